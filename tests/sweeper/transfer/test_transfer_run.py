"""A real transfer end to end: a tiny sweep (one point and AdamW; real Ray, real MLflow SQLite, real torch), then
its chosen pair carried to three CPU rungs beside AdamW and vanilla Muon, read back, fitted, exported, resumed and
driven from the CLI. One sweep and one transfer, shared by the module."""

from __future__ import annotations

import io
import json
import math
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from mlflow import MlflowClient

from scalesweep_cli import main
from scaling.export import Export
from sweeper import run_sweep
from sweeper.transfer import (
    TransferError,
    TransferResult,
    cancel_transfer,
    export_from_sweep,
    load_transfer_result,
    run_transfer,
    transfer_status,
)

from ..conftest import TINY_TRIAL

RUNGS = ["cpu-xs", "cpu-s", "cpu-m"]
WIDTH = {"cpu-xs": 64, "cpu-s": 96, "cpu-m": 128}
ADAMW_LR = 0.004  # the sweep's AdamW baseline lr, so the width rule has something other than the default to carry


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    import ray

    from trials import ensure_store

    root = tmp_path_factory.mktemp("transfer")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    ensure_store(uri, "setup")
    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False)
    try:
        sweep_dir = root / "sweep"
        sweep = run_sweep({
            "name": "tiny-sweep",
            "rung": "cpu-xs",
            "horizon": 6,
            "search": {"space": {"K": [3], "gamma": [0.25]}},
            # AdamW with its own lr; no Muon baseline in the sweep: the transfer then takes Muon's defaults
            "baselines": [{"arm": "adamw", "optimizer": {"lr": ADAMW_LR}}],
            "backend": {"name": "builtin", "checkpoints": False},  # nothing to resume here: skip the saves
            "execution": {"concurrency": 2, "num_cpus": 2},
            "trial": {**json.loads(json.dumps(TINY_TRIAL)), "batch_size": 8},
            "tracking": {"tracking_uri": uri, "experiment": "study"},
        }, workdir=sweep_dir)
        assert sweep.state == "SUCCEEDED"
        # fewer FD samples than the sweep's 96 (still above the 48-d pixel features), and dense tracking (12 points,
        # the default; the tiny trial's is 4): merged into its `trial`
        spec = {"name": "tiny-transfer", "sweep": str(sweep_dir), "rungs": RUNGS,
                "trial": {"eval": {"fd_samples": 64, "track_points": 12}},
                # The isolated timing method (the interleaved one is test_controls_... below): two timing rounds
                # (what the paired ratio needs) of 4 timed steps after 1 warm-up, not the default 20 after 5: the
                # stage runs its 18 short trials one after another before the runs start, and took about a minute
                # at the default on a shared 2-core machine. What is checked (the rounds, their pairing, the
                # medians) does not depend on how long each round is.
                "timing": {"method": "isolated", "steps": 4, "warmup": 1, "repeats": 2}}
        spec_path = root / "transfer.yaml"
        spec_path.write_text(yaml.safe_dump(spec))
        transfer_dir = root / "transfer"
        progress = io.StringIO()
        result = run_transfer(spec, workdir=transfer_dir, show_progress=True, stream=progress)
        yield {"progress": progress.getvalue(), "uri": uri, "sweep": sweep, "sweep_dir": sweep_dir, "spec": spec,
               "spec_path": spec_path, "dir": transfer_dir, "result": result, "root": root}
    finally:
        ray.shutdown()


def _children(uri: str, transfer_id: str) -> list[Any]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("study")
    return client.search_runs([exp.experiment_id], f"tags.`scalesweep.transfer_id` = '{transfer_id}' and "
                              "tags.`scalesweep.kind` = 'trial'", max_results=1000)


def test_runs_carry_the_pair_the_lr_rules_the_horizon_and_the_lineage(case: dict[str, Any]) -> None:
    result: TransferResult = case["result"]
    sweep = case["sweep"]
    assert result.state == "SUCCEEDED" and result.counts == {"SUCCEEDED": 9}
    assert sorted((r.rung, r.arm) for r in result.runs) == sorted((g, a) for g in RUNGS
                                                                  for a in ("periodic", "muon", "adamw"))
    assert result.chosen == {"K": 3, "gamma": 0.25} and result.plan["horizon"] == 12  # 2 x the sweep's 6
    assert result.plan["eval_steps"] == [8, 10, 12]  # the sweep's 4/5/6 at the same fractions
    for run in result.runs:
        assert run.seed == 0 and [c[0] for c in run.checkpoints] == [8, 10, 12]
        assert all(t > 0 and f > 0 for _, t, f in run.checkpoints)
        ratio = WIDTH["cpu-xs"] / WIDTH[run.rung]
        if run.arm == "adamw":
            assert run.lr_rule == "width" and run.lr_base == pytest.approx(ADAMW_LR)
            assert run.lr == pytest.approx(ADAMW_LR * ratio, rel=1e-6)
        else:
            assert run.lr_rule == "unchanged" and run.lr == pytest.approx(0.02)
        if run.arm == "periodic":
            assert (run.K, run.gamma) == (3, 0.25)
    sizes = [result.parameters(r) for r in RUNGS]
    assert sizes == sorted(sizes) and len(set(sizes)) == 3

    client = MlflowClient(case["uri"])
    children = _children(case["uri"], result.transfer_id)
    assert len(children) == 9
    parent = client.get_run(result.parent_run_id)
    for run in [parent, *children]:
        t = run.data.tags
        assert t["scalesweep.transfer_name"] == "tiny-transfer"
        assert t["scalesweep.source_sweep_id"] == sweep.sweep_id
        assert t["scalesweep.source_sweep_name"] == "tiny-sweep"
        assert t["scalesweep.source_parent_run_id"] == sweep.parent_run_id
        assert json.loads(t["scalesweep.transfer.chosen"]) == {"K": 3, "gamma": 0.25}
    for run in children:
        assert run.data.tags["mlflow.parentRunId"] == result.parent_run_id
        assert run.data.params["steps"] == "12" and run.data.tags["scalesweep.base_rung"] == "cpu-xs"
        assert run.data.params["rung"] in RUNGS
    assert {r.info.run_name for r in children} >= {"K=3,gamma=0.25,seed=0", "adamw.cpu-m,seed=0"}

    # progress: the plan with each lr and its rule, one line per run event, the savings at the end
    lines = case["progress"].splitlines()
    assert lines[0].startswith(f"transfer {result.transfer_id}: {{'K': 3, 'gamma': 0.25}} from sweep {sweep.sweep_id}")
    assert any("cpu-m" in line and "adamw" in line and "(width from 0.004)" in line for line in lines)
    assert sum("done" in line and ",seed=0" in line for line in lines) == 9
    assert "time to best saved by periodic" in case["progress"]


