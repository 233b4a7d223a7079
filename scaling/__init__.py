"""Scaling studies from run records: time to best quality, savings between arms, and scaling-law fits.

Pure functions: they take numbers (checkpoints, sizes and values) or records already read (`TransferRun`) and
return typed results; figures live elsewhere. Exports carry the chosen hyperparameters to a target size by stated
rules. `scaling.stats` is the project's statistics (paired differences, Student-t intervals, the paired
bootstrap of P(best)), which the sweep's selection uses too. `TransferResult` is a transfer's analysis over its
runs and its typed plan (`TransferPlan`). Importing `scaling` loads neither Ray, MLflow nor the sweeper.

The transfer job itself moved to the sweeper (`sweeper._transfer_spec`, `sweeper._transfer_job`): its spec, plan,
driver, status, cancel and the MLflow reader. Its names are still importable from here (`scaling.run_transfer`,
`scaling.TransferSpec`, ...): they are forwarded to `sweeper` on first use.

    scalesweep transfer run SPEC [--workdir DIR] [--resume] | transfer status DIR | transfer cancel DIR
    scalesweep fit DIR [--metric M] [--json] | scalesweep export DIR --rung RUNG [--from-sweep]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trials import lazy_attributes

from ._errors import ExtrapolationRefused, FitFailed, ScalingError, ScalingInputError, TransferError
from ._export import LR_RULES, WD_RULES, ArmExport, Export, build_export, default_lr_rule, export_snippet, transfer_lr
from ._fit import (
    DEFAULT_ALPHA_BOUNDS,
    DEFAULT_HUBER_DELTA,
    DEFAULT_MAX_EXTRAPOLATION,
    DEFAULT_N_BOOT,
    ScalingFit,
    fit_scaling,
)
from ._forms import FORMS
from ._records import TransferRun
from ._rungs import step_ratio_text, target_table
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
from ._transfer import FIT_METRICS, PlanRow, TransferPlan, TransferResult
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
    "FIT_METRICS",
    "FORMS",
    "LR_RULES",
    "WD_RULES",
    "ArmExport",
    "Checkpoints",
    "CommonTarget",
    "Export",
    "ExtrapolationRefused",
    "FitFailed",
    "PlanRow",
    "Plateau",
    "Savings",
    "ScalingError",
    "ScalingFit",
    "ScalingInputError",
    "TimeToBest",
    "TimeToTarget",
    "TransferError",
    "TransferPlan",
    "TransferResult",
    "TransferRun",
    "TransferSpec",
    "TransferVerdict",
    "build_export",
    "cancel_transfer",
    "default_lr_rule",
    "default_transfer_workdir",
    "export_from_sweep",
    "export_snippet",
    "fit_scaling",
    "load_transfer_result",
    "load_transfer_spec",
    "plateau",
    "run_transfer",
    "savings",
    "step_ratio_text",
    "target_table",
    "time_to_best",
    "time_to_common_target",
    "time_to_target",
    "transfer_lr",
    "transfer_status",
    "verification_design",
    "verify_transfer",
]

if TYPE_CHECKING:  # what the forwarded names are, for type checkers; at run time `__getattr__` below
    from sweeper._transfer_job import (
        cancel_transfer,
        export_from_sweep,
        load_transfer_result,
        run_transfer,
        transfer_status,
    )
    from sweeper._transfer_spec import TransferSpec, default_transfer_workdir, load_transfer_spec

# The transfer job's names, moved to the sweeper: forwarded on first use, so that importing `scaling` stays free
# of the sweeper (and of Ray and MLflow behind it).
_MOVED_TO_SWEEPER = {name: "sweeper" for name in (
    "TransferSpec",
    "cancel_transfer",
    "default_transfer_workdir",
    "export_from_sweep",
    "load_transfer_result",
    "load_transfer_spec",
    "run_transfer",
    "transfer_status",
)}

__getattr__, __dir__ = lazy_attributes(__name__, globals(), _MOVED_TO_SWEEPER)
