"""Update size against width: rows, ratios, the figure and the report section, from records with update stats."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from dashboards import DashboardInputError, build_report, compute_report
from dashboards.figures import compute_update_scale, plot_update_scale


def _rec(rung: str, seed: int, spec_rownorm: float, status: str = "SUCCEEDED") -> dict:
    updates = {}
    for kind in ("qkv", "mlp_in"):
        updates[f"update_rms.{kind}.refresh"] = 0.01
        updates[f"update_rms.{kind}.rownorm"] = 0.0015  # gamma = 0.15 times the refresh RMS
        updates[f"update_spec.{kind}.refresh"] = 0.02
        updates[f"update_spec.{kind}.rownorm"] = spec_rownorm
    return {"run_id": f"{rung}-{seed}", "arm": "periodic", "rung": rung, "seed": seed, "K": 3, "gamma": 0.15,
            "status": status, "updates": updates}


def test_update_scale_means_over_seeds_per_width_and_gives_the_ratios() -> None:
    records = [_rec("cpu-xs", 0, 0.010), _rec("cpu-xs", 1, 0.012), _rec("cpu-l", 0, 0.030),
               _rec("cpu-l", 1, 1.0, status="FAILED")]
    data = compute_update_scale(records)
    assert data.widths == (64, 160)
    row = next(r for r in data.rows if r.width == 64 and r.kind == "qkv" and r.step_kind == "rownorm")
    assert row.spec == pytest.approx(0.011) and row.n == 2  # the failed run is left out
    ratios = data.ratios()
    assert ratios[(64, "qkv")] == pytest.approx((0.15, 0.55))
    assert ratios[(160, "qkv")] == pytest.approx((0.15, 1.5))  # the spectral ratio grows with width
    assert isinstance(plot_update_scale(data), Figure)


def test_the_report_draws_the_update_section_only_when_runs_logged_it() -> None:
    html = build_report(compute_report([_rec("cpu-xs", 0, 0.01), _rec("cpu-m", 0, 0.02)]))
    assert 'id="update_scale"' in html and "spectral row norm" in html
    plain = compute_report([{"run_id": "a", "arm": "adamw", "rung": "cpu-xs", "fd": {10: 50.0}}])
    assert plain.updates is None
    with pytest.raises(DashboardInputError, match="update statistics"):
        compute_update_scale([{"run_id": "a", "arm": "adamw", "rung": "cpu-xs"}])
