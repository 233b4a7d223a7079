"""Scaling studies from run records: time to best quality and to a target, savings between arms, statistics,
scaling-law fits, exports and the verification verdict.

Pure functions: they take numbers (checkpoints, sizes and values) or records already read (`TransferRun`) and
return typed results; figures live elsewhere. Exports carry the chosen hyperparameters to a target size by stated
rules. `scaling.stats` is the project's statistics (paired differences, Student-t intervals, the paired
bootstrap of P(best)), which the sweep's selection uses too. `scaling` imports only `trials`: no Ray, MLflow,
Optuna, sweeper, service or figures, not even inside a function (tests/test_layout.py).

The transfer job that produces the runs, and its result over them (`TransferResult`, `TransferPlan`), live in
`sweeper.transfer`; their public names are `sweeper`'s (`sweeper.run_transfer`, `sweeper.TransferResult`, ...).
"""

from __future__ import annotations

from ._errors import ExtrapolationRefused, FitFailed, ScalingError, ScalingInputError, TransferError
from ._export import (
    LR_RULES,
    WD_RULES,
    ArmExport,
    Export,
    build_export,
    default_lr_rule,
    export_snippet,
    refuse_losing_choice,
    transfer_lr,
)
from ._fit import (
    DEFAULT_ALPHA_BOUNDS,
    DEFAULT_HUBER_DELTA,
    DEFAULT_MAX_EXTRAPOLATION,
    DEFAULT_N_BOOT,
    ScalingFit,
    fit_scaling,
)
from ._forms import FORMS
from ._lr_rules import LrRule, WdRule, carry_optimizer
from ._records import TransferRun
from ._rounds import RoundsSpec, look_line, next_seeds, planned_looks, rounds_look
from ._rungs import (
    HorizonSpec,
    PlateauSpec,
    TargetSpec,
    TimingSpec,
    median_step_times,
    rung_horizon,
    rung_report,
    step_ratio_text,
    step_time_ratio,
    target_table,
)
from ._target import (
    DEFAULT_PLATEAU_MAX_DROP,
    DEFAULT_PLATEAU_WINDOW,
    Plateau,
    TimeToTarget,
    plateau,
    time_to_target,
)
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
from ._verify import TransferVerdict, verification_design, verify_transfer

__all__ = [
    "DEFAULT_ALPHA_BOUNDS",
    "DEFAULT_HUBER_DELTA",
    "DEFAULT_MAX_EXTRAPOLATION",
    "DEFAULT_N_BOOT",
    "DEFAULT_PLATEAU_MAX_DROP",
    "DEFAULT_PLATEAU_WINDOW",
    "DEFAULT_TOL",
    "DEFAULT_VOLATILITY_TOL",
    "FORMS",
    "LR_RULES",
    "WD_RULES",
    "ArmExport",
    "Checkpoints",
    "CommonTarget",
    "Export",
    "ExtrapolationRefused",
    "FitFailed",
    "HorizonSpec",
    "LrRule",
    "Plateau",
    "PlateauSpec",
    "RoundsSpec",
    "Savings",
    "ScalingError",
    "ScalingFit",
    "ScalingInputError",
    "TargetSpec",
    "TimeToBest",
    "TimeToTarget",
    "TimingSpec",
    "TransferError",
    "TransferRun",
    "TransferVerdict",
    "WdRule",
    "build_export",
    "carry_optimizer",
    "default_lr_rule",
    "export_snippet",
    "fit_scaling",
    "look_line",
    "median_step_times",
    "next_seeds",
    "planned_looks",
    "plateau",
    "refuse_losing_choice",
    "rounds_look",
    "rung_horizon",
    "rung_report",
    "savings",
    "step_ratio_text",
    "step_time_ratio",
    "target_table",
    "time_to_best",
    "time_to_common_target",
    "time_to_target",
    "transfer_lr",
    "verification_design",
    "verify_transfer",
]
