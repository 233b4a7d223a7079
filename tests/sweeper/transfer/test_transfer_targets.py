"""A transfer's report against its declared target, on synthetic records with known crossings: fraction
reaching, steps and time to target, the paired ratios and the time saving, the plateau flag, the fits and the
export. No Ray, no MLflow."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import pytest
from pydantic import ValidationError

from scaling import TransferRun
from sweeper.transfer import TransferResult, TransferSpec
from sweeper.transfer._sections import HorizonSpec, rung_horizon

SIZES = {"cpu-xs": 300_000, "cpu-s": 1_000_000, "cpu-m": 2_300_000, "cpu-l": 4_500_000}
ARMS = ("periodic", "muon", "adamw")
TRACK = tuple(range(2, 25, 2))
SLOPE = {"periodic": 8.0, "muon": 10.0, "adamw": 5.0}  # FD falls by this per step from 300
STEP_S = {"periodic": 0.01, "muon": 0.02, "adamw": 0.009}  # seconds per step


def _fd(arm: str, step: int, rung: str, flat_after: int | None) -> float:
    s = min(step, flat_after) if flat_after else step
    return 300.0 - SLOPE[arm] * s * (SIZES["cpu-xs"] / SIZES[rung]) ** 0.3  # slower at larger rungs


def _run(rung: str, arm: str, seed: int, flat_after: int | None = None, jitter: float = 1.0) -> TransferRun:
    track = tuple((s, s * STEP_S[arm] * jitter, _fd(arm, s, rung, flat_after)) for s in TRACK)
    checkpoints = tuple(p for p in track if p[0] in (16, 20, 24))
    return TransferRun(rung=rung, parameters=SIZES[rung], arm=arm, seed=seed, lr=0.02, lr_rule="unchanged",
                       lr_base=0.02, K=3 if arm == "periodic" else None, gamma=0.15 if arm == "periodic" else None,
                       run_id=f"{rung}-{arm}-{seed}", state="SUCCEEDED", trial_key=f"{arm}.{rung},seed={seed}",
                       attempt=0, checkpoints=checkpoints, metric_name="fd_pixels", fd_samples=96, track=track,
                       horizon=24, track_samples=64)


def _result(runs: list[TransferRun], rungs: list[str], target: dict | None = None,
            seeds: tuple[int, ...] = (0, 1, 2)) -> TransferResult:
    plan = {
        "rungs": rungs, "horizon": 24, "source_horizon": 12, "eval_steps": [16, 20, 24], "seeds": list(seeds),
        "arms": list(ARMS), "searched_arm": "periodic", "chosen": {"K": 3, "gamma": 0.15},
        "horizons": {r: 24 for r in rungs}, "target": target or {"rule": "final_mean", "arm": "adamw", "slack": 0.1},
        "base": {"rung": "cpu-xs", "width": 64, "parameters": SIZES["cpu-xs"], "optimizers": {
            "periodic": {"name": "periodic", "lr": 0.02, "refresh_every": 3, "gamma": 0.15, "aux_lr": 0.003},
            "muon": {"name": "muon", "lr": 0.02, "aux_lr": 0.003},
            "adamw": {"name": "adamw", "lr": 0.004, "aux_lr": 0.003}}},
        "runs": [{"rung": g, "arm": a, "lr_rule": "unchanged", "parameters": SIZES[g]} for g in rungs for a in ARMS],
    }
    timing = {"measured": True, "seconds_per_step": {r: dict(STEP_S) for r in rungs}}
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan, runs=runs,
                          step_timing=timing)


def test_crossings_ratios_and_time_saving_against_the_declared_target() -> None:
    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"])
    report = result.targets()
    rung = report["rungs"]["cpu-xs"]
    # AdamW ends at 300 - 5 * 24 = 180; target 1.1 x 180 = 198, on the tracking curve.
    assert rung["target"] == pytest.approx(198.0) and rung["curve"] == "fd_track"
    expected_steps = {arm: (300 - 198) / SLOPE[arm] for arm in ARMS}  # 12.75, 10.2, 20.4: linear, so exact
    for arm in ARMS:
        a = rung["arms"][arm]
        assert a["reached"] == 3 and a["fraction_reached"] == 1.0
        assert a["steps_to_target"]["mean"] == pytest.approx(expected_steps[arm])
        assert a["time_to_target_s"]["mean"] == pytest.approx(expected_steps[arm] * STEP_S[arm])
        assert a["step_time_s"] == STEP_S[arm]
    vs_muon = rung["comparisons"]["muon"]
    assert vs_muon["status"] == "ok" and vs_muon["seeds_both_reached"] == 3
    assert vs_muon["steps_to_target_ratio"]["mean"] == pytest.approx(12.75 / 10.2)  # 1.25: more steps
    assert vs_muon["step_time_ratio"] == pytest.approx(0.5)  # but half the time per step
    assert vs_muon["time_saving_pct"]["mean"] == pytest.approx(100 * (1 - 1.25 * 0.5))  # 37.5 % faster
    assert vs_muon["time_saving_pct"]["n"] == 3
    vs_adamw = rung["comparisons"]["adamw"]
    assert vs_adamw["time_saving_pct"]["mean"] == pytest.approx(100 * (1 - (12.75 / 20.4) * (0.01 / 0.009)))
    assert vs_adamw["steps_to_target_difference"]["mean"] == pytest.approx(12.75 - 20.4)
    assert "time_to_best_saving_pct" in vs_adamw and "paper" in vs_adamw["time_to_best_saving_pct"]["definition"]
    text = result.table()
    assert "against the target declared before the runs" in text and "time saving +37.5" in text


def test_paired_interval_over_seeds_with_spread() -> None:
    runs = [_run("cpu-xs", a, s, jitter=1.0 + 0.1 * s) for a in ARMS for s in (0, 1, 2)]
    runs = [r if r.arm != "periodic" else _jittered_steps(r, 1.0 + 0.05 * r.seed) for r in runs]
    c = _result(runs, ["cpu-xs"]).targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    ratio = c["steps_to_target_ratio"]
    assert ratio["n"] == 3 and ratio["lo"] < ratio["mean"] < ratio["hi"]
    assert c["time_saving_pct"]["lo"] < c["time_saving_pct"]["mean"] < c["time_saving_pct"]["hi"]


def _jittered_steps(run: TransferRun, factor: float) -> TransferRun:
    from dataclasses import replace

    track = tuple((s, t, 300 - (300 - f) / factor) for s, t, f in run.track)  # slower by `factor`
    return replace(run, track=track)


def test_too_few_seeds_reaching_is_reported_as_such_never_as_a_number() -> None:
    # A fixed target only periodic and muon reach (adamw ends at 180, muon at 60): adamw reaches on no seed.
    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"],
                     target={"rule": "fixed", "values": {"cpu-xs": 150.0}})
    rung = result.targets()["rungs"]["cpu-xs"]
    assert rung["target"] == 150.0 and rung["arms"]["adamw"]["reached"] == 0
    assert rung["arms"]["adamw"]["steps_to_target"]["mean"] is None
    vs_adamw = rung["comparisons"]["adamw"]
    assert vs_adamw["status"] == "too_few_reached" and "steps_to_target_ratio" not in vs_adamw
    assert "time_saving_pct" not in vs_adamw and "0 of 3 paired seeds" in vs_adamw["note"]
    assert rung["comparisons"]["muon"]["status"] == "ok"
    assert "0 of 3 paired seeds reached" in result.table()


def test_plateau_is_judged_per_arm_and_a_rising_arm_is_flagged() -> None:
    """cpu-s: periodic and muon flat, adamw still falling on both seeds. Pooled over the six runs that is 2 of 6 (no
    flag); per arm, adamw is undertrained and the rung says so. cpu-m: muon's curve rises over the last third."""
    from dataclasses import replace

    def rising(run: TransferRun) -> TransferRun:
        return replace(run, track=tuple((s, t, f if s <= 14 else f + 12.0 * (s - 14)) for s, t, f in run.track))

    runs = [_run("cpu-s", a, s, flat_after=None if a == "adamw" else 14) for a in ARMS for s in (0, 1)]
    runs += [rising(_run("cpu-m", a, s, flat_after=14)) if a == "muon" else _run("cpu-m", a, s, flat_after=14)
             for a in ARMS for s in (0, 1)]
    result = _result(runs, ["cpu-s", "cpu-m"], seeds=(0, 1))
    report = result.targets()["rungs"]
    cpu_s, cpu_m = report["cpu-s"]["plateau"], report["cpu-m"]["plateau"]
    assert cpu_s["runs_flagged"] == 2 and cpu_s["runs_checked"] == 6  # the pooled vote would say "ok"
    assert cpu_s["undertrained"] and cpu_s["undertrained_arms"] == ["adamw"] and not cpu_s["rising"]
    assert cpu_s["arms"]["adamw"] == {**cpu_s["arms"]["adamw"], "runs_flagged": 2, "undertrained": True}
    assert cpu_m["rising"] and cpu_m["rising_arms"] == ["muon"] and not cpu_m["undertrained"]
    assert cpu_m["arms"]["muon"]["runs_rising"] == 2 and cpu_m["arms"]["muon"]["median_drop"] < -0.1
    assert result.undertrained_rungs() == ["cpu-s"]
    table = result.table()
    assert "UNDERTRAINED (adamw)" in table and "RISING (muon)" in table