def test_time_to_best_savings_fits_and_analysis(case: dict[str, Any]) -> None:
    result: TransferResult = case["result"]
    ttb = result.time_to_best()
    assert set(ttb) == {r.run_id for r in result.runs}
    for run in result.runs:
        t = ttb[run.run_id]
        assert t.best_fd == min(f for _, _, f in run.checkpoints)
        assert t.best_time_s == next(tt for _, tt, f in run.checkpoints if f == t.best_fd)
    sav = result.savings()
    assert set(sav) == set(RUNGS) and all(set(per) == {"muon", "adamw"} for per in sav.values())
    for rung, per in sav.items():
        p = next(ttb[r.run_id].best_time_s for r in result.runs if r.rung == rung and r.arm == "periodic")
        m = next(ttb[r.run_id].best_time_s for r in result.runs if r.rung == rung and r.arm == "muon")
        assert per["muon"].mean_pct == pytest.approx(100 * (m - p) / m) and per["muon"].std_pct is None

    fit = result.fits("time_to_best", n_boot=20)
    assert set(fit.arms) == {"periodic", "muon", "adamw"} and fit.form == "A*N^-alpha"
    assert all(fit.sizes[a] == tuple(float(result.parameters(r)) for r in RUNGS) for a in fit.arms)
    point, _, _ = result.predict("periodic", "cpu-s", n_boot=20)
    assert point == pytest.approx(fit.predict("periodic", result.parameters("cpu-s"))[0])

    doc = result.analysis(n_boot=20)
    json.dumps(doc, allow_nan=False)  # JSON-able, no NaN
    assert doc["chosen"] == {"K": 3, "gamma": 0.25} and doc["metric_name"] == "fd_pixels"
    assert doc["fd_samples"] == 64 and len(doc["runs"]) == 9
    assert set(doc["fits"]) == {"time_to_best", "best_fd", "endpoint_fd", "steps_to_target", "time_to_target"}
    # Each rung's target from its own AdamW (final_mean): steps to target fitted per level, the headline level's
    # fit in place; time to target not fitted across the rungs' different targets.
    assert result.targets_differ()
    levels = doc["fits"]["steps_to_target"]["levels"]
    assert len(levels["levels"]) == 3 and doc["fits"]["steps_to_target"]["target_level"] == levels["headline"]
    assert doc["fits"].pop("time_to_target")["error"].startswith("the rungs' targets differ")
    for metric, f in doc["fits"].items():
        assert set(f["arms"]) == {"periodic", "muon", "adamw"}, metric
        assert {"params", "intervals", "loo_error"} <= set(f["arms"]["muon"])
    assert doc["savings"]["cpu-s"]["adamw"]["n"] == 1


