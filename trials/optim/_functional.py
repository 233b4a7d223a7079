"""Pure tensor functions behind the Muon-family optimizers.

Everything here is a function of tensors and numbers, with no optimizer state, so each piece can be tested on a
few matrices. The `Optimizer` classes in `_periodic.py` are thin loops around these.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "ADJUST_LR_FNS",
    "NS_COEFFICIENTS",
    "adjust_lr",
    "fast_ns_dtype",
    "newton_schulz5",
    "normalize_rows_or_columns",
    "unit_rows_or_columns",
]

# Keller Jordan's quintic coefficients, the same as torch.optim.Muon's defaults: chosen to maximise the slope at
# zero, so 5 iterations push every normalised singular value >= ~3e-3 into roughly [0.68, 1.20].
NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)

# torch.optim.Muon's names: None and "original" scale by sqrt(max(1, rows/cols)) (Keller Jordan's rule);
# "match_rms_adamw" scales by 0.2*sqrt(max(rows, cols)) (Moonlight's rule, update RMS ~ AdamW's).
ADJUST_LR_FNS: tuple[str | None, ...] = (None, "original", "match_rms_adamw")


def adjust_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size | tuple[int, ...]) -> float:
    """Shape-adjusted learning rate, with torch.optim.Muon's `adjust_lr_fn` semantics."""
    rows, cols = int(shape[0]), int(shape[1])
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1.0, rows / cols))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, cols))
    raise ValueError(f"adjust_lr_fn={adjust_lr_fn!r} is not supported; allowed: {list(ADJUST_LR_FNS)}")


def newton_schulz5(
    g: Tensor,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    steps: int = 5,
    eps: float = 1e-7,
    dtype: torch.dtype = torch.bfloat16,
) -> Tensor:
    """Approximate polar factor U V^T of a 2-D `g` by `steps` quintic Newton-Schulz iterations, in `dtype`.

    In bfloat16 (the default) the arithmetic is the same, operation for operation, as torch.optim.Muon's private
    routine (so K=1 reproduces it), with one difference: the input is never modified. torch's version divides
    `g.bfloat16()` in place, which *is* the caller's tensor when `g` is already bf16. `dtype=torch.float32` is for
    CPUs without native bf16 matrix multiplication (AVX2-only), where bf16 runs 10-30x slower than fp32.
    Returns a new tensor of g's shape in `dtype`.
    """
    if g.ndim != 2:
        raise ValueError(f"newton_schulz5 needs a 2-D matrix, got shape {tuple(g.shape)}")
    a, b, c = coefficients
    x = g.to(dtype)
    transposed = g.size(0) > g.size(1)
    if transposed:
        # Work on the wide orientation so the Gram matrix is the small (min x min) one.
        x = x.T
    # Out of place: when g already has `dtype`, x aliases g. ||x||_F >= ||x||_2, so this bounds sigma_max by 1.
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T  # (m, m) with m = min(rows, cols)
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)  # b*A + c*A^2
        x = torch.addmm(x, poly, x, beta=a)  # a*X + (b*A + c*A^2) X
    return x.T if transposed else x


def fast_ns_dtype(device: torch.device | str = "cpu") -> torch.dtype:
    """The Newton-Schulz dtype that is fast on `device`: bf16 on CUDA and on CPUs with native bf16 matmul
    (AVX512-BF16 / AMX), fp32 elsewhere (on an AVX2-only CPU a bf16 matmul is 10-30x slower than fp32)."""
    device = torch.device(device)
    if device.type != "cpu":
        return torch.bfloat16
    try:
        return torch.bfloat16 if torch.ops.mkldnn._is_mkldnn_bf16_supported() else torch.float32
    except (AttributeError, RuntimeError):  # private probe gone: assume the slow path is possible, stay exact
        return torch.float32


def normalize_rows_or_columns(u: Tensor, eps: float = 1e-7) -> tuple[Tensor, int]:
    """The norms that make `u` (m x n) unit-row (m <= n) or unit-column (m > n), and the dim they run over.

    Returns `(norms, dim)` with norms eps-clamped and shaped to broadcast against `u` (m x 1 for rows, 1 x n for
    columns), so the caller can fuse the division into its parameter update (`addcdiv_`). A zero row stays zero.
    Unit rows of a wide matrix have the same RMS, 1/sqrt(max(m, n)), as its exact polar factor; for a tall matrix
    unit columns do, and need only n column-norm scalars when rows are sharded.
    """
    if u.ndim != 2:
        raise ValueError(f"row/column normalisation needs a 2-D matrix, got shape {tuple(u.shape)}")
    dim = 0 if u.size(0) > u.size(1) else 1
    acc_dtype = torch.float32 if u.dtype in (torch.bfloat16, torch.float16) else u.dtype
    norms = torch.linalg.vector_norm(u, dim=dim, keepdim=True, dtype=acc_dtype).clamp_min_(eps)
    return norms, dim


def unit_rows_or_columns(u: Tensor, eps: float = 1e-7) -> Tensor:
    """`u` with unit rows (m <= n) or unit columns (m > n); a new tensor, in u's dtype."""
    norms, _ = normalize_rows_or_columns(u, eps)
    return (u / norms).to(u.dtype)
