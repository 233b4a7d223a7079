"""Scaling studies from run records: time to best quality, savings between arms, and scaling-law fits.

Pure functions: they take numbers (checkpoints, sizes and values) and return typed results; reading MLflow and
figures live elsewhere. Exports carry the chosen hyperparameters to a target size by stated rules.
"""

from __future__ import annotations

from ._errors import ExtrapolationRefused, FitFailed, ScalingError, ScalingInputError
from ._export import LR_RULES, ArmExport, Export, build_export, export_snippet, transfer_lr
from ._fit import (
    DEFAULT_ALPHA_BOUNDS,
    DEFAULT_HUBER_DELTA,
    DEFAULT_MAX_EXTRAPOLATION,
    DEFAULT_N_BOOT,
    ScalingFit,
    fit_scaling,
)
from ._forms import FORMS
from ._time_to_best import (
    DEFAULT_TOL,
    DEFAULT_VOLATILITY_TOL,
    Checkpoints,
    CommonTarget,
    Savings,
    TimeToBest,
    savings,
    time_to_best,
    time_to_common_target,
)

__all__ = [
    "DEFAULT_ALPHA_BOUNDS",
    "DEFAULT_HUBER_DELTA",
    "DEFAULT_MAX_EXTRAPOLATION",
    "DEFAULT_N_BOOT",
    "DEFAULT_TOL",
    "DEFAULT_VOLATILITY_TOL",
    "FORMS",
    "LR_RULES",
    "ArmExport",
    "Checkpoints",
    "CommonTarget",
    "Export",
    "ExtrapolationRefused",
    "FitFailed",
    "Savings",
    "ScalingError",
    "ScalingFit",
    "ScalingInputError",
    "TimeToBest",
    "build_export",
    "export_snippet",
    "fit_scaling",
    "savings",
    "time_to_best",
    "time_to_common_target",
    "transfer_lr",
]