def test_plateau_flags_a_rung_still_improving_and_clears_a_flat_one() -> None:
    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1)] + \
           [_run("cpu-s", a, s, flat_after=14) for a in ARMS for s in (0, 1)]
    result = _result(runs, ["cpu-xs", "cpu-s"], seeds=(0, 1))
    report = result.targets()["rungs"]
    assert report["cpu-xs"]["plateau"]["undertrained"] and report["cpu-xs"]["plateau"]["runs_flagged"] == 6
    assert not report["cpu-s"]["plateau"]["undertrained"] and report["cpu-s"]["plateau"]["runs_flagged"] == 0
    assert result.undertrained_rungs() == ["cpu-xs"]
    doc = result.analysis(n_boot=0)
    assert doc["undertrained_rungs"] == ["cpu-xs"]
    run = next(r for r in doc["runs"] if r["run_id"] == "cpu-s-adamw-0")
    assert run["plateau_drop"] == pytest.approx(0.0, abs=1e-9) and run["target_reached"] is True
    for metric in ("steps_to_target", "time_to_best"):
        fit = doc["fits"][metric]
        assert "undertrained" in fit["flags"] and "cpu-xs" in fit["flag_details"]["undertrained"]
    # Each rung's target from its own AdamW (198 at cpu-xs, 276 at cpu-s): steps to target is fitted per level,
    # each level's fits marked too; time to target is not fitted across the two.
    levels = doc["fits"]["steps_to_target"]["levels"]
    assert [round(v) for v in levels["levels"]] == [276, 198]
    assert doc["fits"]["steps_to_target"]["target_level"] == levels["headline"] == levels["levels"][0]
    loose, strict = (levels["fits"][f"{v:g}"] for v in levels["levels"])
    for endpoint in ("first", "sustained"):
        assert "undertrained" in loose[endpoint]["fit"]["flags"] and loose[endpoint]["censored"] == 0
        # cpu-s flattens at 276 and never reaches 198: censored there on both seeds, its cells refused, no fit.
        assert strict[endpoint]["cells"]["muon"]["cpu-s"]["right_censored"] == 2
        assert strict[endpoint]["fit"]["error"].startswith("no arm has two rungs or more left to fit at 198")
    assert doc["fits"]["time_to_target"]["error"].startswith("the rungs' targets differ")
    json.dumps(doc)


