"""Faults on the real topology (tests/deploy/conftest.py), in sequence on one deployment, each ending with the sweep
SUCCEEDED, every configuration finished exactly once and no MLflow run left RUNNING: the MLflow server down for
30 s mid-trial (every metric logged meanwhile arrives); the service SIGKILLed and restarted while a driver runs (the
driver is adopted, not started twice); the driver's Ray Job stopped from outside (the sweep FAILED with the cause,
then resumed); a Ray worker node SIGKILLed while it runs a trial (last: it leaves the topology with another node)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlflow import MlflowClient

from api.deploy_local import Deployment, stop_pids
from trials.core.proctree import family

from .conftest import KEYS, check_finished, children, sql, submit, wait_for

ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")


def _trial_processes(pids: set[int]) -> set[int]:
    """The Ray workers among `pids` that run a trial (Ray names them after the trainable: ray::ImplicitFunc...)."""
    found = set()
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if name.startswith("ray::ImplicitFunc") or name.startswith("ray::_Inner"):
            found.add(pid)
    return found


def _wait_for_a_trial(deployment: Deployment, timeout: float = 180) -> None:
    """Until a trial runs somewhere in the topology, then 3 s more: well inside it (16 steps, two evaluations)."""
    deadline = time.time() + timeout
    while not _trial_processes(deployment.pids()) and time.time() < deadline:
        time.sleep(0.5)
    assert _trial_processes(deployment.pids()), f"no trial started within {timeout:.0f} s"
    time.sleep(3)


def _ray_jobs(deployment: Deployment) -> list[dict[str, Any]]:
    """Every Ray Job the cluster knows (submission id, status, entrypoint), asked as any client of it would."""
    code = ("import json, sys; from ray.job_submission import JobSubmissionClient; "
            "jobs = JobSubmissionClient(sys.argv[1]).list_jobs(); "
            "print(json.dumps([{'id': j.submission_id, 'status': str(j.status.value), 'entrypoint': j.entrypoint}"
            " for j in jobs]))")
    done = subprocess.run([sys.executable, "-c", code, deployment.ray_dashboard_url], capture_output=True, text=True,
                          env=deployment._base_env(), timeout=120, check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def _histories(client: MlflowClient, run_id: str) -> dict[str, list[int]]:
    """Metric name -> the steps it was logged at, from the server."""
    run = client.get_run(run_id)
    return {key: sorted(m.step for m in client.get_metric_history(run_id, key)) for key in run.data.metrics}


def _finished_runs(client: MlflowClient, sweep: dict[str, Any]) -> dict[str, Any]:
    return {r.data.tags["scalesweep.trial_key"]: r for r in children(client, sweep) if r.info.status == "FINISHED"}


def _wait_for_a_logging_trial(deployment: Deployment, api: httpx.Client, sweep: str, timeout: float = 240) -> None:
    """Until one of the sweep's trials has its run RUNNING on the server with its first metrics in: mid-trial, with
    more to log (the next evaluation, the summary, the run's end)."""
    client = MlflowClient(tracking_uri=deployment.mlflow_url)
    deadline = time.time() + timeout
    while time.time() < deadline:
        body = api.get(f"/v1/sweeps/{sweep}").json()
        if not (body.get("mlflow_parent_run_id") and body.get("mlflow_experiment_id")):  # not yet reported
            time.sleep(0.5)
            continue
        if any(r.info.status == "RUNNING" and r.data.metrics for r in children(client, body)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no trial of {sweep} logged a metric within {timeout:.0f} s")


def test_the_mlflow_server_down_30_s_mid_trial_loses_no_metric(
        deployment: Deployment, api: httpx.Client, tiny_sweep: str) -> None:
    mlflow_server = deployment.components["mlflow"]
    sweep = submit(api, "deploy-mlflow-down")
    _wait_for_a_logging_trial(deployment, api, sweep)
    down = time.time()
    assert not mlflow_server.stop(grace_s=10), "the MLflow server outlived its stop"
    time.sleep(max(0.0, down + 30 - time.time()))
    up = time.time()
    mlflow_server.start()  # the same port, the same PostgreSQL store and artifact folder
    mlflow_server.wait_healthy(180)
    body = wait_for(api, f"/v1/sweeps/{sweep}", ENDED, timeout=600)
    check_finished(deployment, api, sweep)
    # Nothing lost: each configuration's run holds every metric at every step that the same configuration's run of
    # the sweep without an outage holds (same spec, same seed).
    client = MlflowClient(tracking_uri=deployment.mlflow_url)
    reference = _finished_runs(client, api.get(f"/v1/sweeps/{tiny_sweep}").json())
    outage = _finished_runs(client, body)
    assert sorted(outage) == sorted(reference) == KEYS
    logged_in_window = 0
    for key in KEYS:
        assert _histories(client, outage[key].info.run_id) == _histories(client, reference[key].info.run_id), key
        # A metric's timestamp is the trial's clock when it logged it: some were logged while the server was down,
        # and arrived after (MLflow's client retried them).
        for name in outage[key].data.metrics:
            logged_in_window += sum(down * 1000 <= m.timestamp <= up * 1000
                                    for m in client.get_metric_history(outage[key].info.run_id, name))
    assert logged_in_window > 0, "no metric was logged during the outage: the outage missed the trials"


def test_the_service_killed_mid_sweep_adopts_its_running_driver_and_starts_no_second_one(
        deployment: Deployment, api: httpx.Client) -> None:
    service = deployment.components["api"]
    sweep = submit(api, "deploy-api-killed")
    _wait_for_a_trial(deployment)
    (job_before, pid_before), = sql(deployment, "SELECT ray_job_id, pid FROM sweeps WHERE id = %s", sweep)
    assert service.proc is not None
    os.kill(service.proc.pid, signal.SIGKILL)  # the service alone, as a crash: its drivers live elsewhere
    service.proc.wait(timeout=30)
    with pytest.raises(httpx.TransportError):
        api.get("/v1/health")
    assert _trial_processes(deployment.pids()), "the trials ended with the service"
    service.start()  # the same environment, database and port
    service.wait_healthy(180)
    wait_for(api, f"/v1/sweeps/{sweep}", ENDED, timeout=600)
    check_finished(deployment, api, sweep)
    assert sql(deployment, "SELECT ray_job_id, pid FROM sweeps WHERE id = %s", sweep) == [(job_before, pid_before)]
    if deployment.ray_jobs:  # exactly one driver: the cluster ran one job for this sweep, the one it was running
        jobs = [j for j in _ray_jobs(deployment) if j["id"].startswith(f"{sweep}-")]
        assert [(j["id"], j["status"]) for j in jobs] == [(job_before, "SUCCEEDED")], jobs


def test_the_drivers_ray_job_stopped_from_outside_fails_the_sweep_with_the_cause_and_it_resumes(
        deployment: Deployment, api: httpx.Client) -> None:
    if not deployment.ray_jobs:
        pytest.skip("drivers are not Ray Jobs here (no ray[default]: the deploy extra)")
    sweep = submit(api, "deploy-job-stopped")
    _wait_for_a_trial(deployment)
    (job,), = sql(deployment, "SELECT ray_job_id FROM sweeps WHERE id = %s", sweep)
    ray = str(Path(sys.executable).parent / "ray")
    stopped = subprocess.run([ray, "job", "stop", "--address", deployment.ray_dashboard_url, job],
                             capture_output=True, text=True, env=deployment._base_env(), timeout=120, check=False)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    body = wait_for(api, f"/v1/sweeps/{sweep}", ENDED, timeout=180)
    assert body["state"] == "FAILED", body
    assert job in body["error"] and "stopped" in body["error"], body["error"]  # the cause, with the job's id
    client = MlflowClient(tracking_uri=deployment.mlflow_url)
    # Every run ended: the driver closes those it knows; a trial Tune was stopping closes its own as it exits, which
    # may come a few seconds after the driver (seen once: a run still RUNNING right after the sweep was FAILED).
    deadline = time.time() + 30
    while True:
        runs = children(client, body)
        if all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in runs) or time.time() > deadline:
            break
        time.sleep(1)
    assert all(r.info.status in ("FINISHED", "FAILED", "KILLED") for r in runs), [
        (r.data.tags.get("scalesweep.trial_key"), r.info.status) for r in runs]
    assert client.get_run(body["mlflow_parent_run_id"]).info.status != "RUNNING"
    resumed = api.post(f"/v1/sweeps/{sweep}/resume")
    assert resumed.status_code in (200, 202), resumed.text
    wait_for(api, f"/v1/sweeps/{sweep}", ENDED, timeout=600)
    check_finished(deployment, api, sweep, ended=("FAILED", "CANCELLED"))


def test_a_worker_node_killed_mid_trial_has_its_trial_retried_on_another_node(
        deployment: Deployment, api: httpx.Client) -> None:
    spare = deployment.start_worker("ray-worker-2")  # somewhere for the trial to go
    victim = deployment.components["ray-worker"]
    sweep = submit(api, "deploy-node-lost")
    deadline = time.time() + 180
    while not _trial_processes(victim.pids()) and time.time() < deadline:
        time.sleep(0.5)
    assert _trial_processes(victim.pids()), "no trial started on the first worker node"
    time.sleep(3)  # well inside the trial (16 steps and two evaluations)
    node = family(victim.proc.pid)  # type: ignore[union-attr]  # ray start, its raylet, the trial's worker, ...
    for pid in node:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not stop_pids(node, grace_s=5), "the node's processes outlived SIGKILL"
    wait_for(api, f"/v1/sweeps/{sweep}", ENDED, timeout=600)
    check_finished(deployment, api, sweep)  # each configuration once, SUCCEEDED, no run left RUNNING
    trials = api.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    assert any(t["attempt"] > 0 and t["state"] == "SUCCEEDED" for t in trials), trials  # the lost trial ran again
    assert any(t["state"] == "FAILED" for t in trials), trials  # ... after its attempt on the lost node failed
    assert spare.proc is not None and spare.proc.poll() is None


def test_metrics_that_cannot_reach_the_tracking_server_fail_the_trial_loudly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the MLflow outage: when the client's retries run out, the metric call raises into the
    trial (which fails, and Ray Tune records the error); nothing on the path swallows it. No deployment needed: a
    tracking URI where nothing listens, retries off so it fails at once."""
    from mlflow.exceptions import MlflowException
    from requests.exceptions import RequestException

    from trials._tracking import RunLogger, TrackingConfig
    from trials.core.proctree import free_port
    from trials.record import RunRecorder

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    logger = RunLogger.__new__(RunLogger)  # a run opened while the server was up; the server gone since
    logger.config = TrackingConfig(tracking_uri=f"http://127.0.0.1:{free_port()}", run_id="0" * 32)
    logger.client = MlflowClient(tracking_uri=logger.config.tracking_uri)
    logger.run_id = "0" * 32
    recorder = RunRecorder(logger)
    recorder.defer(4, {"loss": 1.0})
    with pytest.raises((MlflowException, RequestException)):
        recorder.flush()  # the evaluation's flush, where a trial's held-back metrics go out
    with pytest.raises((MlflowException, RequestException)):
        recorder.log_metrics({"fd": 50.0}, 8)
