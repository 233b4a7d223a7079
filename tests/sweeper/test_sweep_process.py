"""Sweep drivers as separate processes, as the service runs them: killed mid-sweep and resumed, cancelled and
resumed, and two sweeps at once in one MLflow experiment without mixing their trials."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from sweeper import cancel_sweep, load_sweep_result, sweep_status
from trials.core.proctree import members, process_alive

from .conftest import REPO, fake_backend, make_spec, write_spec


def _driver(spec_path: Path, workdir: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`scalesweep sweep run` in its own session, as the service starts it."""
    cmd = [sys.executable, "-m", "scalesweep_cli", "sweep", "run", str(spec_path), "--workdir", str(workdir), *extra]
    return subprocess.Popen(cmd, cwd=REPO, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def _trial_runs(client: MlflowClient, experiment: str, sweep_id: str | None = None) -> list[Any]:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    query = "tags.`scalesweep.kind` = 'trial'"
    if sweep_id:
        query += f" and tags.`scalesweep.sweep_id` = '{sweep_id}'"
    return list(client.search_runs([exp.experiment_id], query, max_results=1000))


def _wait(what: str, condition: Callable[[], bool], timeout: float, log: Path) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}; driver log:\n{log.read_text()[-3000:]}")


def _session_alive(sid: int) -> list[int]:
    """Live (non-zombie) processes of a session."""
    return [pid for pid in members(session=sid) if process_alive(pid)]


# Stays long (about 90-180 s): the kill must land after one trial finished and while the next is past a
# checkpoint, so the trials must be long enough (90 steps, one at a time) for a 0.5 s poll to see that window.
def test_killed_driver_resumes_every_point_exactly_once(store_uri: str, tmp_path: Path) -> None:
    # Built-in trainer, checkpoints at 30, 60 and 90; one trial at a time, so that the kill lands after a trial
    # finished and while the next one is past its first checkpoint.
    spec = make_spec("killed", store_uri, horizon=90, eval_steps=[30, 60, 90], baselines=[],
                     execution={"concurrency": 1, "num_cpus": 2})
    spec_path, workdir, log = write_spec(tmp_path / "spec.yaml", spec), tmp_path / "wd", tmp_path / "driver.log"
    client = MlflowClient(store_uri)
    proc = _driver(spec_path, workdir, log)

    def mid_sweep() -> bool:
        runs = _trial_runs(client, "killed")
        done = [r for r in runs if r.info.status == "FINISHED"]
        running = [r for r in runs if r.info.status == "RUNNING" and client.get_metric_history(r.info.run_id, "fd")]
        return bool(done) and bool(running)  # something finished, something checkpointed mid-way

    _wait("a finished trial and one mid-way", mid_sweep, 240, log)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole group: driver and local Ray
    proc.wait()
    killed_at = time.time() * 1000
    deadline = time.time() + 15
    while _session_alive(proc.pid) and time.time() < deadline:
        time.sleep(0.5)
    assert _session_alive(proc.pid) == []  # no Ray process outlives the group kill
    before = {r.info.run_id: r for r in _trial_runs(client, "killed")}
    finished_before = {k for k, r in before.items() if r.info.status == "FINISHED"}
    checkpointed = {k for k, r in before.items()
                    if r.info.status == "RUNNING" and client.get_metric_history(k, "fd")}
    assert checkpointed
    assert sweep_status(workdir)["state"] == "INTERRUPTED"
    assert any(r.info.status == "RUNNING" for r in before.values())  # left behind by the killed driver

    resumed = _driver(spec_path, workdir, log.with_suffix(".resume.log"), "--resume")
    assert resumed.wait(timeout=400) == 0, log.with_suffix(".resume.log").read_text()[-3000:]

    runs = _trial_runs(client, "killed")
    keys = sorted(r.data.tags["scalesweep.trial_key"] for r in runs)
    listing = [(r.info.run_name, r.info.status, r.data.tags.get("scalesweep.status")) for r in runs]
    assert keys == sorted(["K=2,gamma=0.15,seed=0", "K=2,gamma=0.25,seed=0", "K=3,gamma=0.15,seed=0",
                           "K=3,gamma=0.25,seed=0"]), listing  # one run per trial, no duplicates
    assert all(r.info.status == "FINISHED" for r in runs), listing  # every point finished once, none RUNNING
    for run in runs:
        old = before.get(run.info.run_id)
        if run.info.run_id in finished_before:  # completed trials were not re-run
            assert run.info.end_time == old.info.end_time  # type: ignore[union-attr]
        steps = [m for m in client.get_metric_history(run.info.run_id, "fd")]
        assert sorted(m.step for m in steps) == [30, 60, 90]  # no eval logged twice
        if run.info.run_id in checkpointed:  # resumed from its checkpoint into its own run, not from step 0
            first = min(steps, key=lambda m: m.step)
            assert first.timestamp < killed_at
    result = load_sweep_result(workdir)
    assert result.state == "SUCCEEDED" and len(result.points) == 4 and result.selection is not None


def _ran_what_its_name_says(run: Any) -> None:
    """A search trial's run carries the point of its name. The driver creates the run with the point (params K and
    gamma) before the trial starts; the trial then logs its whole config. A cancel that lands between the two
    leaves a KILLED run with the point only: that run never trained, so there is no config to compare."""
    tags, params = run.data.tags, run.data.params
    k, gamma = params["K"], params["gamma"]
    assert tags["scalesweep.trial_key"] == f"K={k},gamma={gamma},seed=0", (run.info.run_name, params)
    if "optimizer.refresh_every" in params:
        assert params["optimizer.refresh_every"] == k and params["optimizer.gamma"] == gamma, params
    else:
        assert run.info.status == "KILLED", (run.info.run_name, run.info.status, params)


