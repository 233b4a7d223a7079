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
    "STREAM_CHUNK",
    "adjust_lr",
    "column_sumsq_",
    "fast_ns_dtype",
    "newton_schulz5",
    "normalize_rows_or_columns",
    "normalized_update_",
    "rownorm_update_",
    "rownorm_update_many_",
    "step_scales",
    "stream_chunk_for",
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
    return _newton_schulz5(g, coefficients, steps, eps, dtype, owned=False)


def _newton_schulz5(
    g: Tensor, coefficients: tuple[float, float, float], steps: int, eps: float, dtype: torch.dtype, *, owned: bool
) -> Tensor:
    """`newton_schulz5`; with `owned=True` the caller hands over `g` (a temporary of its own), which may then be
    overwritten: the normalisation divides in place, as torch.optim.Muon's does, with no extra full-size copy."""
    a, b, c = coefficients
    x = g.to(dtype)
    transposed = g.size(0) > g.size(1)
    if transposed:
        # Work on the wide orientation so the Gram matrix is the small (min x min) one.
        x = x.T
    # ||x||_F >= ||x||_2, so this bounds sigma_max by 1. Out of place unless x is ours: when g already has `dtype`,
    # x aliases g.
    norm = x.norm().clamp(min=eps)
    x = x.div_(norm) if owned or x.data_ptr() != g.data_ptr() else x / norm
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


# --- the non-refresh (row-norm) step, streamed ----------------------------------------------------------------
#
# The step's arithmetic is a handful of element-wise passes and one reduction, so its cost is memory traffic. Done
# matrix by matrix with whole-matrix operations it writes U = nesterov(g, B) to a full-size temporary, reads it
# back for the norms and again for the update, and pays a column-norm reduction that torch runs unvectorised over
# dim 0 (about 40x slower than over dim 1 on a 3072 x 512 matrix, 1 thread): 7-9x the time of two element-wise
# passes over the same tensors. Here each matrix is streamed in chunks of whole rows through one small workspace
# that stays in cache: per chunk the momentum update, U, the row norms and the parameter update run back to back,
# so g, B and W are read once and U never reaches memory. A tall matrix needs every row before its column norms
# exist, so it takes two sweeps: the first updates B and sums U's squared columns (a vectorised dot product), the
# second recomputes U chunk by chunk and applies it. On a CPU U is recomputed, not stored: it is cheaper than a
# full-size temporary.

# Elements of U per chunk on a CPU: 2**18 fp32 values (1 MiB) was the fastest of 2**16 ... 2**20 on a 2-core AMD
# EPYC with AVX512-BF16 (smaller chunks pay torch's per-call overhead, larger ones fall out of cache). Accelerators
# take the whole matrix as one chunk: their kernels need large launches, and their allocator makes a temporary cheap.
STREAM_CHUNK = 2**18


def stream_chunk_for(device: torch.device | str, chunk: int | None = None) -> int | None:
    """The chunk size, in elements, the streamed step uses on `device`: `chunk` when given, STREAM_CHUNK on a CPU,
    None (the whole matrix at once) elsewhere."""
    if chunk is not None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"stream_chunk must be an int >= 1 (elements per chunk) or None, got {chunk!r}")
        return chunk
    return STREAM_CHUNK if torch.device(device).type == "cpu" else None


