"""The command backend against a trainer that misbehaves on purpose (issue 53's rows M3, M4, L4, L1, M7): each
test writes a small trainer script into its folder and runs it through the real backend (`run_command_trial`).

What a trainer reports is checked before it counts: FD finite and in [0, MAX_FD] (NaN or +inf is a divergence, with
its reason recorded), steps integers within the horizon, only the declared eval steps in the objective and every
one of them required; what it writes is read in bounded pieces (stderr quoted from its tail, a cap on a progress
line and on the stderr kept); a metric MLflow would refuse is dropped with a warning; the trial's scratch folder is
the trainer's working directory, holds no service path, and is removed however the trial ends."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from trials import TrialError, run_command_trial
from trials._command import MAX_FD, MAX_LINE_BYTES, MAX_METRICS, STDERR_FILE_BYTES
from trials.core.proctree import TRIAL_TAG_ENV, process_alive, tagged_pids
from trials.record import METRIC, TAG

pytestmark = pytest.mark.integration  # every test starts a trainer process

HORIZON2 = {"rung": "cpu-xs", "steps": 2, "eval_steps": [1, 2]}
HORIZON4 = {"rung": "cpu-xs", "steps": 4, "eval_steps": [2, 4]}

# Every trainer starts with this: `report(**record)` appends one progress line; `dump(**facts)` writes what the
# trainer saw (its folder, working directory, environment) where the test reads it.
PREAMBLE = """\
import json, os, sys, time
PROGRESS = os.environ["SCALESWEEP_PROGRESS_FILE"]
def report(**record):
    with open(PROGRESS, "a") as handle:
        handle.write(json.dumps(record) + "\\n")
def dump(**facts):
    with open(sys.argv[1] + ".tmp", "w") as handle:
        json.dump({"folder": os.path.dirname(PROGRESS), "cwd": os.getcwd(), **facts}, handle)
    os.replace(sys.argv[1] + ".tmp", sys.argv[1])
