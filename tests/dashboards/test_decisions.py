"""The decisions a sweep recorded, as report header lines: choice and P(best), winner's curse, paired claims."""

from __future__ import annotations

from dashboards._decisions import decision_notes


def test_decision_notes_state_the_choice_the_curse_the_budgets_and_the_paired_claims() -> None:
    doc = {
        "selection": {
            "point": {"point_key": "K=4,gamma=0.15"},
            "rule": "one standard error; larger K",
            "uncertainty": {"chosen": "K=4,gamma=0.15", "p_best": {"K=2,gamma=0.15": 0.7, "K=4,gamma=0.15": 0.3}},
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
    assert notes[0].startswith("choice: K=4,gamma=0.15 (P(best) 0.30")
    assert "K=2,gamma=0.15 0.70, K=4,gamma=0.15 0.30" in text
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
