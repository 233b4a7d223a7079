"""FD versus step, loss versus step and effective time: seed statistics, interpolation, rankings, figures."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from matplotlib.figure import Figure

from dashboards.figures import compute_fd_curves, compute_loss_curves, plot_fd_curves, plot_loss_curves


def _gids(fig: Figure, prefix: str) -> list[str]:
    return [line.get_gid() for ax in fig.axes for line in ax.lines if (line.get_gid() or "").startswith(prefix)]


def test_fd_groups_are_means_and_min_max_over_seeds(
    transfer_records: list[dict[str, Any]], synth: SimpleNamespace
) -> None:
    c = compute_fd_curves(transfer_records)
    assert c.rungs == ("xs", "s", "m", "l")  # by parameter count, not by name
    assert len(c.runs) == 36 and len(c.groups) == 12
    g = next(g for g in c.groups if g.rung == "m" and g.arm == "muon")
    values = [synth.transfer_fd("muon", synth.SIZES["m"], 800, seed) for seed in range(3)]
    i = g.stats.x.index(800)
    assert g.stats.mean[i] == pytest.approx(sum(values) / 3)
    assert (g.stats.lo[i], g.stats.hi[i]) == (pytest.approx(min(values)), pytest.approx(max(values)))
    assert g.stats.n[i] == 3
    assert g.seeds == (0, 1, 2) and g.n_failed == 0


def test_failed_trial_is_drawn_alone_and_kept_out_of_the_mean(sweep_records: list[dict[str, Any]]) -> None:
    c = compute_fd_curves(sweep_records)
    g = next(g for g in c.groups if g.label == "periodic K=4 γ=0.25")
    assert g.seeds == (0,) and g.n_failed == 1
    diverged = next(r for r in c.runs if r.run_id == "k4-g0.25-s1")
    assert diverged.status == "DIVERGED" and math.isnan(diverged.values[-1])
    fig = plot_fd_curves(c)
    assert len(fig.axes) == 1
    assert len(_gids(fig, "run:")) == len(c.runs)
    assert len(_gids(fig, "mean:")) == len(c.groups)
    assert _gids(fig, "failed:") == ["failed:k4-g0.25-s1"]
    assert "FD on shapes_cnn features" in fig.axes[0].get_ylabel()


def test_fd_figure_has_one_panel_per_rung_with_bands(transfer_records: list[dict[str, Any]]) -> None:
    fig = plot_fd_curves(compute_fd_curves(transfer_records))
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert len([line for line in ax.lines if (line.get_gid() or "").startswith("mean:")]) == 3
        assert len([c for c in ax.collections if (c.get_gid() or "").startswith("band:")]) == 3


def test_train_loss_time_is_interpolated_between_eval_points(
    transfer_records: list[dict[str, Any]], synth: SimpleNamespace
) -> None:
    one = [r for r in transfer_records if r["arm"] == "periodic" and r["rung"] == "xs" and r["seed"] == 0]
    loss = compute_loss_curves(one)
    (train,) = loss.train
    step_s = synth.STEP_S["periodic"]
    # Effective time is known at 400, 800, 1200 (step_s * step); the train-loss steps between are on the line.
    for step, t in zip(train.stats.x, train.time_s, strict=True):
        assert t == pytest.approx(step_s * step)
    (val,) = loss.val
    assert val.stats.x == (400.0, 800.0, 1200.0)
    assert val.time_s == pytest.approx((step_s * 400, step_s * 800, step_s * 1200))


def test_train_loss_past_the_last_eval_point_gets_no_time() -> None:
    record = {"fd": {}, "loss": {100: 2.0, 200: 1.5, 300: 1.2}, "effective_time_s": {200: 10.0}}
    (train,) = compute_loss_curves([record]).train
    assert train.time_s[:2] == pytest.approx((5.0, 10.0))
    assert math.isnan(train.time_s[2])


def test_per_step_and_per_second_rankings_differ(
    transfer_records: list[dict[str, Any]], synth: SimpleNamespace
) -> None:
    loss = compute_loss_curves(transfer_records)
    by_step = next(r for r in loss.by_step if r.rung == "xs")
    by_time = next(r for r in loss.by_time if r.rung == "xs")
    assert by_step.at == 1200
    assert [label for label, _ in by_step.order] == ["muon", "periodic K=3 γ=0.15", "adamw"]
    # The common budget is AdamW's total time (the fastest arm): 0.5 s/step x mean(1, 1.02, 1.04) x 1200.
    assert by_time.at == pytest.approx(synth.STEP_S["adamw"] * 1.02 * 1200)
    assert [label for label, _ in by_time.order] == ["periodic K=3 γ=0.15", "adamw", "muon"]
    muon = dict(by_time.order)["muon"]
    assert muon == pytest.approx(1 + synth.LOSS_C["muon"] * 1000 / 600 + 0.001, rel=0.01)  # muon is near step 600


def test_loss_figure_pairs_step_and_time_panels(transfer_records: list[dict[str, Any]]) -> None:
    fig = plot_loss_curves(compute_loss_curves(transfer_records))
    assert len(fig.axes) == 2 * 4
    step_ax, time_ax = fig.axes[0], fig.axes[1]
    assert step_ax.get_xlabel() == "training step"
    assert time_ax.get_xlabel() == "effective training time (s)"
    for ax in (step_ax, time_ax):
        assert len([ln for ln in ax.lines if (ln.get_gid() or "").startswith("mean:")]) == 3
        assert len([ln for ln in ax.lines if (ln.get_gid() or "").startswith("val:")]) == 3