def test_target_is_declared_before_the_runs_and_every_run_is_tracked_and_timed(case: dict[str, Any]) -> None:
    result: TransferResult = case["result"]
    declared = {"rule": "final_mean", "arm": "adamw", "slack": 0.1, "values": {}}
    assert result.plan["target"] == declared
    client = MlflowClient(case["uri"])
    parent = client.get_run(result.parent_run_id)
    # Set when the parent run is created, before the driver launches any trial; every child carries it too.
    assert json.loads(parent.data.tags["scalesweep.transfer.target"]) == declared
    assert json.loads(parent.data.tags["scalesweep.transfer.horizons"]) == dict.fromkeys(RUNGS, 12)
    children = _children(case["uri"], result.transfer_id)
    assert min(c.info.start_time for c in children) >= parent.info.start_time
    assert all(json.loads(c.data.tags["scalesweep.transfer.target"]) == declared for c in children)
    # Per-step time in isolation: one short timing run per arm and rung, before the runs.
    timing = result.step_timing
    assert timing["measured"] and set(timing["seconds_per_step"]) == set(RUNGS)
    assert all(set(per) == {"periodic", "muon", "adamw"} and all(t > 0 for t in per.values())
               for per in timing["seconds_per_step"].values())
    assert "timing 4 steps per arm and rung" in case["progress"]
    for run in result.runs:  # dense tracking: 12 points from 4 (1/3 of 12) to 12, plus the eval steps
        assert [s for s, _, _ in run.track] == [4, 5, 6, 7, 8, 9, 10, 11, 12] and run.horizon == 12
    report = result.targets()
    for rung in RUNGS:
        e = report["rungs"][rung]
        assert e["curve"] == "fd_track" and e["horizon"] == 12
        adamw_final = statistics.fmean(r.track[-1][2] for r in result.runs if r.rung == rung and r.arm == "adamw")
        assert e["target"] == pytest.approx(1.1 * adamw_final)
        assert e["arms"]["adamw"]["reached"] == 1  # its own final value is below 1.1 x itself
        rounds = timing["seconds_per_step_runs"][rung]
        assert len(rounds["periodic"]) == len(rounds["muon"]) == 2  # two timing rounds, paired by round
        assert timing["seconds_per_step"][rung]["muon"] == pytest.approx(statistics.median(rounds["muon"]))
        assert e["comparisons"]["muon"]["step_time_ratio"] == pytest.approx(math.sqrt(
            rounds["periodic"][0] / rounds["muon"][0] * rounds["periodic"][1] / rounds["muon"][1]))
        assert e["comparisons"]["muon"]["step_time_ratio_interval"]["n"] == 2
    export = result.export("cpu-m")
    assert export.provenance["target_rule"] == declared and export.provenance["horizons"] == dict.fromkeys(RUNGS, 12)
    assert "against the target declared before the runs" in result.table()


def test_controls_are_trained_timed_interleaved_and_judged_first(case: dict[str, Any], tmp_path: Path) -> None:
    # One rung, two seeds (a control needs a spread to be judged), the three controls, the interleaved timing at a
    # per-rank local batch: 12 runs of 12 steps and 5 timed rounds of 3-step blocks per arm.
    spec = {"name": "tiny-controls", "sweep": str(case["sweep_dir"]), "rungs": ["cpu-xs"], "seeds": [0, 1],
            "controls": ["negative", "positive", "steps"], "control_stretch": 3,
            "trial": {"eval": {"fd_samples": 64, "track_points": 4}},
            "timing": {"rounds": 2, "warmup_rounds": 1, "local_batch": 4}}
    progress = io.StringIO()
    result = run_transfer(spec, workdir=tmp_path / "controls", show_progress=True, stream=progress)
    assert result.state == "SUCCEEDED" and result.counts == {"SUCCEEDED": 12}
    by = {(r.arm, r.seed): r for r in result.runs}
    controls = ("muon_twin", "muon_extra_ns", "muon_stretched")
    assert set(by) == {(a, s) for a in ("periodic", "muon", "adamw", *controls) for s in (0, 1)}
    for seed in (0, 1):  # each control on a data order of its own (control_data_order: other, the default): no
        # two controls train one run, and none is Muon's run on that seed
        curves = {a: [f for _, _, f in by[a, seed].track] for a in ("muon", *controls)}
        assert len({tuple(c) for c in curves.values()}) == 4, curves
    # The steps control ran its null steps: a null step after every 3rd, 9 updates in its 12 steps.
    assert result.plan.controls["steps"] == {"arm": "muon_stretched", "against": "muon", "data_order": "other",
                                             "order_seed_offset": 3_000_009, "stretch": 3,
                                             "expected_steps_ratio": 0.75}
    timing = result.step_timing
    assert timing["method"] == "interleaved" and timing["clock"] == "thread" and timing["local_batch"] == 4
    digest = timing["rungs"]["cpu-xs"]
    assert (digest["block_steps"], digest["rounds"], digest["local_batch"], digest["reference"]) == (3, 6, 4, "muon")
    assert set(timing["seconds_per_step_runs"]["cpu-xs"]) == set(digest["arms"]) == {a for a, _ in by}
    assert all(len(v) == 6 and min(v) > 0 for v in timing["seconds_per_step_runs"]["cpu-xs"].values())
    assert 0 < digest["expected_step_time_ratio"]["muon_extra_ns"] < 1  # the redundant work costs something
    assert "interleaved in one process per rung" in progress.getvalue()

    doc = result.analysis(n_boot=0)
    json.dumps(doc, allow_nan=False)
    controls_doc = doc["controls"]
    # every control judged at the level the strongest claim must pass (2 comparisons, one look: 0.025)
    assert controls_doc["alpha"] == pytest.approx(doc["claims"]["budget"]["first_step"]) == pytest.approx(0.025)
    for kind in ("negative", "positive", "steps"):
        outcome = controls_doc[kind]["rungs"]["cpu-xs"]
        assert outcome["checks"] or outcome["judged"] is False  # judged, or said why not
    positive = controls_doc["positive"]["comparisons"]["cpu-xs"]["first"]["time_saving_pct"]
    assert positive["step_time_ratio"]["mean"] < 1 and positive["step_time_ratio"]["rounds"] == 6
    comp = doc["targets"]["rungs"]["cpu-xs"]["comparisons"]["muon"]
    assert {"first", "steps_above", "sustained"} <= set(comp)
    assert set(comp["sustained"]["censoring"]) == set(comp["steps_above"]["censoring"]) == {"periodic", "muon"}
    lines = result.table().splitlines()
    first_line = ("POSITIVE CONTROL " if not controls_doc["positive"]["passed"] else
                  "STEPS CONTROL " if not controls_doc["steps"]["passed"] else "negative control (muon_twin")
    assert lines[0].startswith(first_line)
    assert any(line.startswith("steps control (muon_stretched against muon): ") for line in lines[:6])
    assert "muon_twin" not in doc["fits"]["time_to_best"].get("arms", {})

    # The raw records a study keeps in the repository: the analysis read back from them is the same, number for
    # number, with no MLflow store named (nothing to open).
    from sweeper.transfer._records import read_transfer_records

    records = tmp_path / "records"
    assert main(["transfer", "records", str(tmp_path / "controls"), "--out", str(records)]) == 0
    assert sorted(p.name for p in records.iterdir()) == ["curves.csv", "runs.csv", "transfer_record.json"]
    again = read_transfer_records(records)
    assert again.tracking_uri == "" and again.runs == result.runs and again.step_timing == result.step_timing
    assert json.dumps(again.analysis(n_boot=0), sort_keys=True) == json.dumps(doc, sort_keys=True)
    assert again.table() == result.table()
    assert main(["fit", str(records), "--json", "--n-boot", "0"]) == 0


