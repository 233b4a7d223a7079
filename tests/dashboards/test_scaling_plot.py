"""Scaling plots: points from the runs, fitted curves, the extrapolated part and the region the fit refuses."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dashboards import DashboardInputError
from dashboards._scaling import compute_fit_plot, scaling_fit_data
from dashboards.figures import compute_scaling_plot, plot_scaling
from scaling.fits import ScalingFit, fit_scaling

ARMS = ("adamw", "muon", "periodic")


@pytest.fixture(scope="module")
def records(synth: SimpleNamespace) -> list[dict[str, Any]]:
    return [synth.transfer_record(arm, rung, seed) for arm in ARMS for rung in synth.SIZES for seed in range(3)]


def _fit(records: list[dict[str, Any]], **kwargs: Any) -> ScalingFit:
    # Parametric bootstrap with few replicates: the plot needs an interval, not a precise one, and it is ~50x
    # cheaper than the seed bootstrap here.
    data = scaling_fit_data(records, "time_to_best_s")
    return fit_scaling(data, "A*N^-alpha", alpha_bounds=(-3.0, 3.0), n_boot=20, bootstrap="parametric", **kwargs)


@pytest.fixture(scope="module")
def fit(records: list[dict[str, Any]]) -> ScalingFit:
    return _fit(records)


def test_fit_data_is_one_value_per_run(records: list[dict[str, Any]], synth: SimpleNamespace) -> None:
    data = scaling_fit_data(records, "best_fd")
    sizes, values = data["muon"]
    assert sizes == sorted(list(synth.SIZES.values()) * 3)  # sizes repeat once per seed
    # The best FD is at the last eval step (1200) in the synthetic runs.
    assert values[:3] == pytest.approx([synth.transfer_fd("muon", 1e6, 1200, s) for s in range(3)])
    times = scaling_fit_data(records, "time_to_best_s")["adamw"][1]
    assert times[0] == pytest.approx(synth.STEP_S["adamw"] * 1200)


def test_points_carry_the_seed_spread(records: list[dict[str, Any]], synth: SimpleNamespace) -> None:
    d = compute_scaling_plot(records, "best_fd")
    assert [p.arm for p in d.points] == list(ARMS)
    p = d.points[1]
    expected = [synth.transfer_fd("muon", 4e6, 1200, s) for s in range(3)]
    assert p.sizes == tuple(synth.SIZES.values())
    assert p.mean[1] == pytest.approx(sum(expected) / 3)
    assert (p.lo[1], p.hi[1]) == (pytest.approx(min(expected)), pytest.approx(max(expected)))
    assert d.curves == () and d.fit is None
    assert "FD on shapes_cnn features" in d.ylabel


def test_curve_is_fitted_then_extrapolated_then_refused(records: list[dict[str, Any]], fit: ScalingFit) -> None:
    flags_before = set(fit.flags)
    d = compute_scaling_plot(records, "time_to_best_s", fit)
    largest = 6.4e7
    limit = fit.max_extrapolation * largest
    assert len(d.curves) == 3
    for c in d.curves:
        assert c.largest_fitted == largest
        assert c.refused_from == pytest.approx(limit)
        assert c.refused_to == pytest.approx(2 * limit)  # default: twice the limit, so the refusal shows
        assert max(c.sizes) == pytest.approx(limit)
        assert largest in c.sizes  # the solid/dashed switch is at the exact size
        assert "extrapolation refused" in (c.refused_reason or "")
        i = c.sizes.index(largest)
        point, lo, hi = fit.predict(c.arm, largest)
        assert (c.point[i], c.lo[i], c.hi[i]) == (pytest.approx(point), pytest.approx(lo), pytest.approx(hi))
    # Drawing asked a copy: the caller's fit does not claim a refusal it was never asked for.
    assert fit.flags == flags_before
    assert "extrapolation_refused" not in d.fit.flags


def test_figure_marks_extrapolation_and_the_refused_region(records: list[dict[str, Any]], fit: ScalingFit) -> None:
    panels = [compute_scaling_plot(records, "best_fd"), compute_scaling_plot(records, "time_to_best_s", fit)]
    fig = plot_scaling(panels)
    assert len(fig.axes) == 2
    no_fit, with_fit = fig.axes
    assert no_fit.get_xscale() == "log" and no_fit.get_yscale() == "log"
    assert [p.get_gid() for p in no_fit.patches if p.get_gid() == "refused"] == []
    assert len([c for c in no_fit.containers if c.get_label() != ""]) == 3  # error bars per arm
    refused = [p for p in with_fit.patches if p.get_gid() == "refused"]
    assert len(refused) == 1
    x0 = refused[0].get_x()
    assert x0 == pytest.approx(2 * 6.4e7)
    solid = {ln.get_gid(): ln for ln in with_fit.lines if (ln.get_gid() or "").startswith("fit:")}
    dashed = {ln.get_gid(): ln for ln in with_fit.lines if (ln.get_gid() or "").startswith("extrapolated:")}
    assert sorted(solid) == [f"fit:{a}" for a in ARMS]
    assert sorted(dashed) == [f"extrapolated:{a}" for a in ARMS]
    for line in dashed.values():
        assert line.get_linestyle() == "--"
        assert min(line.get_xdata()) == pytest.approx(6.4e7) and max(line.get_xdata()) == pytest.approx(x0)
    for line in solid.values():
        assert line.get_linestyle() == "-" and max(line.get_xdata()) == pytest.approx(6.4e7)
    assert len([c for c in with_fit.collections if (c.get_gid() or "").startswith("ci:")]) == 3
    legend = [t.get_text() for t in with_fit.get_legend().get_texts()]
    assert any("refuses to extrapolate" in t for t in legend)


def test_no_refused_region_when_extrapolation_is_allowed(records: list[dict[str, Any]]) -> None:
    d = compute_scaling_plot(records, "time_to_best_s", _fit(records, allow_extrapolation=True), extend_to=1e9)
    assert all(c.refused_from is None and max(c.sizes) == pytest.approx(1e9) for c in d.curves)
    fig = plot_scaling(d)
    assert [p for p in fig.axes[0].patches if p.get_gid() == "refused"] == []


def test_one_configuration_per_arm(records: list[dict[str, Any]]) -> None:
    other = dict(records[-1], gamma=0.25, run_id="other")
    with pytest.raises(DashboardInputError, match="several configurations per arm"):
        compute_scaling_plot([*records, other], "best_fd")
    with pytest.raises(DashboardInputError, match="unknown scaling metric"):
        compute_scaling_plot(records, "fd_at_end")


def test_runs_without_a_size_are_left_out_with_a_note(records: list[dict[str, Any]]) -> None:
    unsized = dict(records[0], parameters=None, run_id="unsized")
    d = compute_scaling_plot([*records, unsized], "best_fd")
    assert any("unsized" in n and "model.parameters" in n for n in d.notes)
    assert sum(len(v) for v in d.points[0].values) == 12


def test_the_legend_gives_the_range_of_seeds_when_sizes_have_different_counts() -> None:
    # Steps to a target count only the seeds that reached it: 2 of 3 at the first size, 3 at the others.

    data = {"adamw": ([1e6, 1e6, 2e6, 2e6, 2e6], [400.0, 420.0, 380.0, 390.0, 385.0]),
            "muon": ([1e6, 1e6, 1e6, 2e6, 2e6, 2e6], [210.0, 215.0, 205.0, 200.0, 190.0, 195.0])}
    fig = plot_scaling(compute_fit_plot("steps_to_target", "steps to the declared target", data))
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "adamw (mean, min–max over 2–3 seeds)" in legend
    assert "muon (mean, min–max over 3 seeds)" in legend
