"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, routing and one factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.
"""

from __future__ import annotations

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

__all__ = [
    "DEFAULT_LR",
    "NS_COEFFICIENTS",
    "OPTIMIZERS",
    "HybridOptimizer",
    "OptimizerConfig",
    "ParameterRouting",
    "PeriodicRowMuon",
    "RowNormMuon",
    "adjust_lr",
    "build_optimizer",
    "fast_ns_dtype",
    "list_optimizers",
    "newton_schulz5",
    "route_parameters",
    "unit_rows_or_columns",
]
