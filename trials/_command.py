"""The command backend: run a team's own trainer as a trial.

The service launches a command template with the trial's hyperparameters substituted, and reads the trainer's
progress from a JSON-lines file it appends to. The protocol, from the trainer's side:

- placeholders in the command: {optimizer} {K} {gamma} {lr} {aux_lr} {weight_decay} {momentum} {rung} {steps}
  {seed} {batch_size} {eval_steps} (comma-separated) {progress_file} {config_file} {run_id} {tracking_uri}
- environment: `SCALESWEEP_PROGRESS_FILE` (where to write), `SCALESWEEP_TRIAL_CONFIG` (a JSON file holding the
  whole trial config), `SCALESWEEP_EVAL_STEPS`, and, when the trial is tracked, `MLFLOW_TRACKING_URI` and
  `MLFLOW_RUN_ID` (the run this trial owns: the trainer may log more into it). Of scalesweep's own variables the
  trainer inherits only the job's tag and the trial settings (`trials.core.trial_settings`): never a service's paths or
  secrets (SCALESWEEP_WORKDIR, its database and store URLs, its token).
- working directory: the command's `cwd` when one is given, else a scratch folder of the trial's own (removed with
  the trial), never the directory of the process that runs the trial (a sweep's job folder, its driver lock).
- progress: one JSON object per line, at least `{"step": 800, "fd": 41.2, "effective_time_s": 95.3}` at each
  checkpoint; any other numeric field (`loss`, `val_loss`, `optimizer_time_s`, ...) is logged as a metric too;
  an optional `"metric_name"` says what the FD was computed on (e.g. "fd_dinov2"; default "fd_external").

What a trainer reports is checked before it counts (docs/security.md):

- `step` is an integer in [0, steps]; `fd` a number in [0, MAX_FD]. Anything else fails the trial, the reason
  in its error. An FD of NaN or +inf is a divergence (the trial ends DIVERGED, the reason recorded on its run).
- The objective is the mean FD over the declared eval steps, each reported exactly once; a missing one fails the
  trial naming it. FD at any other step is neither counted nor logged (a warning says so).
- A metric name MLflow would refuse, a name of the trial's own summary (`objective`, ...), or a name beyond the
  first MAX_METRICS is dropped with a warning; the trial and its other metrics go on.
- A progress line longer than MAX_LINE_BYTES fails the trial (the backend never holds more than one such line);
  the progress file must be a regular file. stderr goes through a pipe into `stderr.txt`, rotated to
  `stderr.txt.1` at STDERR_FILE_BYTES (the last 2 to 4 MiB kept); a failed trial's error quotes its last lines,
  read from the end of those files.

The backend logs every record to MLflow (so a trainer needs no MLflow code), calls `progress` per record, and
builds the same `TrialResult` as the built-in trainer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import posixpath
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._commandline import PLACEHOLDERS, CommandLine
from ._config import TrialConfig, TrialResult
from ._run import summarise_quality
from .core.errors import TrialError
from .core.proctree import (
    JOB_TAG_ENV,
    TRIAL_TAG_ENV,
    end_tagged,
    free_port,
    new_tag,
    start_reaper,
    start_time,
    tagged_pids,
)
from .core.redact import SERVICE_SECRET_ENV  # never handed to a trainer, even where a driver was started with them
from .core.trial_settings import CACHE_DIR_ENV, DINOV2_PATH_ENV, GIT_SHA_ENV
from .record import METRIC, TAG, TRIAL_TAG, RunRecorder, trial_run

__all__ = ["PLACEHOLDERS", "CommandConfig", "CommandLine", "run_command_trial"]


class CommandConfig(BaseModel):
    """How to launch an external trainer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: CommandLine = Field(
        ..., min_length=1, description="Argument list (or one shell-like string, split with shlex) with placeholders."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cwd: str | None = Field(None, description="Working directory of the command.")
    timeout_s: float | None = Field(
        None, gt=0, le=30 * 86400, description="Kill the trainer after this many seconds (at most 30 days)."
    )
    poll_s: float = Field(
        0.5, ge=0.05, le=3600, description="How often the progress file is read while the trainer runs (at least "
        "every hour, at most 20 times a second: a smaller interval only spins a core)."
    )
    kill_grace_s: float = Field(
        10.0, ge=0, le=600, description="When a trial is stopped, seconds between SIGTERM to everything the trainer "
        "started and SIGKILL to what is left (10: a trainer's own SIGTERM handler has time to save)."
    )


log = logging.getLogger(__name__)

# Of scalesweep's own variables a trainer inherits these alone: the job's tag (a cancel finds the trainer by it) and
# the trial settings (`trials.core.trial_settings`: a trainer may use scalesweep's extractors). The rest are the
# service's and the drivers' (the work folder, database and store URLs, the trainer registry): a trainer has no use
# for them.
PASSED_ON_ENV = frozenset({JOB_TAG_ENV, DINOV2_PATH_ENV, CACHE_DIR_ENV, GIT_SHA_ENV})

# Bounds on what a trainer can make the process running its trial hold or keep (docs/security.md).
MAX_LINE_BYTES = 1 << 20  # one progress line: an honest record is a few hundred bytes; a longer one fails the trial
READ_BYTES = 1 << 16  # one read of the progress file or of stderr: what a read holds in memory
POLL_BYTES = 16 << 20  # progress read per poll while the trainer runs, so a flood cannot starve the timeout check
STDERR_FILE_BYTES = 2 << 20  # stderr.txt rotates to stderr.txt.1 at this size: the last 2 to 4 MiB are kept
QUOTE_BYTES = 1 << 16  # read from the end of stderr to quote its last lines in a failed trial's error
QUOTE_LINES = 5
# The quote's length: the run's error tag keeps 500 characters, and the last line (the error itself, mostly) must
# be in them, however long the lines before it.
QUOTE_CHARS = 400
# Above any Fréchet distance the extractors give (pixels, the largest, stay below 1e4) and small enough that sums
# of squares over any sweep stay finite (1e308 made fANOVA assert and ended a finished sweep FAILED).
MAX_FD = 1e12
MAX_METRICS = 100  # distinct metric names a trainer may log besides `fd` (MLflow takes at most 1000 per batch)
# Written by scalesweep itself: a trainer reporting `objective` must not write over the trial's own.
RESERVED_METRICS = frozenset({*METRIC.SUMMARY, METRIC.TRIAL_WALL_S})
# MLflow's rule for metric names on POSIX (mlflow.utils.validation): these characters, at most 250 of them, and a
# name that stays itself as a path (no `..`, no leading `/`).
_METRIC_NAME = re.compile(r"[/\w.\- :]{1,250}")
_SCRATCH_PREFIX = "scalesweep-cmd-"
_OWNER_FILE = "owner.json"


def _values(cfg: TrialConfig, progress_file: Path, config_file: Path, run_id: str, uri: str) -> dict[str, str]:
    opt = cfg.optimizer
    return {
        "optimizer": opt.name,
        "K": str(opt.refresh_every),
        "gamma": repr(opt.gamma),
        "lr": repr(opt.resolved_lr),
        "aux_lr": repr(opt.aux_lr),
        "weight_decay": repr(opt.weight_decay),
        "momentum": repr(opt.momentum),
        "rung": cfg.rung,
        "steps": str(cfg.steps),
        "seed": str(cfg.seed),
        "batch_size": str(cfg.batch_size),
        "eval_steps": ",".join(str(s) for s in cfg.resolved_eval_steps),
        "progress_file": str(progress_file),
        "config_file": str(config_file),
        "run_id": run_id,
        "tracking_uri": uri,
        # Outside a sweep nothing reserved workers elsewhere: the trial's worker count on this host, with a port
        # free here (`run_command_trial` picks one only for a command that still names it). In a sweep the sweeper
        # has already put its own in (its placement group's node and port).
        "workers": str(cfg.workers),
        "master_addr": "127.0.0.1",
        "master_port": "",
    }


def run_command_trial(
    config: TrialConfig | Mapping[str, Any],
    command: CommandConfig | Mapping[str, Any],
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> TrialResult:
    """Run the external trainer for one trial and collect its checkpoints into a `TrialResult`."""
    cfg = config if isinstance(config, TrialConfig) else TrialConfig.model_validate(dict(config))
    cmd = command if isinstance(command, CommandConfig) else CommandConfig.model_validate(dict(command))
    wall_start = time.perf_counter()
    uri = cfg.tracking.tracking_uri if cfg.tracking is not None else ""
    remove_orphaned_folders()
    tag = new_tag()
    # ignore_cleanup_errors: a trainer's leftovers that cannot be removed must not turn its result into an error.
    with trial_run(cfg.tracking, tags={TRIAL_TAG.BACKEND: "command"}) as run, \
            tempfile.TemporaryDirectory(prefix=_SCRATCH_PREFIX, ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        _write_owner(folder, tag)
        scratch = folder / "work"
        scratch.mkdir()
        progress_file, config_file = folder / "progress.jsonl", folder / "trial.json"
        config_file.write_text(cfg.model_dump_json(exclude={"tracking"}, indent=2))
        values = _values(cfg, progress_file, config_file, run.run_id, uri)
        if any("{master_port" in arg for arg in cmd.command):
            # Only then: a sweep's torchrun trial failed about one time in two (a rank's SIGABRT) when a second
            # port was also picked here after the sweeper's, though this one was never used (measured, not
            # explained; tests/sweeper/test_workers.py, 3 of 6 runs against 0 of 4 without it).
            values["master_port"] = str(free_port())
        argv = [arg.format_map(values) for arg in cmd.command]
        (folder / "tmp").mkdir()
        env = {
            **trainer_environ(os.environ),
            # its temporary files in its scratch folder, removed with it however the trial ends (torchrun leaves a
            # torchelastic_* folder per run in the system's: issue 64, N8)
            "TMPDIR": str(folder / "tmp"),
            **cmd.env,
            "SCALESWEEP_PROGRESS_FILE": str(progress_file),
            "SCALESWEEP_TRIAL_CONFIG": str(config_file),
            "SCALESWEEP_EVAL_STEPS": values["eval_steps"],
            TRIAL_TAG_ENV: tag,
        }
        if run.tracked:
            env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run.run_id)
            run.log_params({**cfg.model_dump(exclude={"tracking", "checkpoint_dir"}), "command": shlex.join(argv)})
        collector = _Collector(cfg, run, progress)
        trainer = _Trainer(argv, cmd, env, cwd=cmd.cwd or str(scratch), folder=folder, tag=tag)
        trainer.run(_Tail(progress_file), collector.consume, wall_start)
        result = collector.finish(progress_file.name)
        if result.effective_time_s:
            result.total_effective_time_s = max(result.effective_time_s.values())
        summarise_quality(result)
        result.wall_time_s = time.perf_counter() - wall_start
        run.finish(result)
    return result


def trainer_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """What a trainer inherits of `environ`: all but the service's secrets and every scalesweep variable that is
    not `PASSED_ON_ENV` (the service's paths among them)."""
    return {k: v for k, v in environ.items()
            if k not in SERVICE_SECRET_ENV and (not k.startswith("SCALESWEEP_") or k in PASSED_ON_ENV)}


def _number(value: Any) -> float | None:
    """A JSON number as a float (an integer too large for one: ±inf); None for anything else (`true` included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _shown(steps: list[int]) -> str:
    """A list of steps as an error quotes it: whole up to 12, else its ends and its length (up to 1,000 steps)."""
    if len(steps) <= 12:
        return str(steps)
    return f"[{', '.join(map(str, steps[:6]))}, ..., {', '.join(map(str, steps[-3:]))}] ({len(steps)} steps)"


def loggable_metric_name(name: str) -> bool:
    """Whether MLflow takes `name` as a metric name (on POSIX)."""
    norm = posixpath.normpath(name)
    return bool(_METRIC_NAME.fullmatch(name)) and norm == name and norm != "." and not norm.startswith(("..", "/"))


class _Collector:
    """The trainer's progress records -> the trial's result, its MLflow metrics and the caller's `progress`, each
    record checked first (the module docstring has the rules)."""

    def __init__(self, cfg: TrialConfig, run: RunRecorder, progress: Callable[[dict[str, Any]], None] | None):
        self.run, self.progress = run, progress
        self.steps, self.eval_steps = cfg.steps, cfg.resolved_eval_steps
        self.declared = frozenset(self.eval_steps)  # up to 1,000 steps, looked up once per record
        self.result = TrialResult(status="SUCCEEDED", metric_name="fd_external", fd_samples=cfg.eval.fd_samples,
                                  run_id=run.run_id)
        self.names: set[str] = set()  # metric names accepted so far (at most MAX_METRICS)
        self.warned: set[str] = set()  # what was warned about (bounded: see `_warn`)
        self.diverged: str | None = None

    def consume(self, record: dict[str, Any]) -> None:
        result = self.result
        step = record.get("step")
        if type(step) is not int or not 0 <= step <= self.steps:  # `"step": true` is a bool: refused
            raise TrialError(f"progress: each line needs an integer 'step' in [0, steps={self.steps}], got "
                             f"{step!r:.40}")
        metrics = {k: v for k, value in record.items()
                   if k not in ("step", METRIC.FD) and (v := _number(value)) is not None and self._accept(k)}
        if METRIC.FD in record:
            fd = self._fd(step, record[METRIC.FD])
            if fd is not None:
                metrics[METRIC.FD] = fd
        if isinstance(name := record.get("metric_name"), str):
            if loggable_metric_name(name):
                result.metric_name = name
            else:
                self._warn(f"metric_name {name!r:.80} is not a name MLflow accepts: ignored")
        if step in self.declared and METRIC.FD in metrics and math.isfinite(metrics[METRIC.FD]):
            if step in result.fd:
                raise TrialError(f"progress: 'fd' at step {step} reported twice")
            result.fd[step] = metrics[METRIC.FD]
            if math.isfinite(metrics.get(METRIC.VAL_LOSS, math.nan)):
                result.val_loss[step] = metrics[METRIC.VAL_LOSS]
            if METRIC.EFFECTIVE_TIME_S in metrics:
                elapsed = metrics[METRIC.EFFECTIVE_TIME_S]
                if not 0 <= elapsed < math.inf:
                    raise TrialError(f"progress: 'effective_time_s' {elapsed!r} at step {step} must be finite and "
                                     ">= 0")
                result.effective_time_s[step] = elapsed
        result.steps_done = max(result.steps_done, step)
        self.run.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)}, step)
        if self.progress is not None:
            self.progress({"step": step, **metrics})

    def _fd(self, step: int, value: Any) -> float | None:
        """The FD a record reports, checked: None when it does not count (not a declared eval step)."""
        fd = _number(value)
        if fd is None:
            raise TrialError(f"progress: 'fd' at step {step} must be a number, got {value!r:.40}")
        # The trainer's model diverged (a NaN loss gives NaN samples); an integer too large for a float did not.
        if math.isnan(fd) or (fd == math.inf and isinstance(value, float)):
            if self.diverged is None:
                self.result.status, self.result.diverged_at = "DIVERGED", step
                self.diverged = f"diverged: the trainer reported fd {fd} at step {step}"
            return fd
        if not 0 <= fd <= MAX_FD:
            raise TrialError(f"progress: 'fd' {value!r:.40} at step {step} is not a Fréchet distance: it must be "
                             f"finite and in [0, {MAX_FD:g}]")
        if step not in self.declared:
            self._warn(f"'fd' at step {step}, not a declared eval step ({_shown(self.eval_steps)}): neither counted "
                       "nor logged")
            return None
        return fd

    def _accept(self, name: str) -> bool:
        """Whether metric `name` is logged: one MLflow takes, not the trial's own summary, within MAX_METRICS."""
        if name in self.names:
            return True
        if name in RESERVED_METRICS:
            self._warn(f"metric {name!r} is the trial's own summary, written by scalesweep: dropped")
        elif not loggable_metric_name(name):
            self._warn(f"metric {name!r:.80} is not a name MLflow accepts (letters, digits, _ - . : / and spaces, "
                       "at most 250, no '..' or leading '/'): dropped")
        elif len(self.names) >= MAX_METRICS:
            self._warn(f"metric {name!r} is beyond the {MAX_METRICS} metric names a trial may log: dropped")
        else:
            self.names.add(name)
            return True
        return False

    def _warn(self, message: str) -> None:
        """Log a warning once; after 20 distinct ones, one more says the rest go unsaid (a trainer inventing a
        new bad name per record must not grow this set or the log without bound)."""
        if message in self.warned or len(self.warned) > 20:
            return
        self.warned.add(message)
        log.warning("trial %s: %s", self.run.run_id or "(untracked)",
                    message if len(self.warned) <= 20 else "more warnings about its progress records go unlogged")

    def finish(self, progress_name: str) -> TrialResult:
        """The result once the trainer has exited 0: every declared eval step needs its FD (unless it diverged)."""
        result = self.result
        if self.diverged is not None:
            self.run.set_tags({TAG.ERROR: self.diverged})
        elif not result.fd:
            raise TrialError(f"trainer command finished without reporting any 'fd' to {progress_name}")
        elif missing := [s for s in self.eval_steps if s not in result.fd]:
            raise TrialError(f"trainer command finished without reporting 'fd' at eval step(s) {_shown(missing)} "
                             f"(declared: {_shown(self.eval_steps)})")
        return result


def _open_regular(path: Path) -> int | None:
    """A read-only descriptor of `path` when it is a regular file; None when it does not exist. Opened without
    blocking: a FIFO or a device the trainer put in its place fails the trial instead of hanging it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TrialError(f"cannot read {path.name}: {exc}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TrialError(f"{path.name} is not a regular file")
    return fd


class _Tail:
    """Reads the complete new lines of a growing file READ_BYTES at a time, holding at most one read and one
    unfinished line (at most MAX_LINE_BYTES)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, bytearray()

    def read(self, handle: Callable[[dict[str, Any]], None], budget: int | None = None) -> None:
        """Hand each new record to `handle`: at most `budget` bytes, or (None) up to the size the file had when this
        call began (a writer that never stops cannot keep it reading)."""
        fd = _open_regular(self.path)
        if fd is None:
            return
        try:
            end = os.fstat(fd).st_size
            if budget is not None:
                end = min(end, self.offset + budget)
            os.lseek(fd, self.offset, os.SEEK_SET)
            while self.offset < end and (chunk := os.read(fd, min(READ_BYTES, end - self.offset))):
                self.offset += len(chunk)
                self._lines(chunk, handle)
        finally:
            os.close(fd)

    def _lines(self, chunk: bytes, handle: Callable[[dict[str, Any]], None]) -> None:
        start = 0
        while (newline := chunk.find(b"\n", start)) != -1:
            self._check_length(len(self.partial) + newline - start)
            line = bytes(self.partial) + chunk[start:newline] if self.partial else chunk[start:newline]
            self.partial.clear()
            start = newline + 1
            if line.strip():
                handle(self._record(line))
        self._check_length(len(self.partial) + len(chunk) - start)
        self.partial += chunk[start:]  # an unfinished last line waits for the next read

    def _check_length(self, size: int) -> None:
        if size > MAX_LINE_BYTES:
            raise TrialError(f"progress file {self.path.name}: a progress line longer than {MAX_LINE_BYTES} bytes "
                             f"({bytes(self.partial[:80])!r}...): a record is one short JSON object per line")

    def _record(self, line: bytes) -> dict[str, Any]:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, a 5,000-digit integer, deep nesting
            raise TrialError(f"progress file {self.path.name}: not JSON: {line[:200]!r} ({exc})") from None
        if not isinstance(record, dict):
            raise TrialError(f"progress file {self.path.name}: each line needs a JSON object: {line[:200]!r}")
        return record


class _StderrKeeper(threading.Thread):
    """Copies the trainer's stderr from a pipe into stderr.txt READ_BYTES at a time, rotating it to stderr.txt.1
    at STDERR_FILE_BYTES: a trainer that writes gigabytes leaves the last 2 to 4 MiB on disk and this process one
    read in memory. Where it cannot write (its folder gone, a FIFO in the file's place), it drains the pipe anyway
    so the trainer never blocks on its stderr."""

    def __init__(self, fd: int, path: Path) -> None:
        super().__init__(name="trainer-stderr", daemon=True)
        self.fd, self.path = fd, path

    def _open(self) -> int | None:
        try:
            return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o600)
        except OSError:
            return None

    def run(self) -> None:
        out, written = self._open(), 0
        try:
            while chunk := os.read(self.fd, READ_BYTES):
                if out is None:
                    continue
                try:
                    if written + len(chunk) > STDERR_FILE_BYTES:
                        os.close(out)
                        out, written = None, 0
                        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                        out = self._open()
                    if out is not None:
                        written += os.write(out, chunk)
                except OSError:
                    with contextlib.suppress(OSError, TypeError):
                        os.close(out)  # type: ignore[arg-type]
                    out = None
        finally:
            if out is not None:
                os.close(out)
            os.close(self.fd)


def _quote_tail(path: Path) -> list[str]:
    """The last QUOTE_LINES lines of the trainer's stderr, at most QUOTE_CHARS in all, from at most QUOTE_BYTES at
    the end of its files."""
    data = b""
    for part in (path, path.with_name(path.name + ".1")):
        with contextlib.suppress(OSError, TrialError):
            fd = _open_regular(part)
            if fd is None:
                continue
            try:
                size = os.fstat(fd).st_size
                want = min(size, QUOTE_BYTES - len(data))
                data = os.pread(fd, want, size - want) + data
            finally:
                os.close(fd)
        if len(data) >= QUOTE_BYTES:
            break
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    quoted: list[str] = []
    for line in reversed(lines[-QUOTE_LINES:]):  # the last line first: it is kept whole (up to QUOTE_CHARS)
        room = QUOTE_CHARS - sum(len(q) + 3 for q in quoted)
        if room <= 3:
            break
        quoted.insert(0, line if len(line) <= room else line[: room - 3] + "...")
    return quoted


class _Trainer:
    """The trainer's process: started in a session of its own with its stderr through a `_StderrKeeper`."""

    def __init__(self, argv: list[str], cmd: CommandConfig, env: dict[str, str], *, cwd: str, folder: Path,
                 tag: str) -> None:
        self.argv, self.cmd, self.env, self.cwd, self.tag = argv, cmd, env, cwd, tag
        self.stderr_path = folder / "stderr.txt"

    def run(self, tail: _Tail, consume: Callable[[dict[str, Any]], None], wall_start: float) -> None:
        """Hand the trainer's progress to `consume` while it runs and once after, and raise `TrialError` on a
        timeout or a non-zero exit (with the end of its stderr).

        Everything the trainer starts carries its tag (`trials.core.proctree`): when the trial ends, however it ends,
        what is still running gets SIGTERM, then SIGKILL after `kill_grace_s`; and a reaper beside it does the same
        if this process is killed outright (a cancelled Ray worker) before its `finally` runs."""
        cmd = self.cmd
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.Popen(self.argv, cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL,
                                    stderr=write_end, start_new_session=True)
        except OSError as exc:
            os.close(read_end)
            raise TrialError(f"could not start trainer command {self.argv[0]!r}: {exc}") from None
        finally:
            os.close(write_end)  # the trainer holds it now: the keeper sees EOF when the trainer's tree is gone
        keeper = _StderrKeeper(read_end, self.stderr_path)
        keeper.start()
        reaper = start_reaper(os.getpid(), self.tag, cmd.kill_grace_s, remove=self.stderr_path.parent)
        try:
            while proc.poll() is None:
                tail.read(consume, POLL_BYTES)
                if cmd.timeout_s is not None and time.perf_counter() - wall_start > cmd.timeout_s:
                    raise TrialError(f"trainer command timed out after {cmd.timeout_s} s")
                time.sleep(cmd.poll_s)
        finally:
            # Stopped by a timeout or by the caller, or finished leaving children behind: end the trainer's tree.
            end_tagged(TRIAL_TAG_ENV, self.tag, cmd.kill_grace_s)
            proc.wait()
            reaper.wait()  # it sees no tagged process left and exits
            keeper.join(5)  # a process that dropped the tag may hold the pipe: the quote does without its last words
        tail.read(consume)
        if proc.returncode != 0:
            raise TrialError(f"trainer command exited with {proc.returncode}: "
                             f"{' | '.join(_quote_tail(self.stderr_path))}")


# --- the scratch folders of trials whose process was killed ---------------------------------------------------------


def _write_owner(folder: Path, tag: str) -> None:
    (folder / _OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "started": start_time(os.getpid()),
                                                  "tag": tag}))


def _owner(folder: Path) -> tuple[int, str | None, str] | None:
    """(pid, start time, trainer tag) of the trial that made `folder`; None when unreadable (a folder of an older
    version, or one whose trial is still writing it)."""
    with contextlib.suppress(OSError, TrialError, ValueError, KeyError, TypeError):
        fd = _open_regular(folder / _OWNER_FILE)
        if fd is None:
            return None
        try:
            owner = json.loads(os.read(fd, 4096))  # the trainer can write here: read a bounded amount
        finally:
            os.close(fd)
        return int(owner["pid"]), owner["started"], str(owner["tag"])
    return None


def remove_orphaned_folders() -> list[Path]:
    """Remove the scratch folders of command trials whose process was killed (its own clean-up never ran: a
    cancelled Ray worker) and whose trainer has ended; called as each command trial starts. Only this user's real
    folders (no links), only those with an owner file; the removed ones are returned."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(_SCRATCH_PREFIX + "*"):
        try:
            info = folder.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or (owner := _owner(folder)) is None:
            continue
        pid, started, tag = owner
        if started is None or start_time(pid) == started or tagged_pids(TRIAL_TAG_ENV, tag):
            continue  # no /proc to tell; its trial still runs; or its reaper is still ending the trainer
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