# Stays long (about 60-110 s): four drivers (two sweeps, then both resumed), each starting its own Ray, because
# what it guards (two drivers in one MLflow experiment, cancelled and resumed) exists only across processes.
def test_two_sweeps_at_once_stay_apart_and_cancelled_sweeps_resume(store_uri: str, tmp_path: Path) -> None:
    """Sweep a is cancelled as the service does it (SIGTERM to the driver's whole process group, local Ray
    included), sweep b through `cancel_sweep` (cancel file, then SIGTERM to the driver); both then resume."""
    # Its own experiment: the store lives for the session (a rerun that reused "twins" would count an earlier
    # attempt's runs as belonging to neither sweep).
    experiment = f"twins-{uuid.uuid4().hex[:8]}"
    specs = {
        "twin-a": make_spec("twin-a", store_uri, baselines=["adamw"],
                            search={"space": {"K": [2, 3], "gamma": [0.15, 0.25]}}),
        "twin-b": make_spec("twin-b", store_uri, baselines=["muon"],
                            search={"space": {"K": [3, 4], "gamma": [0.1, 0.35]}}),
    }
    procs, paths = {}, {}
    for name, spec in specs.items():
        spec.update(backend=fake_backend(FAKE_SLEEP="0.5"), tracking={"tracking_uri": store_uri,
                                                                       "experiment": experiment},
                    execution={"concurrency": 1, "num_cpus": 1})
        paths[name] = (write_spec(tmp_path / f"{name}.yaml", spec), tmp_path / name, tmp_path / f"{name}.log")
        procs[name] = _driver(*paths[name])
    client = MlflowClient(store_uri)

    def first_trial_done(name: str) -> Callable[[], bool]:
        def check() -> bool:
            workdir = paths[name][1]
            if not (workdir / "sweep.json").exists():
                return False
            sweep_id = load_sweep_state(workdir)["sweep_id"]
            return any(r.info.status == "FINISHED" for r in _trial_runs(client, experiment, sweep_id))
        return check

    _wait("sweep a's first trial", first_trial_done("twin-a"), 240, paths["twin-a"][2])
    os.killpg(procs["twin-a"].pid, signal.SIGTERM)  # Ray's processes get it too: the driver's grace period ends it
    _wait("sweep b's first trial", first_trial_done("twin-b"), 240, paths["twin-b"][2])
    status = cancel_sweep(paths["twin-b"][1], grace_s=90)
    assert status["state"] == "CANCELLED" and not status["driver_alive"]
    for name, proc in procs.items():
        assert proc.wait(timeout=60) == 130, paths[name][2].read_text()[-3000:]
        state = load_sweep_state(paths[name][1])
        assert sweep_status(paths[name][1])["state"] == "CANCELLED", sweep_status(paths[name][1])
        runs = _trial_runs(client, experiment, state["sweep_id"])
        assert all(r.info.status in ("FINISHED", "KILLED") for r in runs), [
            (r.info.run_name, r.info.status) for r in runs]
        parent = client.get_run(state["parent_run_id"])
        assert parent.info.status == "KILLED" and parent.data.tags["scalesweep.status"] == "CANCELLED"

    resumed = {name: _driver(paths[name][0], paths[name][1], tmp_path / f"{name}.resume.log", "--resume")
               for name in paths}  # both at once again
    for name, proc in resumed.items():
        assert proc.wait(timeout=300) == 0, (tmp_path / f"{name}.resume.log").read_text()[-3000:]

    expected = {
        "twin-a": {"adamw,seed=0"} | {f"K={k},gamma={g},seed=0" for k in (2, 3) for g in (0.15, 0.25)},
        "twin-b": {"muon,seed=0"} | {f"K={k},gamma={g},seed=0" for k in (3, 4) for g in (0.1, 0.35)},
    }
    all_runs = _trial_runs(client, experiment)
    seen = 0
    for name, (_, workdir, _) in paths.items():
        state = load_sweep_state(workdir)
        runs = [r for r in all_runs if r.data.tags["scalesweep.sweep_id"] == state["sweep_id"]]
        seen += len(runs)
        assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {state["parent_run_id"]}
        finished = [r.data.tags["scalesweep.trial_key"] for r in runs if r.info.status == "FINISHED"]
        listing = [(r.info.run_name, r.info.status, r.data.tags.get("scalesweep.status")) for r in runs]
        assert sorted(finished) == sorted(expected[name]), listing  # each of its own trials finished exactly once
        for run in runs:
            assert run.info.status in ("FINISHED", "KILLED"), listing  # KILLED: a trial stopped by a cancel
            if run.data.tags["scalesweep.role"] == "search":
                _ran_what_its_name_says(run)
        result = load_sweep_result(workdir)
        assert result.state == "SUCCEEDED" and len(result.points) == 4
    assert seen == len(all_runs)  # no trial run belongs to neither sweep
    assert load_sweep_result(paths["twin-a"][1]).best == {"K": 3, "gamma": 0.15}
    assert load_sweep_result(paths["twin-b"][1]).best == {"K": 3, "gamma": 0.1}


def load_sweep_state(workdir: Path) -> dict[str, Any]:
    import json

    return dict(json.loads((workdir / "sweep.json").read_text()))