def test_steps_and_time_to_target_are_fitted_against_size() -> None:
    runs = [_run(g, a, s) for g in SIZES for a in ARMS for s in (0, 1)]
    result = _result(runs, list(SIZES), seeds=(0, 1), target={"rule": "fixed", "values": dict.fromkeys(SIZES, 250.0)})
    fit = result.fits("steps_to_target", n_boot=50)
    assert fit.form == "A*N^-alpha" and "non_identifiable" not in fit.flags
    # Steps to target = 50 / (slope x (N0 / N)^0.3): they grow like N^0.3, so alpha = -0.3 for every arm.
    for arm in fit.arms:
        assert fit.params[arm]["alpha"] == pytest.approx(-0.3, abs=0.01)
    doc = result.analysis(n_boot=50)
    # One target for every rung: the fit over the runs that reached it, as before; no levels.
    assert not result.targets_differ() and "levels" not in doc["fits"]["steps_to_target"]
    for metric in ("steps_to_target", "time_to_target"):
        arms = doc["fits"][metric]["arms"]
        assert set(arms) == set(ARMS)
        assert all(v["loo_error"] is not None and v["loo_baseline_error"] is not None for v in arms.values())
        assert doc["fits"][metric]["loss_function"] in ("huber", "least_squares")
    export = result.export("cpu-m")
    assert export.provenance["target_rule"] == {"rule": "fixed", "arm": "adamw", "slack": 0.1,
                                                "values": dict.fromkeys(SIZES, 250.0)}
    assert export.provenance["horizons"] == {r: 24 for r in SIZES}
    assert export.arms["periodic"].evidence["fraction_reached"] == 1.0
    fitted = export.arms["periodic"].evidence["steps_to_target_fit"]
    point = result.fits("steps_to_target").predict("periodic", SIZES["cpu-m"])[0]
    assert fitted["point"] == pytest.approx(point) and fitted["lo"] <= fitted["point"] <= fitted["hi"]
    assert "loo_baseline_error" in fitted and "time_to_target_fit" in export.arms["muon"].evidence


