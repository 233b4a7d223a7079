"""A finished sweep's or transfer's figures (heatmap, FD and loss curves, timing, scaling points) as PNG artifacts
`figures/<name>.png` on its MLflow parent run, logged by the driver itself when it ends, so that `run_sweep()` and
`run_transfer()` called from Python leave the same record as the CLI.

The figures are drawn by `dashboards` (matplotlib), imported only here and only then. Best effort: the run's
numbers are already stored, so a figure that cannot be drawn is reported in one line and never fails the run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ._settings import DriverSettings
from .jobfiles import REPORT_FILE, store_transfer_report, transfer_version

if TYPE_CHECKING:
    from ._result import SweepResult
    from .transfer._result import TransferResult

__all__ = ["log_sweep_figures", "log_transfer_figures"]


def log_sweep_figures(result: SweepResult, stream: IO[str] | None = None) -> list[str]:
    """The sweep's heatmap, curves and timing on its parent run; returns the artifact paths logged."""

    def draw() -> tuple[str, str, Any]:
        from dashboards import sweep_report

        return result.tracking_uri, result.parent_run_id, sweep_report(
            result.tracking_uri, result.parent_run_id, title=f"scalesweep sweep {result.name}")

    return _log(draw, stream)


def log_transfer_figures(result: TransferResult, stream: IO[str] | None = None) -> list[str]:
    """The transfer's curves, timing and scaling panels (and its source sweep's heatmap) on its parent run, and
    its whole report page stored in its work folder (`report.html`, drawn from the same data): readers such as
    the service's `/report` serve that page instead of reading MLflow and fitting again. A driver the service
    started names the transfer and its sweep by the service's ids (from its environment)."""
    parent = result.parent_run_id
    if not parent:
        return []

    def draw() -> tuple[str, str, Any]:
        from dashboards import build_report, transfer_page_data

        version = transfer_version(result.workdir)  # read before the page is built: a label never newer than it
        settings = DriverSettings.from_env()
        data = transfer_page_data(result, transfer_id=settings.transfer_id, sweep_id=settings.source_sweep_id)
        store_transfer_report(result.workdir, build_report(data), version)
        if stream is not None:
            print(f"report: {Path(result.workdir) / REPORT_FILE}", file=stream, flush=True)
        return result.tracking_uri, parent, data

    return _log(draw, stream)


def _log(draw: Callable[[], tuple[str, str, Any]], stream: IO[str] | None) -> list[str]:
    try:
        from dashboards import log_report_figures

        uri, run_id, data = draw()
        logged = log_report_figures(uri, run_id, data)
    except Exception as exc:
        print(f"warning: figures not logged to MLflow: {type(exc).__name__}: {exc}", file=stream or sys.stderr)
        return []
    if stream is not None:
        print(f"figures logged to the MLflow parent run: {', '.join(logged)}", file=stream, flush=True)
    return list(logged)
