"""Optimizers for the trials: Periodic Row-wise Muon, its row-norm ablation, its FSDP2-sharded form, routing and one
factory.

Vanilla Muon is `torch.optim.Muon` and AdamW is `torch.optim.AdamW`; they are reused, not rewritten.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._arms import ARMS, ARMS_WITH_GAMMA, MUON_FAMILY, ArmName

if TYPE_CHECKING:
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

# The optimizers load torch (seconds) on first use; the arm names above are torch-free, so the sweeper's spec,
# scaling and dashboards can name arms without it.
_LAZY = {
    "._comm": ("COLLECTIVES", "CommStats", "logical_bytes_sent"),
    "._factory": ("DEFAULT_LR", "OPTIMIZERS", "HybridOptimizer", "OptimizerConfig", "build_optimizer",
                  "list_optimizers"),
    "._functional": ("NS_COEFFICIENTS", "adjust_lr", "fast_ns_dtype", "newton_schulz5", "unit_rows_or_columns"),
    "._periodic": ("PeriodicRowMuon", "RowNormMuon"),
    "._routing": ("ParameterRouting", "route_parameters"),
    "._sharded": ("DEFAULT_BUCKET_BYTES", "ShardedPeriodicRowMuon"),
    "._update_stats": ("MATRIX_KINDS", "STEP_KINDS", "matrix_kind", "spectral_norm", "update_stats"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "ARMS",
    "ARMS_WITH_GAMMA",
    "COLLECTIVES",
    "DEFAULT_BUCKET_BYTES",
    "DEFAULT_LR",
    "MATRIX_KINDS",
    "MUON_FAMILY",
    "NS_COEFFICIENTS",
    "OPTIMIZERS",
    "STEP_KINDS",
    "ArmName",
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


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name], __name__), name)
        globals()[name] = value  # the next lookup is a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
