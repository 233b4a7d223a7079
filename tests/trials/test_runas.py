"""A trainer run as another, unprivileged user (issue 53 M8, docs/security.md "A trainer as another user"): through
`python -m trials.core.runas --user nobody --progress {progress_file} --config {config_file} -- ...` it trains,
reports, and is cancelled like any other trainer; a bare `setpriv --reuid=nobody` in front of it cannot write its
progress file. Needs root (the drivers' user in the service's container) and a `nobody` user; skipped elsewhere."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trials import TrialError, run_command_trial
from trials.core.proctree import TRIAL_TAG_ENV, end_tagged, process_alive, tagged_pids

STUBBORN = Path(__file__).resolve().parents[1] / "api" / "stubborn_trainer.py"
# The trainer's own interpreter: the test's virtual environment may sit in a folder only root can enter.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")

REPORTING = """
import json, os, sys
for step in (int(s) for s in os.environ["SCALESWEEP_EVAL_STEPS"].split(",")):
    with open(os.environ["SCALESWEEP_PROGRESS_FILE"], "a") as f:
        f.write(json.dumps({"step": step, "fd": 30.0 - step, "uid": os.getuid(), "gid": os.getgid(),
                            "groups": len(os.getgroups()), "config_read": int(len(open(os.environ[
                            "SCALESWEEP_TRIAL_CONFIG"]).read()) > 0)}) + "\\n")
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None or not any(p.pw_name == "nobody" for p in pwd.getpwall()),
    reason="needs root, a 'nobody' user and /usr/bin/python3")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder `nobody` can write (pytest's tmp_path is root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="scalesweep-runas-test-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def stubborn(shared: Path) -> Path:
    """The stubborn trainer copied where `nobody` can read it: the checkout may sit under a folder only root can
    enter (a clone under `mktemp -d`, or under /root)."""
    copy = shared / STUBBORN.name
    shutil.copyfile(STUBBORN, copy)
    copy.chmod(0o644)
    return copy


def _runas(*trainer: str, progress: str = "{progress_file}", config: str = "{config_file}") -> list[str]:
    return [sys.executable, "-m", "trials.core.runas", "--user", "nobody", "--progress", progress, "--config",
            config, "--", *trainer]


def test_a_trainer_run_as_nobody_trains_and_reports(shared: Path) -> None:
    script = shared / "report.py"
    script.write_text(REPORTING)
    seen: list[dict[str, Any]] = []
    result = run_command_trial({"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]},
                               {"command": _runas(SYSTEM_PYTHON, str(script)), "poll_s": 0.1}, progress=seen.append)
    assert result.status == "SUCCEEDED" and result.fd == {2: 28.0, 4: 26.0} and result.objective == 27.0
    nobody = pwd.getpwnam("nobody")
    assert {(r["uid"], r["gid"], r["groups"], r["config_read"]) for r in seen} == {
        (nobody.pw_uid, nobody.pw_gid, 0, 1.0)}


def test_a_bare_setpriv_cannot_write_the_progress_file(shared: Path) -> None:
    # What docs/security.md recommended before: every trial failed, the trial folder being root's alone (0700).
    script = shared / "report.py"
    script.write_text(REPORTING)
    setpriv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", SYSTEM_PYTHON, str(script)]
    with pytest.raises(TrialError, match="PermissionError"):
        run_command_trial({"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}, {"command": setpriv, "poll_s": 0.1})


def test_a_trainer_run_as_nobody_is_cancelled_with_its_setsid_child(shared: Path, stubborn: Path) -> None:
    # The stubborn trainer ignores SIGTERM and starts a child that calls setsid and ignores it too; both run as
    # nobody. The trial's end (here its timeout) ends the trainer's tag from root: after the grace, SIGKILL.
    pids_file = shared / "pids"
    cmd = {"command": _runas(SYSTEM_PYTHON, str(stubborn), "--progress", "{progress_file}", "--eval-steps",
                             "{eval_steps}", "--pids", str(pids_file)),
           "kill_grace_s": 0.5, "poll_s": 0.1, "timeout_s": 4}
    start = time.monotonic()
    with pytest.raises(TrialError, match="timed out"):
        run_command_trial({"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}, cmd)
    pids = [int(p) for p in pids_file.read_text().split()]
    try:
        assert len(pids) == 2
        assert {os.stat(f"/proc/{p}").st_uid for p in pids if process_alive(p)} <= {pwd.getpwnam("nobody").pw_uid}
        assert [p for p in pids if process_alive(p)] == []  # ended before run_command_trial returned
        assert time.monotonic() - start < 4 + 0.5 + 5
    finally:
        for p in pids:
            if process_alive(p):
                os.kill(p, signal.SIGKILL)


def test_a_job_tag_ends_a_trainer_run_as_nobody(shared: Path, stubborn: Path) -> None:
    # The job's cancel (and the queue's end of a job) find another user's processes by their tag too.
    import subprocess

    pids_file = shared / "pids"
    progress = shared / "trial"
    progress.mkdir()
    (progress / "trial.json").write_text("{}")
    env = {**os.environ, TRIAL_TAG_ENV: "runas-test"}
    trainer = subprocess.Popen(_runas(SYSTEM_PYTHON, str(stubborn), "--progress", str(progress / "p.jsonl"),
                                      "--eval-steps", "1", "--pids", str(pids_file), progress=str(progress / "p.jsonl"),
                                      config=str(progress / "trial.json")), env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not (pids_file.is_file() and pids_file.read_text().strip()):
        assert time.monotonic() < deadline, "the trainer did not start"
        time.sleep(0.1)
    pids = [int(p) for p in pids_file.read_text().split()]
    try:
        assert sorted(tagged_pids(TRIAL_TAG_ENV, "runas-test")) == sorted(pids)
        assert end_tagged(TRIAL_TAG_ENV, "runas-test", grace_s=0.5) == 2
        trainer.wait(timeout=5)
        assert [p for p in pids if process_alive(p)] == []
    finally:
        for p in pids:
            if process_alive(p):
                os.kill(p, signal.SIGKILL)
