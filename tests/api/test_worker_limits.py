"""Issue 64 through the live service: a 2-worker trial on the tiny rung whose rank dies before the rendezvous (N1)
or stops mid-trial (N2) ends within its limits (`execution.rendezvous_timeout_s`, `execution.stall_timeout_s`),
names the rank, and leaves no rank running."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.service import Settings, create_app
from trials.core.proctree import descendants, process_alive

from ..conftest import TINY_TRIAL
from .conftest import AUTH, LiveServer, wait_job


def _two_worker_sweep(name: str, **execution: Any) -> dict[str, Any]:
    """One trial (one point, no baselines, no retry) on 2 ranks of 1 CPU each, checkpointing at steps 8 and 16."""
    return {"name": name, "rung": "cpu-xs", "horizon": 16, "eval_steps": [8, 16], "baselines": [],
            "search": {"space": {"K": [3], "gamma": [0.15]}}, "retries": {"max_retries": 0},
            "backend": {"name": "builtin", "checkpoints": True}, "trial": TINY_TRIAL,
            "execution": {"workers_per_trial": 2, "cpus_per_trial": 1, "num_cpus": 2, **execution}}


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    server = LiveServer(settings.model_copy(update={"poll_interval_s": 0.3}), lifespan="on")
    yield server
    server.stop()


def _rank_pids() -> list[int]:
    """This test's rank-1 actors (Ray titles a worker by the actor method it runs), below this process."""
    pids = []
    for pid in descendants(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::_Rank.run"):
                pids.append(pid)
        except OSError:
            continue
    return pids


def _first_rank(timeout: float = 240) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pids := _rank_pids():
            return pids[0]
        time.sleep(0.05)
    raise AssertionError("no rank-1 actor appeared")


def _trial(http: httpx.Client, sweep: str) -> dict[str, Any]:
    trials = http.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    assert len(trials) == 1, trials
    return trials[0]


@pytest.mark.integration  # a real driver, Ray and two gloo ranks
def test_a_rank_killed_before_the_rendezvous_is_restarted_at_once(live: LiveServer) -> None:
    """N1: on main, rank 0 waited in the store's rendezvous for 1,800 s; now the dead actor ends the wait and the
    group restarts (from no checkpoint: the trial starts over) well within the rendezvous timeout."""
    with httpx.Client(base_url=live.url, timeout=30) as http:
        created = http.post("/v1/sweeps", json=_two_worker_sweep("n1", rendezvous_timeout_s=60), headers=AUTH)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        pid = _first_rank()  # still importing torch: seconds before it can reach the store
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        done = wait_job(http, f"/v1/sweeps/{sweep}", timeout=300)
        trial = _trial(http, sweep)
    # restarted at once, not after the 60 s rendezvous timeout: the whole trial took less than that after the kill
    assert done["state"] == "SUCCEEDED", done
    assert trial["state"] == "SUCCEEDED" and trial["attempt"] == 0, trial
    assert time.monotonic() - killed_at < 240
    assert not _rank_pids()


@pytest.mark.integration
def test_a_stopped_rank_ends_the_trial_within_the_stall_timeout_naming_it(live: LiveServer,
                                                                         settings: Settings) -> None:
    """N2: on main, a SIGSTOPped rank held the trial RUNNING with no error for up to 1,800 s; now the watchdog ends
    it at execution.stall_timeout_s, the trial FAILED with rank 1 named, and the stopped process killed."""
    stall = 10
    with httpx.Client(base_url=live.url, timeout=30) as http:
        created = http.post("/v1/sweeps", json=_two_worker_sweep("n2", stall_timeout_s=stall), headers=AUTH)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        pid = _first_rank()
        workdir = Path(settings.workdir)
        deadline = time.monotonic() + 240
        while not any(workdir.rglob("attempt-*/latest")) and time.monotonic() < deadline:
            time.sleep(0.2)  # mid-trial: after its first checkpoint, in the steps between evaluations
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            done = wait_job(http, f"/v1/sweeps/{sweep}", timeout=180)
        finally:
            if process_alive(pid):  # on main nothing ends it: leave no stopped process behind the test
                os.kill(pid, signal.SIGKILL)
        ended_after = time.monotonic() - stopped_at
        trial = _trial(http, sweep)
    assert trial["state"] == "FAILED", trial
    assert "rank 1 sent no heartbeat" in trial["error"] and "execution.stall_timeout_s" in trial["error"], trial
    assert ended_after < stall + 60, ended_after  # the stall timeout, a beat, the kill and the driver's own close
    assert done["state"] in ("FAILED", "SUCCEEDED"), done
    assert not process_alive(pid) and not _rank_pids()


def _after_first_checkpoint(workdir: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not any(workdir.rglob("attempt-*/latest")):
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.1)


def _titled(prefix: bytes) -> list[int]:
    pids = []
    for pid in descendants(os.getpid()):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(prefix):
                pids.append(pid)
        except OSError:
            continue
    return pids


@pytest.mark.integration
def test_a_restarting_trial_reads_running_with_its_restarts_never_failed(live: LiveServer, settings: Settings) -> None:
    """N9: while its ranks restarted after a lost rank, the trial read FAILED with the lost rank's error."""
    with httpx.Client(base_url=live.url, timeout=30) as http:
        created = http.post("/v1/sweeps", json=_two_worker_sweep("n9"), headers=AUTH)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        pid = _first_rank()
        _after_first_checkpoint(Path(settings.workdir))
        os.kill(pid, signal.SIGKILL)
        seen: list[tuple[str, int]] = []
        while http.get(f"/v1/sweeps/{sweep}").json()["state"] in ("PENDING", "RUNNING"):
            trial = _trial(http, sweep)
            seen.append((trial["state"], trial["rank_restarts"]))
            time.sleep(0.1)
        trial = _trial(http, sweep)
    # never FAILED: RUNNING until its last evaluation, then SUCCEEDED a moment before the sweep
    assert seen and {state for state, _ in seen} <= {"RUNNING", "SUCCEEDED"}, seen
    assert ("RUNNING", 1) in seen  # read during the restart: RUNNING, with its count
    assert trial["state"] == "SUCCEEDED" and trial["rank_restarts"] == 1 and trial["error"] is None, trial


@pytest.mark.integration
def test_a_killed_attempts_checkpoint_is_removed_when_its_retry_finishes(live: LiveServer,
                                                                         settings: Settings) -> None:
    """N4: rank 0 (the trainable) SIGKILLed after a checkpoint: the retry succeeded and attempt-0's distributed
    checkpoint stayed in the work folder."""
    spec = {**_two_worker_sweep("n4"), "retries": {"max_retries": 1}}
    with httpx.Client(base_url=live.url, timeout=30) as http:
        created = http.post("/v1/sweeps", json=spec, headers=AUTH)
        assert created.status_code == 201, created.text
        sweep = created.json()["id"]
        _first_rank()
        workdir = Path(settings.workdir)
        _after_first_checkpoint(workdir)
        rank0 = _titled(b"ray::ImplicitFunc")
        assert rank0, "rank 0's trainable was not found"
        os.kill(rank0[0], signal.SIGKILL)
        done = wait_job(http, f"/v1/sweeps/{sweep}", timeout=400)
        trials = http.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    assert done["state"] == "SUCCEEDED", done
    assert sorted((t["attempt"], t["state"]) for t in trials)[-1] == (1, "SUCCEEDED"), trials
    assert not list(workdir.rglob("attempt-*")), list(workdir.rglob("attempt-*"))


# --- refused at submission: what can never be scheduled (N3), counts that are not integers (N7), an extension that
# changes the worker count (N10) ------------------------------------------------------------------------------------


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    yield TestClient(create_app(settings), raise_server_exceptions=False)  # no lifespan: nothing is launched


def _problem_fields(r: Any) -> list[str]:
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", (r.status_code, r.text)
    return [e["field"] for e in r.json()["errors"]]


def test_a_trial_wider_than_its_own_ray_is_refused_with_the_figures(api: TestClient) -> None:
    """N3: 2 workers of 1 CPU on a local Ray of 1 CPU were accepted and held the job slot forever."""
    r = api.post("/v1/sweeps", json=_two_worker_sweep("n3", num_cpus=1), headers=AUTH)
    assert _problem_fields(r) == ["execution.workers_per_trial"]
    assert ("execution.workers_per_trial 2 needs 2 CPUs (1 CPUs per worker); the cluster has 1 CPUs "
            "(execution.num_cpus: the Ray this job starts): at most 1 workers per trial") in r.json()["detail"]
    assert api.get("/v1/sweeps").json()["count"] == 0
    assert api.post("/v1/sweeps", json=_two_worker_sweep("fits"), headers=AUTH).status_code == 201


@pytest.mark.parametrize(("field", "value"), [("workers_per_trial", True), ("workers_per_trial", "2"),
                                              ("num_cpus", "2"), ("num_cpus", True), ("concurrency", 1.0)])
def test_counts_take_integers_only(api: TestClient, field: str, value: object) -> None:
    """N7: `true` was stored as 1 and "2" as 2."""
    r = api.post("/v1/sweeps", json=_two_worker_sweep("n7", **{field: value}), headers=AUTH)
    assert _problem_fields(r) == [f"execution.{field}"]
    assert "valid integer" in r.json()["detail"]


def test_seeds_take_integers_only(api: TestClient) -> None:
    r = api.post("/v1/sweeps", json={**_two_worker_sweep("n7"), "seeds": [0, 1, "2"]}, headers=AUTH)
    assert r.status_code == 422 and "seeds" in _problem_fields(r)[0]
    r = api.post("/v1/transfers", json={"sweep_id": "sw-0123456789ab", "rungs": ["cpu-xs"], "seeds": [0, True]},
                 headers=AUTH)
    assert r.status_code == 422 and _problem_fields(r)[0].startswith("seeds")
    r = api.post("/v1/transfers/tr-0123456789ab/extend", json={"seeds": [0, 1, "2"]}, headers=AUTH)
    assert r.status_code == 422 and _problem_fields(r)[0].startswith("seeds")


# --- nothing left behind (N8) and an extension applied whole or not at all (N5) -------------------------------------


def _one_trial_sweep(name: str, horizon: int = 6) -> dict[str, Any]:
    """The tiny built-in sweep: one point, no baselines, on one worker."""
    return {"name": name, "rung": "cpu-xs", "horizon": horizon, "baselines": [], "seeds": [0],
            "search": {"space": {"K": [3], "gamma": [0.25]}}, "backend": {"name": "builtin", "checkpoints": False},
            "execution": {"num_cpus": 1}, "trial": TINY_TRIAL}


def _session_of(workdir: Path, sweep: str, timeout: float = 240) -> Path:
    """The Ray session folder the sweep's driver started, once a trial of it runs."""
    note = workdir / "sweeps" / sweep / "ray" / "session"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if note.is_file() and _titled(b"ray::ImplicitFunc"):
            return Path(note.read_text().strip())
        time.sleep(0.2)
    raise AssertionError(f"no running trial with its session noted in {note}")


def _gone(path: Path, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return not path.exists()


@pytest.mark.integration
def test_a_job_cancelled_or_killed_mid_trial_leaves_no_ray_session(live: LiveServer, settings: Settings) -> None:
    """N8: a Ray session_* folder stayed per job cancelled mid-trial or whose driver was SIGKILLed."""
    from api.service.db import SweepRecord

    workdir = Path(settings.workdir).resolve()
    with httpx.Client(base_url=live.url, timeout=30) as http:
        cancelled = http.post("/v1/sweeps", json=_one_trial_sweep("n8-cancel", 400), headers=AUTH).json()["id"]
        session = _session_of(workdir, cancelled)
        assert session.name.startswith("session_") and session.is_dir()
        assert http.post(f"/v1/sweeps/{cancelled}/cancel", headers=AUTH).status_code == 202
        assert _gone(session), f"{session} left after the cancel"

        killed = http.post("/v1/sweeps", json=_one_trial_sweep("n8-kill", 400), headers=AUTH).json()["id"]
        session = _session_of(workdir, killed)
        with live.app.state.sessionmaker() as db:
            pid = db.get(SweepRecord, killed).pid
        os.kill(pid, signal.SIGKILL)  # the driver: no clean-up of its own runs
        deadline = time.monotonic() + 120
        while http.get(f"/v1/sweeps/{killed}").json()["state"] == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _gone(session), f"{session} left after its driver was killed"
        http.post(f"/v1/sweeps/{killed}/cancel", headers=AUTH)  # resumed or failed: nothing keeps running
    assert not (workdir / "sweeps" / cancelled / "ray" / "session").exists()


@pytest.mark.integration
def test_cancelling_a_queued_extension_gives_the_sweep_back_as_it_was(settings: Settings) -> None:
    """N5: `extend` then `cancel` while PENDING turned a SUCCEEDED sweep CANCELLED, with /best and /export 409. A
    cancel once the extension runs keeps what it finished and says how to resume."""
    server = LiveServer(settings.model_copy(update={"poll_interval_s": 0.3}), lifespan="on")
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            sweep = http.post("/v1/sweeps", json=_one_trial_sweep("n5"), headers=AUTH).json()["id"]
            assert wait_job(http, f"/v1/sweeps/{sweep}", timeout=400)["state"] == "SUCCEEDED"
    finally:
        server.stop()
    # the same service without its job queue: an extension stays queued until it is cancelled
    server = LiveServer(settings, lifespan="off")
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            before = {path: http.get(f"/v1/sweeps/{sweep}{path}", params=params)
                      for path, params in (("/best", {}), ("/export", {"rung": "cpu-s", "format": "json"}),
                                           ("/trials", {}))}
            assert all(r.status_code == 200 for r in before.values()), {p: r.text for p, r in before.items()}
            extended = http.post(f"/v1/sweeps/{sweep}/extend", json={**_one_trial_sweep("n5"), "seeds": [0, 1]},
                                 headers=AUTH)
            assert extended.status_code == 202 and extended.json()["state"] == "PENDING", extended.text
            cancelled = http.post(f"/v1/sweeps/{sweep}/cancel", headers=AUTH)
            assert cancelled.status_code == 202 and cancelled.json()["state"] == "SUCCEEDED", cancelled.text
            job = http.get(f"/v1/sweeps/{sweep}").json()
            assert job["state"] == "SUCCEEDED" and job["error"] is None, job
            for path, params in (("/best", {}), ("/export", {"rung": "cpu-s", "format": "json"}), ("/trials", {})):
                now = http.get(f"/v1/sweeps/{sweep}{path}", params=params)
                assert now.status_code == 200 and now.json() == before[path].json(), (path, now.text)
            again = http.post(f"/v1/sweeps/{sweep}/extend", json={**_one_trial_sweep("n5"), "seeds": [0, 1]},
                              headers=AUTH)
            assert again.status_code == 202 and again.json()["added"] == ["seeds [1]"], again.text
    finally:
        server.stop()
    # with its queue: the extension runs, and a cancel then keeps the runs it finished and says how to resume
    server = LiveServer(settings.model_copy(update={"poll_interval_s": 0.3}), lifespan="on")
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            deadline = time.monotonic() + 120
            while http.get(f"/v1/sweeps/{sweep}").json()["state"] != "RUNNING":
                assert time.monotonic() < deadline, "the extension never started"
                time.sleep(0.2)
            assert http.post(f"/v1/sweeps/{sweep}/cancel", headers=AUTH).status_code == 202
            job = http.get(f"/v1/sweeps/{sweep}").json()
            assert job["state"] == "CANCELLED" and f"/v1/sweeps/{sweep}/resume" in job["error"], job
            trials = http.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
            assert [t["state"] for t in trials if t["seed"] == 0] == ["SUCCEEDED"], trials
    finally:
        server.stop()
