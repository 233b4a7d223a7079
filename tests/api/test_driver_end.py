"""When a job's driver ends, however it ends, nothing the job started outlives it (issue 53 M1, M2): the queue ends
the job's tag (SCALESWEEP_JOB_TAG) as soon as it sees the driver gone, before any resume, and a failed job's error
is the driver's own words (or how it was killed), never a Ray warning from the end of `driver.log`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from api.service import Settings, create_app
from trials.core.proctree import JOB_TAG_ENV, process_alive

from .conftest import AUTH, TOKEN

HERE = Path(__file__).resolve().parent
GRACE_S = 2.0


def _wait_for(what: str, ready, timeout: float = 240):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := ready():
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s")


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.is_file() else []


def _reap(pids: list[int]) -> list[int]:
    left = [p for p in pids if process_alive(p)]
    for p in left:  # never leave them behind, even when the test fails
        os.kill(p, signal.SIGKILL)
    return left


@pytest.mark.timeout(600)
def test_a_sigkilled_driver_leaves_no_trainer_and_its_error_says_how_it_ended(tmp_path: Path) -> None:
    # The trainer ignores SIGTERM and starts a child that calls setsid and ignores SIGTERM too. Only the driver is
    # SIGKILLed: its Ray workers then exit on their own, killing their direct children (the trainer and, before
    # this fix, the trial's reaper), so the setsid child was left running with both tags until a service restart.
    registry = tmp_path / "trainers.yaml"
    registry.write_text(yaml.safe_dump({"trainers": {"stubborn": {"command": [
        sys.executable, str(HERE / "stubborn_trainer.py"), "--progress", "{progress_file}", "--eval-steps",
        "{eval_steps}", "--pids", str(tmp_path / "pids")]}}}))
    settings = Settings(workdir=tmp_path / "work", api_token=TOKEN, trainers=registry,  # type: ignore[arg-type]
                        poll_interval_s=0.2, reconcile="mark_failed")
    spec = {"name": "killed", "horizon": 20, "search": {"space": {"K": [2]}}, "baselines": [],
            "backend": {"name": "command", "trainer": "stubborn", "kill_grace_s": GRACE_S},
            "execution": {"num_cpus": 1}, "retries": {"max_retries": 0}}
    pids: list[int] = []
    try:
        with TestClient(create_app(settings), raise_server_exceptions=False) as client:
            client.app.state.jobs.kill_grace_s = GRACE_S  # type: ignore[attr-defined]
            created = client.post("/v1/sweeps", json=spec, headers=AUTH)
            assert created.status_code == 201, created.text
            sweep_id = created.json()["id"]
            pids = _wait_for("the trainer and its setsid child", lambda: _pids(tmp_path / "pids"))
            status = json.loads((tmp_path / "work" / "sweeps" / sweep_id / "status.json").read_text())
            os.kill(status["pid"], signal.SIGKILL)
            body = _wait_for("the queue to see the driver end", lambda: (
                r := client.get(f"/v1/sweeps/{sweep_id}", headers=AUTH).json())["state"] != "RUNNING" and r)
            seen = time.monotonic()
            assert body["state"] == "FAILED"
            # The queue ended the job's tag before it wrote the state: nothing of the job is left.
            assert [p for p in pids if process_alive(p)] == []
            assert time.monotonic() - seen < 1.0
            assert body["error"] == "the driver was killed by signal 9 (SIGKILL) before it recorded an error"
    finally:
        assert _reap(pids) == []


RAY_TRIAL = """
import os, sys, time
import ray
from trials import run_command_trial

