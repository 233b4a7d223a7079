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

This face lists what the other packages use from `sweeper` itself: the sweep's spec, run, status and result, the
error, the figure hook, the registered trainers and the driver's variables. The service and the command line take a
comparison, an importance, a front or an Optuna export from `sweeper.analysis` and the transfer's names from
`sweeper.transfer`; every other public name of the rooms above is still `sweeper.<name>` (as the docs show it),
loaded from its room on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from .analysis import load_sweep_result
from .demand import sweep_memory, sweep_work, trial_memory
from .errors import SweepError
from .jobs import FigureHook, apply_extension, run_sweep, set_figure_hook, sweep_status
from .search import RegisteredTrainer, load_trainers, resolve_trainer
from .settings import SOURCE_SWEEP_ID_ENV, TRAINERS_ENV
from .specs import SweepSpec, load_spec, redact_spec
from .specs.checks import check_shape

__all__ = [
    "SOURCE_SWEEP_ID_ENV",
    "TRAINERS_ENV",
    "FigureHook",
    "RegisteredTrainer",
    "SweepError",
    "SweepSpec",
    "apply_extension",
    "check_shape",
    "load_spec",
    "load_sweep_result",
    "load_trainers",
    "redact_spec",
    "resolve_trainer",
    "run_sweep",
    "set_figure_hook",
    "sweep_memory",
    "sweep_status",
    "sweep_work",
    "trial_memory",
]

# Where a name not imported above is found, in this order: each room's own face. The transfer comes last and
# loads on first use, so that a sweep alone does not import the transfer's modules (and `scaling`'s analysis).
_ROOMS = ("specs", "specs.checks", "demand", "selection", "search", "analysis", "jobs", "ledger", "settings", "errors",
          "transfer")


def __getattr__(name: str) -> Any:
    """`sweeper.<name>` for every public name of the rooms, and the rooms themselves, loaded on first use."""
    if name.startswith("__"):  # a tool asking for a module dunder: never a reason to load the rooms
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name in _ROOMS or name in ("cli", "jobfiles"):
        return importlib.import_module(f".{name}", __name__)
    for room in _ROOMS:
        module = importlib.import_module(f".{room}", __name__)
        if name in module.__all__:
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
