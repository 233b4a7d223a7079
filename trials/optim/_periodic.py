"""Periodic Row-wise Muon and its row-norm-only ablation, as thin `torch.optim.Optimizer` loops.

For each matrix W (m x n) with its own step counter t (starting at 0) and momentum buffer B:

    B   <- lerp(B, g, 1 - mu)                          torch.optim.Muon's momentum, exactly
    U   <- lerp(g, B, mu) if nesterov else B           out of place: g and B are never modified here
    eta <- adjust_lr(lr, shape)                        torch.optim.Muon's adjust_lr_fn semantics
    if t % K == 0:  O <- NS5(U)                        refresh: step 0 is one, and K = 1 is vanilla Muon
    else:           O <- U / ||U_i,:||  (m <= n)       unit rows; unit columns when m > n
                    eta <- gamma * eta                 gamma is a relative step size
    W   <- W * (1 - lr * weight_decay) - eta * O       decoupled decay with the unadjusted lr, never scaled by gamma
    t   <- t + 1
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from ._comm import is_dtensor
from ._native import native_applies, native_kernel, native_kernel_error, native_rownorm_update_
from .functional import (
    ADJUST_LR_FNS,
    NS_COEFFICIENTS,
    _newton_schulz5,
    _Workspace,
    adjust_lr,
    normalize_rows_or_columns,
    rownorm_update_many_,
    stream_chunk_for,
)

__all__ = ["ROWNORM_KERNELS", "PeriodicRowMuon", "RowNormMuon"]

# How the non-refresh step runs. "native": contiguous float32 CPU matrices through the compiled kernel (`_native`:
# each matrix read and written once, at the cost of its memory traffic), the rest streamed; an error when the kernel
# cannot be built here. "auto" (the default): the same, falling back to "streamed" where the kernel cannot be
# built. "streamed": torch operations in cache-sized chunks (`functional.rownorm_update_`). "unfused": the
# implementation before 2026-12-03, whole-matrix operations with a full-size temporary, kept as the reference that
# tests and `benchmarks/` compare against. All four give the same update up to float rounding.
ROWNORM_KERNELS: tuple[str, ...] = ("auto", "native", "streamed", "unfused")


def _check_hyperparameters(
    *,
    lr: float,
    weight_decay: float,
    momentum: float,
    gamma: float,
    ns_coefficients: tuple[float, float, float],
    ns_steps: int,
    eps: float,
    adjust_lr_fn: str | None,
) -> None:
    if not lr >= 0.0:
        raise ValueError(f"lr must be >= 0, got {lr}")
    if not weight_decay >= 0.0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"momentum must be in [0, 1), got {momentum}")
    if not gamma > 0.0:
        raise ValueError(f"gamma must be > 0 (a relative step size; the paper's default is 0.15), got {gamma}")
    if len(ns_coefficients) != 3:
        raise ValueError(f"ns_coefficients must be three floats (a, b, c), got {ns_coefficients!r}")
    if not (isinstance(ns_steps, int) and 1 <= ns_steps < 100):
        raise ValueError(f"ns_steps must be an int in [1, 99], got {ns_steps!r}")
    if not eps > 0.0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if adjust_lr_fn not in ADJUST_LR_FNS:
        raise ValueError(f"adjust_lr_fn={adjust_lr_fn!r} is not supported; allowed: {list(ADJUST_LR_FNS)}")


def closure_loss(closure: Callable[[], float] | None) -> float | None:
    """The loss from an optimizer step's `closure` (run with gradients on), or None without one."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class PeriodicRowMuon(Optimizer):
    """Muon with a full Newton-Schulz refresh every `refresh_every` steps and gamma-scaled row norm in between.

    Args mirror `torch.optim.Muon` (same names, same defaults), plus `refresh_every` (K, the paper's 3) and
    `gamma` (the row-norm step ratio, the paper's 0.15). Only 2-D parameters are accepted: route biases, norms and
    embeddings to AdamW (see `route_parameters`). `refresh_every=1` is exactly `torch.optim.Muon`.
    `ns_dtype` (keyword only) is the Newton-Schulz dtype: bf16 as in torch.optim.Muon, or fp32 for CPUs without
    native bf16 matmul (see `fast_ns_dtype`).

    `rownorm_kernel` (keyword only): "auto" (default) runs the non-refresh step of contiguous float32 CPU
    matrices in a compiled kernel (built on first use; `trials.optim._native`) and the rest "streamed", chunk by
    chunk through one cache-sized workspace (`stream_chunk` elements; None = 2**18 on a CPU, whole matrices on an
    accelerator); "native" insists on the compiled kernel (an error where it cannot be built); "unfused" is the
    earlier whole-matrix implementation, kept as a reference. All give the same update up to float rounding;
    `rownorm_kernels_used` says which ran.

    Counters for logging: `ns5_calls` and `rownorm_calls` (one per matrix update of that kind).
    FSDP2-sharded (DTensor) matrices are refused: `ShardedPeriodicRowMuon` updates them shard by shard.
    """

    # DTensor arithmetic would run this loop with hidden, unaccounted collectives (and fails on in-place norms).
    _accepts_dtensor = False

    def __init__(
        self,
        params: Iterable[Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        refresh_every: int = 3,
        gamma: float = 0.15,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        ns_steps: int = 5,
        eps: float = 1e-7,
        adjust_lr_fn: str | None = None,
        *,
        ns_dtype: torch.dtype = torch.bfloat16,
        rownorm_kernel: str = "auto",
        stream_chunk: int | None = None,
    ) -> None:
        if isinstance(refresh_every, bool) or not isinstance(refresh_every, int) or refresh_every < 1:
            raise ValueError(
                f"refresh_every must be an int >= 1 (1 = vanilla Muon; the paper's default is 3), "
                f"got {refresh_every!r}"
            )
        self._setup(params, lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                    refresh_every=refresh_every, gamma=gamma, ns_coefficients=tuple(ns_coefficients), ns_steps=ns_steps,
                    eps=eps, adjust_lr_fn=adjust_lr_fn, ns_dtype=ns_dtype, rownorm_kernel=rownorm_kernel,
                    stream_chunk=stream_chunk)

    def _setup(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], *, rownorm_kernel: str,
               stream_chunk: int | None, **defaults: Any) -> None:
        if rownorm_kernel not in ROWNORM_KERNELS:
            raise ValueError(f"rownorm_kernel={rownorm_kernel!r} is not supported; allowed: {list(ROWNORM_KERNELS)}")
        if rownorm_kernel == "native" and native_kernel() is None:
            raise RuntimeError(
                f"rownorm_kernel='native' needs the compiled CPU kernel, which cannot be built here "
                f"({native_kernel_error()}); use 'auto' (falls back to 'streamed') or 'streamed'"
            )
        self.rownorm_kernel = rownorm_kernel
        self.rownorm_kernels_used: set[str] = set()
        stream_chunk_for("cpu", stream_chunk)  # validates it
        self._stream_chunk = stream_chunk
        self._workspaces: dict[str, _Workspace] = {}
        if defaults["ns_dtype"] not in (torch.bfloat16, torch.float32, torch.float64):
            raise ValueError(f"ns_dtype must be torch.bfloat16, float32 or float64, got {defaults['ns_dtype']}")
        checked = {k: v for k, v in defaults.items() if k not in ("nesterov", "refresh_every", "ns_dtype")}
        _check_hyperparameters(**checked)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        f"{type(self).__name__} only takes 2-D parameters (weight matrices); got one of shape "
                        f"{tuple(p.shape)}. Give biases, norms and embeddings to AdamW (trials.optim."
                        "route_parameters does this split)."
                    )
                if torch.is_complex(p):
                    raise ValueError(f"{type(self).__name__} does not support complex parameters")
                if is_dtensor(p) and not self._accepts_dtensor:
                    raise ValueError(
                        f"{type(self).__name__} got a DTensor parameter of shape {tuple(p.shape)} (FSDP2 / "
                        "fully_shard); use trials.optim.ShardedPeriodicRowMuon, which updates the local shards"
                    )
        self.ns5_calls = 0
        self.rownorm_calls = 0

    def _workspace(self, device: torch.device) -> _Workspace:
        """The streamed step's scratch space on `device`, made once (never part of the state_dict)."""
        ws = self._workspaces.get(str(device))
        if ws is None:
            ws = self._workspaces[str(device)] = _Workspace(stream_chunk_for(device, self._stream_chunk))
        return ws

    def _native_for(self, *tensors: Tensor) -> bool:
        """Whether these tensors' non-refresh step runs in the compiled kernel (and note which kernel ran)."""
        native = (self.rownorm_kernel in ("auto", "native") and native_applies(*tensors)
                  and native_kernel() is not None)
        self.rownorm_kernels_used.add("native" if native else
                                      "unfused" if self.rownorm_kernel == "unfused" else "streamed")
        return native

    @staticmethod
    def _native_step(p: Tensor, grad: Tensor, buf: Tensor, eta: float, group: dict[str, Any]) -> None:
        native_rownorm_update_(p, grad, buf, momentum=group["momentum"], nesterov=group["nesterov"],
                               decay=1.0 - group["lr"] * group["weight_decay"], step_size=group["gamma"] * eta,
                               eps=group["eps"])

    def _rownorm(self, p: Tensor, grad: Tensor, buf: Tensor, group: dict[str, Any], eta: float) -> None:
        """The non-refresh step of one matrix (its own rows: a sharded subclass passes local shards)."""
        if self._native_for(p, grad, buf):
            self._native_step(p, grad, buf, eta, group)
            return
        decay = 1.0 - group["lr"] * group["weight_decay"]
        step_size = group["gamma"] * eta
        if self.rownorm_kernel != "unfused":
            rownorm_update_many_([p], [grad], [buf], [step_size], momentum=group["momentum"],
                                 nesterov=group["nesterov"], decay=decay, eps=group["eps"],
                                 workspace=self._workspace(p.device))
            return
        # The reference ("unfused"): whole-matrix operations and a full-size U.
        buf.lerp_(grad, 1.0 - group["momentum"])
        update = grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
        norms, _ = normalize_rows_or_columns(update, group["eps"])
        p.mul_(decay)
        # One fused pass: p -= gamma * eta * U / norms (norms broadcast over rows or columns).
        p.addcdiv_(update, norms, value=-step_size)

    def _refresh(self, p: Tensor, grad: Tensor, buf: Tensor, group: dict[str, Any], eta: float) -> None:
        """The refresh step of one matrix: Muon's momentum, NS5 of U, decay and update, operation for operation as
        torch.optim.Muon does it (U is a temporary of ours, so NS5 normalises in place: no copy beyond torch's)."""
        buf.lerp_(grad, 1.0 - group["momentum"])
        nesterov = group["nesterov"]
        # (A lerp written straight into a bf16 output would save the fp32 temporary, but torch runs that
        # mixed-dtype lerp unvectorised: 1.2x slower than lerp + .bfloat16() on a 3072 x 512 matrix.)
        update = grad.lerp(buf, group["momentum"]) if nesterov else buf
        ortho = _newton_schulz5(update, group["ns_coefficients"], group["ns_steps"], group["eps"],
                                group["ns_dtype"], owned=nesterov)
        p.mul_(1.0 - group["lr"] * group["weight_decay"])
        p.add_(ortho, alpha=-eta)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Performs one optimisation step; parameters without a gradient are skipped (their counter stays)."""
        loss = closure_loss(closure)

        for group in self.param_groups:
            k: int | None = group["refresh_every"]
            rownorm: list[tuple[Tensor, Tensor, Tensor, float]] = []  # this step's non-refresh matrices
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                if grad.is_sparse:
                    raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
                eta = adjust_lr(group["lr"], group["adjust_lr_fn"], p.shape)
                t: int = state["step"]
                if k is not None and t % k == 0:
                    self._refresh(p, grad, state["momentum_buffer"], group, eta)
                    self.ns5_calls += 1
                else:
                    rownorm.append((p, grad, state["momentum_buffer"], eta))
                state["step"] = t + 1
            self._rownorm_all(rownorm, group)
        return loss

    def _rownorm_all(self, items: list[tuple[Tensor, Tensor, Tensor, float]], group: dict[str, Any]) -> None:
        """The non-refresh step of several matrices of one group, (param, grad, buffer, shape-adjusted lr) each:
        in the compiled kernel one by one where it applies; the rest together where they share a device (the fewest
        torch calls for the small ones), else one by one."""
        if not items:
            return
        self.rownorm_calls += len(items)
        if self.rownorm_kernel != "unfused":
            rest = []
            for item in items:
                if self._native_for(*item[:3]):
                    self._native_step(*item, group)
                else:
                    rest.append(item)
            items = rest
        devices = {p.device for p, *_ in items}
        if self.rownorm_kernel == "unfused" or len(devices) > 1:
            for p, grad, buf, eta in items:
                self._rownorm(p, grad, buf, group, eta)
            return
        if not items:
            return
        params, grads, bufs, etas = (list(x) for x in zip(*items, strict=True))
        rownorm_update_many_(params, grads, bufs, [group["gamma"] * eta for eta in etas],
                             momentum=group["momentum"], nesterov=group["nesterov"],
                             decay=1.0 - group["lr"] * group["weight_decay"], eps=group["eps"],
                             workspace=self._workspace(params[0].device))


class RowNormMuon(PeriodicRowMuon):
    """The paper's ablation arm: Muon's momentum with the row-norm update on every step, never Newton-Schulz.

    Exactly `PeriodicRowMuon` with the refresh removed (K = infinity): each step moves by `gamma` times the
    shape-adjusted lr, so gamma keeps the meaning it has in the periodic arm.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True, gamma: float = 0.15,
                 eps: float = 1e-7, adjust_lr_fn: str | None = None, *, rownorm_kernel: str = "auto",
                 stream_chunk: int | None = None) -> None:
        # No refresh (refresh_every=None), so Newton-Schulz never runs and its settings are placeholders.
        self._setup(params, lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                    refresh_every=None, gamma=gamma, ns_coefficients=NS_COEFFICIENTS, ns_steps=5, eps=eps,
                    adjust_lr_fn=adjust_lr_fn, ns_dtype=torch.bfloat16, rownorm_kernel=rownorm_kernel,
                    stream_chunk=stream_chunk)
