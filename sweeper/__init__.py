"""Sweeps on Ray Tune with Optuna: a typed spec -> trials (each an MLflow child run) -> the chosen point.

The paper's first stage as a repeatable job: search Periodic Row-wise Muon's K and gamma on the smallest rung,
score each pair by mean FD at 2/3, 5/6 and 6/6 of the horizon (mean over seeds, spread kept), beside AdamW and
vanilla Muon, and pick the defaults to transfer with their uncertainty (`select_point`: each point's probability of
being best from a paired bootstrap over seeds; points within one pooled standard error of the best go to the larger,
cheaper K).

    from sweeper import load_spec, run_sweep, load_sweep_result
    result = run_sweep(load_spec("examples/sweep-tiny.yaml"), workdir="out/sweeps/tiny", show_progress=True)
    result.best            # e.g. {"K": 3, "gamma": 0.15}
    print(result.table())  # the rank table, the baselines, the choice

    scalesweep sweep run examples/sweep-tiny.yaml [--workdir DIR] [--resume]   # one driver process per sweep
    scalesweep sweep status DIR | sweep result DIR | sweep cancel DIR

- `run_sweep` is the driver: run it in a process of its own (the CLI is one); it starts a local Ray, or attaches to
  $RAY_ADDRESS, and keeps its state in a work folder (see `_driver`). `sweep_status` and `cancel_sweep` work from
  any process; `load_sweep_result` reads MLflow only.
- Sweep states: RUNNING -> SUCCEEDED | FAILED | CANCELLED (INTERRUPTED when its driver died; `--resume` continues
  it). Trial states: PENDING, RUNNING, SUCCEEDED, PRUNED, FAILED, CANCELLED.
- Resume after a crash or a cancel: MLflow is the ledger; finished trials are never re-run, interrupted ones
  continue from their checkpoint in their own run, failed ones are retried up to the limit, each attempt a run.
- The MLflow layout (run names, tags, params, metrics, artifacts) is documented in `sweeper._ledger`.

The transfer lives here too, in one home: the subpackage `sweeper.transfer` (its spec, plan, job, the reader of
its runs, the verification stage, the result and its command line). `run_transfer` carries a finished sweep's
chosen pair to larger rungs as one multi-rung sweep, `transfer_status` and `cancel_transfer` work from any
process, and `load_transfer_result` reads its runs back into `TransferResult`, whose numbers are `scaling`'s pure
functions. Those names load on first use (they import `scaling`'s analysis).

    scalesweep transfer run SPEC [--workdir DIR] [--resume] | transfer status DIR | transfer cancel DIR
    scalesweep fit DIR [--metric M] [--json] | scalesweep export DIR --rung RUNG [--from-sweep]

A finished sweep's or transfer's figures and stored report page are drawn through a hook (`set_figure_hook`,
`FigureHook`) that the process running the driver registers: the `scalesweep` command line registers
`dashboards.JobFigures`, so every driver it or the service starts logs them; without a hook a job succeeds
without figures. The sweeper itself never imports `dashboards`.

The work folder protocol (file names, atomic writes, status, cancel) is the public module `sweeper.jobfiles`
(the service and the report page use it too). Knows nothing of HTTP.
Heavy imports (torch, Ray, Optuna, MLflow) happen inside the calls that need them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scaling.stats import PairedDifference, paired_difference
from trials import lazy_attributes

from ._compare import ComparedPoint, SweepComparison, compare_sweeps
from ._driver import cancel_sweep, default_workdir, run_sweep, sweep_status
from ._errors import SweepError, SweepFailedError
from ._extend import apply_extension, check_extension, extend_sweep
from ._figures import FigureHook, set_figure_hook, write_comparison_report, write_sweep_report
from ._front import FrontPoint, QualityCostFront, non_dominated, quality_cost_front
from ._importance import EVALUATORS, ParamImportance, SweepImportance, sweep_importance
from ._ledger import TAG, parent_run_name
from ._optuna_study import default_optuna_storage, optuna_study_name, write_optuna_study
from ._planner import SAMPLERS, Planner, TrialRequest, list_search_methods
from ._result import SweepResult, load_sweep_result
from ._selection import TRIAL_STATES, PointSummary, SweepSelection, TrialRecord, select_best, summarise_points
from ._settings import SOURCE_SWEEP_ID_ENV, TRAINERS_ENV, DriverSettings
from ._spec import (
    MAX_HORIZON,
    MAX_SEEDS,
    SEARCH_PARAMS,
    BaselineSpec,
    BuiltinBackend,
    CommandBackend,
    ConfirmSpec,
    EarlyStoppingSpec,
    ExecutionSpec,
    ParamRange,
    RetrySpec,
    SearchSpec,
    SelectionSpec,
    SweepSpec,
    SweepTracking,
    check_numbers,
    check_seeds,
    check_shape,
    check_trial_section,
    format_params,
    load_spec,
    redact_spec,
)
from ._trainable import BACKENDS, list_backends
from ._trainers import RegisteredTrainer, load_trainers, resolve_trainer
from ._uncertainty import Selection, select_point
from ._work import sweep_work, transfer_work, trial_work

__all__ = [
    "BACKENDS",
    "EVALUATORS",
    "FIT_METRICS",
    "MAX_HORIZON",
    "MAX_SEEDS",
    "SAMPLERS",
    "SEARCH_PARAMS",
    "SOURCE_SWEEP_ID_ENV",
    "TAG",
    "TRAINERS_ENV",
    "TRIAL_STATES",
    "BaselineSpec",
    "BuiltinBackend",
    "CommandBackend",
    "ComparedPoint",
    "ConfirmSpec",
    "DriverSettings",
    "EarlyStoppingSpec",
    "ExecutionSpec",
    "FigureHook",
    "FrontPoint",
    "PairedDifference",
    "ParamImportance",
    "ParamRange",
    "PlanRow",
    "Planner",
    "PointSummary",
    "QualityCostFront",
    "RegisteredTrainer",
    "RetrySpec",
    "SearchSpec",
    "Selection",
    "SelectionSpec",
    "SweepComparison",
    "SweepError",
    "SweepFailedError",
    "SweepImportance",
    "SweepResult",
    "SweepSelection",
    "SweepSpec",
    "SweepTracking",
    "TransferPlan",
    "TransferResult",
    "TransferSpec",
    "TrialRecord",
    "TrialRequest",
    "apply_extension",
    "cancel_sweep",
    "cancel_transfer",
    "check_extension",
    "check_numbers",
    "check_seeds",
    "check_shape",
    "check_trial_section",
    "compare_sweeps",
    "default_optuna_storage",
    "default_transfer_workdir",
    "default_workdir",
    "export_from_sweep",
    "extend_sweep",
    "format_params",
    "list_backends",
    "list_search_methods",
    "load_spec",
    "load_sweep_result",
    "load_trainers",
    "load_transfer_result",
    "load_transfer_spec",
    "non_dominated",
    "optuna_study_name",
    "paired_difference",
    "parent_run_name",
    "quality_cost_front",
    "redact_spec",
    "resolve_trainer",
    "run_sweep",
    "run_transfer",
    "select_best",
    "select_point",
    "set_figure_hook",
    "summarise_points",
    "sweep_importance",
    "sweep_status",
    "sweep_work",
    "transfer_status",
    "transfer_work",
    "trial_work",
    "write_comparison_report",
    "write_optuna_study",
    "write_sweep_report",
]

if TYPE_CHECKING:  # what the lazily loaded names are, for type checkers; at run time `__getattr__` below
    from .transfer import (
        FIT_METRICS,
        PlanRow,
        TransferPlan,
        TransferResult,
        TransferSpec,
        cancel_transfer,
        default_transfer_workdir,
        export_from_sweep,
        load_transfer_result,
        load_transfer_spec,
        run_transfer,
        transfer_status,
    )

# The transfer's names (its home is the subpackage `sweeper.transfer`): loaded on first use, so that a sweep alone
# does not import the transfer's modules.
_TRANSFER_NAMES = dict.fromkeys((
    "FIT_METRICS", "PlanRow", "TransferPlan", "TransferResult", "TransferSpec", "cancel_transfer",
    "default_transfer_workdir", "export_from_sweep", "load_transfer_result", "load_transfer_spec", "run_transfer",
    "transfer_status"), ".transfer")


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _TRANSFER_NAMES, ("transfer",))
