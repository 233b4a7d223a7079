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

__all__ = [
    "COLLECTIVES",
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_LR",
    "NS_COEFFICIENTS",
    "OPTIMIZERS",
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
    "newton_schulz5",
    "route_parameters",
    "unit_rows_or_columns",
]