def test_a_pilot_trained_before_the_judged_runs_sets_one_target_for_every_rung(case: dict[str, Any]) -> None:
    # Two rungs, two arms, the sweep's seed 0 judged; AdamW's pilot at cpu-xs for 2 x the 12-step horizon on seeds
    # 5 and 6 with 8 tracking points: 2 pilot runs of 24 steps, then 4 judged runs of 12.
    pilot = {"horizon_factor": 2, "seeds": [5, 6], "points": 8}
    spec = {"name": "tiny-pilot", "sweep": str(case["sweep_dir"]), "rungs": ["cpu-xs", "cpu-s"],
            "arms": ["periodic", "adamw"], "target": {"rule": "pilot", "pilot": pilot}, "timing": {"steps": 0},
            "trial": {"eval": {"fd_samples": 64, "track_points": 4}}}
    progress = io.StringIO()
    result = run_transfer(spec, workdir=case["root"] / "pilot", show_progress=True, stream=progress)
    assert result.state == "SUCCEEDED" and result.counts == {"SUCCEEDED": 4}
    client = MlflowClient(case["uri"])
    exp = client.get_experiment_by_name("study")
    pilot_runs = client.search_runs([exp.experiment_id], f"tags.`scalesweep.transfer.pilot_of` = "
                                    f"'{result.transfer_id}' and tags.`scalesweep.kind` = 'trial'")
    assert sorted(int(r.data.params["seed"]) for r in pilot_runs) == [5, 6]
    assert all(r.data.params["steps"] == "24" and r.data.params["optimizer.name"] == "adamw" for r in pilot_runs)
    # The plateau quality from the recorded curves: each seed's mean tracking FD over steps >= 16 (the last third).
    tails = []
    for run in pilot_runs:
        history = client.get_metric_history(run.info.run_id, "fd_track")
        assert len(history) >= 8  # dense enough to see the plateau
        tails.append(statistics.fmean(m.value for m in history if m.step >= 16))
    derived = result.plan.pilot["result"]
    assert derived["value"] == pytest.approx(1.1 * statistics.fmean(tails), rel=1e-12)
    assert sorted(derived["run_ids"]) == sorted(r.info.run_id for r in pilot_runs)
    report = result.targets()
    assert report["target_values"] == {"cpu-xs": derived["value"], "cpu-s": derived["value"]}
    assert report["targets_differ"] is False and report["pilot"]["result"]["plateaued"] is derived["plateaued"]
    assert (report["pilot"].get("flag") is None) is derived["plateaued"]  # a pilot still falling is flagged
    # Never among the judged arms: not read back as the transfer's runs, not fitted.
    assert {r.run_id for r in result.runs}.isdisjoint(derived["run_ids"])
    assert {(r.arm, r.seed) for r in result.runs} == {(a, 0) for a in ("periodic", "adamw")}
    assert {c.info.run_id for c in _children(case["uri"], result.transfer_id)}.isdisjoint(derived["run_ids"])
    # Recorded before the judged runs: on the parent run from its creation, after the pilot ended.
    parent = client.get_run(result.parent_run_id)
    tag = json.loads(parent.data.tags["scalesweep.transfer.pilot"])
    assert tag["value"] == derived["value"] and tag["run_ids"] == derived["run_ids"]
    assert tag["plateaued"] is derived["plateaued"]
    assert parent.info.start_time >= max(r.info.end_time for r in pilot_runs)
    assert min(c.info.start_time for c in _children(case["uri"], result.transfer_id)) >= parent.info.start_time
    assert "pilot: plateau quality" in progress.getvalue()
    doc = result.analysis(n_boot=0)
    assert doc["targets"]["pilot"]["result"]["value"] == derived["value"]
    assert doc["fits"]["steps_to_target"]["target_values"] == report["target_values"]

    pilot_status = transfer_status(case["root"] / "pilot")["pilot"]
    assert pilot_status["state"] == "SUCCEEDED" and pilot_status["target"] == derived["value"]

    # Resumed: the finished pilot is reused as it was recorded, nothing runs again.
    again = run_transfer(spec, workdir=case["root"] / "pilot", resume=True)
    assert again.plan.pilot["result"] == derived and again.runs == result.runs
    assert len(client.search_runs([exp.experiment_id], f"tags.`scalesweep.transfer.pilot_of` = "
                                  f"'{result.transfer_id}'")) == len(pilot_runs) + 1  # the trials and their parent
    with pytest.raises(ValueError, match=r"target.pilot.seeds must be disjoint"):  # the sweep's seeds, [0]
        run_transfer({**spec, "name": "tiny-pilot-bad", "seeds": None,
                      "target": {"rule": "pilot", "pilot": {"seeds": [0]}}}, workdir=case["root"] / "pilot-bad")


