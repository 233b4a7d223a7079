"""The transfer's controls and timing options without training: the spec refuses what cannot be built or measured
(naming the field and the allowed values, also as a 422 over REST), keeps its fingerprint for earlier transfers, and
the analysis of synthetic runs with known answers carries the controls' outcomes first and both crossings."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from scaling import TransferRun
from sweeper.transfer import TimingSpec, TransferResult, TransferSpec

RUNGS = ("cpu-xs", "cpu-s")
SEEDS = (0, 1, 2, 3, 4)
HORIZON = 60


def _sweep_folder(root: Path, *, batch: int = 16, backend: str = "builtin", chosen: str = "K=3,gamma=0.15") -> Path:
    """A finished sweep's folder as far as the spec reads it: its stored spec and status."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "spec.json").write_text(json.dumps({
        "trial": {"batch_size": batch}, "search": {"space": {"K": [2, 3], "gamma": [0.15]}},
        "backend": {"name": backend}}))
    (root / "status.json").write_text(json.dumps({"state": "SUCCEEDED", "best": {"point_key": chosen}}))
    return root


def _refused(spec: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    with pytest.raises(ValidationError) as err:
        TransferSpec.model_validate({"name": "t", **spec})
    return [(e["loc"], e["msg"]) for e in err.value.errors()]


def test_timing_options_out_of_range_are_refused_naming_the_field_and_the_allowed_values(tmp_path: Path) -> None:
    sweep = str(_sweep_folder(tmp_path / "sweep", batch=16))
    assert _refused({"sweep": sweep, "timing": {"local_batch": 0}})[0][0] == ("timing", "local_batch")
    [(loc, msg)] = _refused({"sweep": sweep, "timing": {"local_batch": 17}})
    assert loc == ("timing",) and "between 1 and the training batch (16), got 17" in msg
    # The transfer's own trial section wins over the sweep's batch.
    assert TransferSpec.model_validate({"name": "t", "sweep": sweep, "trial": {"batch_size": 32},
                                        "timing": {"local_batch": 32}}).timing.local_batch == 32
    [(loc, msg)] = _refused({"sweep": sweep, "timing": {"block_steps": 4}})
    assert loc == ("timing",) and "the chosen K=3" in msg and "a multiple of 3 (3, 6, 9, ...), got 4" in msg
    ok = TransferSpec.model_validate({"name": "t", "sweep": sweep, "timing": {"block_steps": 6, "local_batch": 8,
                                                                              "clock": "wall"}})
    assert (ok.timing.block_steps, ok.timing.local_batch, ok.timing.clock) == (6, 8, "wall")
    assert _refused({"sweep": sweep, "timing": {"clock": "cpu"}})[0][0] == ("timing", "clock")
    [(loc, msg)] = _refused({"sweep": sweep, "timing": {"method": "isolated", "local_batch": 4}})
    assert "['local_batch'] are only for timing.method 'interleaved'" in msg
    [(loc, msg)] = _refused({"sweep": sweep, "timing": {"rounds": 30, "max_rounds": 20}})
    assert "timing.max_rounds (20) must be >= timing.rounds (30)" in msg
    # No timing at all: its options are not checked against the sweep.
    assert TransferSpec.model_validate({"name": "t", "sweep": sweep, "timing": {"steps": 0, "local_batch": 64}})


def test_controls_that_cannot_be_built_are_refused_naming_the_field(tmp_path: Path) -> None:
    sweep = str(_sweep_folder(tmp_path / "sweep"))
    spec = TransferSpec.model_validate({"name": "t", "sweep": sweep, "controls": ["positive", "negative"]})
    assert spec.controls == ["positive", "negative"]
    assert _refused({"sweep": sweep, "controls": ["neutral"]})[0][0] == ("controls", 0)
    [(loc, msg)] = _refused({"sweep": sweep, "controls": ["negative", "negative"]})
    assert loc == ("controls",) and "distinct" in msg
    [(loc, msg)] = _refused({"sweep": sweep, "arms": ["periodic", "adamw"], "controls": ["negative"]})
    assert loc == ("controls",) and "arms must include 'muon'" in msg
    command = str(_sweep_folder(tmp_path / "command", backend="command"))
    [(loc, msg)] = _refused({"sweep": command, "controls": ["positive"]})
    assert loc == ("controls",) and "'command' trainer" in msg and "allowed: []" in msg
    assert TransferSpec.model_validate({"name": "t", "sweep": command}).controls == []
    # the controls' data order: its two values, anything else named with them
    [(loc, msg)] = _refused({"sweep": sweep, "controls": ["negative"], "control_data_order": "shuffled"})
    assert loc == ("control_data_order",) and msg == "Input should be 'other' or 'same'"
    from sweeper import SweepSpec

    base = {"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0]}
    for offset, bound in ((0, "greater than or equal to 1"), (2**31, "less than or equal to 2147483647"),
                          (1.5, "a valid integer")):
        with pytest.raises(ValidationError, match=bound) as err:
            SweepSpec.model_validate({**base, "baselines": [{"arm": "muon", "order_seed_offset": offset}]})
        assert err.value.errors()[0]["loc"] == ("baselines", 0, "order_seed_offset")


def test_the_steps_control_takes_an_integer_stretch_and_refuses_any_other(tmp_path: Path) -> None:
    sweep = str(_sweep_folder(tmp_path / "sweep"))
    spec = TransferSpec.model_validate({"name": "t", "sweep": sweep, "controls": ["negative", "positive", "steps"]})
    assert spec.controls == ["negative", "positive", "steps"] and spec.control_stretch == 8
    assert TransferSpec.model_validate({"name": "t", "sweep": sweep, "controls": ["steps"],
                                        "control_stretch": 4}).control_stretch == 4
    for bad, says in ((8.5, "Input should be a valid integer"), ("8", "Input should be a valid integer"),
                      (8.0, "Input should be a valid integer"), (0, "Input should be greater than or equal to 1")):
        [(loc, msg)] = _refused({"sweep": sweep, "controls": ["steps"], "control_stretch": bad})
        assert loc == ("control_stretch",) and msg.startswith(says), (bad, msg)
    [(loc, msg)] = _refused({"sweep": sweep, "controls": ["negative"], "control_stretch": 4})
    assert "control_stretch is the steps control's: controls must include 'steps'" in msg
    [(loc, msg)] = _refused({"sweep": sweep, "controls": ["steps", "steps"]})
    assert loc == ("controls",) and "distinct" in msg
    # A transfer without the steps control keeps its fingerprint (the stretch left out); a stretch changes it.
    without = TransferSpec.model_validate({"name": "t", "sweep": sweep, "controls": ["negative"]})
    payload = without.model_dump(mode="json")
    assert TransferSpec.model_validate(payload).fingerprint() == without.fingerprint()
    assert spec.fingerprint() != spec.model_copy(update={"control_stretch": 4}).fingerprint()


def test_fingerprint_of_an_earlier_transfer_is_kept_and_new_fields_change_it() -> None:
    def fp(**extra: Any) -> str:
        return TransferSpec.model_validate({"name": "a", "sweep": "/nowhere", **extra}).fingerprint()

    # Computed by the code before controls and the interleaved timing: transfers started then still resume.
    assert fp() == "051019297e5b0150"
    assert fp(timing={"steps": 4, "warmup": 1, "repeats": 2}) == "38c8cbfd7567a899"
    assert fp(timing={"steps": 0}) == "db5eed2dfc96cd08"
    assert fp(controls=[]) == fp(timing={"method": "interleaved", "clock": "thread"}) == fp()
    assert len({fp(), fp(controls=["negative"]), fp(timing={"local_batch": 8}), fp(timing={"rounds": 20})}) == 4


def test_a_bad_timing_value_is_a_422_naming_the_field_over_rest(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from api.schemas import TransferCreate
    from api.service.routers.transfers import _spec

    sweep = SimpleNamespace(name="s", storage_path=str(_sweep_folder(tmp_path / "sweep", batch=16)))
    with pytest.raises(RequestValidationError) as err:
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], timing={"local_batch": 0}), sweep)  # type: ignore[arg-type]
    assert err.value.errors()[0]["loc"] == ("body", "timing", "local_batch")
    with pytest.raises(RequestValidationError) as err:
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], timing={"block_steps": 5}), sweep)  # type: ignore[arg-type]
    [e] = err.value.errors()
    assert e["loc"] == ("body", "timing") and "a multiple of 3 (3, 6, 9, ...), got 5" in e["msg"]
    with pytest.raises(ValidationError) as bad:  # the controls' data order is refused by the body's own schema
        TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], control_data_order="shuffled")  # type: ignore[arg-type]
    assert bad.value.errors()[0]["loc"] == ("control_data_order",)
    for stretch in (8.5, "8"):  # the steps control's stretch: an integer, by the body's schema as by the spec's
        with pytest.raises(ValidationError) as bad:
            TransferCreate.model_validate({"sweep_id": "sw-1", "rungs": ["cpu-s"], "controls": ["steps"],
                                            "control_stretch": stretch})
        assert bad.value.errors()[0]["loc"] == ("control_stretch",)
    ok = _spec(TransferCreate.model_validate({"sweep_id": "sw-1", "rungs": ["cpu-s"], "controls": ["steps"],
                                              "control_stretch": 4}), sweep)  # type: ignore[arg-type]
    assert (ok.controls, ok.control_stretch) == (["steps"], 4)
    body = {"sweep_id": "sw-1", "rungs": ["cpu-s"], "fixed_arms": ["paper_default"],
            "target": {"rule": "pilot", "per_rung": True}}
    fixed = _spec(TransferCreate.model_validate(body), sweep)  # type: ignore[arg-type]
    assert fixed.fixed_arms == ["paper_default"] and fixed.target.per_rung


