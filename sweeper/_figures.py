"""A finished sweep's or transfer's figures (heatmap, FD and loss curves, timing, scaling points) as PNG artifacts
`figures/<name>.png` on its MLflow parent run, logged by the driver itself when it ends, so that `run_sweep()` and
`run_transfer()` called from Python leave the same record as the CLI.

The figures are drawn by `dashboards` (matplotlib), imported only here and only then. Best effort: the run's
numbers are already stored, so a figure that cannot be drawn is reported in one line and never fails the run.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scaling import TransferResult

    from ._result import SweepResult

__all__ = ["log_sweep_figures", "log_transfer_figures"]


def log_sweep_figures(result: SweepResult, stream: IO[str] | None = None) -> list[str]:
    """The sweep's heatmap, curves and timing on its parent run; returns the artifact paths logged."""

    def draw() -> tuple[str, str, Any]:
        from dashboards import sweep_report

        return result.tracking_uri, result.parent_run_id, sweep_report(
            result.tracking_uri, result.parent_run_id, title=f"scalesweep sweep {result.name}")

    return _log(draw, stream)


def log_transfer_figures(result: TransferResult, stream: IO[str] | None = None) -> list[str]:
    """The transfer's curves, timing and scaling panels (and its source sweep's heatmap) on its parent run."""
    parent = result.parent_run_id
    if not parent:
        return []

    def draw() -> tuple[str, str, Any]:
        from dashboards import transfer_report

        return result.tracking_uri, parent, transfer_report(
            result.tracking_uri, parent, sweep_run_id=result.source.get("sweep_parent_run_id"),
            title=f"scalesweep transfer {result.name}")

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
