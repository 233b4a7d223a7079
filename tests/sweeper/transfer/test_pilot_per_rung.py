"""Target rule `pilot` per rung (`target: {rule: pilot, per_rung: true}`) without training: the spec's checks, the
plan's pilot at every rung (horizon_factor x each rung's judged horizon, its own optimizer, the baselines of one
pilot sweep), each rung's target from its own pilot's plateau with the horizon check, and the report reading each
rung's own target."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from scaling import TransferRun
from sweeper import SweepSpec
from sweeper.transfer import TransferSpec
from sweeper.transfer._pilot import PILOT_TAG, pilot_sweep_spec, run_pilot
from sweeper.transfer._plan import TransferPlan
from sweeper.transfer._sections import PlateauSpec

from .test_transfer_targets import ARMS, _result
from .test_transfer_targets import _run as _judged_run

BASE = {"name": "t", "sweep": "out/sweeps/none-here", "seeds": [0, 1, 2], "rungs": ["cpu-xs", "cpu-s"]}
RUNGS = ["cpu-xs", "cpu-s", "cpu-m"]


def test_per_rung_is_a_pilot_option_and_refuses_one_pilot_rung() -> None:
    spec = TransferSpec.model_validate({**BASE, "target": {"rule": "pilot", "per_rung": True, "slack": 0.05}})
    assert spec.target.per_rung and spec.target.slack == 0.05
    assert spec.target.describe().startswith("a target per rung: (1 + 0.05) x adamw's plateau quality in a pilot "
                                             "at that rung, 3 x the rung's horizon")
    one = TransferSpec.model_validate({**BASE, "target": {"rule": "pilot"}})
    assert "per_rung" not in one.target.model_dump()  # dumps as before: earlier transfers keep their fingerprint
    assert spec.fingerprint() != one.fingerprint()
    for target, words in (({"rule": "final_mean", "per_rung": True}, "target.per_rung is only for target.rule "
                                                                      "'pilot', not 'final_mean'"),
                          ({"rule": "pilot", "per_rung": True, "pilot": {"rung": "cpu-xs"}},
                           "with target.per_rung every rung runs its own: allowed: null"),
                          ({"rule": "pilot", "per_rung": "sometimes"}, "valid boolean")):
        with pytest.raises(ValidationError) as refused:
            TransferSpec.model_validate({**BASE, "target": target})
        assert words in str(refused.value), refused.value


def test_the_plan_runs_a_pilot_at_every_rung_at_its_factor_of_that_rungs_horizon() -> None:
    from sweeper.transfer._planning import _plan, _Source

    from ..conftest import TINY_TRIAL

    sweep = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1],
                                      "baselines": ["adamw", "muon"],
                                      "trial": {**TINY_TRIAL, "eval": {**TINY_TRIAL["eval"], "track_points": 4}}})
    source = _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:///x.db",
                     experiment="e", spec=sweep, best={"K": 3, "gamma": 0.15}, objectives={}, searched_arm="periodic")
    # horizons per parameter: each rung's judged horizon grows with its size, the pilot's with it
    spec = TransferSpec(name="t", sweep="/w", rungs=RUNGS, seeds=[0, 1],
                        horizon={"mode": "per_param", "images_per_param": 0.001, "cap": 400, "min_steps": 30},
                        target={"rule": "pilot", "per_rung": True, "pilot": {"horizon_factor": 2, "seeds": [7, 8]}})
    plan, typed = _plan(spec, source, "t-1")
    pilot = plan.pilot
    assert pilot is not None and pilot["per_rung"] and pilot["rungs"] == RUNGS
    assert pilot["judged_horizons"] == plan.horizons and len(set(plan.horizons.values())) > 1
    assert pilot["horizons"] == {r: 2 * h for r, h in plan.horizons.items()}
    for rung in RUNGS:  # the reference arm's carried optimizer at that rung
        row = next(r for r in plan.runs if r.rung == rung and r.arm == "adamw")
        assert pilot["optimizers"][rung]["lr"] == pytest.approx(row.lr)
        assert pilot["eval_steps_by_rung"][rung][-1] == pilot["horizons"][rung]
    doc = pilot_sweep_spec(pilot, typed, name="t", transfer_id="t-1")
    pilot_sweep = SweepSpec.model_validate(doc)
    assert pilot_sweep.rung == "cpu-xs" and pilot_sweep.horizon == pilot["horizons"]["cpu-xs"]
    assert [(b.rung, b.horizon, b.arm) for b in pilot_sweep.baselines] == [
        (r, pilot["horizons"][r], "adamw") for r in RUNGS[1:]]
    assert pilot_sweep.seeds == [7, 8]


def _pilot_run(rung: str, seed: int, floor: float, scale: float) -> TransferRun:
    """A pilot curve falling to `floor` (fd = floor + 100 exp(-step / scale)), a point every 4 steps to 96."""
    track = tuple((s, float(s), floor + 100 * math.exp(-s / scale)) for s in range(4, 97, 4))
    return TransferRun(rung=rung, parameters=None, arm="adamw", seed=seed, lr=0.004, lr_rule=None, lr_base=None,
                       K=None, gamma=None, run_id=f"p-{rung}-{seed}", state="SUCCEEDED",
                       trial_key=f"adamw.{rung},seed={seed}", attempt=0, checkpoints=(), horizon=96, track=track)


class _State:
    def __init__(self, pilot: dict[str, Any]) -> None:
        self.transfer_id = "tr-1"
        self.plan = TransferPlan.model_validate({"rungs": RUNGS, "horizon": 32, "seeds": [0, 1],
                                                 "arms": list(ARMS), "searched_arm": "periodic",
                                                 "chosen": {"K": 3, "gamma": 0.15}, "pilot": pilot})
        self.sweep_spec = SweepSpec.model_validate({"name": "t", "rung": "cpu-xs", "horizon": 32, "seeds": [0, 1]})
        self.pilot_sweep_spec = SweepSpec.model_validate({"name": "t.pilot", "rung": "cpu-xs", "horizon": 96,
                                                          "seeds": [100, 101]})

    def write(self, path: Path) -> None:
        pass


def test_each_rung_gets_its_own_pilots_target_and_a_short_horizon_is_flagged(tmp_path: Path) -> None:
    floors = {"cpu-xs": 200.0, "cpu-s": 150.0, "cpu-m": 120.0}
    scales = {"cpu-xs": 6.0, "cpu-s": 6.0, "cpu-m": 30.0}  # cpu-m falls slowly: its pilot crosses late
    pilot = {"arm": "adamw", "per_rung": True, "rungs": RUNGS, "rung": "cpu-xs", "horizon": 96,
             "horizons": dict.fromkeys(RUNGS, 96), "judged_horizons": dict.fromkeys(RUNGS, 32),
             "seeds": [100, 101], "points": 24, "track_from": 0.1, "slack": 0.05, "curve": "fd_track",
             "result": None, "optimizer": {"name": "adamw", "lr": 0.004},
             "optimizers": {r: {"name": "adamw", "lr": 0.004} for r in RUNGS}}
    runs = [_pilot_run(r, s, floors[r], scales[r]) for r in RUNGS for s in (100, 101)]
    state = _State(pilot)
    out = io.StringIO()
    assert run_pilot(state, tmp_path, run_sweep=lambda spec, folder: "SUCCEEDED", read=lambda: runs,
                     plateau_spec=PlateauSpec(), out=out) == "SUCCEEDED"
    result = state.plan.pilot["result"]
    for rung in RUNGS:  # (1 + slack) x the mean over the last third (steps 64..96) of that rung's own curves
        tail = [floors[rung] + 100 * math.exp(-s / scales[rung]) for s in range(64, 97, 4)]
        assert result["values"][rung] == pytest.approx(1.05 * sum(tail) / len(tail))
        assert result["rungs"][rung]["run_ids"] == [f"p-{rung}-100", f"p-{rung}-101"]
    # cpu-m's target, 1.05 x 127.5, is reached where 100 exp(-s / 30) <= 13.9, s >= 59.2: at its point 60, past
    # its judged 32 steps (flagged); cpu-xs and cpu-s reach theirs within 32
    assert result["horizon_check"]["cpu-m"]["reached_at"] == {"100": 60, "101": 60}
    assert result["horizon_check"]["cpu-xs"]["within_horizon"] and result["horizon_short"] == ["cpu-m"]
    assert "pilot at cpu-m: plateau quality" in out.getvalue() and "HORIZON SHORT" in out.getvalue()
    assert '"per_rung":true' in state.sweep_spec.tags[PILOT_TAG]
    # The judged runs read each rung's own target, and the report says the short horizon first.
    judged = [_judged_run(r, a, s, flat_after=20) for r in RUNGS for a in ARMS for s in (0, 1)]
    transfer = _result(judged, RUNGS, target={"rule": "pilot", "per_rung": True, "pilot": {}}, seeds=(0, 1))
    transfer.plan = transfer.plan.model_copy(update={"pilot": state.plan.pilot})
    report = transfer.targets()
    assert report["target_values"] == pytest.approx(result["values"]) and report["targets_differ"] is True
    assert report["pilot"]["horizon_flag"].startswith("HORIZON SHORT: a pilot seed reached its rung's target only "
                                                      "after the judged horizon at cpu-m")
    lines = transfer.table().splitlines()
    assert lines[0] == report["pilot"]["horizon_flag"]  # said first
    assert any(line.startswith("  pilot at cpu-s: adamw, 96 steps") for line in lines)
