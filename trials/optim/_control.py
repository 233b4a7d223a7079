"""The positive control arms: vanilla Muon plus redundant work of known cost, and vanilla Muon stretched by null
steps.

A study that finds "no saving" must show it would have found one. `muon_extra_ns` is vanilla Muon that, before each
step, runs one more Newton-Schulz orthogonalisation on every matrix's gradient and throws the result away:

    O'_t <- NS5(g_t)        (discarded)
    then exactly vanilla Muon's step

Its parameters are bit-identical to vanilla Muon's after any number of steps from the same seed (nothing it computes
is written anywhere; tests/trials/test_steptime.py checks it), so its true steps-to-target ratio against Muon is
exactly 1, while each step costs one NS5 per matrix more: about Muon's optimizer share of a step more (27-33 % at
the CPU rungs, 1 thread). That extra cost is the known answer a timing stage must recover. The redundant work's own
thread-CPU and wall time are kept (`redundant_thread_s`, `redundant_wall_s`) so a timing can state the ratio it
expects beside the one it measures.

The Newton-Schulz input is the gradient (the same shape, so the same floating-point work, as the momentum update
Muon orthogonalises), in the arm's Newton-Schulz dtype, with the arm's coefficients and iteration count.

`muon_stretched` tests the other half of a saving, the steps. It is vanilla Muon whose training loop (`trials._run`)
takes a null step after every `stretch` steps (8 by default): no batch drawn, no noise drawn, no update, no EMA
update, and the warm-up and EMA schedules read the count of real updates. Its recorded curve is Muon's relabelled:
what Muon shows at step r, the stretched run shows at the step s whose count of real updates is r (s = r + (r - 1)
// stretch once r >= 1), so its steps-to-target ratio against Muon on the same seed is exactly (stretch + 1) /
stretch (9/8 at the default) up to the granularity of the crossing, and its per-step time is Muon's (a null step
costs nothing and is not timed). The arm's optimizer is Muon's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor

from ._periodic import PeriodicRowMuon, closure_loss
from .functional import newton_schulz5

__all__ = ["MuonExtraNS", "PeriodicMuonExtraNS", "RedundantNewtonSchulz"]


class RedundantNewtonSchulz:
    """The redundant work of the positive control, shared by its bf16 (torch.optim.Muon) and fp32 forms.

    `redundant_ns5_calls` counts the discarded orthogonalisations; `redundant_thread_s` and `redundant_wall_s`
    total their thread-CPU and wall time (seconds) since construction.
    """

    param_groups: list[dict[str, Any]]
    redundant_ns5_calls: int
    redundant_thread_s: float
    redundant_wall_s: float

    def _init_redundant(self) -> None:
        self.redundant_ns5_calls = 0
        self.redundant_thread_s = 0.0
        self.redundant_wall_s = 0.0

    def _ns_dtype(self, group: dict[str, Any]) -> torch.dtype:
        return group.get("ns_dtype", torch.bfloat16)  # torch.optim.Muon's groups have none: it is always bf16

    @torch.no_grad()
    def redundant_work(self) -> None:
        """One Newton-Schulz per matrix with a gradient, its result dropped (`newton_schulz5` never writes its
        input, so the gradient Muon then reads is untouched)."""
        thread0, wall0 = time.thread_time(), time.perf_counter()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                newton_schulz5(p.grad, tuple(group["ns_coefficients"]), group["ns_steps"], group["eps"],
                               self._ns_dtype(group))
                self.redundant_ns5_calls += 1
        self.redundant_thread_s += time.thread_time() - thread0
        self.redundant_wall_s += time.perf_counter() - wall0

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """The redundant work, then the Muon step of the class this is mixed into."""
        loss = closure_loss(closure)  # first: a closure makes the gradients the redundant work reads
        self.redundant_work()
        super().step()  # type: ignore[misc]
        return loss


class MuonExtraNS(RedundantNewtonSchulz, torch.optim.Muon):  # type: ignore[misc]  # step: Optimizer's overloads
    """`torch.optim.Muon` (same arguments) plus one discarded Newton-Schulz per matrix per step: the positive
    control where the Newton-Schulz dtype is bf16."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        self._init_redundant()


class PeriodicMuonExtraNS(RedundantNewtonSchulz, PeriodicRowMuon):  # type: ignore[misc]
    """`PeriodicRowMuon(refresh_every=1)` (vanilla Muon in any Newton-Schulz dtype; same arguments but
    `refresh_every` and `gamma`) plus one discarded Newton-Schulz per matrix per step: the positive control where
    the dtype is fp32 (the `muon` arm's own class there)."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(params, refresh_every=1, **kwargs)
        self._init_redundant()