def test_a_transfer_on_n_workers_is_refused_where_it_cannot_run_naming_the_field(tmp_path: Path) -> None:
    sweep = str(_sweep_folder(tmp_path / "sweep", batch=12))
    two = {"sweep": sweep, "execution": {"workers_per_trial": 2}}
    assert TransferSpec.model_validate({"name": "t", **two}).execution.workers_per_trial == 2  # type: ignore[union-attr]
    [(loc, msg)] = _refused({"sweep": sweep, "execution": {"workers_per_trial": 5}})
    assert loc == () and "execution.workers_per_trial 5 does not divide the training batch (trial.batch_size 12)" in msg
    assert "allowed worker counts: [1, 2, 3, 4, 6, 12]" in msg
    # the transfer's own trial section sets the batch the ranks split
    assert TransferSpec.model_validate({"name": "t", **two, "execution": {"workers_per_trial": 5},
                                        "trial": {"batch_size": 20}})
    [(_, msg)] = _refused({**two, "arms": ["periodic", "adamw", "rownorm"]})
    assert "'rownorm' has no sharded form" in msg and "allowed arms on several workers: adamw, muon, periodic" in msg
    [(_, msg)] = _refused({**two, "controls": ["positive"]})
    assert "positive control (muon_extra_ns) runs in one process" in msg and "allowed: [], ['negative']" in msg
    assert TransferSpec.model_validate({"name": "t", **two, "controls": ["negative"]}).controls == ["negative"]
    [(_, msg)] = _refused({**two, "timing": {"method": "isolated"}})
    assert "allowed: 'interleaved'" in msg
    [(_, msg)] = _refused({**two, "timing": {"local_batch": 6}})
    assert "timing.local_batch is the one-process stand-in" in msg and "allowed: unset (null)" in msg
    # No execution section: the sweep's workers_per_trial applies, read from its folder.
    on_three = tmp_path / "three"
    _sweep_folder(on_three, batch=12)
    stored = json.loads((on_three / "spec.json").read_text())
    (on_three / "spec.json").write_text(json.dumps({**stored, "execution": {"workers_per_trial": 3}}))
    [(_, msg)] = _refused({"sweep": str(on_three), "trial": {"batch_size": 16}})
    assert "the sweep's workers_per_trial 3 does not divide the training batch (trial.batch_size 16)" in msg