def test_target_and_horizon_specs_are_strict() -> None:
    base = {"name": "t", "sweep": "out/sweeps/x"}
    with pytest.raises(ValidationError, match=r"target.values must give a value per rung"):
        TransferSpec.model_validate({**base, "target": {"rule": "fixed"}})
    with pytest.raises(ValidationError, match=r"target.values has no value for rungs \['cpu-s'\]"):
        TransferSpec.model_validate({**base, "rungs": ["cpu-xs", "cpu-s"],
                                     "target": {"rule": "fixed", "values": {"cpu-xs": 100.0}}})
    with pytest.raises(ValidationError, match=r"target.arm 'rownorm' must be one of arms"):
        TransferSpec.model_validate({**base, "target": {"arm": "rownorm"}})
    with pytest.raises(ValidationError, match="rule"):
        TransferSpec.model_validate({**base, "target": {"rule": "best"}})
    with pytest.raises(ValidationError, match=r"needs horizon.images_per_param and horizon.cap"):
        TransferSpec.model_validate({**base, "horizon": {"mode": "per_param"}})
    spec = TransferSpec.model_validate({**base, "horizon": {"mode": "per_param", "images_per_param": 0.5,
                                                            "cap": 3000}})
    h = spec.horizon
    assert rung_horizon(h, 324_908, 32, 999) == 3000  # 0.5 x 324908 / 32 = 5077, capped
    assert rung_horizon(HorizonSpec(mode="per_param", images_per_param=0.05, cap=3000), 324_908, 32, 999) == 508
    assert rung_horizon(HorizonSpec(mode="per_param", images_per_param=0.5, cap=3000), 4_543_820, 32, 999) == 3000
    assert rung_horizon(HorizonSpec(), 4_543_820, 32, 999) == 999
    # Specs without the new sections keep their fingerprint (transfers started before them still resume).
    assert TransferSpec.model_validate(base).fingerprint() == TransferSpec.model_validate(
        {**base, "target": {"rule": "final_mean"}}).fingerprint()
    assert math.isfinite(spec.target.slack)


@pytest.mark.parametrize(("section", "value", "field"), [
    ("horizon", {"mode": "per_param", "images_per_param": 1e300, "cap": 3000}, "horizon.images_per_param"),
    ("horizon", {"mode": "per_param", "images_per_param": 0.5, "cap": 10**15}, "horizon.cap"),
    ("horizon", {"mode": "per_param", "images_per_param": float("inf"), "cap": 3000}, "horizon.images_per_param"),
    ("timing", {"steps": 10**12}, "timing.steps"),
    ("timing", {"warmup": 10**12}, "timing.warmup"),
    ("verify", {"knobs": ["K", "gama"]}, "verify.knobs.1"),
    ("verify", {"knobs": []}, "verify.knobs"),
])
def test_oversized_non_finite_and_unknown_sections_are_refused(section: str, value: Any, field: str) -> None:
    # Oversized timing runs would hold the transfer at its start; a misspelt knob would silently drop from the
    # verification bracket; a huge horizon would run for ever.
    with pytest.raises(ValidationError) as refused:
        TransferSpec.model_validate({"name": "t", "sweep": "out/sweeps/x", section: value})
    assert field in {".".join(str(p) for p in e["loc"]) for e in refused.value.errors()}, refused.value


def test_the_html_report_shows_the_target_section() -> None:
    from dashboards import build_report
    from dashboards._report import ReportData

    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"],
                     target={"rule": "fixed", "values": {"cpu-xs": 150.0}})
    html = build_report(ReportData(targets=result.target_summary(n_boot=0)))
    assert "Time to the declared target" in html and "fixed per rung: {&#x27;cpu-xs&#x27;: 150.0}" in html
    assert "0 of 3 paired seeds reached the target in both arms" in html  # adamw: never a number
    assert "steps-to-target ratio (optimizer)" in html and "time to best s (paper&#x27;s definition)" in html
    assert "1.25 [1.25, 1.25] (n=3)" in html  # periodic / muon steps to target, paired over 3 seeds


def test_the_per_step_time_ratio_is_paired_over_timing_rounds_with_its_interval() -> None:
    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"])
    # Three timing rounds; the machine slows down in round 2 (both arms alike), periodic / muon stays near 0.5.
    rounds = {"periodic": [0.010, 0.013, 0.0102], "muon": [0.020, 0.026, 0.0200], "adamw": [0.009, 0.012, 0.009]}
    result.step_timing["seconds_per_step_runs"] = {"cpu-xs": rounds}
    c = result.targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    logs = [math.log(a / b) for a, b in zip(rounds["periodic"], rounds["muon"], strict=True)]
    ratio = c["step_time_ratio_interval"]
    assert ratio["n"] == 3 and ratio["mean"] == pytest.approx(math.exp(sum(logs) / 3))
    assert ratio["lo"] < ratio["mean"] < ratio["hi"] and ratio["hi"] - ratio["lo"] < 0.05  # paired: drift cancels
    assert c["step_time_ratio"] == pytest.approx(ratio["mean"])  # the saving uses the paired ratio
    assert c["time_saving_pct"]["mean"] == pytest.approx(100 * (1 - 1.25 * ratio["mean"]))
    assert f"[{ratio['lo']:.3g}, {ratio['hi']:.3g}] (n=3)" in result.table()
    # One timing round: the ratio carries no spread and says so.
    single = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"])
    assert "(one timing run)" in single.table()


