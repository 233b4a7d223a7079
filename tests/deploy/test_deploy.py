"""Issue 37 on the real topology (tests/deploy/conftest.py): the tiny sweep and its tiny transfer over REST into a
real MLflow server and PostgreSQL; PostgreSQL stopped mid-sweep (503s with Retry-After, never a 500; /v1/ready names the
database; recovery by itself); the Alembic migrations on PostgreSQL; the service's Ray Jobs client against the real
Ray head. Run by `make test-deploy`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from alembic import command
from mlflow import MlflowClient
from sqlalchemy import inspect

from api.deploy_local import Deployment
from api.service.db import MIGRATIONS, make_engine, migrate, migration_config

from .conftest import SPEC, check_finished, children, sql, submit, wait_for


def test_the_tiny_sweep_over_rest_finishes_with_its_runs_in_mlflow_and_its_record_in_postgresql(
        deployment: Deployment, api: httpx.Client, tiny_sweep: str) -> None:
    if os.environ.get("SCALESWEEP_CI") == "1":  # CI installs the deploy extra: the drivers must be Ray Jobs there
        assert deployment.ray_jobs, "Ray's dashboard and job server are missing: drivers would not be Ray Jobs"
    check_finished(deployment, api, tiny_sweep)


def test_the_tiny_transfer_over_rest_finishes_with_its_runs_and_analysis_in_mlflow(
        deployment: Deployment, api: httpx.Client, tiny_sweep: str) -> None:
    # One rung, two arms, one seed, the sweep's horizon: two runs (the transfer's machinery, not its numbers).
    created = api.post("/v1/transfers", json={"sweep_id": tiny_sweep, "rungs": ["cpu-xs"],
                                              "arms": ["periodic", "adamw"], "seeds": [0], "horizon_factor": 1.0})
    assert created.status_code == 201, created.text
    transfer = created.json()["id"]
    body = wait_for(api, f"/v1/transfers/{transfer}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=420)
    assert body["state"] == "SUCCEEDED", body
    runs = api.get(f"/v1/transfers/{transfer}/runs").json()["data"]
    assert sorted((r["arm"], r["rung"], r["state"]) for r in runs) == [
        ("adamw", "cpu-xs", "SUCCEEDED"), ("periodic", "cpu-xs", "SUCCEEDED")], runs
    mlflow = MlflowClient(tracking_uri=deployment.mlflow_url)
    parent = body["mlflow_parent_run_id"]
    assert parent and mlflow.get_run(parent).info.status == "FINISHED"
    children = [r for r in mlflow.search_runs([body["mlflow_experiment_id"]])
                if r.data.tags.get("mlflow.parentRunId") == parent]
    assert sorted(r.info.status for r in children) == ["FINISHED", "FINISHED"], [
        (r.data.tags.get("scalesweep.trial_key"), r.info.status) for r in children]
    assert all(r.data.metrics for r in children)  # each run's metrics arrived on the server
    assert len({r.data.tags.get("scalesweep.trial_key") for r in children}) == 2
    fits = api.get(f"/v1/transfers/{transfer}/fits")
    assert fits.status_code == 200, fits.text  # the analysis reads everything back from the server
    assert sql(deployment, "SELECT state, mlflow_parent_run_id FROM transfers WHERE id = %s", transfer) == [
        ("SUCCEEDED", parent)]


def test_a_two_worker_sweep_over_rest_runs_its_ranks_on_the_worker_node_and_logs_one_run(
        deployment: Deployment, api: httpx.Client, tiny_sweep: str) -> None:
    # One grid point on 2 workers of 1 CPU each (FSDP2 over gloo): Ray packs both ranks' bundles on the worker node
    # (the head has no CPUs), rank 0 logs the one run to the MLflow server. After the tiny sweep, so the worker's 2
    # CPUs are free for both bundles at once.
    spec = {**SPEC, "search": {"method": "grid", "space": {"K": [3], "gamma": [0.15]}}, "baselines": [],
            "execution": {"concurrency": 1, "workers_per_trial": 2, "cpus_per_trial": 1}}
    sweep = submit(api, "deploy-two-workers", spec)
    body = wait_for(api, f"/v1/sweeps/{sweep}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=420)
    assert body["state"] == "SUCCEEDED", body
    mlflow = MlflowClient(tracking_uri=deployment.mlflow_url)
    (run,) = children(mlflow, body)
    assert run.info.status == "FINISHED" and run.data.params["workers"] == "2"
    for rank in (0, 1):  # each rank's FSDP2 traffic and step time, measured on the worker node
        assert run.data.metrics[f"comm_bytes_per_step_rank{rank}"] > 1e5
        assert 0 < run.data.metrics[f"comm_time_s_per_step_rank{rank}"] < run.data.metrics[f"step_time_s_rank{rank}"]
    steps = [m.step for m in mlflow.get_metric_history(run.info.run_id, "fd")]
    assert len(steps) == 3 and steps[-1] == SPEC["horizon"], steps  # the default eval steps: 2/3, 5/6, 6/6


def test_postgresql_stopped_mid_sweep_is_503_everywhere_and_everything_recovers_by_itself(
        deployment: Deployment, api: httpx.Client) -> None:
    sweep = submit(api, "deploy-pg-restart")
    wait_for(api, f"/v1/sweeps/{sweep}", ("RUNNING",), timeout=120)
    deployment.postgres.stop("fast")  # what an operator's restart does first
    try:
        routes = [("GET", "/v1/sweeps"), ("GET", f"/v1/sweeps/{sweep}"), ("GET", f"/v1/sweeps/{sweep}/trials"),
                  ("GET", f"/v1/sweeps/{sweep}/best"), ("GET", "/v1/transfers"), ("GET", "/v1/transfers/tr-none"),
                  ("POST", "/v1/sweeps"), ("POST", f"/v1/sweeps/{sweep}/resume"), ("POST", "/v1/sweeps/sw-none/cancel")]
        for method, path in routes:
            response = api.request(method, path, json={**SPEC, "name": "during"} if path == "/v1/sweeps" else None)
            assert response.status_code == 503, (method, path, response.status_code, response.text)
            assert response.headers["content-type"] == "application/problem+json", (method, path)
            assert int(response.headers["retry-after"]) >= 1, (method, path)
            assert response.json()["status"] == 503
        ready = api.get("/v1/ready")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["database"].startswith("unavailable"), ready.json()
        assert api.get("/v1/health").status_code == 200  # liveness never touches the database
        time.sleep(5)  # the job queue's passes meet the outage too
    finally:
        deployment.postgres.start()
    deadline = time.time() + 60
    while api.get("/v1/ready").status_code != 200 and time.time() < deadline:
        time.sleep(1)
    ready = api.get("/v1/ready").json()
    assert ready["checks"]["database"] == "ok", ready
    assert api.get("/v1/sweeps").status_code == 200
    wait_for(api, f"/v1/sweeps/{sweep}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=420)
    check_finished(deployment, api, sweep)
    # Nothing was created while the database was down, nothing duplicated since.
    names = [row[0] for row in sql(deployment, "SELECT name FROM sweeps")]
    assert "during" not in names and names.count("deploy-pg-restart") == 1, names


def test_the_migrations_run_on_postgresql_from_an_empty_database_down_and_up_again(
        deployment: Deployment) -> None:
    url = deployment.postgres.create_database("migrations", "scalesweep")
    engine = make_engine(url)
    try:
        migrate(engine)  # what the service does at start-up
        assert {"sweeps", "transfers", "alembic_version"} <= set(inspect(engine).get_table_names())
        revisions = sorted(p.stem for p in (MIGRATIONS / "versions").glob("*.py"))
        with engine.begin() as connection:
            # Back one revision (the previous schema; with a single revision, the empty database) and up again.
            command.downgrade(migration_config(connection), "-1")
        remaining = set(inspect(engine).get_table_names())
        if len(revisions) == 1:
            assert not {"sweeps", "transfers"} & remaining, remaining
        migrate(engine)
        assert {"sweeps", "transfers"} <= set(inspect(engine).get_table_names())
        with engine.connect() as connection:
            version = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
        assert version.startswith(revisions[-1].split("_")[0]), (version, revisions)
    finally:
        engine.dispose()


# Run in an interpreter of its own with the deployment's environment (Ray's token auth, as the service has it).
_JOB_CLIENT = """
import json, sys, time
from api.service._jobs import RayJobs
jobs = RayJobs(sys.argv[1])
job = jobs.submit(["python", "-c", "import time; time.sleep(300)"], sys.argv[2], {})
seen = [jobs.status(job)]
deadline = time.time() + 120
while seen[-1] != "RUNNING" and time.time() < deadline:
    time.sleep(0.5)
    seen.append(jobs.status(job))