@ray.remote(num_cpus=1)
def trial(trainer, pids):
    cmd = {"command": [sys.executable, trainer, "--progress", "{progress_file}", "--eval-steps", "{eval_steps}",
                       "--pids", pids], "kill_grace_s": 1.0, "poll_s": 0.1}
    run_command_trial({"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}, cmd)

ray.init(num_cpus=1, include_dashboard=False)
ray.get(trial.remote(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.timeout(300)
def test_the_trials_reaper_outlives_the_ray_worker_that_started_it(tmp_path: Path) -> None:
    # No service here, so no job tag to end: only the trial's reaper can end the trainer's tree. Ray's worker,
    # left without its driver, kills its direct children as it exits; the reaper must not be one of them.
    pids_file = tmp_path / "pids"
    driver = subprocess.Popen([sys.executable, "-c", RAY_TRIAL, str(HERE / "stubborn_trainer.py"), str(pids_file)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_ADDRESS": ""},
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        pids = _wait_for("the trainer and its setsid child", lambda: _pids(pids_file), timeout=180)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        _wait_for("the trainer's tree to end", lambda: not any(process_alive(p) for p in pids), timeout=30)
    finally:
        with_ray = subprocess.run(["pgrep", "-s", str(driver.pid)], capture_output=True, text=True).stdout.split()
        for p in with_ray:  # the driver's own Ray (same session), if it has not ended yet
            os.kill(int(p), signal.SIGKILL)
        assert _reap(pids) == []


def test_a_job_that_succeeded_ends_what_kept_only_its_job_tag(tmp_path: Path) -> None:
    # A descendant that dropped the trial's tag (or was never given one) but kept the job's: no trial reaper ends
    # it, so the queue must, when it sees the driver end, whatever the job's outcome (here SUCCEEDED: exit 0).
    daemon_pid = tmp_path / "daemon"
    driver = ("import os, subprocess, sys, time\n"
              "env = {k: v for k, v in os.environ.items() if k != 'SCALESWEEP_TRIAL_TAG'}\n"
              "d = subprocess.Popen([sys.executable, '-c', 'import os, signal, time; os.setsid(); "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'], env=env)\n"
              f"open({str(daemon_pid)!r}, 'w').write(str(d.pid))\n")
    settings = Settings(workdir=tmp_path / "work", api_token=TOKEN, poll_interval_s=0.1)  # type: ignore[arg-type]
    pids: list[int] = []
    try:
        with TestClient(create_app(settings), raise_server_exceptions=False) as client:
            jobs = client.app.state.jobs  # type: ignore[attr-defined]
            jobs.kill_grace_s = GRACE_S
            jobs.command = lambda record, resume: [sys.executable, "-c", driver]
            created = client.post("/v1/sweeps", json={"name": "done", "horizon": 2, "search": {"space": {"K": [2]}}},
                                  headers=AUTH)
            assert created.status_code == 201, created.text
            sweep_id = created.json()["id"]
            pids = _wait_for("the driver's daemon", lambda: _pids(daemon_pid), timeout=60)
            assert open(f"/proc/{pids[0]}/environ", "rb").read().count(f"{JOB_TAG_ENV}={sweep_id}".encode()) == 1
            body = _wait_for("the queue to see the driver end", lambda: (
                r := client.get(f"/v1/sweeps/{sweep_id}", headers=AUTH).json())["state"] != "RUNNING" and r, 60)
            assert body["state"] == "SUCCEEDED"
            assert not process_alive(pids[0])  # SIGTERM ignored: SIGKILL after the grace period, before the state
    finally:
        assert _reap(pids) == []


RAY_LOG = """\
sweep killed: 0/1 points scored | trials 0 done, 1 running, 0 failed, 0 pruned, 0 queued
Traceback (most recent call last):
  File "/x/sweeper/jobs/_driver.py", line 3, in run
sweeper.errors.SweepFailedError: sweep killed failed: RuntimeError('tune died')
2026-12-05 20:51:02,114\tWARNING worker.py:2347 -- Raylet is terminated. Termination is unexpected.
(raylet) [2026-12-05 20:51:02,200 E 4242 4242] (raylet) node_manager.cc:1 The raylet exited: SIGTERM
[2026-12-05 20:51:03,001 W 4200 4300] core_worker.cc:9 Failed to connect to GCS
*** SIGTERM received at time=1764967862 on cpu 0 ***
"""


def test_a_failed_drivers_error_is_its_own_last_error_line_not_rays() -> None:
    from api.service._jobs import driver_error

    assert driver_error(RAY_LOG, 1) == "sweeper.errors.SweepFailedError: sweep killed failed: RuntimeError('tune died')"
    assert driver_error("sweep x: 0/1 points scored\n(pid=9) Error: not ours\n", 1) == "the driver exited with 1"
    assert driver_error(RAY_LOG.splitlines()[0], -9) == \
        "the driver was killed by signal 9 (SIGKILL) before it recorded an error"


def test_a_restarted_service_ends_a_gone_drivers_leftovers_before_it_queues_the_resume(tmp_path: Path) -> None:
    # The service was down when the driver died: its record still says RUNNING. At start-up the job is queued to
    # resume, and the new driver will carry the same job tag: what the old one left must be gone first.
    from api.service.db import SweepRecord

    settings = Settings(workdir=tmp_path / "work", api_token=TOKEN, poll_interval_s=60)  # type: ignore[arg-type]
    app = create_app(settings)
    sweep_id = TestClient(app).post("/v1/sweeps", json={"name": "gone", "horizon": 2,
                                                        "search": {"space": {"K": [2]}}}, headers=AUTH).json()["id"]
    with app.state.sessionmaker() as session:
        record = session.get(SweepRecord, sweep_id)
        record.state, record.pid = "RUNNING", 2**22 + 1  # beyond pid_max's default: no such process
        session.commit()
    ready = tmp_path / "ready"
    leftover = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; "
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN); open(sys.argv[1], 'w').close(); "
                                 "time.sleep(600)", str(ready)],
                                env={**os.environ, JOB_TAG_ENV: sweep_id}, start_new_session=True)
    try:
        _wait_for("the leftover to ignore SIGTERM", ready.exists, timeout=60)
        restarted = create_app(settings)
        restarted.state.jobs.kill_grace_s = GRACE_S
        restarted.state.jobs.command = lambda record, resume: [sys.executable, "-c", "pass"]
        restarted.state.jobs.tick = lambda: None  # reconcile only: no pass of the queue launches the resume here
        with TestClient(restarted):
            assert leftover.wait(timeout=GRACE_S + 10) == -signal.SIGKILL  # SIGTERM ignored: SIGKILL after grace
            with restarted.state.sessionmaker() as session:
                assert session.get(SweepRecord, sweep_id).state == "PENDING"  # queued to resume
    finally:
        leftover.kill()
