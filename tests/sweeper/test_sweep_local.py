"""Sweeps on a real local Ray (2 CPUs, shared by this module): the built-in trainer end to end into MLflow, and the
fake external trainer for failures, retries, divergence, ASHA pruning and TPE with seeds."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient

from scalesweep_cli import main
from sweeper import SweepError, load_sweep_result, run_sweep

from .conftest import fake_backend, make_spec


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """One local Ray for the module (starting one costs 4-8 s); run_sweep reuses an initialised Ray."""
    import ray

    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False)
    yield
    ray.shutdown()


def _runs(uri: str, experiment: str, query: str = "") -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], query, max_results=1000)


def _children(uri: str, experiment: str) -> list:
    return _runs(uri, experiment, "tags.`scalesweep.kind` = 'trial'")


# Stays long (about 50-100 s): five real tiny trials through Ray into MLflow, then a resume and the CLI; the only
# test of the built-in trainer's whole path inside a sweep.
def test_builtin_sweep_end_to_end_into_mlflow(ray_local: None, store_uri: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = make_spec("e2e", store_uri)
    workdir = tmp_path / "wd"
    result = run_sweep(spec, workdir=workdir)

    assert result.state == "SUCCEEDED" and result.counts["SUCCEEDED"] == 5 and result.counts["attempts"] == 5
    assert {p.point_key for p in result.points} == {"K=2,gamma=0.15", "K=2,gamma=0.25", "K=3,gamma=0.15",
                                                    "K=3,gamma=0.25"}
    assert all(p.status == "SUCCEEDED" and p.objective and p.objective > 0 for p in result.points)
    sel = result.selection
    assert sel is not None and result.best == sel.point.params
    assert [p.objective for p in sel.ranking] == sorted(p.objective for p in sel.ranking)  # type: ignore[type-var]
    assert sel.point.point_key in sel.tied and sel.point.params["K"] == max(
        p.params["K"] for p in sel.ranking if p.point_key in sel.tied)  # the tie rule: larger K
    assert [b.point_key for b in result.baselines] == ["adamw"] and result.baselines[0].objective
    assert set(sel.vs_baselines) == {"adamw"}
    assert result.timings["fit_wall_s"] > 0 and result.timings["trial_wall_s_sum"] > 0

    # MLflow: a parent run per sweep, a child per trial with the documented names and tags.
    client = MlflowClient(store_uri)
    parent = client.get_run(result.parent_run_id)
    assert parent.info.run_name == "sweep:e2e" and parent.info.status == "FINISHED"
    tags = parent.data.tags
    assert tags["scalesweep.kind"] == "sweep" and tags["scalesweep.status"] == "SUCCEEDED"
    assert tags["scalesweep.sweep_id"] == result.sweep_id and tags["scalesweep.sweep_name"] == "e2e"
    assert tags["scalesweep.best.K"] == str(sel.point.params["K"])
    assert tags["scalesweep.best.gamma"] == str(sel.point.params["gamma"])
    assert parent.data.params["search.method"] == "grid" and parent.data.params["horizon"] == "24"
    assert parent.data.metrics["best_objective"] == pytest.approx(sel.point.objective)
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"spec.json", "selection.json"}
    doc = json.loads(Path(client.download_artifacts(parent.info.run_id, "selection.json", str(tmp_path))).read_text())
    assert doc["selection"]["point"]["point_key"] == sel.point.point_key and doc["eval_steps"] == [16, 20, 24]
    assert doc["selection"]["uncertainty"]["chosen"] == sel.point.point_key
    assert sum(doc["selection"]["uncertainty"]["p_best"].values()) == pytest.approx(1.0)
    assert tags["scalesweep.best.rule"] == sel.rule and "scalesweep.best.p_best" in tags
    # One best pair everywhere: the finished status names the rule's choice, not the lowest mean so far.
    from sweeper import sweep_status

    best = sweep_status(workdir)["best"]
    assert best["point_key"] == sel.point.point_key and best["provisional"] is False and best["params"] == result.best

    children = _children(store_uri, "e2e")
    assert sorted(r.info.run_name for r in children) == sorted(
        ["adamw,seed=0", "K=2,gamma=0.15,seed=0", "K=2,gamma=0.25,seed=0", "K=3,gamma=0.15,seed=0",
         "K=3,gamma=0.25,seed=0"])
    for run in children:
        t = run.data.tags
        assert run.info.status == "FINISHED" and t["mlflow.parentRunId"] == parent.info.run_id
        assert t["scalesweep.sweep_id"] == result.sweep_id and t["scalesweep.trial_key"] == run.info.run_name
        assert t["scalesweep.status"] == "SUCCEEDED" and t["scalesweep.attempt"] == "0" and t["scalesweep.seed"] == "0"
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "fd")) == [16, 20, 24]
        if t["scalesweep.role"] == "search":
            k, gamma = run.data.params["K"], run.data.params["gamma"]
            assert run.info.run_name == f"K={k},gamma={gamma},seed=0"
            assert run.data.params["optimizer.refresh_every"] == k and run.data.params["optimizer.name"] == "periodic"
        else:
            assert t["scalesweep.role"] == "baseline" and run.data.params["optimizer.name"] == "adamw"

    # Read back from MLflow by work folder, by sweep id and by name: the same result.
    for loaded in (load_sweep_result(workdir), load_sweep_result(result.sweep_id, tracking_uri=store_uri,
                                                                  experiment="e2e"),
                   load_sweep_result("e2e", tracking_uri=store_uri, experiment="e2e")):
        assert loaded.best == result.best and loaded.state == "SUCCEEDED"
        assert [p.objective for p in loaded.points] == [p.objective for p in result.points]

    # Resuming a finished sweep runs nothing; starting it again in the same folder, or a changed spec, is refused.
    again = run_sweep(spec, workdir=workdir, resume=True)
    assert again.best == result.best and len(_children(store_uri, "e2e")) == 5
    with pytest.raises(SweepError, match="already holds sweep"):
        run_sweep(spec, workdir=workdir)
    with pytest.raises(SweepError, match="the spec changed"):
        run_sweep({**spec, "horizon": 30}, workdir=workdir, resume=True)

    capsys.readouterr()
    assert main(["sweep", "status", str(workdir)]) == 0
    assert "SUCCEEDED" in capsys.readouterr().out
    assert main(["sweep", "result", str(workdir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["selection"]["point"]["params"] == result.best
    assert main(["sweep", "result", result.sweep_id, "--tracking-uri", store_uri, "--experiment", "e2e"]) == 0
    assert "<- chosen" in capsys.readouterr().out


def test_failures_are_recorded_retried_and_do_not_stop_the_others(ray_local: None, store_uri: str,
                                                                  tmp_path: Path) -> None:
    backend = fake_backend(tmp_path / "markers", FAKE_FAIL_ONCE="K=2,gamma=0.15", FAKE_FAIL="K=2,gamma=0.25",
                           FAKE_NAN="K=3,gamma=0.25", FAKE_UNDECLARED="K=3,gamma=0.15")
    spec = make_spec("failures", store_uri, backend=backend, retries={"max_retries": 1})
    result = run_sweep(spec, workdir=tmp_path / "wd")

    assert result.state == "SUCCEEDED" and result.best == {"K": 3, "gamma": 0.15}
    runs = _children(store_uri, "failures")
    by_key: dict[str, list] = {}
    for run in runs:
        by_key.setdefault(run.data.tags["scalesweep.trial_key"], []).append(run)
    for attempts in by_key.values():
        attempts.sort(key=lambda r: int(r.data.tags["scalesweep.attempt"]))

    def states(key: str) -> list[tuple[str, str]]:
        return [(r.info.status, r.data.tags["scalesweep.status"]) for r in by_key[key]]

    assert states("K=2,gamma=0.15,seed=0") == [("FAILED", "FAILED"), ("FINISHED", "SUCCEEDED")]  # retried, then ok
    assert "fake first-attempt failure" in by_key["K=2,gamma=0.15,seed=0"][0].data.tags["scalesweep.error"]
    assert by_key["K=2,gamma=0.15,seed=0"][1].info.run_name == "K=2,gamma=0.15,seed=0 (attempt 2)"
    assert states("K=2,gamma=0.25,seed=0") == [("FAILED", "FAILED"), ("FAILED", "FAILED")]  # retries exhausted
    assert states("K=3,gamma=0.25,seed=0") == [("FAILED", "DIVERGED")]  # NaN: deterministic, not retried
    assert states("K=3,gamma=0.15,seed=0") == [("FINISHED", "SUCCEEDED")]
    assert states("adamw,seed=0") == [("FINISHED", "SUCCEEDED")]

    points = {p.point_key: p for p in result.points}
    assert points["K=2,gamma=0.25"].status == "FAILED" and points["K=3,gamma=0.25"].status == "FAILED"
    assert points["K=2,gamma=0.15"].status == "SUCCEEDED" and points["K=3,gamma=0.15"].status == "SUCCEEDED"
    assert result.counts == {"SUCCEEDED": 3, "RUNNING": 0, "PENDING": 0, "PRUNED": 0, "FAILED": 2, "CANCELLED": 0,
                             "attempts": 7}
    diverged = next(t for t in result.trials if t.trial_key == "K=3,gamma=0.25,seed=0")
    assert diverged.status == "FAILED" and diverged.diverged
    # fake FD: base * (1 + 0.5 (H - s) / H) at s = 16, 20, 24 of H = 24, base 20 for K=3, gamma=0.15; its FD 0 at
    # step 1, not an eval step, does not count (issue 53 M3: the objective was the mean of whatever was reported)
    expected = statistics.fmean(20 * (1 + 0.5 * (24 - s) / 24) for s in (16, 20, 24))
    assert result.selection is not None and result.selection.point.objective == pytest.approx(expected)


def test_a_sweep_chooses_by_steps_to_target_through_ray_and_mlflow(ray_local: None, store_uri: str,
                                                                  tmp_path: Path) -> None:
    """selection.objective steps_to_target end to end: each trial worker scores its own curve, MLflow holds the
    score, and the choice says which objective made it. Fake FD is linear in the step, base x (1 + (24 - s) / 48),
    so the interpolated first crossing of 23 is exact: base 20 (K=3, gamma=0.15) at step 16.8; base 24 (K=2) never
    reaches and scores 24 x 24 / 23, as does AdamW (base 40) with 24 x 40 / 23."""
    spec = make_spec("by-steps", store_uri, backend=fake_backend(), eval_steps=[4, 8, 12, 16, 20, 24],
                     search={"space": {"K": [2, 3], "gamma": [0.15]}},
                     selection={"objective": "steps_to_target", "target": 23, "curve": "fd"})
    result = run_sweep(spec, workdir=tmp_path / "wd")
    scores = {p.point_key: p.objective for p in result.points}
    assert scores == pytest.approx({"K=3,gamma=0.15": 16.8, "K=2,gamma=0.15": 24 * 24 / 23})
    assert result.best == {"K": 3, "gamma": 0.15} and [b.objective for b in result.baselines] == pytest.approx(
        [24 * 40 / 23])
    censored = {p.point_key: p.censored_seeds for p in result.points}
    assert censored == {"K=2,gamma=0.15": [0], "K=3,gamma=0.15": []} and result.baselines[0].censored_seeds == [0]
    chosen = next(r for r in _children(store_uri, "by-steps") if r.info.run_name == "K=3,gamma=0.15,seed=0")
    assert chosen.data.metrics["objective"] == pytest.approx(16.8)  # what the planner told Optuna
    doc = result.selection_document()
    assert doc["selection"]["objective"] == "steps_to_target" and "steps to reach fd <= 23" in doc["objective"]
    assert "steps to reach fd <= 23" in result.table().splitlines()[0]


def test_asha_prunes_search_trials_as_pruned_and_closes_their_runs(ray_local: None, store_uri: str,
                                                                   tmp_path: Path) -> None:
    spec = make_spec(
        "asha", store_uri, horizon=30, backend=fake_backend(), baselines=["adamw"],
        search={"space": {"K": [2, 3, 4], "gamma": [0.15, 0.35]}},
        early_stopping={"method": "asha", "grace_evals": 1, "reduction_factor": 2},
        execution={"concurrency": 1, "num_cpus": 2},  # one at a time: ASHA's decisions are deterministic
    )
    result = run_sweep(spec, workdir=tmp_path / "wd")
    pruned = [p for p in result.points if p.status == "PRUNED"]
    assert pruned, [(p.point_key, p.status) for p in result.points]
    assert all(p.objective is None for p in pruned)  # no low-fidelity score passes for a result
    assert result.best == {"K": 3, "gamma": 0.15}  # the best point is never below a rung's cutoff
    assert [b.status for b in result.baselines] == ["SUCCEEDED"]  # baselines always run their horizon

    for run in _children(store_uri, "asha"):
        tags = run.data.tags
        assert run.info.status in ("FINISHED", "KILLED"), run.info.run_name  # nothing left RUNNING
        if tags["scalesweep.status"] == "PRUNED":
            assert run.info.status == "KILLED" and tags["scalesweep.stop_reason"] == "pruned"
            assert int(tags["scalesweep.steps_done"]) < 30 and "objective" not in run.data.metrics
        else:
            assert tags["scalesweep.status"] == "SUCCEEDED" and run.info.status == "FINISHED"
    assert result.counts["PRUNED"] == len(pruned) and result.counts["SUCCEEDED"] == 7 - len(pruned)


def test_tpe_with_seeds_runs_its_budget_of_distinct_points_on_every_seed(ray_local: None, store_uri: str,
                                                                         tmp_path: Path) -> None:
    spec = make_spec(
        "tpe", store_uri, backend=fake_backend(), baselines=[], seeds=[0, 1],
        search={"method": "tpe", "budget": 4, "tpe_startup_points": 2,
                "space": {"K": [2, 3, 4], "gamma": [0.10, 0.15, 0.25, 0.35]}},
    )
    result = run_sweep(spec, workdir=tmp_path / "wd")
    assert len(result.points) == 4 and result.counts["SUCCEEDED"] == 8
    for p in result.points:
        assert sorted(p.seed_objectives) == [0, 1] and p.seed_std and p.seed_std > 0
        assert p.objective == pytest.approx(statistics.fmean(p.seed_objectives.values()))
        assert p.seed_std == pytest.approx(statistics.stdev(p.seed_objectives.values()), rel=1e-12)
    # The pooled seed std is the root of the mean per-point seed variance, recomputed from the seed objectives.
    pooled = statistics.fmean(statistics.variance(p.seed_objectives.values()) for p in result.points) ** 0.5
    assert result.selection is not None and result.selection.pooled_seed_std == pytest.approx(pooled, rel=1e-12)
    unc = result.selection.uncertainty  # two seeds: the one-SE rule with a paired bootstrap over them
    assert unc is not None and unc.n == 2 and sum(unc.p_best.values()) == pytest.approx(1.0)
    assert set(unc.p_best) == {p.point_key for p in result.points} and "one pooled standard error" in unc.rule
    keys = [r.info.run_name for r in _children(store_uri, "tpe")]
    assert len(keys) == len(set(keys)) == 8


def test_confirmation_reruns_the_top_points_on_fresh_seeds_before_the_choice_is_final(
        ray_local: None, store_uri: str, tmp_path: Path) -> None:
    spec = make_spec("confirm", store_uri, backend=fake_backend(), baselines=["adamw"], seeds=[0],
                     confirm={"top": 2})
    workdir = tmp_path / "wd"
    result = run_sweep(spec, workdir=workdir)
    sel = result.selection
    assert result.state == "SUCCEEDED" and sel is not None and sel.confirmation is not None
    c = sel.confirmation
    assert c["final"] and c["seeds"] == [1] and c["chosen"] == sel.point.point_key == "K=3,gamma=0.15"
    # The fake trainer scores 20 + 0.3 x seed at K=3, gamma=0.15: fresh seed 1 is 0.3 worse than seed 0.
    row = c["points"]["K=3,gamma=0.15"]
    assert row["winners_curse"] == pytest.approx(row["confirmed_objective"] - row["selected_objective"])
    assert set(c["points"]) == {"K=3,gamma=0.15", "K=3,gamma=0.25"}
    assert (workdir / "confirm" / "sweep.json").is_file()
    confirm_runs = _runs(store_uri, "confirm", "tags.`scalesweep.confirms` = '" + result.sweep_id + "'")
    # the two points and the control: AdamW at its setting on the sweep's seeds, on the fresh seed too
    assert len([r for r in confirm_runs if r.data.tags.get("scalesweep.kind") == "trial"]) == 3
    assert list(c["controls"]) == ["adamw"] and "control_shift" in c
    assert row["controlled_curse"] == pytest.approx(row["relative_curse"] - c["control_shift"])
    parent = MlflowClient(store_uri).get_run(result.parent_run_id)
    assert "winners_curse" in parent.data.metrics and "scalesweep.confirmation" in parent.data.tags
    from sweeper import sweep_status

    assert sweep_status(workdir)["best"]["point_key"] == "K=3,gamma=0.15"
