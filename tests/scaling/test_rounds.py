"""Seeds added in rounds (`scaling.rounds`): the looks the budget allows, the next seeds, each look's decision,
and a simulation showing that looking after every round at alpha / looks keeps the false "shown" rate at most
alpha where looking at alpha each time does not."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from pydantic import ValidationError

from scaling.rounds import RoundsSpec, next_seeds, planned_looks, rounds_look
from scaling.stats import t_interval, t_p_value


def _report(doc: dict, rung: str = "cpu-m", against: str = "muon", measure: str = "time_saving_pct") -> dict:
    return {"rungs": {rung: {"comparisons": {against: {"status": "ok", measure: doc}}}}}


def test_the_budget_sets_the_looks_and_the_next_seeds() -> None:
    rule = RoundsSpec(add=3, max_seeds=9)
    assert planned_looks(rule, 3) == 3 and planned_looks(rule, 9) == 1 and planned_looks(rule, 8) == 2
    assert planned_looks(RoundsSpec(add=2, max_seeds=8), 3) == 4  # 3 -> 5 -> 7 -> 8
    assert next_seeds([0, 1, 2], rule) == [3, 4, 5]
    assert next_seeds([6, 7, 8], rule, avoid=[0, 1, 2, 3, 4, 5]) == [9, 10, 11]
    assert next_seeds([0, 1, 2, 3, 4, 5, 6, 7], rule) == [8]  # cut to the budget
    assert next_seeds(list(range(9)), rule) == []
    with pytest.raises(ValidationError, match="max_seeds"):
        RoundsSpec(max_seeds=1)
    with pytest.raises(ValidationError, match="against"):
        RoundsSpec(against="sgd")


def test_a_look_stops_on_a_corrected_p_value_or_a_spent_budget() -> None:
    rule = RoundsSpec(add=3, max_seeds=9)  # 3 looks from 3 seeds: each at 0.05 / 3
    shown = rounds_look(_report({"mean": 21.0, "lo": 9.0, "hi": 31.0, "n": 3, "p_value": 0.004}), rule,
                        seeds=[0, 1, 2], initial_seeds=3, rung="cpu-m")
    assert shown["stop"] and shown["reason"].startswith("shown: a saving (p 0.004 < 0.0167")
    assert shown["alpha_per_look"] == pytest.approx(0.05 / 3) and shown["looks_planned"] == 3
    # p 0.03 would pass a single look at 0.05, not one of three
    early = rounds_look(_report({"mean": 15.0, "lo": 2.0, "hi": 26.0, "n": 3, "p_value": 0.03}), rule,
                        seeds=[0, 1, 2], initial_seeds=3, rung="cpu-m")
    assert not early["stop"] and early["reason"] == "not shown yet (p 0.03 >= 0.0167)"
    spent = rounds_look(_report({"mean": 5.0, "lo": -4.0, "hi": 14.0, "n": 9, "p_value": 0.2}), rule,
                        seeds=list(range(9)), initial_seeds=3, rung="cpu-m")
    assert spent["stop"] and spent["reason"].startswith("budget spent: 9 of max_seeds 9 seeds, not shown")
    loss = rounds_look(_report({"mean": -30.0, "lo": -40.0, "hi": -20.0, "n": 6, "p_value": 1e-4}), rule,
                       seeds=list(range(6)), initial_seeds=3, rung="cpu-m")
    assert loss["stop"] and "a loss" in loss["reason"]
    # no number yet (too few seeds reached the target): continue while the budget lasts
    none = rounds_look({"rungs": {"cpu-m": {"comparisons": {"muon": {"status": "too_few_reached"}}}}}, rule,
                       seeds=[0, 1, 2], initial_seeds=3, rung="cpu-m")
    assert not none["stop"] and none["reason"] == "not shown yet (too_few_reached)" and none["mean"] is None


def test_a_look_says_when_the_timing_spread_dominates() -> None:
    rule = RoundsSpec()
    doc = {"mean": 5.0, "lo": -20.0, "hi": 25.0, "n": 3, "p_value": 0.5, "se_seeds_log": 0.02, "se_timing_log": 0.1}
    look = rounds_look(_report(doc), rule, seeds=[0, 1, 2], initial_seeds=3, rung="cpu-m")
    assert "timing rounds" in look["note"]
    doc.update(se_timing_log=0.01)
    assert "note" not in rounds_look(_report(doc), rule, seeds=[0, 1, 2], initial_seeds=3, rung="cpu-m")


def _false_shown_rate(correct: bool, studies: int = 4000) -> float:
    """Studies with no true difference (each seed's paired log ratio ~ N(0, 0.15), the spread of the evidence
    profile's steps-to-target log ratios): 3 seeds, then 3 more per round up to 15 (5 looks)."""
    rule = RoundsSpec(add=3, max_seeds=15, measure="steps_to_target_ratio")
    rng = np.random.default_rng(20261203)
    shown = 0
    for _ in range(studies):
        logs = list(rng.normal(0.0, 0.15, size=15))
        seeds = [0, 1, 2]
        while True:
            d = t_interval(logs[: len(seeds)])
            doc = {"mean": math.exp(d.mean), "n": len(seeds), "p_value": t_p_value(d)}
            if not correct:  # the naive rule: every look at alpha itself
                doc["p_value"] = doc["p_value"] / planned_looks(rule, 3)  # p / L < alpha / L: p < alpha
            look = rounds_look(_report(doc, measure="steps_to_target_ratio"), rule, seeds=seeds, initial_seeds=3,
                               rung="cpu-m")
            if look["stop"]:
                shown += look["reason"].startswith("shown")
                break
            seeds = seeds + next_seeds(seeds, rule)
    return shown / studies


def test_looking_after_every_round_keeps_the_false_shown_rate_at_alpha() -> None:
    corrected, naive = _false_shown_rate(True), _false_shown_rate(False)
    # Bonferroni over 5 looks is conservative: below 5 % (3.8 % here); 4000 studies give a standard error
    # of about 0.3 points
    assert corrected <= 0.05
    # looking 5 times at 5 % each "shows" a saving that is not there 14.7 % of the time
    assert naive >= 0.10, naive
    print(f"false shown: {corrected:.3f} at alpha / looks, {naive:.3f} at alpha each look")


@pytest.mark.parametrize(("rounds", "field"), [
    ({"max_seeds": 2}, "rounds.max_seeds (2) is below the 3 seeds"),      # budget below the first round
    ({"against": "rownorm"}, "rounds.against 'rownorm' must be one of arms"),  # a baseline the transfer does not run
    ({"alpha": math.nan}, "alpha"),                                        # non-finite
    ({"add": 10_000}, "add"),                                              # oversized
])
def test_a_transfer_spec_refuses_rounds_it_cannot_run(rounds: dict, field: str) -> None:
    from sweeper import TransferSpec

    with pytest.raises(ValidationError, match=re.escape(field)):
        TransferSpec.model_validate({"name": "t", "sweep": "x", "seeds": [0, 1, 2], "rounds": rounds})