"""


def _trainer(tmp_path: Path, body: str, **command: Any) -> dict[str, Any]:
    """The command config of a trainer running PREAMBLE + `body`; argv[1] is the path its `dump` writes to."""
    script = tmp_path / "trainer.py"
    script.write_text(PREAMBLE + textwrap.dedent(body))
    return {"command": [sys.executable, str(script), str(tmp_path / "dump.json")], "poll_s": 0.05,
            "kill_grace_s": 1.0, **command}


def _tracked(tmp_path: Path, store_uri: str, config: dict[str, Any]) -> dict[str, Any]:
    return {**config, "tracking": {"tracking_uri": store_uri, "experiment": f"hardening-{tmp_path.name}"}}


def _only_run(store_uri: str, tmp_path: Path) -> Any:
    client = MlflowClient(store_uri)
    experiment = client.get_experiment_by_name(f"hardening-{tmp_path.name}")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def _dumped(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "dump.json").read_text())


# --- M3: what a trainer reports -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("fd", "shown"), [("-1e300", "-1e+300"), ("1e308", "1e+308"), ("-0.5", "-0.5"),
                                           ("float('-inf')", "-inf"), (repr(MAX_FD * 10), "10000000000000.0")])
def test_an_fd_out_of_range_fails_the_trial_with_its_reason(tmp_path: Path, store_uri: str, fd: str,
                                                            shown: str) -> None:
    # -1e300 was chosen as the best point; 1e308 broke fANOVA and every analysis of the finished sweep.
    cmd = _trainer(tmp_path, f"report(step=1, fd={fd}, effective_time_s=0.1)\nreport(step=2, fd=30.0)\n")
    with pytest.raises(TrialError, match=re.escape(f"'fd' {shown} at step 1 is not a Fréchet distance")):
        run_command_trial(_tracked(tmp_path, store_uri, HORIZON2), cmd)
    run = _only_run(store_uri, tmp_path)
    assert run.info.status == "FAILED" and f"'fd' {shown} at step 1" in run.data.tags[TAG.ERROR]


@pytest.mark.parametrize("fd", ["float('nan')", "float('inf')"])
def test_a_non_finite_fd_is_a_divergence_whose_reason_is_recorded(tmp_path: Path, store_uri: str, fd: str) -> None:
    # NaN/Inf ended the trial FAILED with no error recorded: now the run says why.
    cmd = _trainer(tmp_path, f"report(step=1, fd={fd}, effective_time_s=0.1)\n")
    result = run_command_trial(_tracked(tmp_path, store_uri, HORIZON2), cmd)
    assert result.status == "DIVERGED" and result.diverged_at == 1 and result.objective is None
    run = _only_run(store_uri, tmp_path)
    assert run.info.status == "FAILED" and run.data.tags[TAG.STATUS] == "DIVERGED"
    assert run.data.tags[TAG.ERROR] == f"diverged: the trainer reported fd {float(eval(fd))} at step 1"


@pytest.mark.parametrize(("step", "shown"), [("-5", "-5"), ("True", "True"), ("3", "3"), ("'2'", "'2'"),
                                             ("1.0", "1.0")])
def test_a_step_that_is_not_an_integer_within_the_horizon_fails_the_trial(tmp_path: Path, step: str,
                                                                          shown: str) -> None:
    cmd = _trainer(tmp_path, f"report(step={step}, fd=30.0)\nreport(step=1, fd=30.0)\nreport(step=2, fd=30.0)\n")
    with pytest.raises(TrialError, match=rf"integer 'step' in \[0, steps=2\], got {shown}"):
        run_command_trial(HORIZON2, cmd)


def test_twenty_thousand_records_beyond_the_horizon_end_the_trial_at_the_first(tmp_path: Path) -> None:
    body = """
    with open(PROGRESS, "a") as handle:
        for step in range(3, 20_003):
            handle.write(json.dumps({"step": step, "fd": 10.0}) + "\\n")
    """
    seen: list[int] = []
    start = time.monotonic()
    with pytest.raises(TrialError, match=r"integer 'step' in \[0, steps=2\], got 3\b"):
        run_command_trial(HORIZON2, _trainer(tmp_path, body), progress=lambda r: seen.append(r["step"]))
    assert seen == [] and time.monotonic() - start < 30


def test_the_objective_is_the_mean_over_the_declared_eval_steps_only(tmp_path: Path, store_uri: str) -> None:
    # FD at step 1 and 3 (not declared) must neither count in the objective nor enter the run's FD history.
    body = """
    report(step=1, fd=1000.0, loss=2.0)
    report(step=2, fd=40.0, effective_time_s=1.0)
    report(step=3, fd=0.5, loss=1.0)
    report(step=4, fd=30.0, effective_time_s=2.0)
    """
    seen: list[dict[str, Any]] = []
    result = run_command_trial(_tracked(tmp_path, store_uri, HORIZON4), _trainer(tmp_path, body),
                               progress=seen.append)
    assert result.status == "SUCCEEDED" and result.fd == {2: 40.0, 4: 30.0}
    assert result.objective == 35.0 and result.best_fd == 30.0 and result.best_step == 4 and result.run_id
    assert [(r["step"], r.get("fd")) for r in seen] == [(1, None), (2, 40.0), (3, None), (4, 30.0)]
    history = MlflowClient(store_uri).get_metric_history(result.run_id, METRIC.FD)
    assert sorted((m.step, m.value) for m in history) == [(2, 40.0), (4, 30.0)]
    assert sorted(m.step for m in MlflowClient(store_uri).get_metric_history(result.run_id, "loss")) == [1, 3]


def test_a_missing_declared_eval_step_fails_the_trial_naming_it(tmp_path: Path) -> None:
    cmd = _trainer(tmp_path, "report(step=2, fd=40.0)\nreport(step=3, fd=20.0)\n")
    with pytest.raises(TrialError, match=r"without reporting 'fd' at eval step\(s\) \[4\] \(declared: \[2, 4\]\)"):
        run_command_trial(HORIZON4, cmd)


def test_with_1000_declared_eval_steps_the_error_stays_short(tmp_path: Path) -> None:
    body = """
    with open(PROGRESS, "a") as handle:
        for step in range(1, 1001):
            if step != 500:
                handle.write(json.dumps({"step": step, "fd": 10.0}) + "\\n")
    """
    config = {"rung": "cpu-xs", "steps": 1000, "eval_steps": list(range(1, 1001))}
    with pytest.raises(TrialError) as raised:
        run_command_trial(config, _trainer(tmp_path, body))
    assert str(raised.value) == ("trainer command finished without reporting 'fd' at eval step(s) [500] (declared: "
                                 "[1, 2, 3, 4, 5, 6, ..., 998, 999, 1000] (1000 steps))")


def test_an_eval_step_reported_twice_fails_the_trial(tmp_path: Path) -> None:
    cmd = _trainer(tmp_path, "report(step=2, fd=40.0)\nreport(step=2, fd=1.0)\nreport(step=4, fd=30.0)\n")
    with pytest.raises(TrialError, match="'fd' at step 2 reported twice"):
        run_command_trial(HORIZON4, cmd)


@pytest.mark.parametrize(("value", "why"), [("True", "'fd' at step 1 must be a number, got True"),
                                            ("'41'", "'fd' at step 1 must be a number, got '41'"),
                                            ("10 ** 400", "is not a Fréchet distance")])
def test_an_fd_that_is_not_a_float_fails_the_trial(tmp_path: Path, value: str, why: str) -> None:
    cmd = _trainer(tmp_path, f"report(step=1, fd={value})\nreport(step=2, fd=30.0)\n")
    with pytest.raises(TrialError, match=why):
        run_command_trial(HORIZON2, cmd)


# --- M4: what a trainer writes ------------------------------------------------------------------------------------


def _peak_traced(call: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """Peak bytes Python allocated while `call` ran (every thread), and what it raised."""
    tracemalloc.start()
    try:
        call()
        raised = None
    except BaseException as exc:  # returned to the test, which asserts on it
        raised = exc
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak, raised


def test_a_100_mb_stderr_is_quoted_from_its_tail_and_kept_bounded(tmp_path: Path) -> None:
    # The whole file was read to quote 5 lines (a 718 MB worker) and stderr.txt grew without bound.
    body = """
    block = ("x" * 1023 + "\\n").encode() * 1024  # 1 MiB
    for _ in range(100):
        sys.stderr.buffer.write(block)
    for i in range(1, 7):
        sys.stderr.buffer.write(f"last line {i}\\n".encode())
    sys.stderr.flush()
    time.sleep(0.5)  # the backend's reader has copied all but what the pipe holds
    folder = os.path.dirname(PROGRESS)
    kept = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith("stderr.txt"))
    dump(kept=kept)
    sys.exit(7)
    """
    peak, raised = _peak_traced(lambda: run_command_trial(HORIZON2, _trainer(tmp_path, body)))
    assert isinstance(raised, TrialError), raised
    assert str(raised) == ("trainer command exited with 7: last line 2 | last line 3 | last line 4 | last line 5 | "
                           "last line 6")
    assert peak < 4 << 20, f"peak {peak / 2**20:.1f} MiB"
    assert 2 << 20 <= _dumped(tmp_path)["kept"] <= 2 * STDERR_FILE_BYTES


def test_the_quote_keeps_the_last_line_whole_after_long_ones(tmp_path: Path) -> None:
    # The run's error tag keeps 500 characters: five 2,000-character lines used to push the real reason out of it.
    body = """
    for _ in range(5):
        print("y" * 2000, file=sys.stderr)
    print("ValueError: the real reason", file=sys.stderr)
    sys.exit(2)
    """
    with pytest.raises(TrialError) as raised:
        run_command_trial(HORIZON2, _trainer(tmp_path, body))
    message = str(raised.value)
    assert message.endswith("... | ValueError: the real reason") and len(message) <= 450, message


def test_a_300_mb_progress_line_fails_the_trial_in_bounded_memory(tmp_path: Path) -> None:
    # The partial-line buffer grew to the line's size (1.1 GB for 300 MB): now a line is capped.
    body = """
    report(step=1, fd=30.0)
    chunk = b"7" * (1 << 20)
    with open(PROGRESS, "ab") as handle:
        handle.write(b'{"step": 2, "fd": ')
        for _ in range(300):
            handle.write(chunk)
            handle.flush()
    time.sleep(60)
    """
    peak, raised = _peak_traced(lambda: run_command_trial(HORIZON2, _trainer(tmp_path, body)))
    assert isinstance(raised, TrialError), raised
    assert f"a progress line longer than {MAX_LINE_BYTES} bytes" in str(raised)
    assert peak < MAX_LINE_BYTES + (4 << 20), f"peak {peak / 2**20:.1f} MiB"


def test_a_progress_file_that_is_not_a_regular_file_fails_without_hanging(tmp_path: Path) -> None:
    # A FIFO in the progress file's place would block the backend's open() forever.
    cmd = _trainer(tmp_path, "os.mkfifo(PROGRESS)\ntime.sleep(60)\n", timeout_s=30)
    start = time.monotonic()
    with pytest.raises(TrialError, match=r"progress\.jsonl is not a regular file"):
        run_command_trial(HORIZON2, cmd)
    assert time.monotonic() - start < 20


# --- L4: a metric MLflow refuses ----------------------------------------------------------------------------------


def test_a_metric_mlflow_refuses_is_dropped_with_a_warning(tmp_path: Path, store_uri: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    # `../../evil` failed the whole trial; a trainer's `objective` would have written over the trial's own.
    extra = {f"m{i}": float(i) for i in range(MAX_METRICS + 5)}
    body = f"""
    report(**{{"step": 1, "fd": 40.0, "../../evil": 1.0, "good/one": 2.0, "objective": -1.0, "x" * 300: 3.0}})
    report(**{{"step": 2, "fd": 30.0, "metric_name": "../fd", **{extra!r}}})
    """
    with caplog.at_level(logging.WARNING, logger="trials._command"):
        result = run_command_trial(_tracked(tmp_path, store_uri, HORIZON2), _trainer(tmp_path, body))
    assert result.status == "SUCCEEDED" and result.objective == 35.0 and result.metric_name == "fd_external"
    assert result.run_id
    run = MlflowClient(store_uri).get_run(result.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["good/one"] == 2.0
    assert "../../evil" not in run.data.metrics and run.data.metrics[METRIC.OBJECTIVE] == 35.0
    kept = {k for k in run.data.metrics if k.startswith("m")}
    assert len(kept) == MAX_METRICS - 1  # `good/one` took one of the names a trial may log (`fd` takes none)
    warned = caplog.text
    assert "'../../evil'" in warned and "'objective'" in warned and "'../fd'" in warned and "'xxxxxxxx" in warned
    assert f"beyond the {MAX_METRICS} metric names" in warned


# --- L1: the scratch folder goes when the trial does --------------------------------------------------------------

OUTCOMES = {
    "succeeded": ("dump()\nreport(step=1, fd=3.0)\nreport(step=2, fd=2.0)\n", None),
    "exited 1": ("dump()\nsys.exit(1)\n", "exited with 1"),
    "bad fd": ("dump()\nreport(step=1, fd=-1.0)\ntime.sleep(60)\n", "not a Fréchet distance"),
    "timed out": ("dump()\ntime.sleep(60)\n", "timed out"),
    "stopped": ("dump()\nreport(step=1, fd=3.0)\ntime.sleep(60)\n", "stopped by the caller"),
}


def _stop(record: dict[str, Any]) -> None:
    raise SystemExit("stopped by the caller")  # how Tune stops a trial (from `tune.report`)


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_the_scratch_folder_is_removed_however_the_trial_ends(tmp_path: Path, outcome: str) -> None:
    body, error = OUTCOMES[outcome]
    cmd = _trainer(tmp_path, body, timeout_s=3)
    try:
        run_command_trial(HORIZON2, cmd, progress=_stop if outcome == "stopped" else None)
        raised = None
    except (TrialError, SystemExit) as exc:
        raised = str(exc)
    assert (raised is None) if error is None else (error in str(raised)), raised
    folder = Path(_dumped(tmp_path)["folder"])
    assert folder.name.startswith("scalesweep-cmd-") and not folder.exists()


RUN_TRIAL = """
import sys
from trials import run_command_trial
run_command_trial({"rung": "cpu-xs", "steps": 2, "eval_steps": [1, 2]},
                  {"command": [sys.executable, sys.argv[1], sys.argv[2]], "poll_s": 0.05, "kill_grace_s": 0.5})