def test_a_worker_count_that_does_not_divide_the_batch_is_a_422_over_rest(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from api.schemas import TransferCreate
    from api.service.routers.transfers import _spec

    sweep = SimpleNamespace(name="s", storage_path=str(_sweep_folder(tmp_path / "sweep", batch=16)))
    with pytest.raises(RequestValidationError) as err:
        _spec(TransferCreate(sweep_id="sw-1", rungs=["cpu-s"], execution={"workers_per_trial": 3}), sweep)  # type: ignore[arg-type]
    [e] = err.value.errors()
    assert "execution.workers_per_trial 3" in e["msg"] and "allowed worker counts: [1, 2, 4, 8, 16]" in e["msg"]


def test_the_timing_stage_on_two_workers_times_the_two_rank_step_and_says_so() -> None:
    """measure_interleaved with workers=2 at a tiny rung: the document records 2 workers for the rung, its digest
    every rank's cost and the bytes per rank per step, and its lines say the ratio is a 2-rank one."""
    from sweeper.transfer._timing import measure_interleaved, timing_lines

    from ...conftest import tiny_trial

    trial = tiny_trial(data={"image_size": 8}, batch_size=8)
    arms = {"muon": {"name": "muon", "ns_dtype": "float32"},
            "periodic": {"name": "periodic", "refresh_every": 3, "ns_dtype": "float32",
                         "ns_placement": "distributed"}}
    doc = measure_interleaved(trial, {"cpu-xs": arms}, TimingSpec(rounds=2, warmup_rounds=1, local_batch=4),
                              workers={"cpu-xs": 2})
    digest = doc["rungs"]["cpu-xs"]
    assert doc["workers"] == {"cpu-xs": 2} and digest["workers"] == 2 and digest["cpu_clock"] == "process"
    assert digest["local_batch"] == 4 and digest["batch_size"] == 8  # local_batch ignored: each rank trains 8 / 2
    assert len(doc["seconds_per_step_runs"]["cpu-xs"]["periodic"]) == 2
    assert digest["comm_bytes_per_step"]["periodic"] < digest["comm_bytes_per_step"]["muon"]
    assert all(len(v) == 2 for per in digest["rank_step_s"].values() for v in per.values())
    text = "\n".join(timing_lines(doc))
    assert "2 gloo ranks (the slowest rank's step, communication included" in text
    assert "MB sent per rank per step" in text


# ----------------------------------------------------------------------------------------------------------
# The analysis of synthetic runs with known answers


def _curve(scale: float, floor: float, seconds: float) -> tuple[tuple[int, float, float], ...]:
    """FD falling as floor + 100 exp(-step / scale), one point per 4 steps up to the horizon."""
    return tuple((s, s * seconds, floor + 100 * math.exp(-s / scale)) for s in range(4, HORIZON + 1, 4))


def _runs(scales: dict[str, list[float]]) -> list[TransferRun]:
    runs = []
    for rung in RUNGS:
        for arm, per_seed in scales.items():
            for seed, scale in zip(SEEDS, per_seed, strict=True):
                # muon_twin and muon_extra_ns train exactly as muon (identical updates): the same curve per seed
                points = _curve(scale, 10.0 if arm != "adamw" else 12.0, 0.01)
                runs.append(TransferRun(rung=rung, parameters=1000, arm=arm, seed=seed, lr=0.02, lr_rule="unchanged",
                                        lr_base=0.02, K=None, gamma=None, run_id=f"{rung}-{arm}-{seed}",
                                        state="SUCCEEDED", trial_key=f"{arm}.{rung},seed={seed}", attempt=0,
                                        checkpoints=points[-3:], track=points, horizon=HORIZON))
    return runs


def _timing(extra_cost: float, rounds: int = 12) -> dict[str, Any]:
    """Per-round seconds per step: muon 10 ms, its twin the same, periodic 0.85 x, muon_extra_ns `extra_cost` x,
    each with a 1 % log-normal round-to-round spread."""
    rng = np.random.default_rng(1)
    factor = {"periodic": 0.85, "muon": 1.0, "adamw": 0.7, "muon_twin": 1.0, "muon_extra_ns": extra_cost,
              "muon_stretched": 1.0}
    runs = {rung: {arm: [0.01 * f * math.exp(rng.normal(0, 0.01)) for _ in range(rounds)]
                   for arm, f in factor.items()} for rung in RUNGS}
    return {"measured": True, "method": "interleaved", "clock": "thread", "seconds_per_step_runs": runs,
            "seconds_per_step": {g: {a: float(np.median(v)) for a, v in per.items()} for g, per in runs.items()},
            "rungs": {g: {"expected_step_time_ratio": {"muon_extra_ns": 1 / extra_cost}} for g in RUNGS}}


def _result(extra_cost: float, periodic_scale: float = 1.0, effective_scale: float | None = None,
            stretched_scale: float | None = None) -> TransferResult:
    rng = np.random.default_rng(0)
    base = [float(s) for s in 10 * np.exp(rng.normal(0, 0.05, len(SEEDS)))]
    scales = {"periodic": [periodic_scale * s for s in base], "muon": base, "adamw": [1.1 * s for s in base],
              "muon_twin": base, "muon_extra_ns": base}
    if effective_scale is not None:  # Muon at the periodic arm's update size, its own seed-to-seed spread
        noise = np.exp(rng.normal(0, 0.02, len(SEEDS)))
        scales["muon_effective_step"] = [effective_scale * s * float(n) for s, n in zip(base, noise, strict=True)]
    controls = {"negative": {"arm": "muon_twin", "against": "muon"},
                "positive": {"arm": "muon_extra_ns", "against": "muon"}}
    if stretched_scale is not None:  # the steps control: Muon's curve stretched, its own seed-to-seed spread
        noise = np.exp(rng.normal(0, 0.02, len(SEEDS)))
        scales["muon_stretched"] = [stretched_scale * s * float(n) for s, n in zip(base, noise, strict=True)]
        controls["steps"] = {"arm": "muon_stretched", "against": "muon", "stretch": 8, "expected_steps_ratio": 8 / 9}
    arms = ["periodic", "muon", "adamw"]
    plan = {"rungs": list(RUNGS), "horizon": HORIZON, "seeds": list(SEEDS), "arms": arms, "searched_arm": "periodic",
            "chosen": {"K": 3, "gamma": 0.15}, "eval_steps": [52, 56, 60],
            "runs": [{"rung": g, "arm": a, "parameters": 1000} for g in RUNGS for a in arms],
            "controls": controls,
            "control_runs": [{"rung": g, "arm": c["arm"], "parameters": 1000} for g in RUNGS
                             for c in controls.values()]}
    if effective_scale is not None:
        plan["diagnostics"] = {"effective_step": {"arm": "muon_effective_step", "against": "periodic",
                                                  "reference": "muon", "lr_factor": 0.43}}
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan,
                          runs=_runs(scales), step_timing=_timing(extra_cost))


