"""The compose topology as local processes (`api.deploy_local.Deployment`), once per session, for the tests of
`make test-deploy`: PostgreSQL, an MLflow server on it, a Ray head and a worker node, and `scalesweep serve`.

Not collected by the main suite (tests/conftest.py leaves tests/deploy out unless it is named on the command line).
Where PostgreSQL or psycopg is missing the fixture skips, which CI (SCALESWEEP_CI=1) turns into a failure."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from mlflow import MlflowClient

from api.deploy_local import DeployError, Deployment, Postgres

from ..conftest import TINY_TRIAL


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
    why = Postgres.missing()
    if why:
        pytest.skip(why)
    dep = Deployment(extra_env={"SCALESWEEP_POLL_INTERVAL_S": "0.5"}, timeout_s=180)
    try:
        dep.start()
    except DeployError as exc:
        dep.cleanup()
        pytest.fail(f"the deployment did not start: {exc}", pytrace=False)
    try:
        yield dep
    finally:
        left = dep.stop()
        dep.cleanup()
        assert not left, f"processes left running after the deployment stopped: {sorted(left)}"


@pytest.fixture
def api(deployment: Deployment) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=deployment.api_url, timeout=30,
                      headers={"Authorization": f"Bearer {deployment.api_token}"}) as client:
        yield client


def wait_for(client: httpx.Client, path: str, states: tuple[str, ...], timeout: float = 420) -> dict[str, Any]:
    """Poll GET `path` until its `state` is one of `states`; answers other than 200 (a 503 while a dependency is
    down) are waited through."""
    deadline = time.time() + timeout
    body: dict[str, Any] = {}
    while time.time() < deadline:
        response = client.get(path)
        if response.status_code == 200:
            body = response.json()
            if body["state"] in states:
                return body
        time.sleep(1)
    raise AssertionError(f"{path} still {body.get('state')} after {timeout} s: {body}")


# As small as the service's end-to-end test's sweep: 2 grid points and AdamW, one seed, 16 steps (about a minute on
# 2 cores). No `num_cpus`: the drivers attach to the cluster, which has its own.
SPEC: dict[str, Any] = {
    "name": "deploy-tiny",
    "rung": "cpu-xs",
    "horizon": 16,
    "search": {"method": "grid", "space": {"K": [2, 3], "gamma": [0.15]}},
    "baselines": ["adamw"],
    "execution": {"concurrency": 2},
    "trial": TINY_TRIAL,
    "tracking": {"experiment": "deploy-tiny"},
}


def sql(dep: Deployment, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dep.database_url.replace("postgresql+psycopg", "postgresql")) as conn:
        return conn.execute(query, args).fetchall()


def check_finished(dep: Deployment, api: httpx.Client, sweep: str) -> None:
    """SUCCEEDED, every configuration finished exactly once (a retried trial's earlier attempts FAILED, each its own
    run), each finished trial's run FINISHED with metrics in the MLflow server, no run left RUNNING, and the record
    in PostgreSQL."""
    body = api.get(f"/v1/sweeps/{sweep}").json()
    assert body["state"] == "SUCCEEDED", body
    trials = api.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    done = [t for t in trials if t["state"] == "SUCCEEDED"]
    assert sorted(t["key"] for t in done) == ["K=2,gamma=0.15,seed=0", "K=3,gamma=0.15,seed=0", "adamw,seed=0"]
    assert {t["state"] for t in trials if t not in done} <= {"FAILED"}, trials
    mlflow = MlflowClient(tracking_uri=dep.mlflow_url)
    for trial in done:
        run = mlflow.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", (trial["key"], run.info.status)
        assert run.data.metrics, trial["key"]  # its metrics arrived on the server
    runs = mlflow.search_runs([body["mlflow_experiment_id"]])
    assert runs and all(r.info.status != "RUNNING" for r in runs), [(r.info.run_id, r.info.status) for r in runs]
    assert body["mlflow_parent_run_id"] in {r.info.run_id for r in runs}
    assert sql(dep, "SELECT state, mlflow_parent_run_id FROM sweeps WHERE id = %s", sweep) == [
        ("SUCCEEDED", body["mlflow_parent_run_id"])]
