"""Update RMS and spectral norm per block matrix kind and per step kind: does gamma x row-norm keep its relation to
the Newton-Schulz step as the model widens?

Why: a row-normalised matrix has the polar factor's row norms and RMS (1/sqrt(max(m, n))), but not its spectral
norm. For a low-rank-plus-noise momentum the row-normalised update's largest singular value grows with width while
the polar factor's stays near 1, so gamma (tuned at the smallest width) may not mean the same step at a larger one.
Logging both numbers per matrix kind lets a user see it across the rungs of a transfer.

How (cheap, and exact to the optimizer's formula): after a step, each Muon-family matrix still holds the gradient
and momentum buffer that step used, so the step's update direction U (Nesterov or plain momentum) is rebuilt
exactly. From that same U the update of each step kind the arm uses is formed as the optimizer forms it:
refresh `eta * NS5(U)`, row-norm `gamma * eta * U / ||U_i,:||` (`eta` the shape-adjusted lr at the current lr).
The periodic arm gets both kinds from the same U, so the two are compared on equal footing; vanilla Muon only
`refresh`, the row-norm ablation only `rownorm`. A few matrices per kind (first, middle, last block) and a few power
iterations keep it well under the cost of one evaluation.

Metrics (at each eval step): `update_rms.<kind>.<step kind>` and `update_spec.<kind>.<step kind>` (mean over the
sampled matrices), kinds `qkv`, `attn_out`, `mlp_in`, `mlp_out`, `modulation`, step kinds `refresh`, `rownorm`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from ._comm import is_dtensor
from .functional import NS_COEFFICIENTS, adjust_lr, newton_schulz5, normalize_rows_or_columns

__all__ = ["MATRIX_KINDS", "STEP_KINDS", "matrix_kind", "spectral_norm", "update_rms", "update_stats"]

MATRIX_KINDS = ("qkv", "attn_out", "mlp_in", "mlp_out", "modulation")
STEP_KINDS = ("refresh", "rownorm")

# Module-name endings -> kind: scalesweep's MMDiT (`qkv`, `proj`, `fc1`, `fc2`, `adaLN_modulation`) and the
# diffusers FLUX/SD3 names (`to_q/k/v`, `add_*_proj`, `to_out.0`, `ff.net.0.proj`, `ff.net.2`, `norm1.linear`).
_KIND_BY_NAME: tuple[tuple[str, str], ...] = (
    ("adaLN_modulation", "modulation"), ("norm1.linear", "modulation"), ("norm1_context.linear", "modulation"),
    ("norm.linear", "modulation"),
    ("qkv", "qkv"), ("to_q", "qkv"), ("to_k", "qkv"), ("to_v", "qkv"), ("add_q_proj", "qkv"), ("add_k_proj", "qkv"),
    ("add_v_proj", "qkv"),
    ("fc1", "mlp_in"), ("ff.net.0.proj", "mlp_in"), ("ff_context.net.0.proj", "mlp_in"), ("proj_mlp", "mlp_in"),
    ("fc2", "mlp_out"), ("ff.net.2", "mlp_out"), ("ff_context.net.2", "mlp_out"), ("proj_out", "mlp_out"),
    ("proj", "attn_out"), ("to_out.0", "attn_out"), ("to_add_out", "attn_out"),  # after ff.net.0.proj: first wins
)


def matrix_kind(name: str) -> str | None:
    """The block matrix kind of a parameter name (`blocks.0.image.qkv.weight` -> `qkv`), or None if unknown."""
    module = name.removesuffix(".weight")
    for ending, kind in _KIND_BY_NAME:
        if module == ending or module.endswith("." + ending):
            return kind
    return None


def update_rms(update: Tensor) -> float:
    """Root mean square of the entries: ||A||_F / sqrt(m n)."""
    a = update.detach().float()
    return float(a.pow(2).mean().sqrt())


def spectral_norm(update: Tensor, iters: int = 8, seed: int = 0) -> float:
    """Largest singular value by `iters` power iterations on A^T A (a lower bound that converges as
    (sigma_2 / sigma_1)^(2 iters); 8 iterations are plenty for the low-rank-dominated updates seen here)."""
    a = update.detach().float()
    if a.ndim != 2:
        raise ValueError(f"spectral_norm needs a 2-D matrix, got shape {tuple(a.shape)}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    v = torch.randn(a.shape[1], generator=gen).to(a.device)
    v = v / v.norm().clamp_min(1e-30)
    for _ in range(iters):
        w = a.T @ (a @ v)
        norm = w.norm()
        if not norm > 0:
            return 0.0
        v = w / norm
    return float((a @ v).norm())


def _sample(items: Sequence[Any], per_kind: int) -> list[Any]:
    """Up to `per_kind` items spread over depth: first, last, and evenly between."""
    if len(items) <= per_kind:
        return list(items)
    idx = sorted({round(i * (len(items) - 1) / (per_kind - 1)) for i in range(per_kind)}) if per_kind > 1 else [0]
    return [items[i] for i in idx]


def _step_kinds(group: dict[str, Any]) -> tuple[str, ...]:
    k = group.get("refresh_every", 1)  # torch.optim.Muon has no refresh_every: every step is a refresh
    if k is None:
        return ("rownorm",)
    return ("refresh",) if k == 1 else STEP_KINDS


@torch.no_grad()
def update_stats(
    optimizer: Any,
    named_params: Iterable[tuple[str, Tensor]] | None = None,
    *,
    per_kind: int = 3,
    power_iters: int = 8,
) -> dict[str, float]:
    """`update_rms.<kind>.<step kind>` and `update_spec.<kind>.<step kind>` of the step just taken, for a
    Muon-family matrix optimizer (a `HybridOptimizer`'s `.matrix`, or the `HybridOptimizer` itself, whose routing
    names the parameters). Empty for AdamW, for sharded (DTensor) matrices, and before the first step."""
    matrix = getattr(optimizer, "matrix", optimizer)
    if named_params is None:
        routing = getattr(optimizer, "routing", None)
        if routing is None:
            raise ValueError("update_stats needs the parameters' names: pass named_params or a HybridOptimizer")
        named_params = routing.muon
    if isinstance(matrix, torch.optim.AdamW) or not hasattr(matrix, "state"):
        return {}
    group_of = {id(p): g for g in matrix.param_groups for p in g["params"]}
    by_kind: dict[str, list[tuple[Tensor, dict[str, Any]]]] = {}
    for name, p in named_params:
        kind = matrix_kind(name)
        group = group_of.get(id(p))
        if kind is None or group is None or is_dtensor(p) or p.grad is None:
            continue
        if "momentum_buffer" not in matrix.state.get(p, {}):
            continue
        by_kind.setdefault(kind, []).append((p, group))
    sums: dict[str, list[float]] = {}
    for kind, items in by_kind.items():
        for p, group in _sample(items, per_kind):
            buf: Tensor = matrix.state[p]["momentum_buffer"]
            u = p.grad.lerp(buf, group["momentum"]) if group.get("nesterov", True) else buf
            eta = adjust_lr(group["lr"], group.get("adjust_lr_fn"), p.shape)
            for step_kind in _step_kinds(group):
                if step_kind == "refresh":
                    ortho = newton_schulz5(u, tuple(group.get("ns_coefficients", NS_COEFFICIENTS)),
                                           int(group.get("ns_steps", 5)), float(group.get("eps", 1e-7)),
                                           group.get("ns_dtype", torch.bfloat16))
                    applied = ortho.float() * eta
                else:
                    norms, _ = normalize_rows_or_columns(u, float(group.get("eps", 1e-7)))
                    applied = u.float() / norms.float() * (group["gamma"] * eta)
                key = f"{kind}.{step_kind}"
                sums.setdefault(f"update_rms.{key}", []).append(update_rms(applied))
                sums.setdefault(f"update_spec.{key}", []).append(spectral_norm(applied, power_iters))
    return {k: math.fsum(v) / len(v) for k, v in sums.items()}
