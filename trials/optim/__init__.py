"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, its FSDP2-sharded form, routing and one
factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.
"""

from __future__ import annotations

from ._comm import COLLECTIVES, CommStats, logical_bytes_sent
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
from ._sharded import DEFAULT_BUCKET_BYTES, ShardedPeriodicRowMuon
from ._update_stats import MATRIX_KINDS, STEP_KINDS, matrix_kind, spectral_norm, update_stats

__all__ = [
    "COLLECTIVES",
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_LR",
    "MATRIX_KINDS",
    "NS_COEFFICIENTS",
    "OPTIMIZERS",
    "STEP_KINDS",
    "CommStats",
    "HybridOptimizer",
    "OptimizerConfig",
    "ParameterRouting",
    "PeriodicRowMuon",
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