stopped = jobs.stop(job)
deadline = time.time() + 120
while jobs.status(job) in jobs.ALIVE and time.time() < deadline:
    time.sleep(0.5)
print(json.dumps({"job": job, "seen": sorted(set(seen)), "stopped": stopped, "final": jobs.status(job)}))
"""


def test_the_services_ray_jobs_client_submits_reads_and_stops_a_job_on_the_real_head(deployment: Deployment) -> None:
    """`api.service._jobs.RayJobs` (what the service submits drivers with) against the deployment's Ray head: the job it
    submits runs under the given id, its status is read, and `stop` ends it STOPPED. tests/api/test_ray_jobs.py
    checks the service's use of it with a stand-in client."""
    if not deployment.ray_jobs:  # under CI (the deploy extra installed) this skip is a failure
        pytest.skip("drivers are not Ray Jobs here (no ray[default]: the deploy extra)")
    name = f"scalesweep-test-{os.getpid()}-{int(time.time())}"
    done = subprocess.run([sys.executable, "-c", _JOB_CLIENT, deployment.ray_dashboard_url, name],
                          capture_output=True, text=True, env=deployment._base_env(), timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["job"] == name and "RUNNING" in answer["seen"], answer
    assert answer["stopped"] is True and answer["final"] == "STOPPED", answer
