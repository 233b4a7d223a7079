"""A figure that cannot be drawn leaves the report whole (issue 53 M3): a sweep whose one point scored an
objective of 1.8e308 (the largest float) made matplotlib overflow on the heatmap's ticks, and `GET
/v1/sweeps/{id}/report` answered 500 while every other view of the finished sweep answered. The heatmap here is
the one that live sweep gave."""

from __future__ import annotations

import numpy as np

from dashboards import build_report
from dashboards._heatmap import HeatmapData
from dashboards._records import FDInfo
from dashboards._report import ReportData

HUGE = HeatmapData(
    ks=(2, 3, 4, 5), gammas=(0.15,), steps=(3, 4),
    objective=np.array([[28.5], [np.finfo(float).max], [30.5], [31.5]]),
    per_step=(np.array([[29.0], [1e308], [31.0], [32.0]]), np.array([[28.0], [1e308], [30.0], [31.0]])),
    status=(("ok",), ("ok",), ("ok",), ("ok",)), n_ok=np.ones((4, 1), dtype=np.int64),
    n_runs=np.ones((4, 1), dtype=np.int64), chosen=(2, 0.15), chosen_source="lowest objective", rungs=("cpu-xs",),
    baselines={}, fd=FDInfo(metric_names=("fd_external",), samples=(512,)), eval_steps=(3, 4))


def test_a_figure_that_cannot_be_drawn_is_said_in_its_section_and_the_page_is_built() -> None:
    page = build_report(ReportData(title="huge", heatmap=HUGE))
    assert '<section id="heatmap">' in page
    assert "figure not drawn (OverflowError: cannot convert float infinity to integer)" in page
    assert "<table>" in page  # the section's numbers are still there
    assert page.rstrip().endswith("</html>")


def test_a_scaling_panel_with_a_negative_error_bar_costs_its_own_figure_only() -> None:
    """Issue 64, N6: a transfer whose interval did not hold its mean (`'yerr' must not contain negative values`)
    turned the whole report into a 503 that blamed the time and memory limits. The figure is drawn before the page
    (not in `_img`), so the isolation is where the figures are drawn: the scaling section says why, the heatmap
    beside it is drawn."""
    from dashboards._scaling import ScalingPlotData, ScalingPoints

    fd = FDInfo(metric_names=("fd_pixels",), samples=(96,))
    off = ScalingPoints(arm="periodic", sizes=(1e5, 4e5), values=((50.0,), (40.0,)), mean=(50.0, 40.0),
                        lo=(51.0, 39.0), hi=(52.0, 41.0))  # at 1e5 the mean lies below its interval
    scaling = ScalingPlotData(metric="best_fd", ylabel="best FD", points=(off,), curves=(), fit=None, fd=fd,
                              x_range=(1e5, 4e5))
    fine = HeatmapData(
        ks=(2, 3), gammas=(0.15,), steps=(3, 4), objective=np.array([[28.5], [30.5]]),
        per_step=(np.array([[29.0], [31.0]]), np.array([[28.0], [30.0]])), status=(("ok",), ("ok",)),
        n_ok=np.ones((2, 1), dtype=np.int64), n_runs=np.ones((2, 1), dtype=np.int64), chosen=(2, 0.15),
        chosen_source="lowest objective", rungs=("cpu-xs",), baselines={}, fd=fd, eval_steps=(3, 4))
    page = build_report(ReportData(title="one broken figure", heatmap=fine, scaling=(scaling,)))
    assert '<section id="scaling">' in page
    assert "figure not drawn (ValueError: &#x27;yerr&#x27; must not contain negative values)" in page \
        or "figure not drawn (ValueError: 'yerr' must not contain negative values)" in page, page[:2000]
    assert page.count("<img") == 1 and 'alt="heatmap"' in page  # the other figure drawn
    assert page.rstrip().endswith("</html>")
