"""Confirmation before the choice is final, on numbers: the confirmation sweep it builds, and the final choice and
winner's curse it records."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sweeper import SweepSpec, TrialRecord, select_best, summarise_points
from sweeper._confirm import apply_confirmation, confirmation_spec, top_points

from .conftest import TINY_TRIAL


def _spec(**fields: Any) -> SweepSpec:
    return SweepSpec.model_validate({"name": "c", "horizon": 30, "trial": TINY_TRIAL, "seeds": [0, 1], **fields})


def _records(values: dict[tuple[int, float], list[float]]) -> list[TrialRecord]:
    out = []
    for (k, g), per_seed in values.items():
        key = f"K={k},gamma={g:g}"
        out += [TrialRecord(trial_key=f"{key},seed={s}", point_key=key, role="search", arm="periodic", seed=s,
                            status="SUCCEEDED", params={"K": k, "gamma": g}, objective=v)
                for s, v in enumerate(per_seed)]
    return out


# K=2 looks best on seeds 0-1 by luck; K=3 is within one SE of it (so the rule already prefers K=3) and K=4 is
# clearly worse.
SEARCH = {(2, 0.15): [30.0, 40.0], (3, 0.15): [36.0, 38.0], (4, 0.25): [60.0, 61.0]}


def test_the_confirmation_sweep_reruns_the_top_points_on_fresh_seeds() -> None:
    spec = _spec(confirm={"top": 2}, baselines=["adamw"])
    assert spec.confirm_seeds == [2, 3]
    selection = select_best(summarise_points(_records(SEARCH), [0, 1]))
    assert selection is not None and selection.point.point_key == "K=3,gamma=0.15"
    tops = top_points(selection, 2)
    assert [p.point_key for p in tops] == ["K=3,gamma=0.15", "K=2,gamma=0.15"]
    sub = confirmation_spec(spec, tops, "c-1")
    assert sub.seeds == [2, 3] and sub.search.space == {"K": [3], "gamma": [0.15]} and sub.confirm.top == 0
    assert [(b.label, b.optimizer["refresh_every"], b.tags["scalesweep.confirm_point"]) for b in sub.baselines] == [
        ("top2", 2, "K=2,gamma=0.15")]
    assert sub.tags["scalesweep.confirms"] == "c-1" and sub.name == "c-confirm"
    with pytest.raises(ValidationError, match="fresh"):
        _spec(confirm={"top": 2, "seeds": [1, 5]})
    assert _spec().fingerprint() == _spec(confirm={"top": 0}).fingerprint() != spec.fingerprint()


def test_the_fresh_seeds_make_the_choice_and_measure_the_winners_curse() -> None:
    points = summarise_points(_records(SEARCH), [0, 1])
    selection = select_best(points, tie_break="none")  # the lowest mean: K=2 (35.0), helped by seed 0's 30
    assert selection is not None and selection.point.point_key == "K=2,gamma=0.15"
    doc = {"sweep_id": "c-confirm-1", "parent_run_id": "pc", "seeds": [2, 3, 4],
           "objectives": {"K=2,gamma=0.15": [41.0, 43.0, 42.0], "K=3,gamma=0.15": [37.0, 38.0, 36.0]}}
    apply_confirmation(selection, doc, points)
    c = selection.confirmation
    assert c is not None and c["final"] and c["chosen_before"] == "K=2,gamma=0.15" and c["chosen"] == "K=3,gamma=0.15"
    assert selection.point.point_key == "K=3,gamma=0.15" and "confirmed on fresh seeds [2, 3, 4]" in selection.rule
    assert c["points"]["K=2,gamma=0.15"]["winners_curse"] == pytest.approx(42.0 - 35.0)  # it looked 7 FD better
    assert c["points"]["K=3,gamma=0.15"]["confirmed_objective"] == pytest.approx(37.0)
    assert c["p_best"]["K=3,gamma=0.15"] == pytest.approx(1.0)
    # What is said about the choice follows it: the runner-up is another point, its gap is from the new choice
    # (K=2's 35.0 against K=3's 37.0 on the sweep's seeds), and P(best) is the confirmation's.
    assert selection.runner_up is not None and selection.runner_up.point_key == "K=2,gamma=0.15"
    assert selection.gap_abs == pytest.approx(35.0 - 37.0)
    assert selection.tied == ["K=3,gamma=0.15"] and selection.chosen_p_best == pytest.approx(1.0)
    assert selection.choice_confirmed  # the sweep table labels this P(best) as the fresh seeds'


def test_an_unfinished_confirmation_leaves_the_choice_as_it_was() -> None:
    points = summarise_points(_records(SEARCH), [0, 1])
    selection = select_best(points)
    assert selection is not None
    apply_confirmation(selection, {"seeds": [2], "objectives": {"K=3,gamma=0.15": [None]}}, points)
    assert selection.point.point_key == "K=3,gamma=0.15" and selection.confirmation is not None
    assert selection.confirmation["final"] is False and "stays" in selection.confirmation["note"]
    assert not selection.choice_confirmed