def test_controls_come_out_as_they_must_and_a_null_on_periodic_is_interpretable() -> None:
    result = _result(extra_cost=1.3)
    doc = result.analysis(n_boot=0)
    controls = doc["controls"]
    assert controls["negative"]["passed"] and controls["positive"]["passed"]
    assert (controls["negative"]["arm"], controls["positive"]["arm"]) == ("muon_twin", "muon_extra_ns")
    for rung in RUNGS:
        neg = controls["negative"]["comparisons"][rung]["first"]
        assert neg["steps_to_target_ratio"]["mean"] == pytest.approx(1.0)
        pos = controls["positive"]["comparisons"][rung]["first"]["time_saving_pct"]
        # identical updates: steps ratio 1; per-step muon / muon_extra_ns = 1 / 1.3: saving 1 - 1 / 1.3 = 23 %
        assert pos["steps_ratio"] == pytest.approx(1.0) and pos["mean"] == pytest.approx(100 * (1 - 1 / 1.3), abs=1.0)
        assert pos["detected"] and pos["lo"] > 15
        checks = {c["quantity"]: c for c in controls["positive"]["rungs"][rung]["checks"]}
        assert set(checks) == {"steps_ratio", "time_saving_pct", "step_time_ratio"} and all(
            c["passed"] for c in checks.values())
    # Every endpoint on every comparison, censoring counted, a null read against the positive control.
    comp = doc["targets"]["rungs"]["cpu-s"]["comparisons"]["muon"]
    for endpoint in ("first", "steps_above", "sustained"):
        assert comp[endpoint]["steps_to_target_ratio"]["mean"] == pytest.approx(1.0)
        assert comp[endpoint]["censoring"]["periodic"] == {"reached": 5, "right_censored": 0, "left_censored": 0}
        assert comp[endpoint]["time_saving_pct"]["mean"] == pytest.approx(15.0, abs=1.0)
        assert comp[endpoint]["reading"].startswith("saving shown: the interval lies above 0")
    # One alpha budget over the 2 rungs x 2 baselines: periodic's 15 % per-step saving stands at the first crossing
    # and in steps above the target (the co-primary pair).
    claims = doc["claims"]
    assert (claims["budget"]["comparisons"], claims["budget"]["looks"]) == (4, 1)
    assert claims["budget"]["first_step"] == pytest.approx(0.05 / 4)
    assert claims["stands"]["cpu-s vs muon"] and claims["direction"]["cpu-s vs muon"] == "faster"
    assert claims["power"]["cpu-s vs muon"]["alpha"] == pytest.approx(0.0125)
    assert any(line.split()[:5] == ["cpu-s", "vs", "muon", "stands", "(faster);"]
               for line in result.table().splitlines())
    # The controls are kept out of the arms' fits and tables.
    assert "muon_twin" not in doc["fits"]["time_to_best"].get("arms", {})
    lines = result.table().splitlines()
    assert lines[0] == "negative control (muon_twin against muon): came out as it must at every rung"
    assert lines[1] == "positive control (muon_extra_ns against muon): came out as it must at every rung"


