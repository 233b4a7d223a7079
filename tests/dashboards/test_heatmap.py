"""The K x γ heatmap: objective and per-step numbers, missing and failed cells, the chosen pair on every panel."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

from dashboards import DashboardInputError
from dashboards.figures import compute_heatmap, plot_heatmap


def _panels(fig: Figure) -> list[Any]:
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def test_objective_is_the_mean_over_steps_and_seeds(
    sweep_records: list[dict[str, Any]], synth: SimpleNamespace
) -> None:
    h = compute_heatmap(sweep_records, gammas=synth.SWEEP_GAMMAS)
    assert h.ks == synth.SWEEP_KS
    assert h.gammas == synth.SWEEP_GAMMAS
    assert h.steps == synth.SWEEP_STEPS
    i, j = h.cell(3, 0.15)
    expected = np.mean([synth.sweep_fd(3, 0.15, s, seed) for s in synth.SWEEP_STEPS for seed in (0, 1)])
    assert h.objective[i, j] == pytest.approx(expected)
    # Per-step panels: the mean over seeds at that step.
    assert h.per_step[0][i, j] == pytest.approx((synth.sweep_fd(3, 0.15, 800, 0) + synth.sweep_fd(3, 0.15, 800, 1)) / 2)
    assert h.n_ok[i, j] == 2 and h.n_runs[i, j] == 2


def test_best_cell_is_chosen_and_baselines_kept_apart(sweep_records: list[dict[str, Any]]) -> None:
    h = compute_heatmap(sweep_records)
    assert h.chosen == (3, 0.15)
    assert h.chosen_source == "lowest objective"
    assert h.baselines == {"adamw": 50.0, "muon": 29.0}
    assert h.fd.metric_names == ("fd_shapes_cnn",)
    assert h.fd.samples == (256,)


def test_missing_failed_and_partial_cells(sweep_records: list[dict[str, Any]], synth: SimpleNamespace) -> None:
    h = compute_heatmap(sweep_records, gammas=synth.SWEEP_GAMMAS)
    missing = h.cell(2, 0.35)
    failed = h.cell(4, 0.35)
    partial = h.cell(4, 0.25)
    assert h.status[missing[0]][missing[1]] == "missing"
    assert math.isnan(h.objective[missing])
    assert h.status[failed[0]][failed[1]] == "FAILED"
    assert math.isnan(h.objective[failed])
    assert h.n_runs[failed] == 2 and h.n_ok[failed] == 0
    # One seed diverged: the cell is the surviving seed's objective, and it says so.
    assert h.status[partial[0]][partial[1]] == "ok"
    assert (h.n_ok[partial], h.n_runs[partial]) == (1, 2)
    assert h.objective[partial] == pytest.approx(np.mean([synth.sweep_fd(4, 0.25, s, 0) for s in synth.SWEEP_STEPS]))
    assert any("K=4, γ=0.25: 1 of 2 seeds" in n for n in h.notes)


def test_grid_given_shows_cells_never_run() -> None:
    h = compute_heatmap([], ks=[2, 3], gammas=[0.1, 0.2])
    assert h.status == (("missing", "missing"), ("missing", "missing"))
    assert h.chosen is None


def test_given_chosen_pair_must_be_in_the_grid(sweep_records: list[dict[str, Any]]) -> None:
    h = compute_heatmap(sweep_records, chosen=(2, 0.25))
    assert h.chosen == (2, 0.25) and h.chosen_source == "given"
    with pytest.raises(DashboardInputError, match="K=5 not in the grid"):
        compute_heatmap(sweep_records, chosen=(5, 0.15))


def test_figure_has_objective_and_step_panels_with_the_chosen_pair_marked(
    sweep_records: list[dict[str, Any]], synth: SimpleNamespace
) -> None:
    h = compute_heatmap(sweep_records, gammas=synth.SWEEP_GAMMAS)
    fig = plot_heatmap(h)
    panels = _panels(fig)
    assert len(panels) == 1 + len(synth.SWEEP_STEPS)
    assert "objective" in panels[0].get_title()
    assert [ax.get_title() for ax in panels[1:]] == [f"FD at step {s} (mean over seeds)" for s in synth.SWEEP_STEPS]
    i, j = h.cell(3, 0.15)
    for ax in panels:
        chosen = [p for p in ax.patches if p.get_gid() == "chosen"]
        assert len(chosen) == 1
        assert chosen[0].get_xy() == (j - 0.5, i - 0.5)  # outlines the K=3, γ=0.15 cell
        kinds = sorted(p.get_gid() for p in ax.patches if (p.get_gid() or "").startswith("no-value"))
        assert kinds == ["no-value:failed", "no-value:missing"]
        texts = {t.get_text() for t in ax.texts}
        assert {"missing", "failed"} <= texts
    assert any("1/2 seeds" in t.get_text() for t in panels[0].texts)
    assert "chosen: K=3, γ=0.15" in panels[0].get_legend().get_texts()[0].get_text()
    assert "adamw 50" in fig.get_suptitle()
