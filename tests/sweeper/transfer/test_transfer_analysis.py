"""The transfer's plan and its analysis on synthetic records: no Ray, no MLflow, numbers known in advance."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from scaling import ExtrapolationRefused, ScalingInputError, TransferRun
from sweeper import SweepSpec
from sweeper.transfer import TransferError, TransferResult, TransferSpec, load_transfer_spec
from sweeper.transfer._plan import _rung_shape
from sweeper.transfer._planning import _default_rungs, _plan, _scaled_eval_steps, _Source

from ..conftest import TINY_TRIAL

SIZES = {"cpu-xs": 300_000, "cpu-s": 1_000_000, "cpu-m": 2_300_000, "cpu-l": 4_500_000}
ARMS = ("periodic", "muon", "adamw")
# Time to best = c_arm * N^0.5 seconds (grows with size); periodic 20% faster than muon, 10% than adamw.
C = {"periodic": 0.08, "muon": 0.1, "adamw": 0.08 / 0.9}
FD_E, FD_A, FD_ALPHA = 10.0, 4000.0, 0.5


def _run(rung: str, arm: str, seed: int, *, state: str = "SUCCEEDED", jitter: float = 0.0) -> TransferRun:
    n = SIZES[rung]
    t_best = C[arm] * n**0.5 * (1 + jitter)
    fd_best = FD_E + FD_A * n**-FD_ALPHA
    # three checkpoints; the best one is the second, at t_best (the endpoint a little worse, as FD often is)
    checkpoints = ((16, t_best * 0.8, fd_best * 1.3), (20, t_best, fd_best), (24, t_best * 1.2, fd_best * 1.01))
    return TransferRun(rung=rung, parameters=n, arm=arm, seed=seed, lr=0.02, lr_rule="unchanged", lr_base=0.02,
                       K=3 if arm == "periodic" else None, gamma=0.15 if arm == "periodic" else None,
                       run_id=f"{rung}-{arm}-{seed}", state=state, trial_key=f"{arm}.{rung},seed={seed}", attempt=0,
                       checkpoints=checkpoints, metric_name="fd_pixels", fd_samples=96)


def _result(runs: list[TransferRun], rungs: tuple[str, ...] = ("cpu-xs", "cpu-s", "cpu-m", "cpu-l"),
            seeds: tuple[int, ...] = (0, 1, 2)) -> TransferResult:
    plan = {
        "rungs": list(rungs), "horizon": 24, "source_horizon": 12, "eval_steps": [16, 20, 24], "seeds": list(seeds),
        "arms": list(ARMS), "searched_arm": "periodic", "chosen": {"K": 3, "gamma": 0.15},
        "base": {"rung": "cpu-xs", "width": 64, "parameters": SIZES["cpu-xs"], "optimizers": {
            "periodic": {"name": "periodic", "lr": 0.02, "refresh_every": 3, "gamma": 0.15, "aux_lr": 0.003},
            "muon": {"name": "muon", "lr": 0.02, "aux_lr": 0.003},
            "adamw": {"name": "adamw", "lr": 0.004, "aux_lr": 0.003}}},
        "runs": [{"rung": g, "arm": a, "lr_rule": "width" if a == "adamw" else "unchanged",
                  "parameters": SIZES[g]} for g in rungs for a in ARMS],
    }
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan, runs=runs)


def _full(jitter: bool = True) -> TransferResult:
    rng = np.random.default_rng(0)
    runs = [_run(g, a, s, jitter=float(rng.normal(0, 0.03)) if jitter else 0.0)
            for g in SIZES for a in ARMS for s in (0, 1, 2)]
    return _result(runs)


def test_savings_per_rung_with_seed_spread() -> None:
    result = _result([_run(g, a, s) for g in SIZES for a in ARMS for s in (0, 1, 2)])
    sav = result.savings()
    assert set(sav) == set(SIZES)
    for per in sav.values():
        assert per["muon"].mean_pct == pytest.approx(20.0) and per["adamw"].mean_pct == pytest.approx(10.0)
        assert per["muon"].n == 3 and per["muon"].std_pct == pytest.approx(0.0, abs=1e-9)
    jittered = _full().savings()
    assert all(s["muon"].std_pct and s["muon"].std_pct > 0 for s in jittered.values())


def test_failed_and_missing_runs_are_left_out_not_counted() -> None:
    runs = [_run(g, a, 0) for g in SIZES for a in ARMS]
    runs = [r for r in runs if not (r.rung == "cpu-l" and r.arm == "muon")]  # never ran
    runs.append(_run("cpu-l", "muon", 0, state="FAILED"))
    diverged = _run("cpu-s", "adamw", 1, state="DIVERGED")
    runs.append(TransferRun(**{**diverged.__dict__, "checkpoints": (*diverged.checkpoints[:2], (24, 1e9, math.nan))}))
    result = _result(runs, seeds=(0, 1))
    assert "muon" not in result.savings()["cpu-l"] and set(result.savings()["cpu-m"]) == {"muon", "adamw"}
    assert result.time_to_best()[diverged.run_id].diverged  # read, flagged, but never fitted
    data = result.fit_data("best_fd")
    assert len(data["muon"][0]) == 3 and len(data["adamw"][0]) == 4 and len(data["periodic"][0]) == 4


def test_time_to_best_fit_recovers_the_growing_exponent_and_predicts() -> None:
    # Without jitter the records are exactly C·N^0.5: the fit must give the exponent, the constant and the
    # prediction to rounding.
    exact = _full(jitter=False)
    fit = exact.fits("time_to_best", n_boot=100)
    assert fit.form == "A*N^-alpha" and fit.bootstrap == "seed"
    for arm in ARMS:
        assert fit.params[arm]["alpha"] == pytest.approx(-0.5, abs=1e-9)
        assert fit.params[arm]["A"] == pytest.approx(C[arm], rel=1e-9)
    truth = C["periodic"] * SIZES["cpu-m"] ** 0.5
    assert exact.predict("periodic", "cpu-m", n_boot=100)[0] == pytest.approx(truth, rel=1e-9)
    # With 3 % log-normal jitter on 4 sizes x 3 seeds, the least-squares slope in log space has standard error
    # 0.03/sqrt(Sxx) (about 0.009) and the log prediction at cpu-m 0.03·sqrt(1/n + (x0 - mean)²/Sxx) (about 0.01):
    # the fit must land within 4 of them, and its bootstrap interval must hold the truth.
    result = _full()
    fit = result.fits("time_to_best", n_boot=100)
    x = np.log([SIZES[g] for g in SIZES for _ in range(3)])
    sxx = float(((x - x.mean()) ** 2).sum())
    for arm in ARMS:
        lo, hi = fit.intervals[arm]["alpha"]
        assert lo <= -0.5 <= hi and fit.params[arm]["alpha"] == pytest.approx(-0.5, abs=4 * 0.03 / sxx**0.5)
    point, lo, hi = result.predict("periodic", "cpu-m", n_boot=100)
    se_log = 0.03 * (1 / len(x) + (math.log(SIZES["cpu-m"]) - x.mean()) ** 2 / sxx) ** 0.5
    assert lo <= point <= hi and abs(math.log(point / truth)) <= 4 * se_log
    with pytest.raises(ExtrapolationRefused, match="max_extrapolation"):
        result.predict("periodic", "paper-1.3b", n_boot=100)
    assert "extrapolation_refused" in fit.flags
    shared = result.fits("time_to_best", share=("alpha",), n_boot=50)
    assert len({shared.params[a]["alpha"] for a in ARMS}) == 1
    with pytest.raises(ScalingInputError, match="unknown metric"):
        result.fits("fid")


def test_analysis_is_json_with_every_part() -> None:
    doc = _full().analysis(n_boot=50)
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text) == doc
    assert doc["chosen"] == {"K": 3, "gamma": 0.15} and doc["metric_name"] == "fd_pixels" and doc["fd_samples"] == 96
    assert len(doc["runs"]) == 36 and doc["rungs"]["cpu-l"] == SIZES["cpu-l"]
    run = doc["runs"][0]
    assert run["time_to_best_s"] == pytest.approx(run["checkpoints"][1][1]) and run["best_step"] == 20
    assert doc["savings"]["cpu-m"]["muon"]["n"] == 3
    common = doc["common_target"]["cpu-s"]["0"]
    assert common["reference_arm"] in ARMS and set(common["time_s"]) == set(ARMS)
    fits = doc["fits"]
    assert fits["time_to_best"]["form"] == "A*N^-alpha" and fits["best_fd"]["form"] == "E+A*N^-alpha"
    assert set(fits["best_fd"]["arms"]["adamw"]["params"]) == {"E", "A", "alpha"}
    assert "non_identifiable" in fits["best_fd"]["flags"] and "alternative" in fits["best_fd"]  # 3 params, 4 sizes
    too_few = _result([_run("cpu-xs", a, 0) for a in ARMS], rungs=("cpu-xs",)).analysis(n_boot=10)
    assert "two rungs" in too_few["fits"]["best_fd"]["error"]


def test_export_marks_verified_where_the_arm_ran_and_carries_the_lr_by_rule() -> None:
    runs = [_run(g, a, 0) for g in ("cpu-xs", "cpu-s") for a in ARMS]
    runs = [r for r in runs if not (r.rung == "cpu-s" and r.arm == "adamw")] + [_run("cpu-s", "adamw", 0,
                                                                                    state="FAILED")]
    export = _result(runs, rungs=("cpu-xs", "cpu-s"), seeds=(0,)).export("cpu-s")
    assert {a: e.verified_at_target for a, e in export.arms.items()} == {"periodic": True, "muon": True,
                                                                       "adamw": False}
    assert export.arms["adamw"].optimizer["lr"] == pytest.approx(0.004 * 64 / 96)
    assert export.arms["muon"].optimizer["lr"] == 0.02 and export.arms["periodic"].optimizer["gamma"] == 0.15
    assert export.arms["periodic"].evidence["transfer_run_ids"] == ["cpu-s-periodic-0"]
    assert export.provenance["transfer_id"] == "t-1" and export.target["rung"] == "cpu-s"


# -- the spec and the plan ------------------------------------------------------------------------------------


def test_spec_is_strict_and_names_fields() -> None:
    spec = TransferSpec(name="t", sweep="out/sweeps/s")
    assert spec.arms == ["periodic", "muon", "adamw"] and spec.horizon_factor == 2.0 and spec.rungs is None
    cases: list[tuple[dict[str, Any], str]] = [
        ({"colour": 1}, "colour"),
        ({"lr_rules": {"adamw": "cubic"}}, "'unchanged', 'width' or 'sqrt_width'"),
        ({"arms": ["periodic", "sgd"]}, "'periodic', 'muon', 'adamw' or 'rownorm'"),
        ({"arms": ["periodic"], "lr_rules": {"adamw": "width"}}, "not in arms"),
        ({"rungs": ["cpu-xs", "cpu-xxl"]}, "unknown rung 'cpu-xxl'"),
        ({"horizon_factor": 0}, "greater than 0"),
        ({"seeds": [1, 1]}, "distinct"),
    ]
    for extra, needle in cases:
        with pytest.raises(ValidationError, match=needle.replace("(", r"\(")):
            TransferSpec.model_validate({"name": "t", "sweep": "s", **extra})


def test_the_example_spec_validates() -> None:
    spec = load_transfer_spec(Path(__file__).resolve().parents[3] / "examples" / "transfer-tiny.yaml")
    assert spec.rungs == ["cpu-xs", "cpu-s", "cpu-m"] and spec.lr_rules["adamw"] == "width"


def _source(**spec_fields: Any) -> _Source:
    spec = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1],
                                     "baselines": [{"arm": "adamw", "optimizer": {"lr": 0.004}}, "muon"],
                                     "trial": dict(TINY_TRIAL), **spec_fields})
    return _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:////tmp/x.db",
                   experiment="e", spec=spec, best={"K": 4, "gamma": 0.25}, objectives={}, searched_arm="periodic")


def test_plan_defaults_rules_eval_shape_and_order() -> None:
    assert _default_rungs("cpu-s") == ["cpu-s", "cpu-m", "cpu-l"] and _default_rungs("paper-9b")[-1] == "paper-15b"
    assert _scaled_eval_steps([20, 25, 30], 30, 60) == [40, 50, 60]
    plan, typed = _plan(TransferSpec(name="t", sweep="/w"), _source(), "t-1")
    sweep = typed.model_dump(mode="json")  # as stored
    assert plan["rungs"] == ["cpu-xs", "cpu-s", "cpu-m", "cpu-l"] and plan["horizon"] == 60
    assert plan["eval_steps"] == [40, 50, 60] and plan["seeds"] == [0, 1]
    lr = {(r["rung"], r["arm"]): r["lr"] for r in plan["runs"]}
    assert lr[("cpu-l", "adamw")] == pytest.approx(0.004 * 64 / 160) and lr[("cpu-l", "muon")] == 0.02
    # One sweep: the pair at the first rung is its search point, everything else a baseline at its own rung,
    # the largest rungs first; lineage on every run.
    assert sweep["rung"] == "cpu-xs" and sweep["search"]["space"] == {"K": [4], "gamma": [0.25]}
    assert sweep["search"]["optimizer"]["lr"] == 0.02 and sweep["search"]["tags"]["scalesweep.lr_rule"] == "unchanged"
    assert [b["rung"] for b in sweep["baselines"]][:3] == ["cpu-l"] * 3 and len(sweep["baselines"]) == 11
    cpu_l_periodic = next(b for b in sweep["baselines"] if b["label"] == "periodic.cpu-l")
    assert cpu_l_periodic["optimizer"]["refresh_every"] == 4 and cpu_l_periodic["optimizer"]["gamma"] == 0.25
    assert sweep["tags"]["scalesweep.source_sweep_id"] == "s-1" and sweep["early_stopping"]["method"] == "none"
    assert sweep["tracking"] == {"tracking_uri": "sqlite:////tmp/x.db", "experiment": "e"}

    custom = TransferSpec(name="t", sweep="/w", rungs=["cpu-m", "cpu-s"], steps=50, seeds=[7],
                          lr_rules={"adamw": "unchanged", "muon": "sqrt_width"}, trial={"eval": {"fd_samples": 64}})
    plan, typed = _plan(custom, _source(), "t-2")
    sweep = typed.model_dump(mode="json")  # as stored
    lr = {(r["rung"], r["arm"]): r["lr"] for r in plan["runs"]}
    assert plan["rungs"] == ["cpu-s", "cpu-m"] and plan["horizon"] == 50 and sweep["seeds"] == [7]
    assert lr[("cpu-m", "adamw")] == 0.004 and lr[("cpu-m", "muon")] == pytest.approx(0.02 * math.sqrt(64 / 128))
    assert sweep["trial"]["eval"]["fd_samples"] == 64 and sweep["trial"]["eval"]["extractor"] == "pixels"
    with pytest.raises(TransferError, match="searched arm 'periodic'"):
        _plan(TransferSpec(name="t", sweep="/w", arms=["muon", "adamw"]), _source(), "t-3")


def test_rung_shapes_count_the_ladder() -> None:
    assert _rung_shape("cpu-xs") == (64, 324_908) and _rung_shape("paper-1.3b")[0] == 1344