def test_timing_repeats_are_bounded() -> None:
    from sweeper.transfer import TimingSpec

    assert TimingSpec().repeats == 1 and TimingSpec(repeats=3).repeats == 3
    for bad in (0, 21):
        with pytest.raises(ValidationError, match="repeats"):
            TimingSpec(repeats=bad)


def test_three_rungs_give_a_flagged_per_arm_fit_and_a_shared_alpha_alternative_in_every_view() -> None:
    from api.demo._demo import _fit_text
    from dashboards._targets import targets_html

    rungs = ["cpu-xs", "cpu-s", "cpu-m"]
    runs = [_run(g, a, s) for g in rungs for a in ARMS for s in (0, 1)]
    result = _result(runs, rungs, seeds=(0, 1), target={"rule": "fixed", "values": dict.fromkeys(rungs, 250.0)})
    summary = result.target_summary(n_boot=50)
    fit = summary["fits"]["steps_to_target"]
    # A*N^-alpha per arm on 3 sizes: 3 - 2 = 1 residual degree of freedom, flagged; alpha shared by the 3 arms
    # leaves 3 - 1 - 1/3 = 1.67: the alternative passes, and recovers the common exponent (-0.3, see _fd).
    assert "non_identifiable" in fit["flags"] and "share=('alpha',)" in fit["suggestion"]
    alt = fit["alternative"]
    assert alt["share"] == ["alpha"] and "non_identifiable" not in alt["flags"]
    # The synthetic curves still fall at their end: every rung is undertrained, and both fits say so.
    assert summary["undertrained_rungs"] == rungs
    assert "undertrained" in fit["flags"] and "undertrained" in alt["flags"]
    for arm in ARMS:
        assert alt["arms"][arm]["params"]["alpha"] == pytest.approx(-0.3, abs=0.01)
    html = targets_html(summary)
    assert "alternative fit A*N^-alpha, alpha shared by the arms of steps_to_target" in html
    line = _fit_text(alt)
    assert line.startswith("(A*N^-alpha, shared alpha, ") and "non_identifiable" not in line
    assert "alpha periodic -0.3 [-0.3, -0.3]" in line


def test_the_report_draws_steps_and_time_to_target_against_size_with_the_fit_that_passes() -> None:
    from dashboards._report import ReportData, build_report, report_figures
    from dashboards._transfer_page import _target_panels

    rungs = ["cpu-xs", "cpu-s", "cpu-m"]
    runs = [_run(g, a, s) for g in rungs for a in ARMS for s in (0, 1)]
    result = _result(runs, rungs, seeds=(0, 1), target={"rule": "fixed", "values": dict.fromkeys(rungs, 250.0)})
    panels = _target_panels(result, None)
    assert [p.metric for p in panels] == ["steps_to_target", "time_to_target"]
    steps = panels[0]
    periodic = next(p for p in steps.points if p.arm == "periodic")
    assert periodic.sizes == tuple(float(SIZES[r]) for r in rungs)
    # Both seeds give the same crossing here: steps to 250 = 50 / (8 x (N0 / N)^0.3).
    assert periodic.mean[2] == pytest.approx(50 / (8 * (SIZES["cpu-xs"] / SIZES["cpu-m"]) ** 0.3))
    assert steps.fit is not None and steps.fit.share == ("alpha",)  # the per-arm fit on 3 sizes is flagged
    assert "non_identifiable" not in steps.fit.flags
    assert "undertrained" in steps.fit.flags  # the synthetic runs still fall at their end (as the analysis says)
    curve = next(c for c in steps.curves if c.arm == "periodic")
    assert curve.point[0] == pytest.approx(periodic.mean[0], rel=1e-3)  # the curve goes through the points
    figures = report_figures(ReportData(target_scaling=panels))
    assert set(figures) == {"targets"} and len(figures["targets"].axes) == 2
    html = build_report(ReportData(targets=result.target_summary(n_boot=20), target_scaling=panels))
    section = html[html.index('<section id="targets">'):]
    assert section.index("<img") < section.index("<table")  # the figure heads the target section


