"""Scaling studies from run records: time to best quality and to a target, savings between arms, statistics,
scaling-law fits, exports and the verification verdict.

Steps to target as a survival time (`crossings`: the first and the sustained crossing; `restricted_ratio`: the
paired ratio of Kaplan-Meier restricted means; `censored_fit_data`: size-fit data that keep censored runs), the
controls' expected outcomes (`control_outcome`), statistics a reader can check (`alpha_budget`, `power_at_alpha`,
`p_best_text`, `choice_warning`) and the injection simulation that measures the intervals' coverage
(`injection_coverage`) are docs/targets.md's "Sustained crossing, censoring and the restricted mean".

Pure functions: they take numbers (checkpoints, sizes and values) or records already read (`TransferRun`) and
return typed results; figures live elsewhere. Exports carry the chosen hyperparameters to a target size by stated
rules. `scaling.stats` is the project's statistics (paired differences, Student-t intervals, the paired
bootstrap of P(best)), which the sweep's selection uses too. `scaling` imports only `trials`: no Ray, MLflow,
Optuna, sweeper, service or figures, not even inside a function (tests/test_layout.py).

The transfer job that produces the runs, and its result over them (`TransferResult`, `TransferPlan`), live in
`sweeper.transfer`; their public names are `sweeper`'s (`sweeper.run_transfer`, `sweeper.TransferResult`, ...).
"""

from __future__ import annotations

from ._claims import (
    MIN_SEEDS_P_BEST,
    AlphaBudget,
    ChoiceWarning,
    PowerStatement,
    alpha_budget,
    choice_warning,
    holm_in_budget,
    p_best_text,
    power_at_alpha,
)
from ._comparison import ClaimFamily, CrossingComparison, compare_crossings, controls_section, judge_claims
from ._controls import ControlCheck, ControlOutcome, control_outcome, null_reading
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
from ._injection import (
    ControlSimulation,
    InjectionCoverage,
    RecordedCurve,
    control_simulation,
    grid_crossings,
    injection_coverage,
)
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
from ._survival import (
    DEFAULT_SURVIVAL_BOOT,
    CensoredFitData,
    Crossing,
    RestrictedMean,
    RestrictedRatio,
    SurvivalSaving,
    censored_fit_data,
    crossings,
    one_target,
    restricted_mean,
    restricted_ratio,
    restricted_saving,
    sustained_crossing,
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
    "DEFAULT_SURVIVAL_BOOT",
    "DEFAULT_TOL",
    "DEFAULT_VOLATILITY_TOL",
    "FORMS",
    "LR_RULES",
    "MIN_SEEDS_P_BEST",
    "WD_RULES",
    "AlphaBudget",
    "ArmExport",
    "CensoredFitData",
    "Checkpoints",
    "ChoiceWarning",
    "ClaimFamily",
    "CommonTarget",
    "ControlCheck",
    "ControlOutcome",
    "ControlSimulation",
    "Crossing",
    "CrossingComparison",
    "Export",
    "ExtrapolationRefused",
    "FitFailed",
    "HorizonSpec",
    "InjectionCoverage",
    "LrRule",
    "Plateau",
    "PlateauSpec",
    "PowerStatement",
    "RecordedCurve",
    "RestrictedMean",
    "RestrictedRatio",
    "RoundsSpec",
    "Savings",
    "ScalingError",
    "ScalingFit",
    "ScalingInputError",
    "SurvivalSaving",
    "TargetSpec",
    "TimeToBest",
    "TimeToTarget",
    "TimingSpec",
    "TransferError",
    "TransferRun",
    "TransferVerdict",
    "WdRule",
    "alpha_budget",
    "build_export",
    "carry_optimizer",
    "censored_fit_data",
    "choice_warning",
    "compare_crossings",
    "control_outcome",
    "control_simulation",
    "controls_section",
    "crossings",
    "default_lr_rule",
    "export_snippet",
    "fit_scaling",
    "grid_crossings",
    "holm_in_budget",
    "injection_coverage",
    "judge_claims",
    "look_line",
    "median_step_times",
    "next_seeds",
    "null_reading",
    "one_target",
    "p_best_text",
    "planned_looks",
    "plateau",
    "power_at_alpha",
    "refuse_losing_choice",
    "restricted_mean",
    "restricted_ratio",
    "restricted_saving",
    "rounds_look",
    "rung_horizon",
    "rung_report",
    "savings",
    "step_ratio_text",
    "step_time_ratio",
    "sustained_crossing",
    "target_table",
    "time_to_best",
    "time_to_common_target",
    "time_to_target",
    "transfer_lr",
    "verification_design",
    "verify_transfer",
]
