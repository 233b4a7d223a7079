"""A transfer's pilot (target rule `pilot`) that does not finish: cancelled or failed, it records no target and says
how it ended; one whose runs finished on only some seeds is refused naming them; a recorded target is reused, never
derived again (sweeper.transfer._pilot.run_pilot, with the pilot's sweep and its run reader given)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from scaling import TransferRun
from sweeper.specs import SweepSpec
from sweeper.transfer import TransferError
from sweeper.transfer._pilot import PILOT_TAG, run_pilot
from sweeper.transfer._plan import TransferPlan
from sweeper.transfer._sections import PlateauSpec

PILOT = {"arm": "muon", "rung": "cpu-xs", "horizon": 40, "seeds": [100, 101], "points": 8, "track_from": 0.1,
         "eval_steps": [27, 33, 40], "lr": 0.02, "horizon_factor": 1.5, "slack": 0.3, "curve": "fd_track",
         "result": None, "optimizer": {"name": "muon", "lr": 0.02}}


class _State:
    """What run_pilot reads and writes of a transfer's state, with the writes counted."""

    def __init__(self, pilot: dict[str, Any]) -> None:
        self.transfer_id = "tr-1"
        self.plan = TransferPlan.model_validate({"rungs": ["cpu-xs"], "horizon": 27, "seeds": [6, 7],
                                                 "arms": ["periodic", "muon"], "searched_arm": "periodic",
                                                 "chosen": {"K": 3, "gamma": 0.15}, "pilot": pilot})
        self.sweep_spec = SweepSpec.model_validate({"name": "t", "rung": "cpu-xs", "horizon": 27, "seeds": [6, 7]})
        self.pilot_sweep_spec: SweepSpec | None = SweepSpec.model_validate(
            {"name": "t.pilot", "rung": "cpu-xs", "horizon": 40, "seeds": [100, 101]})
        self.writes = 0

    def write(self, path: Path) -> None:
        self.writes += 1


def _run(seed: int, state: str, fds: list[float]) -> TransferRun:
    steps = [4 * (i + 1) for i in range(len(fds))]
    return TransferRun(rung="cpu-xs", parameters=None, arm="muon", seed=seed, lr=0.02, lr_rule=None, lr_base=None,
                       K=None, gamma=None, run_id=f"r{seed}", state=state, trial_key=f"lr=0.02,seed={seed}",
                       attempt=0, checkpoints=(), horizon=40,
                       track=tuple((s, float(s), f) for s, f in zip(steps, fds, strict=True)))


def _pilot(state: _State, ended: str, runs: list[TransferRun], tmp_path: Path) -> tuple[str, list[Path]]:
    swept: list[Path] = []

    def run_sweep(spec: SweepSpec, folder: Path) -> str:
        swept.append(folder)
        return ended

    out = io.StringIO()
    how = run_pilot(state, tmp_path, run_sweep=run_sweep, read=lambda: runs, plateau_spec=PlateauSpec(), out=out)
    return how, swept


@pytest.mark.parametrize("ended", ["CANCELLED", "FAILED"])
def test_a_pilot_that_did_not_finish_records_no_target_and_says_how_it_ended(ended: str, tmp_path: Path) -> None:
    state = _State(dict(PILOT))
    how, swept = _pilot(state, ended, [], tmp_path)
    assert how == ended and swept == [tmp_path / "pilot"]
    assert state.plan.pilot is not None and state.plan.pilot["result"] is None  # no target: nothing judged on one
    assert state.writes == 0 and PILOT_TAG not in state.sweep_spec.tags


def test_a_pilot_with_a_seed_that_failed_is_refused_naming_it(tmp_path: Path) -> None:
    state = _State(dict(PILOT))
    curve = [900.0, 600.0, 480.0, 420.0, 400.0, 395.0, 392.0, 390.0, 391.0, 389.0]
    with pytest.raises(TransferError, match=r"no finished run with a tracking curve on seeds \[101\].*\(101, "
                                            r"'FAILED'\)"):
        _pilot(state, "SUCCEEDED", [_run(100, "SUCCEEDED", curve), _run(101, "FAILED", curve[:3])], tmp_path)
    assert state.writes == 0 and state.plan.pilot["result"] is None


def test_a_finished_pilot_records_its_target_once_and_a_resume_reuses_it(tmp_path: Path) -> None:
    state = _State(dict(PILOT))
    a = [900.0, 600.0, 480.0, 420.0, 400.0, 395.0, 392.0, 390.0, 391.0, 389.0]
    b = [950.0, 640.0, 500.0, 430.0, 410.0, 405.0, 400.0, 398.0, 397.0, 399.0]
    how, _ = _pilot(state, "SUCCEEDED", [_run(100, "SUCCEEDED", a), _run(101, "SUCCEEDED", b)], tmp_path)
    result = state.plan.pilot["result"]
    # the plateau quality: the mean over seeds of each curve's mean over its last third (steps >= 40 - 40/3)
    plateau = (sum(a[-4:]) / 4 + sum(b[-4:]) / 4) / 2
    assert how == "SUCCEEDED" and state.writes == 1
    assert result["quality"] == pytest.approx(plateau) and result["value"] == pytest.approx(1.3 * plateau)
    assert result["run_ids"] == ["r100", "r101"] and PILOT_TAG in state.sweep_spec.tags
    # resumed: the stored target stands; the pilot's sweep is not run again, whatever the runs now say
    how, swept = _pilot(state, "FAILED", [], tmp_path)
    assert how == "SUCCEEDED" and swept == [] and state.plan.pilot["result"]["value"] == result["value"]
