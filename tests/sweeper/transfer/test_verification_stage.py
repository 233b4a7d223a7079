"""The transfer's verification stage: the bracket it plans, and the verdict it reads back from the bracket's runs
(kept out of the savings and fits), into the analysis, the table and the export's provenance."""

from __future__ import annotations

import pytest

from scaling.records import TransferRun
from sweeper import SweepSpec
from sweeper.transfer import TransferError, TransferResult, TransferSpec
from sweeper.transfer._planning import _plan, _Source
from sweeper.transfer._verification import is_verification_run

from ..conftest import TINY_TRIAL


def _source() -> _Source:
    spec = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1, 2],
                                     "baselines": ["adamw", "muon"], "trial": dict(TINY_TRIAL)})
    return _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:////tmp/x.db",
                   experiment="e", spec=spec, best={"K": 3, "gamma": 0.15}, objectives={}, searched_arm="periodic")


def test_the_plan_brackets_the_transferred_point_at_the_largest_rung() -> None:
    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-l"], verify={})
    plan, typed = _plan(spec, _source(), "t-1")
    sweep = typed.model_dump(mode="json")  # as stored
    v = plan["verification"]
    assert v["rung"] == "cpu-l" and v["center"] == {"K": 3, "gamma": 0.15, "lr": 0.02} and v["tolerance"] == 0.02
    bracket = [b for b in sweep["baselines"] if b["label"].startswith("verify-")]
    assert [b["label"] for b in bracket] == [f"verify-{i}.cpu-l" for i in range(1, 7)]
    knobs = {(b["optimizer"]["refresh_every"], b["optimizer"]["gamma"], b["optimizer"]["lr"]) for b in bracket}
    assert knobs == {(2, 0.15, 0.02), (4, 0.15, 0.02), (3, 0.075, 0.02), (3, 0.3, 0.02), (3, 0.15, 0.01),
                     (3, 0.15, 0.04)}
    assert all(b["rung"] == "cpu-l" and b["tags"]["scalesweep.verify_point"] == b["label"] for b in bracket)
    assert TransferSpec(name="t", sweep="/w").fingerprint() == TransferSpec(name="t", sweep="/w",
                                                                           verify=None).fingerprint()
    with pytest.raises(TransferError, match=r"verify\.rung"):
        _plan(TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-s"], verify={"rung": "cpu-l"}),
              _source(), "t-2")


def _run(trial_key: str, seed: int, fd: float, *, arm: str = "periodic", rung: str = "cpu-l") -> TransferRun:
    return TransferRun(rung=rung, parameters=1000, arm=arm, seed=seed, lr=0.02, lr_rule="unchanged", lr_base=0.02,
                       K=3, gamma=0.15, run_id=f"{trial_key}-{seed}", state="SUCCEEDED",
                       trial_key=f"{trial_key},seed={seed}", attempt=0,
                       checkpoints=((16, 10.0, fd + 2), (20, 12.0, fd), (24, 14.0, fd - 2)))


def _result(shift: dict[str, float]) -> TransferResult:
    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-l"], verify={})
    plan, _ = _plan(spec, _source(), "t-1")
    base = {0: 100.0, 1: 120.0, 2: 90.0}
    runs = [_run("periodic.cpu-l", s, v) for s, v in base.items()]
    runs += [_run("muon.cpu-l", s, v + 30, arm="muon") for s, v in base.items()]
    bracket = [_run(label, s, v + shift.get(label, 8.0) + 0.5 * s)
               for label in plan["verification"]["points"] if label != "center" for s, v in base.items()]
    assert all(is_verification_run(r) for r in bracket) and not any(is_verification_run(r) for r in runs)
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan, runs=runs,
                          verification_runs=bracket)


def test_a_transfer_that_held_and_one_that_moved() -> None:
    held = _result({})
    doc = held.verification_doc()
    assert doc is not None and doc["verdict"] == "held" and doc["rung"] == "cpu-l" and doc["n"] == 3
    assert "verification at cpu-l: held" in held.table()
    moved = _result({"verify-6.cpu-l": -20.0})  # lr x2 is 20 better on every seed (+- 0.5 x seed)
    doc = moved.verification_doc()
    assert doc is not None and doc["verdict"] == "moved" and doc["move"]["change"] == {"lr": "x2"}
    assert doc["move"]["diff"]["mean"] == pytest.approx(-19.5)
    export = moved.export("cpu-l")
    assert export.provenance["verification"]["verdict"] == "moved"
    pending = _result({})
    pending.verification_runs = pending.verification_runs[:-1]  # one bracket run missing on seed 2
    assert pending.verification_doc()["verdict"] == "held"  # type: ignore[index]  # seeds 0, 1 still pair up
    pending.verification_runs = []
    assert pending.verification_doc()["verdict"] == "pending"  # type: ignore[index]
