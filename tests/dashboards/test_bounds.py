"""The figure stage stays bounded whatever a spec declares or a trainer reports: a sweep of 1,000 declared eval
steps (the spec's cap) or a trainer writing 20,000 FD records at horizon 2 once made one heatmap panel per FD step
(minutes and gigabytes in the driver). The records are the reader's own (`StoredRun` through the function
`load_runs` applies to each run); what is asserted is what gets drawn: panels, points and tables."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dashboards import build_report, compute_report, report_figures
from dashboards._heatmap import MAX_STEP_PANELS
from dashboards._mlflow import _eval_steps, _record
from trials.record import SUCCEEDED, StoredRun

KS = (2, 3, 4)
GAMMAS = (0.1, 0.2)
SEEDS = (0, 1)


def _runs(declared: list[int], reported: range) -> list[Any]:
    """A 3 x 2 grid over two seeds, each trial declaring `declared` and reporting FD at every step of `reported`."""
    runs = []
    for k in KS:
        for gamma in GAMMAS:
            for seed in SEEDS:
                params = {"optimizer.name": "periodic", "optimizer.refresh_every": str(k),
                          "optimizer.gamma": str(gamma), "seed": str(seed), "rung": "cpu-xs",
                          "eval_steps": json.dumps(declared)}
                fd = {s: 30.0 + k + gamma + 100.0 / s for s in reported}
                runs.append(_record(StoredRun(run_id=f"k{k}g{gamma}s{seed}", state=SUCCEEDED, params=params,
                                              histories={"fd": fd, "effective_time_s": {s: 0.1 * s for s in fd}})))
    return runs


def _panels(figure: Figure) -> int:
    return sum(1 for ax in figure.axes if ax.images)


def _points(figure: Figure) -> int:
    return sum(int(np.size(line.get_xdata())) for ax in figure.axes for line in ax.lines)


def test_a_thousand_declared_eval_steps_make_a_few_panels() -> None:
    declared = list(range(1, 1001))
    records = _runs(declared, range(1, 1001))
    data = compute_report(records)
    assert data.heatmap is not None and len(data.heatmap.eval_steps) == 1000
    assert data.heatmap.steps == (1, 201, 401, 600, 800, 1000)  # evenly spaced, the first and the last
    assert len(data.heatmap.per_step) == MAX_STEP_PANELS
    assert any("6 of the 1000 eval steps" in note for note in data.heatmap.notes)
    figures = report_figures(data)
    assert _panels(figures["heatmap"]) == 1 + MAX_STEP_PANELS  # the objective, then the step panels
    assert "1000 eval steps" in figures["heatmap"].axes[0].get_title()
    # FD curves: each trial's declared steps and each group's mean over them, nothing more.
    assert _points(figures["fd_curves"]) <= 1000 * (len(records) + len(KS) * len(GAMMAS))
    page = build_report(data, figures=figures, dpi=20)
    assert page.count("<table>") <= 1 + MAX_STEP_PANELS + 2  # the heatmap's tables, the FD curves' and a spare


def test_fd_reported_at_undeclared_steps_is_left_out_of_every_figure() -> None:
    records = _runs([1, 2], range(1, 20_001))  # horizon 2, 20,000 FD records
    tracemalloc.start()
    try:
        data = compute_report(records)
        figures = report_figures(data)
        build_report(data, figures=figures, dpi=20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data.heatmap is not None and data.heatmap.steps == (1, 2)
    assert data.fd_curves is not None and {run.steps for run in data.fd_curves.runs} == {(1, 2)}
    assert _panels(figures["heatmap"]) == 3
    assert _points(figures["fd_curves"]) == 2 * (len(records) + len(KS) * len(GAMMAS))
    # 12 trials at two steps, whatever they reported beyond: about 9 MB of Python allocations (measured), where one
    # panel per reported step took gigabytes.
    assert peak < 50e6, f"{peak / 1e6:.0f} MB"


def test_the_declared_steps_come_from_the_trials_eval_steps_param() -> None:
    assert _eval_steps("[1000, 800, 1000]") == (800, 1000)
    # Not recorded, or not a whole list of steps (MLflow keeps 6,000 characters of a param): nothing declared, and
    # the panel cap alone bounds the heatmap.
    assert _eval_steps(None) == _eval_steps("None") == _eval_steps("[800, 10") == _eval_steps("[true, 2]") == ()
    assert _eval_steps("[-1, 2]") == _eval_steps('{"a": 1}') == ()