def test_a_transfer_with_one_rung_on_two_workers_times_each_rung_at_its_count(case: dict[str, Any],
                                                                             tmp_path: Path) -> None:
    """`execution.workers_per_trial: 2` with `rungs: {cpu-xs: {workers: 1}, cpu-s: null}`: cpu-s's runs take the
    execution section's 2 ranks (FSDP2 on a placement group of 2 bundles each, beside 1-bundle trials in the same
    Tune run) and cpu-xs's its own count, one process; the timing stage times cpu-xs's step in one process and
    cpu-s's on 2 gloo ranks, and each rung's per-step ratio says which it is. What the stage counted each rank
    sending per step equals, to the byte, what each 2-rank run's training logged (comm_bytes_per_step): the timed
    step communicates exactly as the trained one does. The horizons are per parameter, so each rung also trains
    its own number of steps.

    One transfer for what were three, each a Tune run of its own (seconds in the full run at d56d647): one on 2
    workers at every rung (38 s), one with the count set per rung (68 s) and one with per-parameter horizons (34 s;
    its checks of `timing.steps: 0` are in the rounds test below, which times nothing)."""
    from sweeper.transfer._timing import _where_timed

    spec = {"name": "tiny-rung-workers", "sweep": str(case["sweep_dir"]), "seeds": [0],
            "rungs": {"cpu-xs": {"workers": 1}, "cpu-s": None},
            "execution": {"workers_per_trial": 2, "num_cpus": 2},
            # cap 18, not the 30 the horizons' test first had: cpu-s still runs into it (its per-parameter horizon
            # is about 36), and its three runs train 12 steps fewer each
            "horizon": {"mode": "per_param", "images_per_param": 3e-4, "cap": 18, "min_steps": 6},
            "trial": {"eval": {"fd_samples": 64, "track_points": 4}}, "timing": {"rounds": 2, "warmup_rounds": 1}}
    progress = io.StringIO()
    result = run_transfer(spec, workdir=tmp_path / "rung-workers", show_progress=True, stream=progress)
    assert result.state == "SUCCEEDED" and result.counts == {"SUCCEEDED": 6}
    assert result.plan["workers_by_rung"] == {"cpu-xs": 1}  # the rung's own count; cpu-s runs on execution's
    timing = result.step_timing
    assert timing["workers"] == {"cpu-xs": 1, "cpu-s": 2}
    one, two = timing["rungs"]["cpu-xs"], timing["rungs"]["cpu-s"]
    assert one.get("workers", 1) == 1 and "comm_bytes_per_step" not in one  # one process: nothing sent
    assert (two["workers"], two["cpu_clock"], two["batch_size"], two["local_batch"]) == (2, "process", 8, 4)
    assert "interleaved in one process at cpu-xs, on 2 gloo ranks at cpu-s (" in progress.getvalue()
    # the same progress line where every rung runs on one count (the line above is the mixed form of this)
    assert _where_timed({"cpu-xs": 2, "cpu-s": 2}) == "on 2 gloo ranks per rung"
    assert _where_timed({"cpu-xs": 1}) == "in one process per rung"
    # the comparisons say which step their per-step ratio is: at cpu-s the 2-rank one, communication included
    rungs = result.targets()["rungs"]
    assert rungs["cpu-xs"]["comparisons"]["muon"]["step_time_ratio_how"] == "interleaved"
    comp = rungs["cpu-s"]["comparisons"]["muon"]
    assert comp["step_time_ratio_how"] == "interleaved, 2 gloo ranks"
    assert "slowest of 2 gloo ranks' step, communication included" in comp["step_time_ratio_source"]
    assert "(interleaved, 2 gloo ranks)" in result.table()
    client = MlflowClient(case["uri"])
    by_rung: dict[str, list[str]] = {}
    for run in result.runs:
        logged = client.get_run(run.run_id).data
        by_rung.setdefault(run.rung, []).append(run.arm)
        if run.rung == "cpu-xs":
            assert logged.params.get("workers", "1") == "1" and "comm_bytes_per_step_rank1" not in logged.metrics
        else:  # both ranks trained and logged their traffic: the trial had its 2 bundles
            assert logged.params["workers"] == "2" and logged.metrics["comm_bytes_per_step_rank1"] > 0
            assert logged.metrics["comm_bytes_per_step"] == pytest.approx(two["comm_bytes_per_step"][run.arm],
                                                                          rel=1e-9), run.arm
    assert {r: sorted(a) for r, a in by_rung.items()} == {r: ["adamw", "muon", "periodic"] for r in ("cpu-xs", "cpu-s")}

    # Per-parameter horizons. cpu-xs: 3e-4 x its parameters (about 0.28M on this study's size basis) / batch 8 = 11
    # steps; cpu-s: about 36, capped at 18. Eval steps at the sweep's fractions (4, 5, 6 of 6) of each rung's own
    # horizon.
    xs = round(3e-4 * result.parameters("cpu-xs") / 8)
    assert 6 <= xs < 18 and result.plan["horizons"] == {"cpu-xs": xs, "cpu-s": 18}
    want = {"cpu-xs": (xs, sorted({round(s * xs / 6) for s in (4, 5, 6)})), "cpu-s": (18, [12, 15, 18])}
    for run in result.runs:
        assert (run.horizon, [c[0] for c in run.checkpoints]) == want[run.rung]
        assert run.track[-1][0] == want[run.rung][0]
    assert rungs["cpu-s"]["horizon"] == 18
    doc = result.analysis(n_boot=0)
    assert doc["horizons"] == {"cpu-xs": xs, "cpu-s": 18} and doc["horizon_rule"]["mode"] == "per_param"
    json.dumps(doc, allow_nan=False)