def test_the_steps_control_detects_the_stretched_arms_known_ratio_at_the_claims_level() -> None:
    # muon_stretched needs 9/8 of Muon's steps (its curve stretched, a 2 % seed-to-seed spread of its own)
    doc = _result(extra_cost=1.3, stretched_scale=9 / 8).analysis(n_boot=0)
    controls, claims = doc["controls"], doc["claims"]
    # Every control judged at the level the strongest claim must pass: 0.05 over 4 comparisons, not 0.05.
    assert controls["alpha"] == pytest.approx(claims["budget"]["first_step"]) == pytest.approx(0.0125)
    assert "every control judged at alpha 0.0125" in controls["alpha_text"]
    steps = controls["steps"]
    assert steps["passed"] and steps["arm"] == "muon_stretched"
    for rung in RUNGS:
        ratio = steps["comparisons"][rung]["first"]["steps_to_target_ratio"]
        assert ratio["mean"] == pytest.approx(8 / 9, rel=0.03)
        checks = steps["rungs"][rung]["checks"]
        assert [c["quantity"] for c in checks] == ["steps_ratio", "steps_ratio", "time_saving_pct"]
        assert all(c["passed"] and c["level"] == pytest.approx(1 - 0.0125) for c in checks)
        assert "includes 0.8889" in checks[1]["expected"]
    for kind in ("negative", "positive"):
        assert all(c["level"] is not None and c["level"] >= 1 - 0.0125 for o in controls[kind]["rungs"].values()
                   for c in o["checks"])
    lines = _result(extra_cost=1.3, stretched_scale=9 / 8).table().splitlines()
    assert lines[2] == "steps control (muon_stretched against muon): came out as it must at every rung"
    assert lines[3].startswith("every control judged at alpha 0.0125, the level the strongest claim must pass")
    # The stretched arm walking Muon's own steps: the known penalty is not there, and the report says so first.
    failed = _result(extra_cost=1.3, stretched_scale=1.0)
    assert not failed.analysis(n_boot=0)["controls"]["steps"]["passed"]
    assert failed.table().splitlines()[0].startswith(f"STEPS CONTROL FAILED at {', '.join(RUNGS)}")


