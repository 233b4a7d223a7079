"""The command backend: run a team's own trainer as a trial.

The service launches a command template with the trial's hyperparameters substituted, and reads the trainer's
progress from a JSON-lines file it appends to. The protocol, from the trainer's side:

- placeholders in the command: {optimizer} {K} {gamma} {lr} {aux_lr} {weight_decay} {momentum} {rung} {steps}
  {seed} {batch_size} {eval_steps} (comma-separated) {progress_file} {config_file} {run_id} {tracking_uri}
- environment: `SCALESWEEP_PROGRESS_FILE` (where to write), `SCALESWEEP_TRIAL_CONFIG` (a JSON file holding the
  whole trial config), `SCALESWEEP_EVAL_STEPS`, and, when the trial is tracked, `MLFLOW_TRACKING_URI` and
  `MLFLOW_RUN_ID` (the run this trial owns: the trainer may log more into it).
- progress: one JSON object per line, at least `{"step": 800, "fd": 41.2, "effective_time_s": 95.3}` at each
  checkpoint; any other numeric field (`loss`, `val_loss`, `optimizer_time_s`, ...) is logged as a metric too;
  an optional `"metric_name"` says what the FD was computed on (e.g. "fd_dinov2"; default "fd_external").

The backend logs every record to MLflow (so a trainer needs no MLflow code), calls `progress` per record, and
builds the same `TrialResult` as the built-in trainer.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._commandline import PLACEHOLDERS, CommandLine
from ._config import TrialConfig, TrialResult
from ._errors import TrialError
from ._proctree import TRIAL_TAG_ENV, end_tagged, new_tag, start_reaper
from ._run import summarise_quality
from .core.redact import SERVICE_SECRET_ENV  # never handed to a trainer, even where a driver was started with them
from .record import METRIC, TRIAL_TAG, RunRecorder, trial_run

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
    }


class _Tail:
    """Reads complete new lines of a growing file."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, ""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open("r", encoding="utf-8") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
            self.offset = handle.tell()
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()  # an unfinished last line waits for the next read
        records = []
        for line in lines:
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise TrialError(f"progress file {self.path}: not JSON: {line[:200]!r} ({exc})") from None
                if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                    raise TrialError(f"progress file {self.path}: each line needs an integer 'step': {line[:200]!r}")
                records.append(record)
        return records


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
    with trial_run(cfg.tracking, tags={TRIAL_TAG.BACKEND: "command"}) as run, \
            tempfile.TemporaryDirectory(prefix="scalesweep-cmd-") as tmp:
        progress_file, config_file = Path(tmp) / "progress.jsonl", Path(tmp) / "trial.json"
        config_file.write_text(cfg.model_dump_json(exclude={"tracking"}, indent=2))
        values = _values(cfg, progress_file, config_file, run.run_id, uri)
        argv = [arg.format_map(values) for arg in cmd.command]
        env = {
            **{k: v for k, v in os.environ.items() if k not in SERVICE_SECRET_ENV},
            **cmd.env,
            "SCALESWEEP_PROGRESS_FILE": str(progress_file),
            "SCALESWEEP_TRIAL_CONFIG": str(config_file),
            "SCALESWEEP_EVAL_STEPS": values["eval_steps"],
        }
        if run.tracked:
            env.update(MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run.run_id)
            run.log_params({**cfg.model_dump(exclude={"tracking", "checkpoint_dir"}), "command": shlex.join(argv)})
        collector = _Collector(cfg, run, progress)
        _run_trainer(argv, cmd, env, Path(tmp), _Tail(progress_file), collector.consume, wall_start)
        result = collector.result
        if not result.fd and result.status == "SUCCEEDED":
            raise TrialError(f"trainer command finished without reporting any 'fd' to {progress_file.name}")
        if result.effective_time_s:
            result.total_effective_time_s = max(result.effective_time_s.values())
        summarise_quality(result)
        result.wall_time_s = time.perf_counter() - wall_start
        run.finish(result)
    return result


class _Collector:
    """The trainer's progress records -> the trial's result, its MLflow metrics and the caller's `progress`."""

    def __init__(self, cfg: TrialConfig, run: RunRecorder, progress: Callable[[dict[str, Any]], None] | None):
        self.run, self.progress = run, progress
        self.result = TrialResult(status="SUCCEEDED", metric_name="fd_external", fd_samples=cfg.eval.fd_samples,
                                  run_id=run.run_id)

    def consume(self, records: list[dict[str, Any]]) -> None:
        result = self.result
        for record in records:
            step = record["step"]
            metrics = {k: float(v) for k, v in record.items() if isinstance(v, int | float) and k != "step"}
            if "metric_name" in record:
                result.metric_name = str(record["metric_name"])
            fd = metrics.get(METRIC.FD)
            if fd is not None and not math.isfinite(fd):
                result.status, result.diverged_at = "DIVERGED", step
            elif fd is not None:
                result.fd[step] = fd
                if METRIC.VAL_LOSS in metrics:
                    result.val_loss[step] = metrics[METRIC.VAL_LOSS]
                if METRIC.EFFECTIVE_TIME_S in metrics:
                    result.effective_time_s[step] = metrics[METRIC.EFFECTIVE_TIME_S]
            result.steps_done = max(result.steps_done, step)
            self.run.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)}, step)
            if self.progress is not None:
                self.progress({"step": step, **metrics})


def _run_trainer(argv: list[str], cmd: CommandConfig, env: dict[str, str], tmp: Path, tail: _Tail,
                 consume: Callable[[list[dict[str, Any]]], None], wall_start: float) -> None:
    """Start the trainer in a session of its own, hand its progress to `consume` while it runs and once after, and
    raise `TrialError` on a timeout or a non-zero exit (with the end of its stderr).

    Everything the trainer starts carries its tag (`trials._proctree`): when the trial ends, however it ends, what
    is still running gets SIGTERM, then SIGKILL after `kill_grace_s`; and a reaper beside it does the same if this
    process is killed outright (a cancelled Ray worker) before its `finally` runs."""
    stderr_path = tmp / "stderr.txt"
    tag = new_tag()
    with stderr_path.open("w") as stderr:
        try:
            proc = subprocess.Popen(argv, cwd=cmd.cwd, env={**env, TRIAL_TAG_ENV: tag}, stdout=subprocess.DEVNULL,
                                    stderr=stderr, start_new_session=True)
        except OSError as exc:
            raise TrialError(f"could not start trainer command {argv[0]!r}: {exc}") from None
        reaper = start_reaper(os.getpid(), tag, cmd.kill_grace_s)
        try:
            while proc.poll() is None:
                consume(tail.read())
                if cmd.timeout_s is not None and time.perf_counter() - wall_start > cmd.timeout_s:
                    raise TrialError(f"trainer command timed out after {cmd.timeout_s} s")
                time.sleep(cmd.poll_s)
        finally:
            # Stopped by a timeout or by the caller, or finished leaving children behind: end the trainer's tree.
            end_tagged(TRIAL_TAG_ENV, tag, cmd.kill_grace_s)
            proc.wait()
            reaper.wait()  # it sees no tagged process left and exits
    consume(tail.read())
    if proc.returncode != 0:
        err = stderr_path.read_text(errors="replace").strip().splitlines()[-5:]
        raise TrialError(f"trainer command exited with {proc.returncode}: {' | '.join(err)}")