def test_seeds_added_in_rounds_until_shown_or_the_budget_is_spent(case: dict[str, Any]) -> None:
    # One rung, one seed to start, one seed per round up to 2: looks after 1 and 2 seeds, each at 0.05 / 2 (each
    # round is a Ray Tune run of its own; with a third round up to 3 seeds this test took 51 s, with two 43 s).
    # Two arms, the chosen pair and the one the rule compares it against (whose final quality is then the target):
    # each round's runs are one pair that the Tune run's two slots train at once, where AdamW's third run of each
    # round was a second wave (55 s in the full run at d56d647 with three arms).
    rule = {"against": "muon", "measure": "steps_to_target_ratio", "add": 1, "max_seeds": 2}
    spec = {"name": "tiny-rounds", "sweep": str(case["sweep_dir"]), "rungs": ["cpu-xs"], "seeds": [0],
            "arms": ["periodic", "muon"], "target": {"rule": "final_mean", "arm": "muon"},
            "rounds": rule, "timing": {"steps": 0}, "trial": {"eval": {"fd_samples": 64, "track_points": 4}}}
    progress = io.StringIO()
    result = run_transfer(spec, workdir=case["root"] / "rounds", show_progress=True, stream=progress)
    assert result.state == "SUCCEEDED"
    # timing.steps 0: nothing timed, so no per-step ratio and no time saving, only steps
    assert result.step_timing == {"measured": False, "reason": "timing.steps is 0"}
    against = result.targets()["rungs"]["cpu-xs"]["comparisons"]["muon"]
    assert against["step_time_ratio"] is None and "time_saving_pct" not in against
    rounds = result.plan.rounds
    looks = rounds["looks"]
    assert rounds["rung"] == "cpu-xs" and rounds["initial_seeds"] == [0] and rounds["looks_planned"] == 2
    # the sweep chose on seed 0, so the added seed is fresh: 1
    # one seed cannot stop it (no interval); at 2 seeds it stops, shown or with the budget spent
    assert [look["seeds"] for look in looks] == [[0], [0, 1]]
    assert looks[0]["p_value"] is None and not looks[0]["stop"] and looks[0]["alpha_per_look"] == 0.05 / 2
    last = looks[-1]
    assert last["stop"] and (last["reason"].startswith("budget spent: 2 of max_seeds 2")
                             or last["p_value"] < 0.05 / 2)
    seeds = last["seeds"]
    assert result.plan.seeds == seeds
    # every arm ran once per seed, all in the transfer's one MLflow parent run
    assert result.counts == {"SUCCEEDED": 2 * len(seeds)}
    assert sorted((r.arm, r.seed) for r in result.runs) == sorted((a, s) for a in ("muon", "periodic") for s in seeds)
    assert len({r.data.tags["mlflow.parentRunId"] for r in _children(case["uri"], result.transfer_id)}) == 1
    text = progress.getvalue()
    assert text.count("rounds: look ") == len(looks) and "rounds: adding seeds [1]" in text
    assert "seeds added in rounds:" in result.table() and result.analysis(n_boot=0)["rounds"]["looks"] == looks

    # A restart after a round's seeds were recorded but before they ran: the resume adds them to the sweep and runs
    # only them, then looks again (past the budget now: it stops).
    state = json.loads((case["root"] / "rounds" / "transfer.json").read_text())
    state["plan"]["seeds"] = state["sweep_spec"]["seeds"] = [*seeds, 7]
    (case["root"] / "rounds" / "transfer.json").write_text(json.dumps(state))
    again = run_transfer(spec, workdir=case["root"] / "rounds", resume=True)
    assert again.state == "SUCCEEDED" and again.counts == {"SUCCEEDED": 2 * len(seeds) + 2}
    assert {r.seed for r in again.runs} == {*seeds, 7}
    assert again.plan.rounds["looks"][-1]["seeds"] == [*seeds, 7] and again.plan.rounds["looks"][-1]["stop"]
    with pytest.raises(ValueError, match=r"rounds\.against 'rownorm' must be one of arms"):
        run_transfer({**spec, "rounds": {**rule, "against": "rownorm"}}, workdir=case["root"] / "rounds-bad")
    with pytest.raises(TransferError, match=r"rounds\.against must be a baseline"):
        run_transfer({**spec, "rounds": {**rule, "against": "periodic"}}, workdir=case["root"] / "rounds-bad")