def test_a_failed_positive_control_still_reports_and_says_so_first() -> None:
    # The redundant work costs nothing measurable: the known saving is not there to detect.
    result = _result(extra_cost=1.0, periodic_scale=1.0)
    doc = result.analysis(n_boot=0)
    assert doc["controls"]["negative"]["passed"] and not doc["controls"]["positive"]["passed"]
    lines = result.table().splitlines()
    assert lines[0].startswith(f"POSITIVE CONTROL FAILED at {', '.join(RUNGS)}")
    assert f"positive control (muon_extra_ns against muon): did NOT come out as it must at {', '.join(RUNGS)}" in lines
    comp = doc["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]
    # periodic's 15 % per-step saving is shown
    assert comp["first"]["reading"].startswith("saving shown: the interval lies above 0 (+1")


def test_a_null_is_interpretable_only_with_a_detected_positive_control() -> None:
    # periodic needs 1 / 0.85 x the steps: its saving is null (1 - 0.85 / 0.85 = 0)
    passed = _result(extra_cost=1.3, periodic_scale=1 / 0.85).targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    failed = _result(extra_cost=1.0, periodic_scale=1 / 0.85).targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    assert passed["first"]["time_saving_pct"]["lo"] < 0 < passed["first"]["time_saving_pct"]["hi"]
    assert passed["first"]["reading"].startswith("null, interpretable")
    claims = _result(extra_cost=1.3, periodic_scale=1 / 0.85).claims()
    assert claims["stands"]["cpu-xs vs muon"] is False and claims["direction"]["cpu-xs vs muon"] is None
    assert failed["first"]["reading"].startswith("null, not interpretable: the positive control")


def test_the_plan_runs_each_control_beside_muon_at_every_rung_with_muons_carried_lr() -> None:
    from sweeper import SweepSpec
    from sweeper.search._planner import Planner
    from sweeper.transfer import TransferError
    from sweeper.transfer._planning import _plan, _Source
    from sweeper.transfer._spec import CONTROL_ORDER_OFFSETS

    from ..conftest import TINY_TRIAL

    def source(**fields: Any) -> _Source:
        spec = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1],
                                         "baselines": ["adamw", "muon"], "trial": dict(TINY_TRIAL), **fields})
        return _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:///x.db",
                       experiment="e", spec=spec, best={"K": 4, "gamma": 0.25}, objectives={}, searched_arm="periodic")

    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-s"], controls=["negative", "positive", "steps"],
                        lr_rules={"muon": "sqrt_width"})
    plan, typed = _plan(spec, source(), "t-1")
    sweep = typed.model_dump(mode="json")  # as stored
    assert plan.controls == {
        "negative": {"arm": "muon_twin", "against": "muon", "data_order": "other", "order_seed_offset": 1_000_003},
        "positive": {"arm": "muon_extra_ns", "against": "muon", "data_order": "other", "order_seed_offset": 2_000_006},
        "steps": {"arm": "muon_stretched", "against": "muon", "data_order": "other", "order_seed_offset": 3_000_009,
                  "stretch": 8, "expected_steps_ratio": 8 / 9}}
    assert plan.arms == ["periodic", "muon", "adamw"]  # the controls are never compared with the searched arm
    by_label = {b["label"]: b for b in sweep["baselines"]}
    for rung in ("cpu-xs", "cpu-s"):
        muon, twin, extra = by_label[f"muon.{rung}"], by_label[f"muon_twin.{rung}"], by_label[f"muon_extra_ns.{rung}"]
        assert twin["arm"] == "muon" and twin["optimizer"] == muon["optimizer"]
        assert extra["arm"] == "muon_extra_ns" and {**extra["optimizer"], "name": "muon"} == muon["optimizer"]
        assert twin["tags"]["scalesweep.transfer.arm"] == "muon_twin"
        assert extra["tags"]["scalesweep.transfer.arm"] == "muon_extra_ns"
        stretched = by_label[f"muon_stretched.{rung}"]
        assert stretched["arm"] == "muon_stretched" and stretched["optimizer"]["stretch"] == 8
        assert {**stretched["optimizer"], "name": "muon", "stretch": None} == {**muon["optimizer"], "stretch": None}
    assert by_label["muon_twin.cpu-s"]["optimizer"]["lr"] == pytest.approx(0.02 * math.sqrt(64 / 96))
    # The controls run on another data order (each seed's batches and noise from seed + the offset), the arms on
    # their seed's own; `control_data_order: same` keeps Muon's order (and the fingerprint of a transfer without it)
    # Each control on an order of its own: no two controls train one run.
    arm_kind = {"muon_twin": "negative", "muon_extra_ns": "positive", "muon_stretched": "steps"}
    assert {b["label"]: b.get("order_seed_offset") for b in sweep["baselines"] if b.get("order_seed_offset")} == {
        f"{a}.{g}": CONTROL_ORDER_OFFSETS[k] for a, k in arm_kind.items() for g in ("cpu-xs", "cpu-s")}
    assert len(set(CONTROL_ORDER_OFFSETS.values())) == 3
    requests = {(r.point_key, r.seed): r for r in Planner(SweepSpec.model_validate(sweep))._baselines()}
    assert requests[("muon_twin.cpu-s", 1)].order_seed == 1 + CONTROL_ORDER_OFFSETS["negative"]
    assert requests[("muon_extra_ns.cpu-s", 1)].order_seed == 1 + CONTROL_ORDER_OFFSETS["positive"]
    assert requests[("muon.cpu-s", 1)].order_seed is None
    twin_cfg = SweepSpec.model_validate(sweep).trial_config({"name": "muon"}, 1, "cpu-s", order_seed=1_000_004)
    assert twin_cfg["order_seed"] == 1_000_004 and twin_cfg["seed"] == 1
    same = spec.model_copy(update={"control_data_order": "same"})
    _, same_sweep = _plan(same, source(), "t-6")
    assert not any(b.order_seed_offset for b in same_sweep.baselines)
    before = json.loads(spec.model_dump_json())
    before.pop("control_data_order")
    assert TransferSpec.model_validate({**before, "control_data_order": "same"}).fingerprint() != spec.fingerprint()
    assert TransferSpec.model_validate({**before, "controls": []}).fingerprint() == TransferSpec.model_validate(
        {**before, "controls": [], "control_data_order": "same"}).fingerprint()
    # The effective-step diagnostic: Muon at (1 + (K - 1) gamma) / K = (1 + 3 x 0.25) / 4 of the periodic arm's lr
    # (Muon's own lr differs here: its sqrt_width rule), the periodic arm's lr x wd kept.
    diag, _ = _plan(spec.model_copy(update={"diagnostics": ["effective_step"]}), source(), "t-5")
    assert diag.diagnostics == {"effective_step": {"arm": "muon_effective_step", "against": "periodic",
                                                   "reference": "muon", "lr_factor": 0.4375}}
    rows = {(r.rung, r.arm): r for r in diag.control_runs}
    arm_rows = {(r.rung, r.arm): r for r in diag.runs}
    periodic_row, muon_row = arm_rows[("cpu-s", "periodic")], arm_rows[("cpu-s", "muon")]
    eff = rows[("cpu-s", "muon_effective_step")]
    assert periodic_row.lr != pytest.approx(muon_row.lr)
    assert eff.lr == pytest.approx(0.4375 * periodic_row.lr) and eff.lr_factor == 0.4375
    if periodic_row.weight_decay:
        assert eff.weight_decay * eff.lr == pytest.approx(periodic_row.weight_decay * periodic_row.lr)
    assert {(r.rung, r.arm) for r in plan.control_runs} == {(g, a) for g in ("cpu-xs", "cpu-s")
                                                           for a in ("muon_twin", "muon_extra_ns", "muon_stretched")}
    with pytest.raises(TransferError, match=r"timing.block_steps .* a multiple of 4, got 6"):
        _plan(TransferSpec(name="t", sweep="/w", rungs=["cpu-xs"], timing={"block_steps": 6}), source(), "t-2")
    with pytest.raises(TransferError, match=r"timing.local_batch .* training batch \(16\), got 17"):
        _plan(TransferSpec(name="t", sweep="/w", rungs=["cpu-xs"], timing={"local_batch": 17}), source(), "t-3")
    command = {"backend": {"name": "command", "command": ["python", "train.py"]}}
    with pytest.raises(TransferError, match=r"controls .* 'command' trainer"):
        _plan(TransferSpec(name="t", sweep="/w", rungs=["cpu-xs"], controls=["negative"]), source(**command), "t-4")