def test_a_run_that_crosses_and_rises_again_is_reached_but_not_held() -> None:
    # Periodic seed 0 crosses the target (198) at 12.75 steps like the others, then climbs back to 250 by its end.
    from dataclasses import replace

    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)]
    rising = next(r for r in runs if r.arm == "periodic" and r.seed == 0)
    track = tuple((s, t, f if s <= 16 else 250.0) for s, t, f in rising.track)
    runs = [replace(r, track=track) if r is rising else r for r in runs]
    result = _result(runs, ["cpu-xs"])
    a = result.targets()["rungs"]["cpu-xs"]["arms"]["periodic"]
    assert a["reached"] == 3 and a["held_to_end"] == 2  # the first crossing counts it; held does not
    assert a["per_seed"]["0"]["below_at_end"] is False and a["per_seed"]["1"]["below_at_end"] is True
    assert a["steps_to_target"]["mean"] == pytest.approx(12.75)  # time to target stays the first crossing
    assert result.targets()["rungs"]["cpu-xs"]["arms"]["muon"]["held_to_end"] == 3
    assert "held: of the seeds that reached the target" in result.table()
    from dashboards import build_report
    from dashboards._report import ReportData

    html = build_report(ReportData(targets=result.target_summary(n_boot=0)))
    assert "held to the end" in html and "<td>2/3</td>" in html


def test_timing_rounds_that_do_not_pair_give_the_medians_labelled_as_such() -> None:
    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"])
    # Muon lost its third round: the rounds no longer pair, so the ratio is of the medians with no interval.
    rounds = {"periodic": [0.010, 0.013, 0.011], "muon": [0.020, 0.022], "adamw": [0.009, 0.012, 0.009]}
    result.step_timing["seconds_per_step_runs"] = {"cpu-xs": rounds}
    result.step_timing["seconds_per_step"] = {"cpu-xs": {"periodic": 0.011, "muon": 0.021, "adamw": 0.009}}
    c = result.targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    assert "step_time_ratio_interval" not in c and c["step_time_ratio"] == pytest.approx(0.011 / 0.021)
    assert c["step_time_ratio_label"] == "medians of unpaired timing rounds"
    table = result.table()
    assert f"{0.011 / 0.021:.3g} (medians of unpaired timing rounds)" in table
    assert "(one timing run)" not in table.split("vs muon")[1].splitlines()[0]
    # Paired rounds of periodic and AdamW still give an interval.
    assert "step_time_ratio_interval" in result.targets()["rungs"]["cpu-xs"]["comparisons"]["adamw"]


def test_the_plan_line_gives_the_range_of_horizons_when_rungs_differ() -> None:
    import io

    from sweeper.transfer._job import _print_plan
    from sweeper.transfer._state import TransferHead

    plan = _result([], ["cpu-xs", "cpu-s"]).plan.to_dict()

    def printed(horizons: dict[str, int]) -> str:
        state = TransferHead(transfer_id="t-1", name="t", source={"chosen": {"K": 3}, "sweep_id": "s-1"},
                             plan={**plan, "horizons": horizons}, sweep_spec={})
        out = io.StringIO()
        _print_plan(state, out)
        return out.getvalue().splitlines()[0]

    assert "24-36 steps by rung" in printed({"cpu-xs": 24, "cpu-s": 36})
    assert "evals at the sweep's fractions of each rung's horizon" in printed({"cpu-xs": 24, "cpu-s": 36})
    same = printed({"cpu-xs": 24, "cpu-s": 24})
    assert "; 24 steps (sweep: 12), evals at [16, 20, 24]" in same


def test_the_time_savings_interval_carries_the_timing_spread_as_well_as_the_seeds() -> None:
    from scipy import stats

    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)]
    runs = [r if r.arm != "periodic" else _jittered_steps(r, 1.0 + 0.05 * r.seed) for r in runs]
    result = _result(runs, ["cpu-xs"])
    rounds = {"periodic": [0.010, 0.013, 0.0102], "muon": [0.020, 0.024, 0.0190], "adamw": [0.009, 0.012, 0.009]}
    result.step_timing["seconds_per_step_runs"] = {"cpu-xs": rounds}
    c = result.targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    # By hand: the log of the product is the sum of two means of paired logs; Welch-Satterthwaite df.
    s_logs = [math.log(x) for x in c["steps_to_target_ratio"]["per_seed"].values()]
    t_logs = [math.log(a / b) for a, b in zip(rounds["periodic"], rounds["muon"], strict=True)]
    mean_s, mean_t = sum(s_logs) / 3, sum(t_logs) / 3
    var_s = sum((x - mean_s) ** 2 for x in s_logs) / 2 / 3
    var_t = sum((x - mean_t) ** 2 for x in t_logs) / 2 / 3
    df = (var_s + var_t) ** 2 / (var_s**2 / 2 + var_t**2 / 2)
    half = stats.t.ppf(0.975, df) * math.sqrt(var_s + var_t)
    saving = c["time_saving_pct"]
    assert saving["mean"] == pytest.approx(100 * (1 - math.exp(mean_s + mean_t)))
    assert saving["lo"] == pytest.approx(100 * (1 - math.exp(mean_s + mean_t + half)))
    assert saving["hi"] == pytest.approx(100 * (1 - math.exp(mean_s + mean_t - half)))
    assert saving["n"] == 3 and saving["timing_rounds"] == 3 and "the timing's" in saving["definition"]
    # One timing round: the interval is the seeds' alone (Student-t on n - 1 = 2 degrees of freedom).
    single = _result(runs, ["cpu-xs"]).targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]["time_saving_pct"]
    assert single["timing_rounds"] == 1 and "no timing spread" in single["definition"]
    ratio = _result(runs, ["cpu-xs"]).targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]["steps_to_target_ratio"]
    assert single["lo"] == pytest.approx(100 * (1 - ratio["hi"] * 0.5))  # one round: the old, seeds-only interval


