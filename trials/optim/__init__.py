"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, its FSDP2-sharded form, routing and one
factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.

The face below is what the other packages, the docs and the examples use. The optimizers load torch (seconds) on
first use; the arm names are torch-free, so the sweeper's spec, scaling and dashboards can name arms without it.
The pure tensor functions (Newton-Schulz, the row-norm step, the learning-rate adjustments) are the public module
`trials.optim.functional`; the rest (communication accounting, the control arm's classes, the update statistics'
kinds) stays in the private modules, which this package alone uses.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core import lazy_face

if TYPE_CHECKING:
    from . import functional
    from ._arms import ARMS, ARMS_WITH_GAMMA, CONTROL_ARMS, MUON_FAMILY, ArmName, ControlArmName
    from ._comm import logical_bytes_sent
    from ._control import RedundantNewtonSchulz
    from ._factory import DEFAULT_LR, HybridOptimizer, OptimizerConfig, build_optimizer, list_optimizers
    from ._periodic import PeriodicRowMuon, RowNormMuon
    from ._routing import route_parameters
    from ._sharded import ShardedPeriodicRowMuon
    from ._update_stats import matrix_kind, update_stats
    from .functional import fast_ns_dtype

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
