"""What draws a finished sweep's or transfer's figures: the sweeper's figure hook (`sweeper.FigureHook`), which
the command line registers for every driver it runs (`scalesweep_cli`). The sweeper calls it when a job
SUCCEEDED; results are read by their attributes, so this module imports nothing of the sweeper."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._mlflow import log_figures
from ._report import ReportData, build_report, report_figures, write_report_folder
from ._study import comparison_report, log_report_figures, sweep_report
from ._transfer_page import transfer_page_data

__all__ = ["JobFigures"]


class JobFigures:
    """The sweeper's figure hook, drawn with this package: the study's report figures on the job's parent run."""

    def sweep_figures(self, result: Any) -> list[str]:
        """The sweep's heatmap, curves and timing (`sweep_report`), logged on its parent run."""
        return log_report_figures(result.tracking_uri, result.parent_run_id, _sweep_data(result))

    def sweep_page(self, result: Any, folder: str | Path) -> list[str]:
        """The sweep's report (`sweep_report`) as `folder/report.html` and each figure as `folder/<name>.png`."""
        return [str(p) for p in write_report_folder(folder, _sweep_data(result))]

    def comparison_page(self, comparison: Any, folder: str | Path) -> list[str]:
        """Two sweeps compared (`sweeper.SweepComparison`) as `folder/report.html` and `folder/comparison.png`."""
        data = comparison_report(comparison.to_dict())
        return [str(p) for p in write_report_folder(folder, data)]

    def transfer_figures(self, result: Any, *, transfer_id: str | None, sweep_id: str | None,
                         store_page: Callable[[str], None]) -> list[str]:
        """The transfer's report page (handed to `store_page`), then the same figures logged on its parent run:
        each drawn once for both."""
        data = transfer_page_data(result, transfer_id=transfer_id, sweep_id=sweep_id)
        figures = report_figures(data)
        store_page(build_report(data, figures=figures))
        return log_figures(result.tracking_uri, result.parent_run_id, figures)


def _sweep_data(result: Any) -> ReportData:
    return sweep_report(result.tracking_uri, result.parent_run_id, title=f"scalesweep sweep {result.name}")
