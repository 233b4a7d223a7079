"""Target rule `pilot` without training: the spec's checks, the target a pilot's curves give, one target for every
rung in the report and the fits, and the flag of targets that differ under the other rules. The pilot trained for
real (its runs, its tags, resume) is in test_transfer_run.py."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from pydantic import ValidationError

from scaling.targets import pilot_target, plateau
from sweeper.transfer import TransferSpec

from .test_transfer_targets import ARMS, _result, _run

BASE = {"name": "t", "sweep": "out/sweeps/none-here", "seeds": [0, 1, 2], "rungs": ["cpu-xs", "cpu-s"]}


@pytest.mark.parametrize(("target", "field", "words"), [
    ({"rule": "pilot", "pilot": {"seeds": [2, 100]}}, "target", "disjoint from the transfer's judged seeds"),
    ({"rule": "pilot", "pilot": {"horizon_factor": 1.2}}, "target.pilot.horizon_factor", "or equal to 1.5"),
    ({"rule": "pilot", "pilot": {"rung": "cpu-m"}}, "target", "must be one of the transfer's rungs"),
    ({"rule": "pilot", "pilot": {"rung": "cpu-huge"}}, "target.pilot.rung",
     "allowed: ['cpu-3xs', 'cpu-2xs', 'cpu-xs1', 'cpu-xs'"),
    ({"rule": "pilot", "pilot": {"seeds": []}}, "target.pilot.seeds", "at least 1"),
    ({"rule": "pilot", "pilot": {"seeds": [5, 5]}}, "target.pilot.seeds", "distinct"),
    ({"rule": "pilot", "pilot": {"points": 3}}, "target.pilot.points", "greater than or equal to 6"),
    ({"rule": "pilot", "pilot": {"sedes": [5]}}, "target.pilot.sedes", "Extra inputs"),
    ({"rule": "final_mean", "pilot": {}}, "target", "target.pilot is only for target.rule 'pilot'"),
    ({"rule": "pilot", "arm": "rownorm"}, "", "target.arm 'rownorm' must be one of arms"),
])
def test_bad_pilot_values_are_refused_naming_the_field(target: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationError) as refused:
        TransferSpec.model_validate({**BASE, "target": target})
    errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in refused.value.errors()}
    assert field in errors and words in errors[field], errors


def test_a_pilot_spec_takes_stated_defaults_and_changes_the_fingerprint() -> None:
    spec = TransferSpec.model_validate({**BASE, "target": {"rule": "pilot"}})
    assert spec.target.pilot is not None
    assert spec.target.pilot.model_dump() == {"rung": None, "horizon_factor": 3.0, "seeds": [100, 101], "points": 24}
    assert spec.fingerprint() != TransferSpec.model_validate(BASE).fingerprint()
    assert "one target for every rung" in spec.target.describe()


def test_the_target_is_one_plus_slack_times_the_mean_of_each_seeds_mean_over_the_last_third() -> None:
    steps = list(range(3, 31, 3))  # 3..30: the last third of 30 steps is 20..30 -> steps 21, 24, 27, 30
    flat = {0: (steps, [300 - 10 * min(s, 18) for s in steps]), 1: (steps, [310 - 10 * min(s, 18) for s in steps])}
    t = pilot_target(flat, horizon=30, slack=0.1)
    assert t.tail_from == pytest.approx(20) and t.tail_points == {"0": 4, "1": 4}
    assert t.per_seed == {"0": 120.0, "1": 130.0} and t.quality == 125.0
    assert t.value == pytest.approx(1.1 * 125.0) and t.plateaued
    falling = {0: (steps, [300 - 5 * s for s in steps]), 1: flat[1]}  # seed 0 still falls 5 per step to the end
    t = pilot_target(falling, horizon=30, slack=0.1)
    assert not t.plateaued and t.drops["1"] == pytest.approx(0.0, abs=1e-9)
    assert t.drops["0"] == pytest.approx(plateau(steps, falling[0][1], horizon=30).drop) and t.drops["0"] > 0.05
    assert t.quality == pytest.approx(statistics.fmean([statistics.fmean([300 - 5 * s for s in (21, 24, 27, 30)]),
                                                        130.0]))


def _pilot_plan(value: float, plateaued: bool) -> dict[str, Any]:
    return {"arm": "adamw", "rung": "cpu-xs", "horizon": 72, "seeds": [100, 101], "points": 24, "curve": "fd_track",
            "slack": 0.1, "result": {"value": value, "quality": value / 1.1, "plateaued": plateaued,
                                     "per_seed": {"100": 1.0, "101": 1.0}, "drops": {"100": 0.2, "101": 0.01},
                                     "window": 1 / 3, "max_drop": 0.05, "curve": "fd_track",
                                     "run_ids": ["p0", "p1"], "definition": "(1 + 0.1) x ..."}}


def test_one_target_for_every_rung_from_the_pilot_and_a_flag_first_when_it_had_not_plateaued() -> None:
    rungs = ["cpu-xs", "cpu-s", "cpu-m"]
    runs = [_run(r, a, s, flat_after=20) for r in rungs for a in ARMS for s in (0, 1)]
    result = _result(runs, rungs, target={"rule": "pilot", "pilot": {}}, seeds=(0, 1))
    result.plan = result.plan.model_copy(update={"pilot": _pilot_plan(150.0, plateaued=False)})
    report = result.targets()
    assert report["target_values"] == dict.fromkeys(rungs, 150.0) and report["targets_differ"] is False
    assert all(e["target"] == 150.0 and "the pilot's" in e["target_source"] for e in report["rungs"].values())
    assert report["pilot"]["result"]["run_ids"] == ["p0", "p1"] and "optimizer" not in report["pilot"]
    assert report["pilot"]["flag"].startswith("PILOT NOT AT A PLATEAU")
    assert result.table().splitlines()[0] == report["pilot"]["flag"]  # said first
    fits = result.analysis(n_boot=0)["fits"]
    assert fits["steps_to_target"]["targets_differ"] is False
    assert "targets_differ" not in fits["steps_to_target"].get("flags", [])
    assert fits["steps_to_target"]["target_values"] == dict.fromkeys(rungs, 150.0)


def test_a_pilot_not_finished_sets_no_target_and_a_pilot_on_another_curve_is_never_read() -> None:
    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1)]
    result = _result(runs, ["cpu-xs"], target={"rule": "pilot", "pilot": {}}, seeds=(0, 1))
    result.plan = result.plan.model_copy(update={"pilot": {**_pilot_plan(150.0, True), "result": None}})
    entry = result.targets()["rungs"]["cpu-xs"]
    assert entry["target"] is None and "has not set the target" in entry["target_source"]
    result = _result(runs, ["cpu-xs"], target={"rule": "pilot", "pilot": {}}, seeds=(0, 1))
    on_fd = _pilot_plan(150.0, True)
    on_fd["result"]["curve"] = "fd"
    result.plan = result.plan.model_copy(update={"pilot": on_fd})
    entry = result.targets()["rungs"]["cpu-xs"]
    assert entry["target"] is None and "judged on fd_track" in entry["target_source"]


def test_targets_that_differ_per_rung_are_flagged_beside_the_fits_with_their_values() -> None:
    rungs = ["cpu-xs", "cpu-s", "cpu-m"]
    runs = [_run(r, a, s, flat_after=20) for r in rungs for a in ARMS for s in (0, 1)]
    result = _result(runs, rungs, seeds=(0, 1))  # final_mean: 1.1 x AdamW's final at each rung
    report = result.targets()
    adamw_final = {r: 1.1 * statistics.fmean(x.track[-1][2] for x in runs if x.rung == r and x.arm == "adamw")
                   for r in rungs}
    assert len(set(adamw_final.values())) == 3  # AdamW ends lower at the smaller rungs here
    assert report["target_values"] == pytest.approx(adamw_final) and report["targets_differ"] is True
    doc = result.analysis(n_boot=0)["fits"]["steps_to_target"]
    assert doc["targets_differ"] is True and doc["target_values"] == pytest.approx(adamw_final)
    # fitted at one declared level (the per-level fits), so no exponent mixes targets: no flag on it
    assert any(doc["target_level"] == pytest.approx(v) for v in adamw_final.values())
    assert "targets_differ" not in doc.get("flags", [])
    # time to target is not fitted across the differing targets at all
    assert "target" in result.analysis(n_boot=0)["fits"]["time_to_target"]["error"]
