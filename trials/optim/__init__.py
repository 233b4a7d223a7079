"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, its FSDP2-sharded form, routing and one
factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trials._lazy import homes_of, lazy_attributes

from ._arms import ARMS, ARMS_WITH_GAMMA, CONTROL_ARMS, MUON_FAMILY, ArmName, ControlArmName

if TYPE_CHECKING:
    from ._comm import COLLECTIVES, CommStats, logical_bytes_sent
    from ._control import MuonExtraNS, PeriodicMuonExtraNS, RedundantNewtonSchulz
    from ._factory import (
        DEFAULT_LR,
        OPTIMIZERS,
        HybridOptimizer,
        OptimizerConfig,
        build_optimizer,
        list_optimizers,
    )
    from ._functional import NS_COEFFICIENTS, adjust_lr, fast_ns_dtype, newton_schulz5, unit_rows_or_columns
    from ._periodic import PeriodicRowMuon, RowNormMuon
    from ._routing import ParameterRouting, route_parameters
    from ._sharded import DEFAULT_BUCKET_BYTES, NS_PLACEMENTS, ShardedPeriodicRowMuon
    from ._update_stats import MATRIX_KINDS, STEP_KINDS, matrix_kind, spectral_norm, update_stats

# The optimizers load torch (seconds) on first use; the arm names above are torch-free, so the sweeper's spec,
# scaling and dashboards can name arms without it.
_LAZY = {
    "._comm": ("COLLECTIVES", "CommStats", "logical_bytes_sent"),
    "._control": ("MuonExtraNS", "PeriodicMuonExtraNS", "RedundantNewtonSchulz"),
    "._factory": ("DEFAULT_LR", "OPTIMIZERS", "HybridOptimizer", "OptimizerConfig", "build_optimizer",
                  "list_optimizers"),
    "._functional": ("NS_COEFFICIENTS", "adjust_lr", "fast_ns_dtype", "newton_schulz5", "unit_rows_or_columns"),
    "._periodic": ("PeriodicRowMuon", "RowNormMuon"),
    "._routing": ("ParameterRouting", "route_parameters"),
    "._sharded": ("DEFAULT_BUCKET_BYTES", "NS_PLACEMENTS", "ShardedPeriodicRowMuon"),
    "._update_stats": ("MATRIX_KINDS", "STEP_KINDS", "matrix_kind", "spectral_norm", "update_stats"),
}

__all__ = [
    "ARMS",
    "ARMS_WITH_GAMMA",
    "COLLECTIVES",
    "CONTROL_ARMS",
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_LR",
    "MATRIX_KINDS",
    "MUON_FAMILY",
    "NS_COEFFICIENTS",
    "NS_PLACEMENTS",
    "OPTIMIZERS",
    "STEP_KINDS",
    "ArmName",
    "CommStats",
    "ControlArmName",
    "HybridOptimizer",
    "MuonExtraNS",
    "OptimizerConfig",
    "ParameterRouting",
    "PeriodicMuonExtraNS",
    "PeriodicRowMuon",
    "RedundantNewtonSchulz",
    "RowNormMuon",
    "ShardedPeriodicRowMuon",
    "adjust_lr",
    "build_optimizer",
    "fast_ns_dtype",
    "list_optimizers",
    "logical_bytes_sent",
    "matrix_kind",
    "newton_schulz5",
    "route_parameters",
    "spectral_norm",
    "unit_rows_or_columns",
    "update_stats",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), homes_of(_LAZY))