"""


def test_a_killed_trials_folder_is_removed_once_its_trainer_has_ended(tmp_path: Path) -> None:
    # The process running the trial (a Ray worker) is SIGKILLed: its own clean-up never runs, and the folder was
    # left in /tmp for good. The next command trial on the machine removes it, once nothing of that trial runs.
    folder = Path(_kill_a_running_trial(tmp_path)["folder"])
    result = run_command_trial(HORIZON2, _trainer(tmp_path, "report(step=1, fd=3.0)\nreport(step=2, fd=2.0)\n"))
    assert result.status == "SUCCEEDED" and not folder.exists()


def _kill_a_running_trial(tmp_path: Path) -> dict[str, Any]:
    """Run a trial in a process of its own, SIGKILL that process while the trainer runs, and wait for the trainer's
    reaper to end the trainer; what the trainer dumped (its folder, its pid)."""
    cmd = _trainer(tmp_path, "dump(pid=os.getpid())\ntime.sleep(60)\n")
    runner = subprocess.Popen([sys.executable, "-c", RUN_TRIAL, *cmd["command"][1:]],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 60
    while not (tmp_path / "dump.json").exists():
        assert time.monotonic() < deadline and runner.poll() is None, "the trainer did not start"
        time.sleep(0.05)
    seen = _dumped(tmp_path)
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    while process_alive(seen["pid"]):  # the trainer's reaper ends it (tests/trials/test_proctree.py)
        assert time.monotonic() < deadline, "the trainer outlived its trial"
        time.sleep(0.1)
    return seen


def test_a_killed_trials_folder_is_removed_by_its_reaper(tmp_path: Path) -> None:
    folder = Path(_kill_a_running_trial(tmp_path)["folder"])
    deadline = time.monotonic() + 5
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not folder.exists()


def test_a_live_trials_folder_is_left_alone(tmp_path: Path) -> None:
    # Two trials at once: the second one's start must not touch the first one's folder.
    first = tmp_path / "first"
    first.mkdir()
    cmd = _trainer(first, "dump()\nwhile not os.path.exists(sys.argv[1] + '.go'):\n    time.sleep(0.05)\n"
                          "report(step=1, fd=3.0)\nreport(step=2, fd=2.0)\n")
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(run_command_trial(HORIZON2, cmd)))
    thread.start()
    deadline = time.monotonic() + 60
    while not (first / "dump.json").exists():
        assert time.monotonic() < deadline, "the first trainer did not start"
        time.sleep(0.05)
    second = tmp_path / "second"
    second.mkdir()
    run_command_trial(HORIZON2, _trainer(second, "report(step=1, fd=3.0)\nreport(step=2, fd=2.0)\n"))
    assert Path(_dumped(first)["folder"]).is_dir()
    (first / "dump.json.go").touch()
    thread.join(60)
    assert outcome and outcome[0].objective == 2.5


# --- M7: the trainer's own folder and environment -----------------------------------------------------------------


def test_a_trainer_runs_in_a_scratch_folder_of_its_own_with_no_service_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A trainer ran in the sweep's job folder (it removed `driver.lock` there) and was handed SCALESWEEP_WORKDIR,
    # which points at the service's databases.
    job = tmp_path / "job"
    job.mkdir()
    (job / "driver.lock").write_text("12345")
    monkeypatch.chdir(job)
    service = {"SCALESWEEP_WORKDIR": str(tmp_path / "work"), "SCALESWEEP_DATABASE_URL": "sqlite:////srv/db",
               "SCALESWEEP_MLFLOW_TRACKING_URI": "sqlite:////srv/mlflow.db", "SCALESWEEP_OPTUNA_STORAGE": "x",
               "SCALESWEEP_TRAINERS": "/etc/trainers.yaml", "SCALESWEEP_SWEEP_ID": "s1"}
    kept = {"SCALESWEEP_JOB_TAG": "job-1", "SCALESWEEP_CACHE_DIR": str(tmp_path / "cache"), "OTHER_VAR": "1"}
    for name, value in {**service, **kept}.items():
        monkeypatch.setenv(name, value)
    body = """
    for name in ("driver.lock", "spec.yaml"):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
    dump(environ=dict(os.environ))
    report(step=1, fd=3.0)
    report(step=2, fd=2.0)
    """
    run_command_trial(HORIZON2, _trainer(tmp_path, body, env={"SCALESWEEP_MINE": "given"}))
    seen = _dumped(tmp_path)
    assert (job / "driver.lock").read_text() == "12345"
    assert seen["cwd"] == str(Path(seen["folder"]) / "work")
    environ = seen["environ"]
    assert not set(service) & set(environ), sorted(set(service) & set(environ))
    assert all(environ[k] == v for k, v in kept.items())
    assert environ["SCALESWEEP_MINE"] == "given"  # the command's own environment is the operator's choice
    assert environ[TRIAL_TAG_ENV] and not tagged_pids(TRIAL_TAG_ENV, environ[TRIAL_TAG_ENV])


def test_a_command_with_its_own_cwd_keeps_it(tmp_path: Path) -> None:
    home = tmp_path / "trainer-home"
    home.mkdir()
    run_command_trial(HORIZON2, _trainer(tmp_path, "dump()\nreport(step=1, fd=3.0)\nreport(step=2, fd=2.0)\n",
                                         cwd=str(home)))
    assert _dumped(tmp_path)["cwd"] == str(home)


# --- {workers} {master_addr} {master_port} outside a sweep --------------------------------------------------------

TORCHRUN_RANK = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
if dist.get_rank() == 0:
    report(step=1, fd=float(total), world=float(dist.get_world_size()))
    report(step=2, fd=float(total))
dist.destroy_process_group()
"""


