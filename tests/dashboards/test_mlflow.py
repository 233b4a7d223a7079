"""Round trip through a real SQLite MLflow store: trial runs logged under the README's names come back as
records, and figures go back as artifacts."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag

import dashboards._mlflow as mlflow_io
from dashboards import DashboardInputError, load_runs, log_figures
from dashboards._mlflow import load_chosen, load_run
from dashboards.figures import compute_heatmap, compute_timing, plot_heatmap, plot_timing

EVAL = (800, 1000, 1200)


def _log_trial(
    client: MlflowClient,
    experiment_id: str,
    parent: str,
    *,
    arm: str,
    k: int,
    gamma: float,
    seed: int,
    fd: dict[int, float],
    status: str | None = "SUCCEEDED",
    rung: str = "cpu-xs",
    attempt: int | None = None,
) -> str:
    run_tags = {"mlflow.parentRunId": parent}
    if attempt is not None:  # the sweeper's retry bookkeeping (sweeper/_ledger.py)
        run_tags |= {"scalesweep.trial_key": f"K={k},gamma={gamma},seed={seed}", "scalesweep.attempt": str(attempt)}
    run = client.create_run(experiment_id, tags=run_tags, run_name=f"{arm}-{k}-{gamma}-{seed}")
    run_id = run.info.run_id
    # The whole config is logged, flattened, as trials do: a baseline carries K and γ params it never uses.
    params = {
        "rung": rung,
        "seed": seed,
        "steps": 1200,
        "optimizer.name": arm,
        "optimizer.refresh_every": k,
        "optimizer.gamma": gamma,
        "eval.fd_samples": 256,
    }
    tags = {"fd.metric_name": "fd_shapes_cnn", "fd.samples": "256", "model.parameters": "380000"}
    if status is not None:
        tags["scalesweep.status"] = status
    now = int(time.time() * 1000)
    metrics = []
    for i, step in enumerate(EVAL):
        t = 0.5 * step
        metrics += [
            Metric("fd", fd[step], now + i, step),
            Metric("fd_shapes_cnn", fd[step], now + i, step),
            Metric("val_loss", 1.0 + 100 / step, now + i, step),
            Metric("effective_time_s", t, now + i, step),
            Metric("optimizer_time_s", 0.1 * step, now + i, step),
            Metric("step_time_s", 0.5, now + i, step),
            Metric("optimizer_step_time_s", 0.1, now + i, step),
        ]
    metrics += [Metric("loss", 2.0 - step / 1200, now, step) for step in range(100, 1201, 100)]
    if all(math.isfinite(v) for v in fd.values()):
        metrics.append(Metric("objective", sum(fd.values()) / len(fd), now, 1200))
    client.log_batch(
        run_id,
        metrics=metrics,
        params=[Param(k_, str(v)) for k_, v in params.items()],
        tags=[RunTag(k_, v) for k_, v in tags.items()],
    )
    client.set_terminated(run_id, "FINISHED" if status in ("SUCCEEDED", None) else "FAILED")
    return run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("study", artifact_location=(root / "mlartifacts").as_uri())
    parent = client.create_run(exp, run_name="sweep").info.run_id
    other_parent = client.create_run(exp, run_name="another sweep").info.run_id
    fd_best = {800: 40.0, 1000: 35.0, 1200: 30.0}
    nan = math.nan
    # Each trial's own settings (the rest: arm periodic, seed 0, SUCCEEDED, this sweep), logged in this order.
    trials: dict[str, dict[str, Any]] = {
        "best": {"k": 3, "gamma": 0.15, "fd": fd_best},
        "worse": {"k": 2, "gamma": 0.25, "fd": {800: 45.0, 1000: 40.0, 1200: 38.0}},
        "failed": {"k": 4, "gamma": 0.15, "fd": {800: 50.0, 1000: nan, 1200: nan}, "status": "FAILED"},
        "untagged": {"k": 3, "gamma": 0.25, "fd": {800: 42.0, 1000: 37.0, 1200: 33.0}, "status": None},
        "adamw": {"arm": "adamw", "k": 3, "gamma": 0.15, "fd": {800: 60.0, 1000: 55.0, 1200: 50.0}},
        # Retried: attempt 0 failed, attempt 1 succeeded; only the last attempt is the trial.
        "retry0": {"k": 2, "gamma": 0.15, "fd": {800: 47.0, 1000: nan, 1200: nan}, "status": "FAILED", "attempt": 0},
        "retry1": {"k": 2, "gamma": 0.15, "fd": {800: 46.0, 1000: 41.0, 1200: 39.0}, "attempt": 1},
        "elsewhere": {"arm": "muon", "k": 3, "gamma": 0.15, "fd": fd_best, "parent": other_parent},
    }
    ids = {
        name: _log_trial(client, exp, settings.pop("parent", parent), **{"arm": "periodic", "seed": 0, **settings})
        for name, settings in trials.items()
    }
    client.set_tag(parent, "scalesweep.best.K", "3")
    client.set_tag(parent, "scalesweep.best.gamma", "0.15")
    # A resumed trial re-logs step 1000: the later value counts.
    client.log_batch(ids["best"], metrics=[Metric("fd", 34.0, int(time.time() * 1000) + 10_000, 1000)])
    return {"uri": uri, "client": client, "parent": parent, "ids": ids}


def test_child_runs_come_back_as_records(store: dict[str, Any]) -> None:
    records = load_runs(store["uri"], store["parent"])
    by_id = {r.run_id: r for r in records}
    ids = store["ids"]
    expected = {ids[name] for name in ("best", "worse", "failed", "untagged", "adamw", "retry1")}
    assert set(by_id) == expected  # not the other sweep's run, not the superseded attempt
    best = by_id[ids["best"]]
    assert (best.arm, best.K, best.gamma, best.seed, best.rung) == ("periodic", 3, 0.15, 0, "cpu-xs")
    assert best.status == "SUCCEEDED"
    assert best.fd == {800: 40.0, 1000: 34.0, 1200: 30.0}  # the re-logged step's later value
    assert best.objective == pytest.approx(35.0)
    assert best.effective_time_s == {800: 400.0, 1000: 500.0, 1200: 600.0}
    assert list(best.loss) == list(range(100, 1201, 100))
    assert best.val_loss[1000] == pytest.approx(1.1)
    assert best.optimizer_time_s[1200] == pytest.approx(120.0)
    assert best.step_time_s[800] == 0.5 and best.optimizer_step_time_s[1200] == pytest.approx(0.1)
    assert (best.parameters, best.metric_name, best.fd_samples) == (380_000, "fd_shapes_cnn", 256)
    failed = by_id[ids["failed"]]
    assert failed.status == "FAILED" and failed.objective is None and math.isnan(failed.fd[1000])
    assert by_id[ids["untagged"]].status == "SUCCEEDED"  # no scalesweep.status: MLflow's FINISHED
    adamw = by_id[ids["adamw"]]
    assert adamw.K is None and adamw.gamma is None and adamw.label == "adamw"
    assert load_run(store["uri"], ids["worse"]).fd == {800: 45.0, 1000: 40.0, 1200: 38.0}


def test_all_attempts_on_request(store: dict[str, Any]) -> None:
    ids = {r.run_id for r in load_runs(store["uri"], store["parent"], all_attempts=True)}
    assert {store["ids"]["retry0"], store["ids"]["retry1"]} <= ids and len(ids) == 7


def test_records_from_mlflow_feed_the_heatmap(store: dict[str, Any]) -> None:
    chosen = load_chosen(store["uri"], store["parent"])
    assert chosen == (3, 0.15)
    h = compute_heatmap(load_runs(store["uri"], store["parent"]), chosen=chosen)
    assert h.chosen_source == "given"
    retried = h.cell(2, 0.15)
    assert (h.n_ok[retried], h.n_runs[retried]) == (1, 1)
    assert h.objective[retried] == pytest.approx(42.0)
    assert h.ks == (2, 3, 4) and h.gammas == (0.15, 0.25)
    assert h.chosen == (3, 0.15)
    assert h.baselines == {"adamw": pytest.approx(55.0)}
    row, col = h.cell(4, 0.15)
    assert h.status[row][col] == "FAILED"


def test_search_pages_through_every_child(store: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mlflow_io, "_PAGE", 2)  # 7 children over four pages
    assert len(load_runs(store["uri"], store["parent"], all_attempts=True)) == 7


def test_figures_are_logged_as_png_artifacts(store: dict[str, Any], tmp_path: Path) -> None:
    records = load_runs(store["uri"], store["parent"])
    figures = {"heatmap": plot_heatmap(compute_heatmap(records)), "timing": plot_timing(compute_timing(records))}
    paths = log_figures(store["uri"], store["parent"], figures, dpi=60)
    assert paths == ["figures/heatmap.png", "figures/timing.png"]
    client: MlflowClient = store["client"]
    listed = sorted(a.path for a in client.list_artifacts(store["parent"], "figures"))
    assert listed == paths
    local = Path(client.download_artifacts(store["parent"], "figures/heatmap.png", str(tmp_path)))
    data = local.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


def test_bad_names_and_ids_are_refused(store: dict[str, Any]) -> None:
    with pytest.raises(DashboardInputError, match="not a safe file name"):
        log_figures(store["uri"], store["parent"], {"../escape": plot_timing(compute_timing([]))})
    with pytest.raises(DashboardInputError, match="not a run id"):
        load_runs(store["uri"], "x' OR '1'='1")


def test_states_read_as_the_sweeper_reads_them(tmp_path: Path) -> None:
    # An interrupted trial (MLflow KILLED, tagged KILLED) is CANCELLED here as in the sweeper's ledger, and a trial
    # still running (its tag still PENDING) is RUNNING.
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("states", artifact_location=(tmp_path / "art").as_uri())
    parent = client.create_run(exp, run_name="sweep").info.run_id
    fd = {800: 50.0, 1000: 45.0, 1200: 40.0}
    killed = _log_trial(client, exp, parent, arm="periodic", k=3, gamma=0.15, seed=0, fd=fd, status="KILLED")
    client.set_terminated(killed, "KILLED")
    running = _log_trial(client, exp, parent, arm="periodic", k=3, gamma=0.15, seed=1, fd=fd, status="PENDING")
    client.update_run(running, "RUNNING")
    diverged = _log_trial(client, exp, parent, arm="periodic", k=3, gamma=0.15, seed=2, fd=fd, status="DIVERGED")
    by_id = {r.run_id: r.status for r in load_runs(uri, parent)}
    assert by_id == {killed: "CANCELLED", running: "RUNNING", diverged: "DIVERGED"}
    assert load_run(uri, killed).status == "CANCELLED"
