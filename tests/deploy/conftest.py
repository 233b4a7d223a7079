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


KEYS = ["K=2,gamma=0.15,seed=0", "K=3,gamma=0.15,seed=0", "adamw,seed=0"]  # SPEC's configurations


def submit(api: httpx.Client, name: str, spec: dict[str, Any] | None = None) -> str:
    """POST a sweep (SPEC under another name by default); its id."""
    created = api.post("/v1/sweeps", json={**(spec or SPEC), "name": name})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


@pytest.fixture(scope="session")
def tiny_sweep(deployment: Deployment) -> str:
    """SPEC submitted over REST and run to its end (not checked here: the first test checks it); its id. Shared by
    the transfer (which needs a finished sweep) and the MLflow outage (whose metrics are compared with these)."""
    with httpx.Client(base_url=deployment.api_url, timeout=30,
                      headers={"Authorization": f"Bearer {deployment.api_token}"}) as client:
        sweep = submit(client, SPEC["name"])
        wait_for(client, f"/v1/sweeps/{sweep}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=420)
    return sweep


def sql(dep: Deployment, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dep.database_url.replace("postgresql+psycopg", "postgresql")) as conn:
        return conn.execute(query, args).fetchall()


def children(mlflow: MlflowClient, job: dict[str, Any]) -> list[Any]:
    """The MLflow runs of a sweep or transfer (`job` as GET answers it): its parent run's children."""
    return list(mlflow.search_runs([job["mlflow_experiment_id"]],
                                   filter_string=f"tags.`mlflow.parentRunId` = '{job['mlflow_parent_run_id']}'"))


def finished_once(runs: list[Any], keys: list[str]) -> None:
    """Of `runs` (MLflow runs of one job), exactly one FINISHED run per key in `keys` and none for another key;
    every other attempt ended (FAILED or KILLED), none left RUNNING."""
    finished = sorted(r.data.tags.get("scalesweep.trial_key", "") for r in runs if r.info.status == "FINISHED")
    assert finished == sorted(keys), finished
    assert all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in runs), [
        (r.data.tags.get("scalesweep.trial_key"), r.info.status) for r in runs]


def check_finished(dep: Deployment, api: httpx.Client, sweep: str, *, ended: tuple[str, ...] = ("FAILED",)) -> None:
    """SUCCEEDED, every configuration finished exactly once (a retried trial's earlier attempts in `ended`, each its
    own run), each finished trial's run FINISHED with metrics in the MLflow server, no run left RUNNING, and the
    record in PostgreSQL."""
    body = api.get(f"/v1/sweeps/{sweep}").json()
    assert body["state"] == "SUCCEEDED", body
    trials = api.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    done = [t for t in trials if t["state"] == "SUCCEEDED"]
    assert sorted(t["key"] for t in done) == KEYS
    assert {t["state"] for t in trials if t not in done} <= set(ended), trials
    mlflow = MlflowClient(tracking_uri=dep.mlflow_url)
    for trial in done:
        run = mlflow.get_run(trial["run_id"])
        assert run.info.status == "FINISHED", (trial["key"], run.info.status)
        assert run.data.metrics, trial["key"]  # its metrics arrived on the server
    parent = body["mlflow_parent_run_id"]
    assert mlflow.get_run(parent).info.status == "FINISHED"
    # Every attempt's run, not only the latest per configuration (what /trials shows): one FINISHED each, none left
    # RUNNING (or SCHEDULED). Other sweeps share the experiment: this sweep's runs are its parent's children.
    finished_once(children(mlflow, body), KEYS)
    assert sql(dep, "SELECT state, mlflow_parent_run_id FROM sweeps WHERE id = %s", sweep) == [
        ("SUCCEEDED", body["mlflow_parent_run_id"])]