@pytest.mark.parametrize(("effective_scale", "verdict"), [
    (1.2, "the step size (at equal update size the penalty is gone; tune its lr)"),
    (1.0, "the direction (at equal update size Muon still needs fewer steps)"),
])
def test_the_effective_step_diagnostic_tells_step_size_from_direction(effective_scale: float, verdict: str) -> None:
    # periodic needs 1.2 x Muon's steps; Muon at periodic's update size needs either as many (1.2: the step size)
    # or Muon's own (1.0: the direction)
    result = _result(extra_cost=1.3, periodic_scale=1.2, effective_scale=effective_scale)
    doc = result.analysis(n_boot=0)["diagnostics"]["effective_step"]
    for rung in RUNGS:
        d = doc["rungs"][rung]
        assert d["vs_muon"]["first"]["steps_to_target_ratio"]["mean"] == pytest.approx(1.2, rel=0.02)
        assert d["verdict"].endswith(verdict)
    assert f"cpu-xs: effective step: {doc['rungs']['cpu-xs']['verdict']}" in result.table().splitlines()


def test_diagnostics_that_cannot_be_built_are_refused(tmp_path: Path) -> None:
    sweep = tmp_path / "muon-sweep"
    _sweep_folder(sweep)
    spec = json.loads((sweep / "spec.json").read_text())
    (sweep / "spec.json").write_text(json.dumps({**spec, "search": {"optimizer": {"name": "rownorm"},
                                                                    "space": {"gamma": [0.1]}}}))
    [(loc, msg)] = _refused({"sweep": str(sweep), "diagnostics": ["effective_step"]})
    assert loc == ("diagnostics",) and "need a periodic searched arm" in msg
    [(loc, msg)] = _refused({"sweep": str(_sweep_folder(tmp_path / "command", backend="command")),
                             "diagnostics": ["effective_step"]})
    assert loc == ("diagnostics",) and "'command' trainer" in msg
    ok = TransferSpec.model_validate({"name": "t", "sweep": str(_sweep_folder(tmp_path / "periodic")),
                                      "diagnostics": ["effective_step"]})
    assert ok.diagnostics == ["effective_step"] and ok.fingerprint() != ok.model_copy(
        update={"diagnostics": []}).fingerprint()


def test_tuning_budgets_per_arm_are_printed_and_compared() -> None:
    result = _result(extra_cost=1.3)
    result.source.update(selection_points=12)
    result.source_objectives.update({"muon": {"lr_tuning": {"muon.lr_x0.5": 1.0, "muon.lr_x1": 0.9,
                                                            "muon.lr_x2": 1.1}}, "adamw": {}})
    budgets = result.tuning_budgets()
    assert {a: b["sweep_settings"] for a, b in budgets["arms"].items()} == {"periodic": 12, "muon": 3, "adamw": 1}
    assert budgets["equal_in_sweep"] is False and budgets["equal_in_transfer"] is True
    assert all(b["runs_per_rung"] == len(SEEDS) for b in budgets["arms"].values())
    line = next(x for x in result.table().splitlines() if x.startswith("tuning budget per arm"))
    assert "periodic 12 in the sweep, 1 x 5 runs per rung" in line and "(sweep NOT equal, transfer equal)" in line


