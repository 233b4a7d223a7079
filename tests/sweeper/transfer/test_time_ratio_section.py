"""The fits' `time_ratio` section on synthetic runs with a known trend: the time ratio at equal quality per rung
(steps ratio to the declared target x the timing stage's per-step ratio, seeds paired), the line against block
parameters, the largest rung held out (pass, or a miss when it is moved off the line), the extrapolation to the
paper's rungs beside the paper's figures, and the refusal below 3 rungs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from scaling import TransferRun
from sweeper.transfer import TransferResult
from sweeper.transfer._time_ratio import PAPER_RUNGS, block_parameters

LADDER = ("cpu-2xs", "cpu-xs", "cpu-s", "cpu-m")
SEEDS = (0, 1, 2, 3)
HORIZON = 60
SLOPE = -0.1  # log steps ratio per decade of block parameters
STEP_RATIO = 0.9  # periodic / Muon per step, at every rung


def _steps_ratio(rung: str) -> float:
    return math.exp(SLOPE * math.log10(block_parameters(rung) / block_parameters("cpu-xs")))


def _result(rungs: tuple[str, ...] = LADDER, shift_largest: float = 1.0) -> TransferResult:
    rng = np.random.default_rng(0)
    runs = []
    for rung in rungs:
        ratio = _steps_ratio(rung) * (shift_largest if rung == rungs[-1] else 1.0)
        for seed in SEEDS:
            base = 10 * math.exp(rng.normal(0, 0.05))
            for arm, scale in (("muon", base), ("periodic", base * ratio * math.exp(rng.normal(0, 0.01)))):
                # FD = 10 + 100 exp(-step / scale), every step: it crosses 30 at scale x ln 5
                points = tuple((s, 0.01 * s, 10 + 100 * math.exp(-s / scale)) for s in range(1, HORIZON + 1))
                runs.append(TransferRun(rung=rung, parameters=1000, arm=arm, seed=seed, lr=0.02,
                                        lr_rule="unchanged", lr_base=0.02, K=None, gamma=None,
                                        run_id=f"{rung}-{arm}-{seed}", state="SUCCEEDED",
                                        trial_key=f"{arm}.{rung},seed={seed}", attempt=0, checkpoints=points[-3:],
                                        track=points, horizon=HORIZON))
    timing_rng = np.random.default_rng(1)
    per_round = {rung: {arm: [0.01 * f * math.exp(timing_rng.normal(0, 0.01)) for _ in range(12)]
                        for arm, f in (("muon", 1.0), ("periodic", STEP_RATIO))} for rung in rungs}
    plan = {"rungs": list(rungs), "horizon": HORIZON, "seeds": list(SEEDS), "arms": ["periodic", "muon"],
            "searched_arm": "periodic", "chosen": {"K": 3, "gamma": 0.15}, "eval_steps": [40, 50, 60],
            "runs": [{"rung": g, "arm": a, "parameters": 1000} for g in rungs for a in ("periodic", "muon")],
            "target": {"rule": "fixed", "values": dict.fromkeys(rungs, 30.0)}}
    timing = {"measured": True, "method": "interleaved", "clock": "thread", "seconds_per_step_runs": per_round,
              "seconds_per_step": {g: {a: float(np.median(v)) for a, v in per.items()} for g, per in per_round.items()}}
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan, runs=runs,
                          step_timing=timing)


def test_the_time_ratio_per_rung_is_the_steps_ratio_times_the_per_step_ratio_and_the_line_recovers_the_trend(
) -> None:
    doc = _result().analysis(n_boot=0)["time_ratio"]
    json.dumps(doc, allow_nan=False)
    assert (doc["searched"], doc["against"]) == ("periodic", "muon") and doc["rungs_without_ratio"] == {}
    for rung in LADDER:
        row = doc["per_rung"][rung]
        assert row["seeds"] == list(SEEDS) and row["block_parameters"] == block_parameters(rung)
        assert row["log_step_time_ratio"] == pytest.approx(math.log(STEP_RATIO), abs=0.01)
        assert row["ratio_mean"] == pytest.approx(_steps_ratio(rung) * STEP_RATIO, rel=0.02)
    lo, hi = doc["slope_interval"]
    assert lo < SLOPE < hi and doc["slope_per_decade"] == pytest.approx(SLOPE, abs=0.03)
    # The largest rung held out first and predicted by the line over the other three: on the line, a pass.
    held = doc["holdout"]
    assert held["tested"] and held["rung"] == "cpu-m" and held["fitted_on"] == list(LADDER[:3])
    assert held["passed"] and held["verdict"] == "pass"
    # Then every rung, extrapolated to the paper's rungs by their block parameters, each labelled, with the
    # paper's figures beside (not fitted).
    assert list(doc["extrapolation"]) == list(PAPER_RUNGS)
    for rung, e in doc["extrapolation"].items():
        assert e["label"] == "extrapolation" and e["params"] == block_parameters(rung)
        assert e["decades_past_largest"] > 2
        assert e["time_change_pct"] == pytest.approx(100 * (e["ratio"] - 1))
        low, high = e["time_change_interval_pct"]
        assert low < e["time_change_pct"] < high
    assert doc["paper"]["time_to_best_pct"] == [-64.8, -33.7] and doc["paper"]["step_time_pct"] == [-24.3, -15.7]
    assert any(line.startswith("held out cpu-m: predicted ratio") and line.endswith("(fitted on cpu-2xs, cpu-xs, "
                                                                                    "cpu-s)") for line in doc["lines"])
    assert any("the paper (not fitted" in line and "optimizer time -54.3 to -46.9 %" in line for line in doc["lines"])


def test_a_largest_rung_off_the_line_is_a_miss_and_three_rungs_fit_without_a_holdout() -> None:
    missed = _result(shift_largest=1.6).analysis(n_boot=0)["time_ratio"]["holdout"]
    assert missed["tested"] and not missed["passed"] and missed["verdict"] == "MISS"
    assert missed["observed_ratio"] > missed["interval_ratio"][1]
    three = _result(rungs=LADDER[1:]).analysis(n_boot=0)["time_ratio"]
    assert three["holdout"] == {"tested": False, "reason": "3 rungs: a hold-out needs 4 (3 to fit the line and the "
                                                           "largest to predict)"}
    assert list(three["extrapolation"]) == list(PAPER_RUNGS) and three["df"] == 1


def test_a_fit_over_fewer_than_three_rungs_is_refused_with_its_reason() -> None:
    doc = _result(rungs=("cpu-xs", "cpu-s")).analysis(n_boot=0)["time_ratio"]
    assert doc["error"].startswith("time_ratio fit refused: a size trend needs at least 3 rungs to fit")
    assert "got 2" in doc["error"] and "no residual to judge it by" in doc["error"]
    assert set(doc["per_rung"]) == {"cpu-xs", "cpu-s"}  # the ratios are still reported, rung by rung
    untimed = _result(rungs=LADDER[1:])
    untimed.step_timing.clear()
    refused = untimed.analysis(n_boot=0)["time_ratio"]
    assert refused["rungs_without_ratio"]["cpu-s"] == "no per-step timing of periodic and muon at cpu-s"
    assert "got 0" in refused["error"]


def test_transfer_fits_prints_the_section_and_refuses_a_fit_over_two_rungs(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from scalesweep_cli import main
    from sweeper.transfer import write_transfer_records

    write_transfer_records(_result(), tmp_path / "four")
    assert main(["transfer", "fits", str(tmp_path / "four"), "--n-boot", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("time ratio at equal quality, periodic / muon")
    assert "held out cpu-m: predicted ratio" in out and "extrapolation to paper-15b" in out
    assert main(["transfer", "fits", str(tmp_path / "four"), "--n-boot", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["holdout"]["verdict"] == "pass"
    write_transfer_records(_result(rungs=("cpu-xs", "cpu-s")), tmp_path / "two")
    assert main(["transfer", "fits", str(tmp_path / "two"), "--n-boot", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "time_ratio fit refused: a size trend needs at least 3 rungs" in err[0]
    assert main(["transfer", "fits", str(tmp_path / "four"), "--against", "adamw"]) == 2
    assert "against must be one of the baseline arms ['muon']" in capsys.readouterr().err
