"""Figures and an HTML report computed from run records and fits: compute the data, then draw it.

``compute_*`` functions turn run records (``RunRecord`` or dicts, e.g. from ``load_runs``) and fits into small
typed data objects; ``plot_*`` functions turn those into a ``matplotlib.figure.Figure`` without touching pyplot or
any global state. ``log_figures`` saves figures as MLflow artifacts; ``build_report``/``write_report`` make one
self-contained HTML file. ``JobFigures`` draws a finished sweep's or transfer's figures and report page for the
sweeper, through the figure hook the command line registers (it imports nothing of the sweeper).
"""

from __future__ import annotations

from ._curves import (
    FDCurves,
    GroupSeries,
    LossCurves,
    Ranking,
    RunSeries,
    compute_fd_curves,
    compute_loss_curves,
    plot_fd_curves,
    plot_loss_curves,
)
from ._decisions import decision_notes
from ._errors import DashboardError, DashboardInputError
from ._heatmap import HeatmapData, compute_heatmap, plot_heatmap
from ._jobs import JobFigures
from ._mlflow import load_chosen, load_run, load_runs, log_figures
from ._records import ARMS, FDInfo, RunRecord, SeedStats, as_records, describe_fd, fd_label
from ._report import ReportData, build_report, compute_report, report_figures, write_report, write_report_folder
from ._scaling import (
    SCALING_METRICS,
    FitCurve,
    FitSummary,
    ScalingPlotData,
    ScalingPoints,
    compute_scaling_plot,
    plot_scaling,
    scaling_fit_data,
)
from ._study import comparison_report, log_report_figures, sweep_report, transfer_report
from ._timing import TimingData, compute_timing, plot_timing
from ._transfer_page import transfer_page, transfer_page_data
from ._updates import UpdateScaleData, compute_update_scale, plot_update_scale

__all__ = [
    "ARMS",
    "SCALING_METRICS",
    "DashboardError",
    "DashboardInputError",
    "FDCurves",
    "FDInfo",
    "FitCurve",
    "FitSummary",
    "GroupSeries",
    "HeatmapData",
    "JobFigures",
    "LossCurves",
    "Ranking",
    "ReportData",
    "RunRecord",
    "RunSeries",
    "ScalingPlotData",
    "ScalingPoints",
    "SeedStats",
    "TimingData",
    "UpdateScaleData",
    "as_records",
    "build_report",
    "comparison_report",
    "compute_fd_curves",
    "compute_heatmap",
    "compute_loss_curves",
    "compute_report",
    "compute_scaling_plot",
    "compute_timing",
    "compute_update_scale",
    "decision_notes",
    "describe_fd",
    "fd_label",
    "load_chosen",
    "load_run",
    "load_runs",
    "log_figures",
    "log_report_figures",
    "plot_fd_curves",
    "plot_heatmap",
    "plot_loss_curves",
    "plot_scaling",
    "plot_timing",
    "plot_update_scale",
    "report_figures",
    "scaling_fit_data",
    "sweep_report",
    "transfer_page",
    "transfer_page_data",
    "transfer_report",
    "write_report",
    "write_report_folder",
]