def test_a_finished_transfer_extended_with_seeds_runs_only_them_and_counts_one_more_look(
        case: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Two arms on one seed, then one seed more: two Tune runs of one pair each (about 20 s in all).
    from sweeper.transfer import extend_transfer

    spec = {"name": "tiny-extend", "sweep": str(case["sweep_dir"]), "rungs": ["cpu-xs"], "seeds": [1],
            "arms": ["periodic", "muon"], "target": {"rule": "final_mean", "arm": "muon"},
            "timing": {"steps": 0}, "trial": {"eval": {"fd_samples": 64, "track_points": 4}}}
    folder = case["root"] / "extend"
    first = run_transfer(spec, workdir=folder)
    assert first.state == "SUCCEEDED" and first.counts == {"SUCCEEDED": 2}
    assert first.claims()["budget"]["looks"] == 1
    before = {r.info.run_id for r in _children(case["uri"], first.transfer_id)}

    # Refused before anything runs, naming the field: a seed lost, another field changed, a seed the sweep chose
    # on (0) or a transfer whose rounds add its own seeds; the transfer in the folder stays as it was.
    for bad, message in (({**spec, "seeds": [2]}, r"seeds: an extension keeps the transfer's seeds \[1\]; \[1\] "),
                         ({**spec, "seeds": [1, 2], "horizon_factor": 3.0}, "horizon_factor changed"),
                         ({**spec, "seeds": [1, 2], "timing": {"steps": 0, "rounds": 3}}, "timing.rounds changed"),
                         ({**spec, "seeds": [1, 0]}, r"seeds: \[0\] are the sweep's selection seeds")):
        with pytest.raises(TransferError, match=message):
            extend_transfer(bad, folder)
    # a transfer with a rounds rule (its state copied here with one; refused before its sweep is read)
    state = json.loads((folder / "transfer.json").read_text())
    rounds = {"against": "muon", "add": 1, "max_seeds": 3}
    state["spec"] = {**state["spec"], "rounds": rounds}
    (tmp_path / "transfer.json").write_text(json.dumps(state))
    with pytest.raises(TransferError, match="rounds: this transfer adds its own seeds"):
        extend_transfer({**spec, "seeds": [1, 2], "rounds": rounds}, tmp_path)
    assert json.loads((folder / "transfer.json").read_text())["plan"]["seeds"] == [1]
    spec_file = tmp_path / "more.yaml"
    spec_file.write_text(yaml.safe_dump({**spec, "seeds": [1, 2]}))
    assert main(["transfer", "extend", str(spec_file), "--workdir", str(tmp_path / "none")]) == 2
    assert "holds no transfer to extend" in capsys.readouterr().err

    # Two extensions at once (two callers on one folder): the driver lock lets one apply it; the other is refused
    # while it is held, or finds the seed added. One extension is recorded either way.
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: _try_extension({**spec, "seeds": [1, 2]}, folder), range(2)))
    assert outcomes.count([2]) == 1 and all(o in ([2], [], "locked") for o in outcomes), outcomes
    assert len(json.loads((folder / "transfer.json").read_text())["plan"]["extensions"]) == 1

    progress = io.StringIO()  # the extension applied, its seed's runs not yet run: this runs them
    extended = extend_transfer({**spec, "seeds": [1, 2]}, folder, show_progress=True, stream=progress)
    assert extended.state == "SUCCEEDED" and extended.transfer_id == first.transfer_id
    assert extended.counts == {"SUCCEEDED": 4} and extended.plan.seeds == [1, 2]
    assert sorted((r.arm, r.seed) for r in extended.runs) == [("muon", 1), ("muon", 2), ("periodic", 1),
                                                              ("periodic", 2)]
    after = {r.info.run_id for r in _children(case["uri"], first.transfer_id)}
    assert before < after and len(after - before) == 2  # the first seed's runs kept, not run again
    [entry] = extended.plan.extensions
    assert entry["seeds_before"] == [1] and entry["added"] == [2]
    # decided after a look at seed 1: the claims' budget divides alpha over two looks now
    assert extended.claims()["budget"]["looks"] == 2
    assert "nothing to add" in progress.getvalue() and "seed=2" in progress.getvalue()
    # the same spec again adds nothing and runs nothing; a plain resume with it is accepted (same fingerprint)
    again = extend_transfer({**spec, "seeds": [1, 2]}, folder)
    assert again.counts == {"SUCCEEDED": 4} and len(again.plan.extensions) == 1
    assert run_transfer({**spec, "seeds": [1, 2]}, workdir=folder, resume=True).state == "SUCCEEDED"


def _try_extension(spec: dict[str, Any], folder: Path) -> list[int] | str:
    from sweeper.transfer import TransferSpec, apply_transfer_extension

    try:
        return apply_transfer_extension(TransferSpec.model_validate(spec), folder)
    except TransferError as exc:
        assert "a driver is already running" in str(exc), exc
        return "locked"


