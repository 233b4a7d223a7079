"""Optimizer time and step time per arm and rung."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dashboards.figures import compute_timing, plot_timing


def test_times_per_step_in_ms_with_seed_spread(transfer_records: list[dict[str, Any]], synth: SimpleNamespace) -> None:
    t = compute_timing(transfer_records)
    assert t.labels == ("adamw", "muon", "periodic K=3 γ=0.15")
    assert t.rungs == ("xs", "s", "m", "l")
    muon, xs = t.labels.index("muon"), 0
    assert t.optimizer_ms[muon, xs] == pytest.approx(1000 * synth.OPT_S["muon"])
    step = [1000 * synth.STEP_S["muon"] * (1 + 0.02 * s) for s in range(3)]
    assert t.step_ms[muon, xs] == pytest.approx(sum(step) / 3)
    assert (t.step_lo[muon, xs], t.step_hi[muon, xs]) == (pytest.approx(step[0]), pytest.approx(step[2]))
    assert t.n[muon, xs] == 3


def test_optimizer_time_falls_back_to_the_cumulative_total() -> None:
    t = compute_timing([{"arm": "muon", "optimizer_time_s": {100: 5.0, 200: 12.0}, "step_time_s": {200: 0.2}}])
    assert t.optimizer_ms[0, 0] == pytest.approx(60.0)  # 12 s over 200 steps
    assert t.step_ms[0, 0] == pytest.approx(200.0)


def test_grouped_bars(transfer_records: list[dict[str, Any]]) -> None:
    fig = plot_timing(compute_timing(transfer_records))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert len(ax.patches) == 3 * 4  # one bar per arm per rung
        assert [label.get_text() for label in ax.get_xticklabels()] == ["xs", "s", "m", "l"]
    assert fig.axes[0].get_title() == "optimizer time per step"