def test_the_saving_states_what_the_study_could_detect() -> None:
    """Power from the observed spread: with seed logs of sd s and n=3 (no timing spread), the detectable log effect
    is (t(0.975, 2) + t(0.80, 2)) x s / sqrt(3); the seeds needed for 10 % are the first n where that falls to
    -log(0.9). A study with 1.5x the spread needs more seeds."""
    from scipy import stats as st

    from scaling.rungs import _time_saving

    logs = [math.log(x) for x in (1.22, 1.06, 1.40)]
    out = _time_saving(logs, None, 0.79)
    sd = statistics.stdev(logs)
    delta = (st.t.ppf(0.975, 2) + st.t.ppf(0.8, 2)) * sd / math.sqrt(3)
    assert out["detectable_pct"] == pytest.approx(100 * (1 - math.exp(-delta)), rel=1e-9)
    n = out["seeds_for_10pct"]
    at = lambda m: (st.t.ppf(0.975, m - 1) + st.t.ppf(0.8, m - 1)) * sd / math.sqrt(m)  # noqa: E731
    assert at(n) <= -math.log(0.9) < at(n - 1)
    wider = _time_saving([1.5 * v - 0.5 * statistics.fmean(logs) for v in logs], None, 0.79)
    assert wider["seeds_for_10pct"] > n and wider["detectable_pct"] > out["detectable_pct"]
    # timing rounds whose spread alone exceeds 10 % leave no seed count that detects it
    noisy = _time_saving(logs, {"log_ratios": [-0.5, 0.4, -0.3, 0.2]}, 0.79)
    assert noisy["seeds_for_10pct"] is None


def test_seeds_that_never_reach_are_censored_not_dropped_and_early_crossings_are_flagged() -> None:
    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)]
    # adamw ends at 180 and never reaches 150: censored at its last checkpoint (24), not dropped.
    rung = _result(runs, ["cpu-xs"], target={"rule": "fixed", "values": {"cpu-xs": 150.0}}).targets()["rungs"][
        "cpu-xs"]
    restricted = rung["comparisons"]["adamw"]["steps_to_target_ratio_restricted"]
    assert restricted["seeds_censored"] == {"periodic": 0, "adamw": 3} and restricted["n"] == 3
    # periodic crosses 150 at step 18.75 (FD 300 - 8 s, interpolated); adamw counts at 24 on every seed
    assert restricted["mean"] == pytest.approx(18.75 / 24)
    assert "not a measurement" in restricted["definition"]
    # a target every arm is already below at the first tracking point (step 2: FD 284, 280, 290)
    early = _result(runs, ["cpu-xs"], target={"rule": "fixed", "values": {"cpu-xs": 295.0}}).targets()["rungs"][
        "cpu-xs"]
    assert early["arms"]["periodic"]["left_censored"] == 3 and early["arms"]["adamw"]["left_censored"] == 3
    vs_muon = early["comparisons"]["muon"]
    assert vs_muon["status"] == "ok" and vs_muon["left_censored_seeds"] == 3
    assert "crossed the target at the first tracking point" in vs_muon["note"]