def test_lr_brackets_run_each_multiple_and_judge_each_rungs_arm_at_its_best() -> None:
    from sweeper import SweepSpec
    from sweeper.transfer import transfer_work
    from sweeper.transfer._planning import _plan, _Source

    from ..conftest import TINY_TRIAL

    sweep = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1],
                                      "baselines": ["adamw", "muon"], "trial": dict(TINY_TRIAL)})
    source = _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:///x.db",
                     experiment="e", spec=sweep, best={"K": 3, "gamma": 0.15}, objectives={}, searched_arm="periodic")
    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-s"],
                        lr_brackets={"periodic": [1, 1.5, 2.3], "muon": [1, 1.5, 2.3]})
    plan, sweep = _plan(spec, source, "t-1")
    by_label = {b["label"]: b for b in sweep.model_dump(mode="json")["baselines"]}
    for rung in ("cpu-xs", "cpu-s"):
        for arm in ("periodic", "muon"):
            carried = next(r.lr for r in plan.runs if r.rung == rung and r.arm == arm)
            b = by_label[f"{arm}.lr_x2.3.{rung}"]
            assert b["arm"] == arm and b["optimizer"]["lr"] == pytest.approx(2.3 * carried)
            assert b["tags"]["scalesweep.transfer.arm"] == f"{arm}@lr_x2.3"
    assert by_label["periodic.lr_x1.5.cpu-xs"]["optimizer"]["refresh_every"] == 3  # the pair, unchanged
    assert len(plan.bracket_runs) == 2 * 2 * 2 and plan.planned_runs() == (6 + 8) * 2
    # The work counts every multiple: 3 arms + 4 bracket settings per rung, against 3 without.
    assert transfer_work(spec, sweep) * 3 == transfer_work(spec.model_copy(update={"lr_brackets": {}}), sweep) * 7

    # The analysis: periodic reaches lower at x1.5 on every seed, Muon is best at its carried lr.
    result = _result(extra_cost=1.3, periodic_scale=1.2)
    runs = list(result.runs)
    muon = {(r.rung, r.seed): r.track for r in runs if r.arm == "muon"}
    for r in [r for r in runs if r.arm in ("periodic", "muon")]:
        for factor in (1.5, 2.3):
            if r.arm == "periodic" and factor == 1.5:  # Muon's pace at 1.5 x the lr
                points = muon[r.rung, r.seed]
            else:  # higher on the whole curve
                points = tuple((s, t, 10.0 + (f - 10.0) * (1.1 if factor == 1.5 else 1.3)) for s, t, f in r.track)
            runs.append(dataclasses.replace(r, arm=f"{r.arm}@lr_x{factor:g}", run_id=f"{r.run_id}-x{factor:g}",
                                            track=points, checkpoints=points[-3:]))
    plan_doc = {**result.plan.to_dict(), "lr_brackets": {"periodic": [1, 1.5, 2.3], "muon": [1, 1.5, 2.3]}}
    bracketed = TransferResult(**{**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)
                                     if f.name not in ("_fits", "tuning_runs", "lr_choices")},
                                  "plan": plan_doc, "runs": runs})
    choice = bracketed.lr_choices["cpu-s"]
    assert (choice["periodic"]["chosen"], choice["muon"]["chosen"]) == (1.5, 1.0)
    assert set(choice["periodic"]["multiples"]) == {"1", "1.5", "2.3"}
    judged = [r for r in bracketed.runs if r.rung == "cpu-s" and r.arm == "periodic"]
    assert len(judged) == len(SEEDS) and all(r.run_id.endswith("-x1.5") for r in judged)
    assert len(bracketed.tuning_runs) == 2 * 2 * len(SEEDS) * len(RUNGS)
    doc = bracketed.analysis(n_boot=0)
    # periodic judged at x1.5 now needs Muon's steps: the 1.2 x penalty was its step size
    ratio = doc["targets"]["rungs"]["cpu-s"]["comparisons"]["muon"]["first"]["steps_to_target_ratio"]["mean"]
    assert ratio == pytest.approx(1.0, abs=0.03)
    budgets = doc["tuning_budgets"]
    assert budgets["arms"]["periodic"]["runs_per_rung"] == 3 * len(SEEDS) and budgets["equal_in_transfer"] is False
    assert doc["lr_brackets"]["choices"]["cpu-xs"]["periodic"]["chosen"] == 1.5
    assert any("cpu-s      periodic judged at lr x1.5" in line for line in bracketed.table().splitlines())


def test_a_per_step_ratio_says_which_step_it_timed_for_every_shape_of_the_timing_document() -> None:
    from sweeper.transfer._targets import timing_how

    def how(timing: dict, rung: str = "cpu-xs") -> tuple[str, str] | None:
        return timing_how(timing, rung)

    # one worker, as written now: the document's workers is rung -> count and the digest carries none
    one = how({"method": "interleaved", "clock": "thread", "workers": {"cpu-xs": 1}, "rungs": {"cpu-xs": {}}})
    assert one is not None and one[0] == "interleaved" and "gloo" not in one[1]
    two = how({"method": "interleaved", "workers": {"cpu-xs": 2}, "rungs": {"cpu-xs": {"workers": 2}}})
    assert two is not None and two[0] == "interleaved, 2 gloo ranks" and "communication included" in two[1]
    # a document written before workers existed, and the isolated method (the report's own wording stays)
    assert how({"method": "interleaved", "rungs": {"cpu-xs": {"clock": "wall"}}}) == (
        "interleaved", "interleaved in one process per rung on the wall clock, whole refresh periods per block")
    assert how({"method": "isolated", "rungs": {}}) is None


def test_a_control_not_judged_at_a_rung_is_told_apart_from_a_failed_one() -> None:
    """A rung where no seed of either arm reached the target never put the control to the test: the summary says
    NOT JUDGED there (a null at that rung is still not evidence), not FAILED, and names the rungs it passed at."""
    from sweeper.transfer._targets import controls_summary

    ok = {"passed": True, "judged": True, "verdict": "ok"}
    unjudged = {"passed": False, "judged": False, "verdict": "positive control not judged: no seed reached"}
    doc = {"lines": ["cpu-m: positive control not judged: no seed reached"],
           "negative": {"arm": "muon_twin", "against": "muon", "passed": True,
                        "rungs": {"cpu-xs": ok, "cpu-s": ok}},
           "positive": {"arm": "muon_extra_ns", "against": "muon", "passed": False,
                        "rungs": {"cpu-xs": ok, "cpu-s": ok, "cpu-m": unjudged}}}
    lines = controls_summary(doc)
    assert lines[0].startswith("POSITIVE CONTROL NOT JUDGED at cpu-m: no null at that rung is evidence")
    assert lines[2] == ("positive control (muon_extra_ns against muon): came out as it must at cpu-xs, cpu-s; "
                        "NOT JUDGED at cpu-m")
    assert not any("FAILED" in line for line in lines)
    # One judged rung that failed outranks any rung not judged.
    doc["positive"]["rungs"]["cpu-s"] = {"passed": False, "judged": True, "verdict": "not detected"}
    lines = controls_summary(doc)
    assert lines[0].startswith("POSITIVE CONTROL FAILED at cpu-s: ")
    assert lines[2] == "positive control (muon_extra_ns against muon): did NOT come out as it must at cpu-s"
