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
  $RAY_ADDRESS, and keeps its state in a work folder (see `sweeper.jobs`). `sweep_status` and `cancel_sweep` work from
  any process; `load_sweep_result` reads MLflow only.
- Sweep states: RUNNING -> SUCCEEDED | FAILED | CANCELLED (INTERRUPTED when its driver died; `--resume` continues
  it). Trial states: PENDING, RUNNING, SUCCEEDED, PRUNED, FAILED, CANCELLED.
- Resume after a crash or a cancel: MLflow is the ledger; finished trials are never re-run, interrupted ones
  continue from their checkpoint in their own run, failed ones are retried up to the limit, each attempt a run.
- The MLflow layout (run names, tags, params, metrics, artifacts) is documented in `sweeper.ledger`.

The transfer lives here too, in one home: the subpackage `sweeper.transfer` (its spec, plan, job, the reader of
its runs, the verification stage, the result and its command line). `run_transfer` carries a finished sweep's
chosen pair to larger rungs as one multi-rung sweep, `transfer_status` and `cancel_transfer` work from any
process, and `load_transfer_result` reads its runs back into `TransferResult`, whose numbers are `scaling`'s pure
functions. Those names load on first use (they import `scaling`'s analysis).

    scalesweep transfer run SPEC [--workdir DIR] [--resume] | transfer extend SPEC --workdir DIR
    scalesweep transfer status DIR | transfer cancel DIR
    scalesweep fit DIR [--metric M] [--json] | scalesweep export DIR --rung RUNG [--from-sweep]

A finished sweep's or transfer's figures and stored report page are drawn through a hook (`set_figure_hook`,
`FigureHook`) that the process running the driver registers: the `scalesweep` command line registers
`dashboards.JobFigures`, so every driver it or the service starts logs them; without a hook a job succeeds
without figures. The sweeper itself never imports `dashboards`.

The work folder protocol (file names, atomic writes, status, cancel) is the public module `sweeper.jobfiles`
(the service and the report page use it too). Knows nothing of HTTP.
Heavy imports (torch, Ray, Optuna, MLflow) happen inside the calls that need them.

Rooms, one concept each (every subpackage's face names what the others may use):

    specs/       the typed sweep spec (`SweepSpec`, `load_spec`) and the checks every job spec shares (`checks`)
    selection/   trial records -> points over seeds -> the chosen point with its uncertainty
    search/      the planner (Optuna), the Tune stage, the trainable, the registered trainers
    analysis/    a sweep's result read back from MLflow; confirmation, importance, front, comparison, Optuna export
    jobs/        the job runner, the sweep driver, its status, cancel and extension, the figure hook
    transfer/    the transfer, a multi-rung sweep run by the same job runner
    ledger.py    the sweep's record in MLflow (its layout); jobfiles.py the work folder's files
    errors.py, settings.py, cli.py: the error root, the driver's environment, `scalesweep sweep ...`

This face is what a user and the other packages use from `sweeper` itself: the sweep's spec, run, status, cancel
and result, the error, the figure hook, the demand estimates, the choice rule, the driver's settings, and the
transfer's spec, run, status, cancel, extension, result and export (those load on first use: they import `scaling`'s
analysis). Every other name is imported from the room that owns it (`sweeper.analysis.compare_sweeps`,
`sweeper.search.load_trainers`, `sweeper.settings.TRAINERS_ENV`, ...); a name not on this face is not here.
"""

from __future__ import annotations

from trials.core import homes_of, lazy_attributes

from .analysis import load_sweep_result
from .demand import sweep_memory, sweep_work, trial_memory, trial_memory_bytes
from .errors import SweepError
from .jobs import FigureHook, cancel_sweep, run_sweep, set_figure_hook, sweep_status
from .selection import PairedDifference, paired_difference, select_point
from .settings import DriverSettings
from .specs import SweepSpec, load_spec

# The transfer's names, loaded from `sweeper.transfer` on first use, so that a sweep alone does not import the
# transfer's modules (and `scaling`'s analysis).
_TRANSFER = ("TransferResult", "TransferSpec", "cancel_transfer", "export_from_sweep", "extend_transfer",
             "load_transfer_result", "load_transfer_spec", "run_transfer", "transfer_status", "transfer_work")

__all__ = [
    "DriverSettings",
    "FigureHook",
    "PairedDifference",
    "SweepError",
    "SweepSpec",
    "cancel_sweep",
    "load_spec",
    "load_sweep_result",
    "paired_difference",
    "run_sweep",
    "select_point",
    "set_figure_hook",
    "sweep_memory",
    "sweep_status",
    "sweep_work",
    "trial_memory",
    "trial_memory_bytes",
    *_TRANSFER,
]

# The rooms that `import sweeper` does not load itself answer as modules (`sweeper.transfer`, `sweeper.cli`, ...).
__getattr__, __dir__ = lazy_attributes(__name__, globals(), homes_of({".transfer": _TRANSFER}),
                                       submodules=("transfer", "cli", "jobfiles", "ledger"))
