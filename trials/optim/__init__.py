"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, its FSDP2-sharded form, routing and one
factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.

The face below is what the other packages, the docs and the examples use. The optimizers load torch (seconds) on
first use; the arm names are torch-free, so the sweeper's spec, scaling and dashboards can name arms without it.
The parts one level down (the Newton-Schulz functions, communication accounting, the control arm's classes, the
update statistics' kinds) stay `trials.optim.<name>`, loaded from their module on first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core import lazy_face

if TYPE_CHECKING:
    from ._arms import ARMS, ARMS_WITH_GAMMA, CONTROL_ARMS, MUON_FAMILY, ArmName, ControlArmName
    from ._control import RedundantNewtonSchulz, stretched_updates
    from ._factory import DEFAULT_LR, HybridOptimizer, OptimizerConfig, build_optimizer, list_optimizers
    from ._functional import fast_ns_dtype
    from ._periodic import PeriodicRowMuon, RowNormMuon
    from ._routing import route_parameters
    from ._sharded import ShardedPeriodicRowMuon
    from ._update_stats import matrix_kind, update_stats

# Where the names below the face are found (torch-free first, so a missing name costs torch last).
_PARTS = ("._arms", "._factory", "._routing", "._update_stats", "._functional", "._control", "._comm", "._sharded")

__all__, __getattr__, __dir__ = lazy_face(__name__, globals(), fallbacks=_PARTS)