def test_a_torchrun_command_runs_outside_a_sweep_on_this_hosts_defaults(tmp_path: Path) -> None:
    """Run directly (no Ray, no placement group), {workers} is the trial's worker count, {master_addr} 127.0.0.1
    and {master_port} a free port here: torchrun starts 2 gloo ranks whose all-reduce of 1 + 2 is the FD reported."""
    script = tmp_path / "rank.py"
    script.write_text(PREAMBLE + TORCHRUN_RANK)
    cmd = {"command": [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "{workers}",
                       "--master-addr", "{master_addr}", "--master-port", "{master_port}", str(script), "unused"],
           "poll_s": 0.1, "kill_grace_s": 1.0, "timeout_s": 300}
    result = run_command_trial({**HORIZON2, "workers": 2}, cmd)
    assert result.status == "SUCCEEDED" and result.fd == {1: 3.0, 2: 3.0}


TORCHRUN_TEMP = """
import tempfile
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 0:
    dump(tmp=tempfile.gettempdir(), elastic=os.environ.get("TORCHELASTIC_ERROR_FILE"))
    report(step=1, fd=1.0)
    report(step=2, fd=1.0)
dist.destroy_process_group()
"""


def test_a_torchrun_trials_temporary_files_go_with_its_scratch_folder(tmp_path: Path) -> None:
    """Issue 64, N8: torchrun left one torchelastic_* folder per trial in the system's temporary folder. The trainer's
    TMPDIR is now its scratch folder, removed when the trial ends: torchrun's folder (where its ranks' error files
    go) is made there."""
    script = tmp_path / "rank.py"
    script.write_text(PREAMBLE + TORCHRUN_TEMP)
    cmd = {"command": [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "{workers}",
                       "--master-addr", "{master_addr}", "--master-port", "{master_port}", str(script),
                       str(tmp_path / "dump.json")],
           "poll_s": 0.1, "kill_grace_s": 1.0, "timeout_s": 300}
    result = run_command_trial({**HORIZON2, "workers": 2}, cmd)
    assert result.status == "SUCCEEDED"
    seen = _dumped(tmp_path)
    folder = Path(seen["folder"])
    assert Path(seen["tmp"]).is_relative_to(folder), seen
    if seen["elastic"]:  # torchrun's own folder, where it is named to the ranks
        assert Path(seen["elastic"]).is_relative_to(folder) and "torchelastic_" in seen["elastic"], seen
    assert not folder.exists()
