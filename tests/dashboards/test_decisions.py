"""The decisions a sweep recorded, as report header lines: choice and P(best) (a probability only from 5 seeds),
the warnings right under the choice, winner's curse, paired claims."""

from __future__ import annotations

from typing import Any

import pytest

from dashboards._decisions import choice_notes, decision_notes
from scaling.claims import choice_warning


def test_decision_notes_state_the_choice_the_curse_the_budgets_and_the_paired_claims() -> None:
    doc = {
        "selection": {
            "point": {"point_key": "K=4,gamma=0.15"},
            "rule": "one standard error; larger K",
            "uncertainty": {"chosen": "K=4,gamma=0.15", "p_best": {"K=2,gamma=0.15": 0.7, "K=4,gamma=0.15": 0.3},
                            "n": 6},
            "confirmation": {"seeds": [3, 4], "final": True, "chosen": "K=4,gamma=0.15",
                             "points": {"K=4,gamma=0.15": {"selected_objective": 40.0, "confirmed_objective": 46.5,
                                                           "winners_curse": 6.5}}},
            "vs_baselines_paired": {
                "muon": {"mean": 20.9, "interval": [-9.4, 51.2], "n": 6, "includes_zero": True},
                "adamw": {"mean": -122.0, "interval": [-156.0, -88.6], "n": 6, "includes_zero": False}},
        },
        "budgets": {"periodic": {"settings": 12, "trials": 36}, "adamw": {"settings": 3, "trials": 9}},
    }
    notes = decision_notes(doc)
    text = "\n".join(notes)
    assert notes[0].startswith("choice: K=4,gamma=0.15 (P(best) 0.30 on the sweep's seeds)")
    assert "P(best), paired bootstrap over 6 seeds: K=2,gamma=0.15 0.70, K=4,gamma=0.15 0.30" in text
    assert "winner's curse +6.5" in text and "final choice K=4,gamma=0.15" in text
    assert "K=4,gamma=0.15 - muon (objective, paired over seeds): +20.9, 95% CI [-9.4, +51.2], n=6 (the interval " \
           "includes zero: no difference shown)" in text
    assert "- adamw (objective, paired over seeds): -122, 95% CI [-156, -88.6], n=6" in text
    assert "adamw 3 setting(s), 9 trials" in text
    assert decision_notes(None) == [] and decision_notes({"selection": None}) == []


def test_a_losing_choice_is_flagged_right_under_the_choice() -> None:
    warning = "the chosen point is worse than adamw with confidence: chosen - adamw = +300 FD, 95 % CI [+250, +350]"
    doc = {"selection": {"point": {"point_key": "K=3,gamma=0.25"}, "rule": "r", "warnings": [warning]}}
    notes = decision_notes(doc)
    assert notes[0].startswith("choice: K=3,gamma=0.25") and notes[1] == f"WARNING: {warning}"


def _selection(seeds: int, fresh: int) -> dict[str, Any]:
    p_best = {"K=2,gamma=0.15": 0.7, "K=3,gamma=0.15": 0.3}
    return {"seeds": list(range(seeds)), "selection": {
        "point": {"point_key": "K=3,gamma=0.15"}, "rule": "r",
        "uncertainty": {"chosen": "K=3,gamma=0.15", "p_best": p_best, "n": seeds},
        "confirmation": {"seeds": list(range(seeds, seeds + fresh)), "final": True, "chosen": "K=3,gamma=0.15",
                         "points": {"K=3,gamma=0.15": {"selected_objective": 40.0, "confirmed_objective": 46.5,
                                                       "winners_curse": 6.5}}, "p_best": p_best}}}


@pytest.mark.parametrize(("seeds", "fresh"), [(3, 3), (5, 3), (3, 5), (5, 5)])
def test_p_best_is_a_probability_only_from_five_seeds(seeds: int, fresh: int) -> None:
    text = "\n".join(decision_notes(_selection(seeds, fresh)))
    chosen = "0.30" if seeds >= 5 else f"too few seeds (n={seeds})"
    assert f"choice: K=3,gamma=0.15 (P(best) {chosen} on the sweep's seeds); rule: r" in text
    for label, n in (("P(best)", seeds), ("P(best) on the fresh seeds (what made the choice final)", fresh)):
        if n >= 5:  # a paired bootstrap over 5 seeds has 126 distinct resamples
            assert f"{label}, paired bootstrap over {n} seeds: K=2,gamma=0.15 0.70, K=3,gamma=0.15 0.30" in text
        else:  # over 3 seeds, 10: no probability with two decimals
            assert f"{label}: too few seeds (n={n}): a paired bootstrap over fewer than 5 seeds" in text
    if seeds < 5 and fresh < 5:
        assert "0.70" not in text and "0.30" not in text
    # a document that does not say how many seeds states no probability
    unknown = _selection(5, 5)
    del unknown["seeds"], unknown["selection"]["uncertainty"]["n"]
    assert "P(best) not stated (the number of seeds is not recorded)" in choice_notes(unknown)[0]


def test_a_choice_worse_than_every_baseline_is_warned_of_under_the_choice_significant_or_not() -> None:
    # issue 51's grid at lr 8: every point 8 x worse than both baselines on 2 seeds, nothing "shown" at n=2
    warning = choice_warning("K=3,gamma=0.15", {0: 810.0, 1: 790.0},
                             {"adamw": {0: 100.0, 1: 98.0}, "muon": {0: 96.0, 1: 97.0}})
    assert warning is not None
    text = warning.text()
    assert "worse than adamw and muon on 2 of 2 seeds" in text
    doc = {**_selection(2, 0), "choice_warning": text}
    notes = choice_notes(doc)
    assert notes == ["choice: K=3,gamma=0.15 (P(best) too few seeds (n=2) on the sweep's seeds); rule: r",
                     f"WARNING: {text}"]
    assert decision_notes(doc)[:2] == notes