def test_export_round_trips_and_builds_the_optimizer(case: dict[str, Any]) -> None:
    import torch

    from trials.optim import PeriodicRowMuon, build_optimizer

    result: TransferResult = case["result"]
    export = result.export("cpu-m")
    assert all(arm.verified_at_target for arm in export.arms.values())
    assert export.arms["adamw"].optimizer["lr"] == pytest.approx(ADAMW_LR * 64 / 128)
    assert export.arms["periodic"].optimizer["refresh_every"] == 3
    assert export.arms["periodic"].optimizer["gamma"] == 0.25
    assert export.provenance["transfer_id"] == result.transfer_id
    assert export.provenance["sweep_id"] == case["sweep"].sweep_id
    assert len(export.arms["periodic"].evidence["transfer_run_ids"]) == 1
    for text in (export.to_yaml(), export.to_json()):
        assert Export.from_text(text).to_dict() == export.to_dict()
    beyond = result.export("cpu-l")
    assert not any(arm.verified_at_target for arm in beyond.arms.values())

    model = torch.nn.Module()
    model.transformer_blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8)])
    model.head = torch.nn.Linear(8, 2)
    opt = build_optimizer(model, export.optimizer_config("periodic"), block_prefixes=("transformer_blocks",))
    inner = [o for o in getattr(opt, "optimizers", [opt]) if isinstance(o, PeriodicRowMuon)]
    assert inner and inner[0].param_groups[0]["refresh_every"] == 3 and inner[0].param_groups[0]["gamma"] == 0.25

    rules_only = export_from_sweep(case["sweep_dir"], "cpu-m")
    assert not any(arm.verified_at_target for arm in rules_only.arms.values())
    assert rules_only.arms["adamw"].optimizer["lr"] == pytest.approx(export.arms["adamw"].optimizer["lr"])
    with pytest.raises(TransferError, match="transfer's work folder"):
        export_from_sweep(case["dir"], "cpu-m")


def test_resume_runs_nothing_again_and_a_second_start_is_refused(case: dict[str, Any]) -> None:
    result: TransferResult = case["result"]
    before = sorted(r.info.run_id for r in _children(case["uri"], result.transfer_id))
    again = run_transfer(case["spec"], workdir=case["dir"], resume=True)
    assert again.state == "SUCCEEDED" and again.transfer_id == result.transfer_id
    assert sorted(r.info.run_id for r in _children(case["uri"], result.transfer_id)) == before
    with pytest.raises(TransferError, match="already holds transfer"):
        run_transfer(case["spec"], workdir=case["dir"])
    with pytest.raises(TransferError, match="spec changed"):
        run_transfer({**case["spec"], "horizon_factor": 3.0}, workdir=case["dir"], resume=True)
    status = transfer_status(case["dir"])
    assert status["state"] == "SUCCEEDED" and status["driver_alive"] is False
    assert status["counts"]["SUCCEEDED"] == 9 and status["parent_run_id"] == result.parent_run_id
    assert load_transfer_result(case["dir"]).runs == result.runs
    assert cancel_transfer(case["dir"], grace_s=1)["state"] == "SUCCEEDED"  # a finished transfer stays as it ended


def test_cli(case: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = str(case["dir"])
    capsys.readouterr()
    assert main(["transfer", "status", d]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out
    assert main(["fit", d, "--metric", "best_fd", "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "best_fd vs parameter count" in out and "time to best saved by periodic" in out
    assert main(["fit", d, "--json", "--n-boot", "20"]) == 0
    assert json.loads(capsys.readouterr().out)["chosen"] == {"K": 3, "gamma": 0.25}
    out_file = tmp_path / "export.json"
    assert main(["export", d, "--rung", "cpu-s", "--format", "json", "--out", str(out_file)]) == 0
    exported = Export.from_text(out_file.read_text())
    assert exported.arms["adamw"].optimizer["lr"] == pytest.approx(ADAMW_LR * 64 / 96)
    assert main(["export", str(case["sweep_dir"]), "--from-sweep", "--rung", "paper-1.3b"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["target"]["rung"] == "paper-1.3b"

    for argv, needle in [
        (["export", d, "--rung", "cpu-xxl"],
         "--rung: unknown rung 'cpu-xxl'; allowed: ['cpu-3xs', 'cpu-2xs', 'cpu-xs1', 'cpu-xs'"),
        (["export", d, "--rung", "cpu-s", "--format", "xml"], "--format: unknown format 'xml'; allowed: ['yaml'"),
        (["fit", d, "--metric", "fid"], "--metric: unknown metric 'fid'; allowed: ['time_to_best'"),
        (["transfer", "status", str(tmp_path)], "not a transfer work folder"),
        (["transfer", "run", str(case["spec_path"]), "--workdir", d], "already holds transfer"),
    ]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**case["spec"], "lr_rules": {"adamw": "cubic"}, "colour": 1}))
    assert main(["transfer", "run", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "lr_rules.adamw" in err and "'unchanged', 'width' or 'sqrt_width'" in err and "colour" in err
    assert math.isfinite(case["result"].runs[0].checkpoints[0][2])
