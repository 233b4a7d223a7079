"""The transfer's report page shows what its analysis computed: the controls first (before any saving), every
comparison at every endpoint with its censoring counts (the co-primary pair marked), the claims in one alpha
budget, the effective-step verdict and the tuning budget per arm, each comparison as mean, 95 % interval and n;
hostile names escaped. The analyses are real ones (`TransferResult.analysis()`) of synthetic runs with known
answers, no Ray, no MLflow."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest

from dashboards import ReportData, _study, build_report
from dashboards._transfer_page import analysis_sections, transfer_page_data
from scaling.claims import choice_warning

from ..sweeper.transfer.test_transfer_controls import SEEDS, _result


def _page(analysis: dict[str, Any], targets: dict[str, Any] | None = None) -> str:
    return build_report(ReportData(title="transfer t", analysis=analysis, targets=targets), figures={})


def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def _iv(d: dict[str, Any], suffix: str = "") -> str:
    """An estimate as the page must print it: mean [lo, hi] (n)."""
    return f"{d['mean']:.3g} [{d['lo']:.3g}, {d['hi']:.3g}]{suffix} (n={d['n']})"


def test_the_controls_open_the_page_before_any_saving_with_their_figures() -> None:
    result = _result(extra_cost=1.3, periodic_scale=1 / 0.85)
    analysis = result.analysis(n_boot=0)
    page = _page(analysis, result.target_summary(n_boot=0))
    lead = page.index('<div class="controls">')
    assert lead < page.index('class="fd"') < page.index("<section")
    assert re.findall(r'<section id="(\w+)"', page) == ["controls", "targets", "crossings", "claims", "time_ratio",
                                                        "budgets"]
    # two rungs: the time ratio's line is refused with its reason, said on the page
    assert "time_ratio fit refused: a size trend needs at least 3 rungs" in html.unescape(_section(page, "time_ratio"))
    # No saving of the searched arm before the controls have been stated, in the header and in their section.
    saving = _iv(analysis["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]["first"]["time_saving_pct"], " %")
    end_of_controls = page.index("</section>", page.index('<section id="controls">'))
    assert page.index(saving) > end_of_controls and page.index("time saving = 1 - product") > end_of_controls
    header = page[lead:page.index("</div>", lead)]
    assert "<li>negative control (muon_twin against muon): came out as it must at every rung</li>" in header
    assert "<li>positive control (muon_extra_ns against muon): came out as it must at every rung</li>" in header
    controls = _section(page, "controls")
    for rung in ("cpu-xs", "cpu-s"):
        # Muon / (Muon + 30 % redundant work) per step, identical updates: a known saving of 1 - 1 / 1.3 = 23.1 %
        pos = analysis["controls"]["positive"]["comparisons"][rung]["first"]
        assert pos["time_saving_pct"]["mean"] == pytest.approx(100 * (1 - 1 / 1.3), abs=1.0)
        assert _iv(pos["time_saving_pct"], " %") in controls and _iv(pos["steps_to_target_ratio"]) in controls
        assert (f"<td>positive</td><td>muon_extra_ns against muon</td><td>{rung}</td><td>as it must</td>"
                in controls)
        neg = analysis["controls"]["negative"]["comparisons"][rung]["first"]["time_saving_pct"]
        assert neg["lo"] < 0 < neg["hi"] and _iv(neg, " %") in controls  # null, as it must be
    checks = [c for r in analysis["controls"]["positive"]["rungs"].values() for c in r["checks"]]
    assert len(checks) == 6 and all(html.escape(c["text"]) in controls for c in checks)
    assert any(c["text"].endswith("shown at p < 0.0125 (the known saving detected) -> ok") for c in checks)
    # periodic needs 1 / 0.85 x Muon's steps at 0.85 x its step time: no saving, a null read as interpretable.
    comp = analysis["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]
    crossings = _section(page, "crossings")
    labels = {"first": "first crossing (co-primary)", "steps_above": "steps above the target (co-primary)",
              "sustained": "sustained crossing (reported, not judged)"}
    for endpoint, label in labels.items():
        saving = comp[endpoint]["time_saving_pct"]
        assert saving["lo"] < 0 < saving["hi"] and saving["n"] == len(SEEDS)
        row = (f"<td>cpu-xs</td><td>muon</td><td>{label}</td><td>{_iv(comp[endpoint]['steps_to_target_ratio'])}"
               f"</td>")
        assert row in crossings and _iv(saving, " %") in crossings
    # the co-primary pair first, then the sustained crossing; its coverage caveat in the caption
    assert crossings.index(f"<td>{labels['first']}</td>") < crossings.index(f"<td>{labels['steps_above']}</td>") \
        < crossings.index(f"<td>{labels['sustained']}</td>")
    assert "the sustained crossing is reported, not judged: its 95 % interval covers about 89 %" in crossings
    # against Muon at both rungs and three endpoints; against AdamW (0.7 x the step time) the penalty is shown
    assert crossings.count("null, interpretable: the positive control&#x27;s saving was detected") == 6
    # a penalty is a cost, never a saving "shown"
    assert crossings.count("cost shown: the interval lies below 0") == 6 and "saving shown" not in crossings


def test_censoring_claims_and_the_effective_step_verdict_carry_the_analysis_numbers() -> None:
    # periodic at 1.8 x Muon's curve: one seed in five never reaches the target at cpu-xs (right-censored)
    censored = _result(extra_cost=1.3, periodic_scale=1.8).analysis(n_boot=0)
    counts = censored["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]["first"]["censoring"]
    assert counts["periodic"] == {"reached": 4, "right_censored": 1, "left_censored": 0}
    assert ("periodic: 4 reached, 1 right-censored, 0 left-censored<br>muon: 5 reached, 0 right-censored, 0 "
            "left-censored") in _section(_page(censored), "crossings")
    # In steps above the target the seed that never reached is known (above throughout): no seed stopped early.
    assert censored["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]["steps_above"]["censoring"]["periodic"] == \
        {"reached": 5, "right_censored": 0, "left_censored": 0}
    assert ("periodic: 5 observed to the horizon, 0 right-censored (stopped early)<br>muon: 5 observed to the "
            "horizon, 0 right-censored (stopped early)") in _section(_page(censored), "crossings")

    # periodic needs 1.2 x Muon's steps; Muon at periodic's update size needs as many: the step size.
    analysis = _result(extra_cost=1.3, periodic_scale=1.2, effective_scale=1.2).analysis(n_boot=0)
    page = _page(analysis)
    claims = _section(page, "claims")
    assert ("alpha 0.05 over 4 comparison(s) and 1 look(s): Holm at 0.05 per look, the strongest claim must pass "
            "0.0125") in claims
    doc = analysis["claims"]
    for key in ("cpu-xs vs muon", "cpu-s vs adamw"):
        rung, base = key.split(" vs ")
        first = analysis["targets"]["rungs"][rung]["comparisons"][base]["first"]["time_saving_pct"]
        above = analysis["targets"]["rungs"][rung]["comparisons"][base]["steps_above"]["time_saving_pct"]
        # 1 - 1.2 x 0.85 = -2 % against Muon: slower, shown at the first crossing and in steps above the target
        assert doc["stands"][key] and doc["direction"][key] == "slower"
        assert (f"<td>{key}</td><td><strong>stands (slower)</strong></td><td>{_iv(first, ' %')}<br>Holm p "
                f"{doc['p_holm']['first'][key]:.3g}</td><td>{_iv(above, ' %')}<br>Holm p "
                f"{doc['p_holm']['steps_above'][key]:.3g}</td>") in claims
        assert doc["power"][key]["text"] in claims and "at alpha 0.0125 with 5 seeds" in doc["power"][key]["text"]
    assert ("stands only where the first crossing and the steps above the target both show it, in one direction "
            "(co-primary); the sustained crossing is reported beside them, not judged") in claims
    assert "time saving, sustained crossing (reported, not judged) [95 % interval] (n)" in claims
    diagnostics = _section(page, "diagnostics")
    for rung, d in analysis["diagnostics"]["effective_step"]["rungs"].items():
        vs_muon = d["vs_muon"]["first"]["steps_to_target_ratio"]
        assert vs_muon["mean"] == pytest.approx(1.2, rel=0.02)
        assert d["verdict"].endswith("the step size (at equal update size the penalty is gone; tune its lr)")
        assert (f"<td>{rung}</td><td>{_iv(vs_muon)}</td><td>"
                f"{_iv(d['vs_muon_effective_step']['first']['steps_to_target_ratio'])}</td>") in diagnostics
        assert d["verdict"] in diagnostics


def test_a_failed_positive_control_is_said_first_and_no_controls_is_said_too() -> None:
    # The redundant work costs nothing measurable: the known saving is not there to detect.
    page = _page(_result(extra_cost=1.0).analysis(n_boot=0))
    lead = page[page.index('<div class="controls">'):page.index("</div>")]
    first = re.search(r"<li>(.*?)</li>", lead)
    assert first is not None
    assert first.group(1).startswith("<strong>POSITIVE CONTROL FAILED at cpu-xs, cpu-s: a known per-step")
    assert ("<li><strong>positive control (muon_extra_ns against muon): did NOT come out as it must at cpu-xs, "
            "cpu-s</strong></li>") in lead
    assert "<td>positive</td><td>muon_extra_ns against muon</td><td>cpu-xs</td><td><strong>FAILED</strong></td>" in page
    # A transfer without controls: the page opens saying that no null on it is interpretable.
    analysis = _result(extra_cost=1.3).analysis(n_boot=0)
    page = _page({**analysis, "controls": None})
    assert page.index("No controls ran in this transfer") < page.index('<section id="controls">')


def test_tuning_budgets_per_arm_with_the_lr_multiples_tried() -> None:
    result = _result(extra_cost=1.3)
    result.source.update(selection_points=12)
    result.source_objectives.update({"muon": {"lr_tuning": {"x0.5": 1.0, "x1": 0.9, "x2": 1.1}}, "adamw": {}})
    analysis = {**result.analysis(n_boot=0), "lr_brackets": {
        "multiples": {"periodic": [1, 1.5, 2.3]},
        "choices": {"cpu-xs": {"periodic": {"chosen": 1.5, "multiples": {
            "1": {"runs": 5, "finished": 5, "mean_final": 14.25}, "1.5": {"runs": 5, "finished": 5, "mean_final": 12.5},
            "2.3": {"runs": 5, "finished": 4, "mean_final": 13.0}}}}}}}
    budgets = _section(_page(analysis), "budgets")
    assert "<td>periodic</td><td>12</td><td>x1, x1.5, x2.3</td><td>1</td><td>5</td>" in budgets
    assert "<td>muon</td><td>3</td><td>x1 (the carried lr)</td><td>1</td><td>5</td>" in budgets
    assert "Budgets in the sweep: <strong>NOT equal</strong>; in the transfer: equal." in budgets
    assert ("<td>cpu-xs</td><td>periodic</td><td>x1.5</td><td>x1: 14.25 (5/5 finished); x1.5: 12.5 (5/5 finished); "
            "x2.3: 13 (4/5 finished)</td>") in budgets


def test_hostile_names_are_escaped() -> None:
    analysis = _result(extra_cost=1.3, periodic_scale=1.2, effective_scale=1.2).analysis(n_boot=0)
    hostile = json.loads(json.dumps(analysis, default=str)
                         .replace("muon_twin", "<img src=x onerror=alert(1)>")
                         .replace("cpu-xs", "<script>alert('rung')</script>"))
    # a comparison that could not be made, and a claim not judged, say why, escaped too
    why = "<b>seed 4 only in periodic</b>"
    comp = hostile["targets"]["rungs"]["cpu-s"]["comparisons"]["muon"]
    comp.update(first={"error": why}, steps_above={"error": why}, sustained={"error": why})
    hostile["claims"]["not_judged"] = ["<i>cpu-m</i> vs muon"]
    page = _page(hostile)
    assert "<img src=x" not in page and "<script>alert" not in page and "<b>seed" not in page and "<i>" not in page
    assert _section(page, "crossings").count("not computed: &lt;b&gt;seed 4 only in periodic&lt;/b&gt;") == 3
    assert "<td>&lt;i&gt;cpu-m&lt;/i&gt; vs muon</td><td>not judged (no comparison)</td>" in _section(page, "claims")
    assert "&lt;img src=x onerror=alert(1)&gt; against muon" in page
    for name in ("controls", "crossings", "claims", "diagnostics"):
        assert "&lt;script&gt;alert(&#x27;rung&#x27;)&lt;/script&gt;" in _section(page, name)


def test_the_page_takes_the_analysis_own_sections() -> None:
    result = _result(extra_cost=1.3, periodic_scale=1.2, effective_scale=1.2)
    sections, analysis = analysis_sections(result), result.analysis(n_boot=0)
    assert sections["controls"]["summary"] == analysis["controls"]["summary"]
    assert sections["claims"]["stands"] == analysis["claims"]["stands"]
    assert sections["diagnostics"]["effective_step"]["lines"] == analysis["diagnostics"]["effective_step"]["lines"]
    assert sections["tuning_budgets"] == analysis["tuning_budgets"]
    assert sections["targets"]["rungs"]["cpu-s"]["comparisons"]["muon"]["sustained"]["censoring"] == \
        analysis["targets"]["rungs"]["cpu-s"]["comparisons"]["muon"]["sustained"]["censoring"]
    assert _section(_page(sections), "claims") == _section(_page(analysis), "claims")


def test_the_transfer_page_assembles_the_analysis_and_the_sweeps_chosen_line(
        monkeypatch: pytest.MonkeyPatch, sweep_records: list[dict[str, Any]],
        transfer_records: list[dict[str, Any]]) -> None:
    """`transfer_page_data` over a real analysis; only MLflow's reads (the runs, the sweep's choice and its
    selection.json) are replaced by the records and the document they would return."""
    warning = choice_warning("K=3,gamma=0.15", {0: 810.0, 1: 790.0},
                             {"adamw": {0: 100.0, 1: 98.0}, "muon": {0: 96.0, 1: 97.0}})
    assert warning is not None
    selection = {"seeds": [0, 1], "choice_warning": warning.text(), "selection": {
        "point": {"point_key": "K=3,gamma=0.15"}, "rule": "r",
        "uncertainty": {"chosen": "K=3,gamma=0.15", "p_best": {"K=3,gamma=0.15": 0.23}, "n": 2}}}
    monkeypatch.setattr(_study, "load_runs", lambda uri, run: sweep_records if run == "sweep-run" else transfer_records)
    monkeypatch.setattr(_study, "load_chosen", lambda uri, run: (3, 0.15))
    monkeypatch.setattr(_study, "load_selection", lambda uri, run: selection)
    result = _result(extra_cost=1.0, periodic_scale=1.2, effective_scale=1.2)  # the positive control fails
    result.source.update(sweep_parent_run_id="sweep-run")
    data = transfer_page_data(result, transfer_id="tr-1", sweep_id="sw-1")
    assert data.analysis is not None and set(data.analysis) == {
        "searched_arm", "controls", "targets", "claims", "diagnostics", "tuning_budgets", "lr_brackets"}
    assert data.notes[:2] == ("choice: K=3,gamma=0.15 (P(best) too few seeds (n=2) on the sweep's seeds); rule: r",
                              f"WARNING: {warning.text()}")
    page = build_report(ReportData(title="t", analysis=data.analysis, notes=data.notes))
    header = page[:page.index("</header>")]
    assert (header.index("POSITIVE CONTROL FAILED") < header.index("choice: K=3,gamma=0.15")
            < header.index("worse than adamw and muon on 2 of 2 seeds"))


def test_an_analysis_judged_before_steps_above_shows_the_pair_it_was_judged_on() -> None:
    # An analysis stored before the steps above the target were an endpoint: no `steps_above`, no `co_primary`;
    # its claims were judged on the first and the sustained crossing, and the page says so.
    analysis = _result(extra_cost=1.3, periodic_scale=1.2).analysis(n_boot=0)
    del analysis["claims"]["co_primary"], analysis["claims"]["p_holm"]["steps_above"]
    for entry in analysis["targets"]["rungs"].values():
        for comp in entry["comparisons"].values():
            del comp["steps_above"]
    page = _page(analysis)
    crossings, claims = _section(page, "crossings"), _section(page, "claims")
    assert crossings.count("<td>sustained crossing (co-primary)</td>") == 4 and "steps above" not in crossings
    assert "stands only where the first crossing and the sustained crossing both show it" in claims
    assert "steps above" not in claims and "reported" not in claims
