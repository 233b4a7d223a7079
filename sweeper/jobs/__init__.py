"""Jobs: one driver process per sweep (or transfer), its work folder, its lock, its status and its cancel.

- `_runner`: the one job runner under the sweep and the transfer (`run_locked_job`, `run_stages`, `JobRun`): the
  driver lock, the resume check, a broken driver recorded FAILED, the table and the finish stage;
- `_driver`: the sweep as a job (`SweepJob`: ledger, Tune stage, confirmation, result), `run_sweep`,
  `sweep_status` and `cancel_sweep`;
- `_heartbeat`: the live status the driver writes; `_emergency`: the cancel's deadline, when a grace runs out;
- `_figures`: the finish stage's figures through the hook the layer above registers (`set_figure_hook`,
  `FigureHook`, typed by protocols: it imports no result class);
- `_extend`: extending a finished sweep in place (`extend_sweep`, `apply_extension`, `check_extension`);
- `_undo`: giving a job back as it was when its queued extension is cancelled before it runs (`ExtensionUndo`).

The work folder's files are `sweeper.jobfiles`; the MLflow record is `sweeper.ledger`.
"""

from __future__ import annotations

from ._driver import SweepJob, cancel_sweep, default_workdir, run_sweep, sweep_status
from ._extend import apply_extension, changed_paths, check_extension, extend_held, extend_sweep
from ._figures import FigureHook, log_transfer_figures, set_figure_hook, write_comparison_report, write_sweep_report
from ._runner import JobRun, driver_command, run_locked_job, run_stages
from ._undo import ExtensionUndo

__all__ = [
    "ExtensionUndo",
    "FigureHook",
    "JobRun",
    "SweepJob",
    "apply_extension",
    "cancel_sweep",
    "changed_paths",
    "check_extension",
    "default_workdir",
    "driver_command",
    "extend_held",
    "extend_sweep",
    "log_transfer_figures",
    "run_locked_job",
    "run_stages",
    "run_sweep",
    "set_figure_hook",
    "sweep_status",
    "write_comparison_report",
    "write_sweep_report",
]