def _height(rows: int, cols: int, chunk: int | None) -> int:
    """Rows per chunk: whole rows, at most `chunk` elements (at least one row); every row without `chunk`."""
    return max(1, rows if chunk is None else chunk // max(cols, 1))


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    # Norms accumulate in fp32 for half types and in the tensor's own dtype otherwise (normalize_rows_or_columns).
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


class _Workspace:
    """Flat scratch tensors per (slot, device, dtype), reused by every chunk of every matrix (never a full-size
    one): slot 0 holds U's chunk, slot 1 a tall matrix's squares."""

    def __init__(self, chunk: int | None) -> None:
        self.chunk = chunk
        self._buffers: dict[tuple[int, torch.device, torch.dtype], Tensor] = {}
        self._views: dict[tuple[int, int, int, torch.device, torch.dtype], Tensor] = {}

    def block(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device, slot: int = 0) -> Tensor:
        """A scratch (rows x cols) tensor: a view of the shared buffer, or a fresh tensor when chunks are whole
        matrices (accelerators, whose allocator makes that cheap)."""
        if self.chunk is None:
            return torch.empty((rows, cols), dtype=dtype, device=device)
        key = (slot, device, dtype)
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < rows * cols:
            buf = self._buffers[key] = torch.empty(max(self.chunk, rows * cols), dtype=dtype, device=device)
        return buf[: rows * cols].view(rows, cols)

    def shaped(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device, slot: int = 0) -> Tensor:
        """`block`, with the view kept per shape: a small matrix's step then makes no call to get its scratch. (A
        kept view of a buffer that has since grown still points at valid scratch memory of its own.)"""
        if self.chunk is None:
            return self.block(rows, cols, dtype, device, slot)
        key = (rows, cols, slot, device, dtype)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self.block(rows, cols, dtype, device, slot)
        return view


def _nesterov_chunk(g: Tensor, b: Tensor, momentum: float, nesterov: bool, ws: Tensor | None) -> Tensor:
    """U for one chunk: lerp(g, B, mu) into `ws` (the workspace's rows for it) with Nesterov, B itself without
    (never a copy of it)."""
    if not nesterov:
        return b
    return torch.lerp(g, b, momentum, out=ws if ws is not None else torch.empty_like(g))


def _rows_of(block: Tensor | None, rows: int) -> Tensor | None:
    return block if block is None or block.size(0) == rows else block[:rows]


def column_sumsq_(
    grad: Tensor, buf: Tensor, out: Tensor, *, momentum: float, nesterov: bool, workspace: _Workspace
) -> None:
    """The first sweep of a tall matrix's step: B <- lerp(B, g, 1 - mu) in place, and `out` (n values, fp32 for
    half types) <- the squared column norms of U = nesterov(g, B). An empty matrix (a rank's empty shard) gives
    zeros. Sharded, `out` is this rank's part of the sums that one all-reduce adds up."""
    rows, cols = grad.shape
    if rows == 0:
        out.zero_()
        return
    height = _height(rows, cols, workspace.chunk)
    ws = workspace.block(height, cols, grad.dtype, grad.device) if nesterov else None
    # Squares accumulate element-wise in a (chunk rows x n) block, one fused multiply-add per chunk, and are summed
    # over rows once at the end: a reduction per chunk would cost more than the chunk's element-wise work.
    squares = workspace.block(height, cols, out.dtype, grad.device, slot=1).zero_()
    for g, b in zip(grad.split(height), buf.split(height), strict=True):
        b.lerp_(g, 1.0 - momentum)
        u = _nesterov_chunk(g, b, momentum, nesterov, _rows_of(ws, g.size(0)))
        rows_sq = squares if g.size(0) == height else squares[: g.size(0)]
        rows_sq.addcmul_(u, u)  # in squares' dtype: half types squared and summed in fp32
    torch.sum(squares, dim=0, out=out)


def normalized_update_(
    param: Tensor, grad: Tensor, buf: Tensor, scales: Tensor, *, momentum: float, nesterov: bool, decay: float,
    workspace: _Workspace,
) -> None:
    """The second sweep of a tall matrix's step: W <- decay * W + U * scales, with U recomputed from g and the
    already-updated B chunk by chunk; `scales` (1 x n) = -step_size / (clamped column norms), from `step_scales`."""
    rows, cols = param.shape
    if rows == 0:
        return
    height = _height(rows, cols, workspace.chunk)
    ws = workspace.block(height, cols, grad.dtype, grad.device) if nesterov else None
    for w, g, b in zip(param.split(height), grad.split(height), buf.split(height), strict=True):
        _apply(w, _nesterov_chunk(g, b, momentum, nesterov, _rows_of(ws, g.size(0))), scales, decay, nesterov)


def step_scales(norms: Tensor, step_size: float, eps: float) -> Tensor:
    """-step_size / max(norms, eps), in place on `norms` (a row or column vector): what `_apply` multiplies U by."""
    return norms.clamp_min_(eps).reciprocal_().mul_(-step_size)


def _apply(w: Tensor, u: Tensor, scales: Tensor, decay: float, scratch: bool) -> None:
    """W <- decay * W + U * scales, the scales broadcast over rows or columns. When U is scratch (the workspace) it
    is scaled in place while cache-hot and W is then read and written once; when U is the momentum buffer itself
    (no Nesterov) it is left alone and W takes two passes, as it does in half types (a scaled U stored in bf16
    would round the update once more)."""
    if scratch and u.dtype == scales.dtype:
        torch.add(u.mul_(scales), w, alpha=decay, out=w)
        return
    if decay != 1.0:
        w.mul_(decay)
    w.addcmul_(u, scales)


def rownorm_update_(
    param: Tensor, grad: Tensor, buf: Tensor, *, momentum: float, nesterov: bool, decay: float, step_size: float,
    eps: float, workspace: _Workspace,
) -> None:
    """One whole non-refresh step of one m x n matrix, in place and streamed (the block comment above):

        B <- lerp(B, g, 1 - mu);  U <- lerp(g, B, mu) if nesterov else B
        W <- decay * W - step_size * U / ||U_i,:||   (m <= n; ||U_:,j|| when m > n; norms clamped at eps)

    `step_size` is gamma times the shape-adjusted lr; `decay` is 1 - lr * weight_decay. g is never modified."""
    rows, cols = param.shape
    acc = _acc_dtype(param.dtype)
    if rows > cols and workspace.chunk is not None and rows * cols > workspace.chunk:
        # A tall matrix larger than a chunk: its column norms need every row first, so two sweeps.
        sums = torch.empty(1, cols, dtype=acc, device=param.device)
        column_sumsq_(grad, buf, sums[0], momentum=momentum, nesterov=nesterov, workspace=workspace)
        normalized_update_(param, grad, buf, step_scales(sums.sqrt_(), step_size, eps), momentum=momentum,
                           nesterov=nesterov, decay=decay, workspace=workspace)
        return
    # Wide or square matrices chunk by chunk of whole rows; a tall one that fits a chunk (or a whole matrix on an
    # accelerator) in one piece.
    height = rows if rows > cols else _height(rows, cols, workspace.chunk)
    ws = workspace.block(height, cols, grad.dtype, grad.device) if nesterov else None
    for w, g, b in zip(param.split(height), grad.split(height), buf.split(height), strict=True):
        b.lerp_(g, 1.0 - momentum)
        u = _nesterov_chunk(g, b, momentum, nesterov, _rows_of(ws, g.size(0)))
        if rows <= cols:
            norms = torch.linalg.vector_norm(u, dim=1, keepdim=True, dtype=acc)
        elif acc == u.dtype:
            norms = torch.linalg.vecdot(u, u, dim=0).sqrt_()  # vectorised, unlike vector_norm over dim 0
        else:  # half types: squares summed in fp32
            norms = torch.linalg.vector_norm(u, dim=0, dtype=acc)
        _apply(w, u, step_scales(norms, step_size, eps), decay, nesterov)


def rownorm_update_many_(
    params: list[Tensor], grads: list[Tensor], bufs: list[Tensor], step_sizes: list[float], *, momentum: float,
    nesterov: bool, decay: float, eps: float, workspace: _Workspace,
) -> None:
    """`rownorm_update_` on many matrices of one parameter group (`step_sizes[i]` is matrix i's). Matrices larger
    than a chunk are streamed; the others, which fit in cache whole, take the fewest torch calls the step allows
    (at their size the per-call overhead is most of the cost): U in a reused scratch block (never a fresh
    allocation: fresh full-size outputs, as `_foreach_lerp` makes for all matrices at once, cost page faults every
    step and were measured 2x slower at the cpu-m rung), its norms, and one `addcdiv_`.
    """
    for p, g, b, step_size in zip(params, grads, bufs, step_sizes, strict=True):
        rows, cols = p.shape
        if workspace.chunk is not None and rows * cols > workspace.chunk:
            rownorm_update_(p, g, b, momentum=momentum, nesterov=nesterov, decay=decay, step_size=step_size,
                            eps=eps, workspace=workspace)
            continue
        b.lerp_(g, 1.0 - momentum)
        u = torch.lerp(g, b, momentum, out=workspace.shaped(rows, cols, g.dtype, g.device)) if nesterov else b
        acc = _acc_dtype(u.dtype)
        if rows <= cols:
            norms = torch.linalg.vector_norm(u, dim=1, keepdim=True, dtype=acc)
        elif acc == u.dtype:  # squares summed over rows in a scratch block: vectorised, unlike vector_norm, dim 0
            squares = workspace.shaped(rows, cols, acc, g.device, slot=1)
            norms = torch.sum(torch.mul(u, u, out=squares), dim=0).sqrt_()
        else:  # half types: squared and summed in fp32
            norms = torch.linalg.vector_norm(u, dim=0, dtype=acc)
        if decay != 1.0:
            p.mul_(decay)
        p.addcdiv_(u, norms.clamp_min_(eps), value=-step_size)
