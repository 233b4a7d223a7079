"""The finish stage's figures: a SUCCEEDED sweep's or transfer's figures (heatmap, FD and loss curves, timing,
scaling points) as PNG artifacts `figures/<name>.png` on its MLflow parent run, and a transfer's report page stored
in its work folder, drawn through a hook that the layer above registers.

The sweeper does not draw: drawing is `dashboards`' job, a layer above it. The process that runs a driver
registers a `FigureHook` (`set_figure_hook`): the command line does (`scalesweep_cli`, with
`dashboards.JobFigures`), so every driver the CLI or the service starts logs its figures. A sweep or transfer run
without a hook (e.g. `run_sweep()` called from Python without registering one) succeeds just the same, without
figures; the service draws a transfer's report page itself when none was stored.

Best effort: the run's numbers are already stored, so a figure that cannot be drawn is reported in one line and
never fails the run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from ..errors import SweepError
from ..jobfiles import REPORT_FILE, store_transfer_report, transfer_version
from ..settings import DriverSettings
from ._runner import Finished

__all__ = ["Comparison", "FigureHook", "FinishedTransfer", "log_sweep_figures", "log_transfer_figures",
           "set_figure_hook", "write_comparison_report", "write_sweep_report"]


# What the hook receives is the result itself (a `sweeper.SweepResult`, a `sweeper.TransferResult`, a
# `sweeper.SweepComparison`), drawn whole by the hook; this stage reads no more of it than these protocols say, so
# it imports no result class (the results are computed beside it and above it).


class Comparison(Protocol):
    """Two sweeps side by side (`sweeper.SweepComparison`)."""

    def to_dict(self) -> dict[str, Any]: ...


class FinishedTransfer(Finished, Protocol):
    """A finished transfer's result (`sweeper.TransferResult`): where its runs and its work folder are."""

    @property
    def parent_run_id(self) -> str | None: ...

    @property
    def workdir(self) -> str: ...


class FigureHook(Protocol):
    """What draws a finished job's figures (`dashboards.JobFigures` is one)."""

    def sweep_figures(self, result: Finished) -> Sequence[str]:
        """Draw the sweep's figures and log them on its parent run; the artifact paths logged."""

    def sweep_page(self, result: Finished, folder: str | Path) -> Sequence[str]:
        """The sweep's report page and each of its figures as files in `folder`; the paths written."""

    def comparison_page(self, comparison: Comparison, folder: str | Path) -> Sequence[str]:
        """Two sweeps' comparison as a report page and its figure in `folder`; the paths written."""

    def transfer_figures(self, result: FinishedTransfer, *, transfer_id: str | None, sweep_id: str | None,
                         store_page: Callable[[str], None]) -> Sequence[str]:
        """Build the transfer's report page (naming it and its sweep by these ids when given), hand it to
        `store_page` first, then log its figures on the parent run; the artifact paths logged."""


# A factory, called when a finished job first draws: the hook's own imports (matplotlib) wait until then.
_hook_factory: Callable[[], FigureHook] | None = None


def set_figure_hook(factory: Callable[[], FigureHook] | None) -> Callable[[], FigureHook] | None:
    """Register what draws finished jobs' figures in this process (None: none); returns the one it replaces."""
    global _hook_factory
    previous, _hook_factory = _hook_factory, factory
    return previous


def log_sweep_figures(result: Finished, stream: IO[str] | None = None) -> list[str]:
    """The sweep's heatmap, curves and timing on its parent run; returns the artifact paths logged."""
    return _log(lambda hook: hook.sweep_figures(result), stream)


def log_transfer_figures(result: FinishedTransfer, stream: IO[str] | None = None) -> list[str]:
    """The transfer's curves, timing and scaling panels (and its source sweep's heatmap) on its parent run, and
    its whole report page stored in its work folder (`report.html`, drawn from the same data): readers such as
    the service's `/report` serve that page instead of reading MLflow and fitting again. A driver the service
    started names the transfer and its sweep by the service's ids (from its settings)."""
    if not result.parent_run_id:
        return []
    version = transfer_version(result.workdir)  # read before the page is built: a label never newer than it
    settings = DriverSettings.from_env()

    def store_page(page: str) -> None:
        store_transfer_report(result.workdir, page, version)
        if stream is not None:
            print(f"report: {Path(result.workdir) / REPORT_FILE}", file=stream, flush=True)

    return _log(lambda hook: hook.transfer_figures(result, transfer_id=settings.transfer_id,
                                                   sweep_id=settings.source_sweep_id, store_page=store_page), stream)


def write_sweep_report(result: Finished, folder: str | Path) -> list[str]:
    """The sweep's report (`report.html`) and every figure (`<name>.png`: heatmap, importance, front, parallel
    coordinates and slices, curves, timing) written to `folder`; the paths written. Needs a figure hook (the
    command line registers one); unlike the finish stage's figures, a failure here is the caller's error."""
    return list(_hook("write a sweep's report").sweep_page(result, folder))


def write_comparison_report(comparison: Comparison, folder: str | Path) -> list[str]:
    """A comparison of two sweeps (`compare_sweeps`) as `folder/report.html` and `folder/comparison.png`."""
    return list(_hook("write a comparison's report").comparison_page(comparison, folder))


def _hook(purpose: str) -> FigureHook:
    if _hook_factory is None:
        raise SweepError(f"no figure hook is registered to {purpose}: call "
                         "sweeper.set_figure_hook(dashboards.JobFigures) first (the scalesweep command does)")
    return _hook_factory()


def _log(draw: Callable[[FigureHook], Sequence[str]], stream: IO[str] | None) -> list[str]:
    if _hook_factory is None:
        return []
    try:
        logged = list(draw(_hook_factory()))
    except Exception as exc:
        print(f"warning: figures not logged to MLflow: {type(exc).__name__}: {exc}", file=stream or sys.stderr)
        return []
    if stream is not None:
        print(f"figures logged to the MLflow parent run: {', '.join(logged)}", file=stream, flush=True)
    return logged
