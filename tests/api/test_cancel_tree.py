"""A cancel ends everything the job started (docs/security.md, "Cancel ends every process"): a registered trainer
that ignores SIGTERM and starts a child in a session of its own is gone within the grace period after
`POST .../cancel`, also when the cancel comes from a service restarted after the sweep started, and a restarted
service ends what a job that is no longer running left behind. Real service, real driver, real Ray."""

from __future__ import annotations

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


def _settings(tmp_path: Path) -> Settings:
    registry = tmp_path / "trainers.yaml"
    registry.write_text(yaml.safe_dump({"trainers": {"stubborn": {"command": [
        sys.executable, str(HERE / "stubborn_trainer.py"), "--progress", "{progress_file}", "--eval-steps",
        "{eval_steps}", "--pids", str(tmp_path / "pids")]}}}))
    return Settings(workdir=tmp_path / "work", api_token=TOKEN, trainers=registry,  # type: ignore[arg-type]
                    poll_interval_s=0.2)


def _client(settings: Settings) -> TestClient:
    client = TestClient(create_app(settings), raise_server_exceptions=False)
    client.app.state.jobs.kill_grace_s = GRACE_S  # type: ignore[attr-defined]
    client.app.state.jobs.cancel_grace_s = 10.0  # type: ignore[attr-defined]
    return client


def _wait_for_pids(path: Path, timeout: float = 240) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file() and path.read_text().strip():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.2)
    raise AssertionError("the trainer did not start")


def _reap(pids: list[int]) -> list[int]:
    left = [p for p in pids if process_alive(p)]
    for p in left:  # never leave them behind, even when the test fails
        os.kill(p, signal.SIGKILL)
    return left


SPEC = {"name": "tree", "horizon": 20, "search": {"space": {"K": [2]}}, "baselines": [],
        "backend": {"name": "command", "trainer": "stubborn", "kill_grace_s": GRACE_S},
        "execution": {"num_cpus": 1}, "retries": {"max_retries": 0}}


@pytest.mark.timeout(600)
def test_cancel_after_a_restart_ends_a_trainer_that_ignores_sigterm_and_its_own_session_child(
        tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    with _client(settings) as first:  # the service that started the sweep
        created = first.post("/v1/sweeps", json=SPEC, headers=AUTH)
        assert created.status_code == 201, created.text
        sweep_id = created.json()["id"]
        pids = _wait_for_pids(tmp_path / "pids")
    # The first service is gone (its driver runs on, in a session of its own); a new one adopts the sweep.
    try:
        assert all(process_alive(p) for p in pids)
        with _client(settings) as second:
            start = time.monotonic()
            r = second.post(f"/v1/sweeps/{sweep_id}/cancel", headers=AUTH)
            took = time.monotonic() - start
            assert r.status_code == 202, r.text
            assert r.json()["state"] == "CANCELLED"
            # Before today's rule both were left running: the trainer in its own session ignored SIGTERM and the
            # child had left that session too.
            assert [p for p in pids if process_alive(p)] == []
            assert took < 10.0 + GRACE_S + 30
    finally:
        assert _reap(pids) == []


def test_a_restarted_service_ends_what_a_finished_job_left_running(tmp_path: Path) -> None:
    # A cancel the service did not live to finish: the record says CANCELLED, a tagged trainer still runs.
    settings = _settings(tmp_path)
    service = _client(settings)  # no lifespan: the sweep stays PENDING, and is cancelled
    sweep_id = service.post("/v1/sweeps", json={**SPEC, "name": "left"}, headers=AUTH).json()["id"]
    assert service.post(f"/v1/sweeps/{sweep_id}/cancel", headers=AUTH).json()["state"] == "CANCELLED"
    leftover = subprocess.Popen(
        [sys.executable, str(HERE / "stubborn_trainer.py"), "--progress", str(tmp_path / "p"), "--eval-steps", "1",
         "--pids", str(tmp_path / "pids")], env={**os.environ, JOB_TAG_ENV: sweep_id}, start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             env={**os.environ, JOB_TAG_ENV: "sw-of-another-service"})
    try:
        pids = _wait_for_pids(tmp_path / "pids", timeout=30)
        app = create_app(settings)
        app.state.jobs.kill_grace_s = GRACE_S
        start = time.monotonic()
        with TestClient(app):  # start-up: reconcile
            took = time.monotonic() - start
            assert [p for p in pids if process_alive(p)] == []
            assert GRACE_S <= took < GRACE_S + 20  # SIGTERM was ignored: SIGKILL after the grace period
            assert other.poll() is None  # a job this service does not know is left alone
        leftover.wait(timeout=5)
    finally:
        other.kill()
        _reap([int(p) for p in (tmp_path / "pids").read_text().split()] if (tmp_path / "pids").is_file() else [])
