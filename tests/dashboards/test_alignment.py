"""The alignment score beside FD on the report: a section (curve and per-attribute table), a column in the FD and the
sweep's trials tables and a scaling panel of its error, wherever the runs carry it; nothing of it where they do not."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from dashboards import DashboardInputError, as_records, build_report, compute_report, report_figures
from dashboards._mlflow import _record
from dashboards._scaling import scaling_fit_data
from scaling.fits import fit_scaling
from trials.record import StoredRun

ATTRIBUTES = ("count", "position", "kind", "colour", "size", "relation")


def _share(arm: str, size: float, step: int, seed: int) -> float:
    """Rises with the step and the size; Muon above periodic above AdamW; seeds 0.01 apart."""
    base = {"adamw": 0.30, "periodic": 0.40, "muon": 0.42}[arm]
    return min(0.95, base + 0.05 * (size / 1e6) ** 0.25 + 0.1 * step / 1200 + 0.01 * seed)


def _aligned(record: dict[str, Any], sizes: dict[str, float]) -> dict[str, Any]:
    size = sizes.get(record["rung"], 1e6)
    shares = {s: _share(record["arm"], size, s, record["seed"]) for s in record["fd"]}
    end = shares[max(shares)]
    return {**record, "alignment": shares,
            "alignment_attributes": {a: min(1.0, end + 0.05 * (i + 1)) for i, a in enumerate(ATTRIBUTES)}}


def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def test_a_scenes_transfer_shows_alignment_beside_fd(transfer_records: list[dict[str, Any]],
                                                     synth: SimpleNamespace) -> None:
    records = [_aligned(r, synth.SIZES) for r in transfer_records]
    data = compute_report(records, title="scenes transfer")
    assert data.alignment is not None and "alignment" in report_figures(data)
    page = build_report(data)
    table = _section(page, "alignment")
    assert "all correct [min, max]" in table and all(f"<th>{a}</th>" in table for a in ATTRIBUTES)
    # muon at m: the mean over seeds 0-2 at the last eval step, and its spread
    ends = [_share("muon", synth.SIZES["m"], 1200, seed) for seed in range(3)]
    row = next(r for r in table.split("<tr>") if "<td>m</td>" in r and "<td>muon</td>" in r)
    assert f"{sum(ends) / 3:.3f} [{min(ends):.3f}, {max(ends):.3f}]" in row
    assert f"<td>{min(1.0, max(ends) + 0.05 * 4):.3f}</td>" not in row  # attributes are means, not a seed's
    colour = sum(min(1.0, e + 0.05 * 4) for e in ends) / 3
    assert f"<td>{colour:.3f}</td>" in row
    fd = _section(page, "fd_curves")
    assert "endpoint mean alignment" in fd and f"{sum(ends) / 3:.3g}" in fd
    # without fits the scaling section draws its points: the error 1 - alignment at each run's last eval step
    panel = next(p for p in data.scaling if p.metric == "alignment_error")
    muon = next(p for p in panel.points if p.arm == "muon")
    assert muon.mean[-1] == pytest.approx(1 - sum(_share("muon", synth.SIZES["l"], 1200, s) for s in range(3)) / 3)
    assert "1 − alignment" in panel.ylabel


def test_the_alignment_fit_is_drawn_on_its_error(transfer_records: list[dict[str, Any]],
                                                 synth: SimpleNamespace) -> None:
    records = [_aligned(r, synth.SIZES) for r in transfer_records]
    data = scaling_fit_data(records, "alignment_error")
    assert data["adamw"][1][0] == pytest.approx(1 - _share("adamw", synth.SIZES["xs"], 1200, 0))
    fit = fit_scaling(data, "A*N^-alpha", n_boot=0)  # the form is not the point here: drawing it is
    report = compute_report(records, fits={"alignment_error": fit})
    assert [p.metric for p in report.scaling] == ["alignment_error"] and report.scaling[0].fit is not None
    assert "fit A*N^-alpha of alignment_error" in build_report(report, figures={})


def test_runs_without_alignment_say_nothing_of_it(transfer_records: list[dict[str, Any]],
                                                  sweep_records: list[dict[str, Any]]) -> None:
    for records in (transfer_records, sweep_records):
        data = compute_report(records)
        assert data.alignment is None and "alignment" not in report_figures(data)
        assert all(p.metric != "alignment_error" for p in data.scaling)
        page = build_report(data, figures={})
        assert not re.search("alignment", page, re.IGNORECASE), "a page of FD-only runs mentions alignment"


def test_the_sweeps_trials_table_carries_alignment(sweep_records: list[dict[str, Any]]) -> None:
    records = [{**r, "alignment": {1200: 0.5 + 0.1 * r["K"]}} if r.get("K") and r["status"] == "SUCCEEDED" else r
               for r in sweep_records]
    from dashboards._sweepviews import compute_trials_view, trials_view_html

    view = compute_trials_view(records)
    assert view is not None and dict((v, m) for v, m, _ in view.alignment_slices["K"]) == pytest.approx(
        {2.0: 0.7, 3.0: 0.8, 4.0: 0.9})
    assert "mean endpoint alignment at each value" in trials_view_html(view) and "3: 0.800" in trials_view_html(view)
    plain = compute_trials_view(sweep_records)
    assert plain is not None and not plain.alignment_slices and "alignment" not in trials_view_html(plain)


def test_alignment_is_read_from_the_run_record_and_checked() -> None:
    run = StoredRun(run_id="r1", params={"optimizer.name": "muon", "rung": "cpu-xs", "seed": "0",
                                         "eval_steps": "[6, 12]"},
                    metrics={"alignment": 0.4, "alignment.colour": 0.9, "alignment.count": 0.8, "fd": 3.0},
                    histories={"alignment": {6: 0.2, 12: 0.4, 13: 0.9}, "fd": {6: 5.0, 12: 3.0}})
    record = as_records([_record(run)])[0]
    assert dict(record.alignment) == {6: 0.2, 12: 0.4}  # only the declared eval steps, as FD
    assert record.endpoint_alignment == 0.4 and dict(record.alignment_attributes) == {"colour": 0.9, "count": 0.8}
    with pytest.raises(DashboardInputError, match="alignment_attributes must map name -> value"):
        as_records([{"run_id": "x", "alignment_attributes": [0.5]}])
    with pytest.raises(DashboardInputError, match="alignment has a non-numeric entry"):
        as_records([{"run_id": "x", "alignment": {6: "high"}}])


def test_the_transfer_page_fits_alignment_only_where_the_runs_carry_it(
        monkeypatch: Any, transfer_records: list[dict[str, Any]]) -> None:
    """`transfer_page_data` over a real result (test_transfer_study's way: only MLflow's reads replaced): a transfer
    whose runs carry alignment is fitted on it (here refused for its one size, said in a note), one whose runs do
    not says nothing of alignment."""
    import dataclasses

    from dashboards import _study
    from dashboards._transfer_page import transfer_page_data

    from ..sweeper.transfer.test_transfer_controls import _result

    monkeypatch.setattr(_study, "load_runs", lambda uri, run: transfer_records)
    plain = _result(extra_cost=1.3)
    notes = transfer_page_data(plain).notes
    assert not any("alignment" in n for n in notes), notes
    aligned = dataclasses.replace(plain, runs=[dataclasses.replace(r, alignment=((60, 1.0, 0.5),))
                                               for r in plain.runs], _fits={})
    notes = transfer_page_data(aligned).notes
    assert "no alignment fit: no arm has succeeded runs at two rungs or more to fit alignment on" in notes
