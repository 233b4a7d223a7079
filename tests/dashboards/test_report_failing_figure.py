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
