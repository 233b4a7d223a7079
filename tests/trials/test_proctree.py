"""A trial ends everything its trainer started: a trainer that ignores SIGTERM and starts a child in a session of
its own is gone within the grace period when the trial stops, and when the process running the trial is killed
outright (a cancelled Ray worker, a driver that died)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from trials.core.proctree import TRIAL_TAG_ENV, end_tagged, process_alive, tagged_pids

TRAINER = Path(__file__).resolve().parents[1] / "api" / "stubborn_trainer.py"


def _wait_for_pids(path: Path, timeout: float = 60) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.is_file() and path.read_text().strip():
            return [int(p) for p in path.read_text().split()]
        time.sleep(0.1)
    raise AssertionError(f"the trainer did not start (no {path})")


def _gone_within(pids: list[int], seconds: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not any(process_alive(p) for p in pids):
            return time.monotonic() - start
        time.sleep(0.1)
    left = [p for p in pids if process_alive(p)]
    for p in left:  # do not leave them behind after a failure
        os.kill(p, signal.SIGKILL)
    raise AssertionError(f"still running after {seconds} s: {left}")


def test_end_tagged_kills_a_stubborn_tree_after_the_grace(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    env = {**os.environ, TRIAL_TAG_ENV: "t-unit"}
    trainer = subprocess.Popen([sys.executable, str(TRAINER), "--progress", str(tmp_path / "p"), "--eval-steps", "1",
                                "--pids", str(pids_file)], env=env, start_new_session=True)
    pids = _wait_for_pids(pids_file)
    assert sorted(tagged_pids(TRIAL_TAG_ENV, "t-unit")) == sorted(pids)
    start = time.monotonic()
    assert end_tagged(TRIAL_TAG_ENV, "t-unit", grace_s=1.0) == 2
    took = time.monotonic() - start
    trainer.wait(timeout=5)
    assert not any(process_alive(p) for p in pids)
    assert 1.0 <= took < 4.0  # SIGTERM was ignored: SIGKILL came after the grace period, not before


RUN_TRIAL = """
import sys
from trials import run_command_trial
cfg = {"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}
cmd = {"command": [sys.executable, sys.argv[1], "--progress", "{progress_file}", "--eval-steps", "{eval_steps}",
                   "--pids", sys.argv[2]], "kill_grace_s": 1.0, "poll_s": 0.1}
run_command_trial(cfg, cmd)
"""


def test_a_trial_killed_outright_leaves_no_trainer_behind(tmp_path: Path) -> None:
    # The process running the trial (in a sweep: a Ray worker) is SIGKILLed, so its own clean-up never runs; the
    # trainer's reaper notices and ends the tree: SIGTERM, the grace period (1 s), SIGKILL.
    pids_file = tmp_path / "pids"
    runner = subprocess.Popen([sys.executable, "-c", RUN_TRIAL, str(TRAINER), str(pids_file)],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    pids = _wait_for_pids(pids_file)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    _gone_within(pids, 1.0 + 5.0)


def test_a_trial_that_times_out_ends_the_trainer_tree(tmp_path: Path) -> None:
    from trials import TrialError, run_command_trial

    pids_file = tmp_path / "pids"
    cmd = {"command": [sys.executable, str(TRAINER), "--progress", "{progress_file}", "--eval-steps", "{eval_steps}",
                       "--pids", str(pids_file)], "kill_grace_s": 0.5, "poll_s": 0.1, "timeout_s": 3}
    try:
        run_command_trial({"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}, cmd)
    except TrialError as exc:
        assert "timed out" in str(exc)
    else:
        raise AssertionError("the trial did not time out")
    pids = [int(p) for p in pids_file.read_text().split()]
    assert not any(process_alive(p) for p in pids)  # ended before run_command_trial returned


_SPAWNER = """
import multiprocessing, os, sys, time
from trials.core.proctree import die_with_parent

def worker(parent, out, armed):
    if armed:
        die_with_parent(parent)
    with open(out, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=worker, args=(os.getpid(), sys.argv[1], sys.argv[2] == "armed"), daemon=True)
    p.start()
    p.join()
"""


def test_a_spawned_timing_rank_dies_with_a_sigkilled_starter(tmp_path: Path) -> None:
    # the N-rank timing stage's ranks (multiprocessing spawn, daemon): a SIGKILLed starter runs no cleanup, so
    # without the kernel's parent-death signal its rank would live on (shown by the unarmed control)
    script = tmp_path / "spawner.py"
    script.write_text(_SPAWNER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    pids = {}
    for mode in ("armed", "unarmed"):
        out = tmp_path / f"{mode}.pid"
        starter = subprocess.Popen([sys.executable, str(script), str(out), mode], env=env)
        pids[mode] = _wait_for_pids(out)
        starter.kill()
        starter.wait()
    assert _gone_within(pids["armed"], 10) < 10
    time.sleep(1)
    assert process_alive(pids["unarmed"][0])  # the control: multiprocessing alone leaves it running
    os.kill(pids["unarmed"][0], signal.SIGKILL)


def test_a_group_a_session_and_a_family_are_found_by_pid() -> None:
    """`members` finds a new session's processes by session and by group, `family` its leader's descendants in a
    session of their own too (where a group kill does not reach), `start_time` tells a pid's process from a later
    one, and `free_port` gives a port that can be bound."""
    import socket

    from trials.core.proctree import family, free_port, members, start_time

    code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); "
            "time.sleep(60)']); time.sleep(60)")
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while len(family(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        found = family(leader.pid)
        assert leader.pid in found and len(found) == 2
        (child,) = found - {leader.pid}
        assert members(session=leader.pid) == [leader.pid] == members(group=leader.pid)  # the child left both
        assert os.getsid(child) == child
        assert int(start_time(child) or -1) >= int(start_time(leader.pid) or 0) > 0  # the child started later
    finally:
        for pid in family(leader.pid):
            os.kill(pid, signal.SIGKILL)
        leader.wait()
    assert start_time(leader.pid) is None and not process_alive(leader.pid)
    with socket.socket() as s:
        s.bind(("127.0.0.1", free_port("127.0.0.1")))