def test_the_ratio_is_drawn_against_the_target_level() -> None:
    """Periodic's FD falls by 8 per step and Muon's by 10 from the same start, so wherever both reach a level the
    steps ratio is 10/8 = 1.25; levels below periodic's final FD are reached by Muon alone (no ratio, n=0). The
    grid runs from the best arm's mean final FD (Muon's 60) to 1.5 x the worst's (AdamW's 180: 270)."""
    result = _result([_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)], ["cpu-xs"])
    sens = result.targets()["rungs"]["cpu-xs"]["sensitivity"]
    assert sens["levels"][0] == pytest.approx(60.0) and sens["levels"][-1] == pytest.approx(270.0)
    rows = sens["comparisons"]["muon"]
    assert len(rows) == len(sens["levels"]) == 12
    for row in rows:
        if row["target"] < 108.0:  # periodic ends at 300 - 8 x 24 = 108
            assert row["seeds_both_reached"] == 0 and row["ratio"] is None
        else:
            assert row["seeds_both_reached"] == 3 and row["ratio"]["mean"] == pytest.approx(1.25, rel=1e-9)
    from dashboards._targets import targets_html

    html = targets_html(result.target_summary(n_boot=0))
    assert "against where the target is drawn" in html and "60: — (n=0)" in html and "270: 1.25" in html
    # and drawn: the figure's muon line is the ratio at every level both reached, 1.25 throughout
    from dashboards._report import ReportData, build_report, report_figures

    summary = result.target_summary(n_boot=0)
    figure = report_figures(ReportData(targets=summary))["target_sensitivity"]
    (line,) = [ln for ln in figure.axes[0].get_lines() if ln.get_label() == "periodic / muon"]
    xs, ys = line.get_data()
    assert min(xs) >= 108.0 and len(xs) == sum(r["seeds_both_reached"] == 3 for r in rows)
    assert list(ys) == pytest.approx([1.25] * len(ys), rel=1e-9)
    assert 'id="target_sensitivity"' in build_report(ReportData(targets=summary))


def test_the_comparisons_of_every_rung_are_corrected_together() -> None:
    runs = [_run(g, a, s, jitter=1.0 + 0.1 * s) for g in ("cpu-xs", "cpu-s") for a in ARMS for s in (0, 1, 2)]
    runs = [r if r.arm != "periodic" else _jittered_steps(r, 1.0 + 0.05 * r.seed) for r in runs]
    report = _result(runs, ["cpu-xs", "cpu-s"]).targets()
    family = report["multiplicity"]
    assert family["method"] == "Holm" and family["steps_to_target_ratio"]["comparisons"] == 4
    from scaling.stats import holm_rejections

    docs = {(g, b): report["rungs"][g]["comparisons"][b]["steps_to_target_ratio"]
            for g in ("cpu-xs", "cpu-s") for b in ("muon", "adamw")}
    _, expected = holm_rejections({k: d["p_value"] for k, d in docs.items()}, 0.05)
    for key, doc in docs.items():
        assert 0 <= doc["p_value"] <= doc["p_holm"] <= 1 and doc["p_holm"] == pytest.approx(expected[key])
        assert doc["rejected"] == (doc["p_holm"] <= 0.05)
    assert sorted(family["steps_to_target_ratio"]["rejected"]) == sorted(
        f"{g} vs {b}" for (g, b), d in docs.items() if d["rejected"])
    assert "Holm p" in _result(runs, ["cpu-xs", "cpu-s"]).table()


def test_under_the_null_holm_keeps_a_false_claim_anywhere_in_the_tables_at_most_5_percent() -> None:
    """Six comparisons (three rungs x two baselines), three seeds each, no true difference: how often does any
    comparison claim one? Uncorrected about 1 - 0.95^6 = 26 %; Holm at most 5 %."""
    import random

    from scaling.rungs import correct_across_rungs
    from scaling.stats import t_interval, t_p_value

    rng = random.Random(3)
    studies, any_raw, any_holm = 2000, 0, 0
    for _ in range(studies):
        rungs: dict[str, Any] = {}
        raw = False
        for g in ("cpu-xs", "cpu-s", "cpu-m"):
            comps = {}
            for b in ("muon", "adamw"):
                logs = [rng.gauss(0.0, 0.2) for _ in range(3)]
                p = t_p_value(t_interval(logs))
                raw |= p <= 0.05
                comps[b] = {"steps_to_target_ratio": {"p_value": p}}
            rungs[g] = {"comparisons": comps}
        any_raw += raw
        any_holm += bool(correct_across_rungs(rungs)["steps_to_target_ratio"]["rejected"])
    assert 0.20 < any_raw / studies < 0.32
    assert any_holm / studies <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / studies)


def test_a_transfer_on_the_seeds_that_selected_says_so_and_one_on_fresh_seeds_does_not() -> None:
    from dataclasses import replace

    runs = [_run("cpu-xs", a, s) for a in ARMS for s in (0, 1, 2)]
    result = _result(runs, ["cpu-xs"])
    assert result.seeds_note is None  # the sweep's seeds were not recorded: nothing to say
    overlapping = replace(result, source={"sweep_id": "s-1", "selection_seeds": [0, 1, 2]})
    assert overlapping.seeds_note is not None and "seeds [0, 1, 2], which also selected" in overlapping.seeds_note
    assert "NOTE: the transfer runs on seeds [0, 1, 2]" in overlapping.table()
    assert overlapping.analysis(n_boot=50)["seeds_note"] == overlapping.seeds_note
    fresh = replace(result, source={"sweep_id": "s-1", "selection_seeds": [3, 4, 5]})
    assert fresh.seeds_note is None and "NOTE:" not in fresh.table()
