"""Report a team's own trainer's checkpoints to scalesweep's command backend: one call per checkpoint.

The command backend (`trials._command`) starts the trainer with `SCALESWEEP_PROGRESS_FILE` (where to append one
JSON object per line) and `SCALESWEEP_EVAL_STEPS` (the trial's checkpoint steps, comma-separated) in its
environment, and reads the file while the trainer runs. Instead of writing those lines by hand:

    from trials.progress import report_checkpoint, report_divergence

    for step in range(1, steps + 1):
        ...train...
        if step in eval_steps:
            report_checkpoint(step, fd=fd, effective_time_s=train_seconds, val_loss=val_loss,
                              metrics={"optimizer_time_s": opt_seconds}, metric_name="fd_dinov2")
    # a non-finite loss: report_divergence(step), and stop

Each call checks its record on the spot, so a wrong value fails in the trainer with the field named, not later in
the service: `step` an int > 0, one of the declared eval steps (when the trial declared them) and after the last
one reported; `fd` a finite number >= 0 (a diverged run says so with `report_divergence`); timings finite and >= 0;
extra metrics finite numbers under plain names. Errors are `trials.InputError` (a ValueError).

Only rank 0 writes: on other ranks (torch.distributed's rank once initialised, else the `RANK` variable torchrun
sets) a call validates and returns None, so every rank of a torchrun trainer may call it. Without a progress file
(no `SCALESWEEP_PROGRESS_FILE`, no `path=`) it validates and writes nothing either: the same trainer runs outside
scalesweep. The light install is enough (no torch, Ray, MLflow or FastAPI import).
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from .core.errors import InputError
from .core.settings import EnvSettings
from .record import METRIC

__all__ = [
    "EVAL_STEPS_ENV",
    "PROGRESS_FILE_ENV",
    "ProgressReporter",
    "TrainerSettings",
    "report_checkpoint",
    "report_divergence",
]

PROGRESS_FILE_ENV = "SCALESWEEP_PROGRESS_FILE"  # set by the command backend: the JSON-lines file to append to
EVAL_STEPS_ENV = "SCALESWEEP_EVAL_STEPS"  # set by the command backend: the trial's eval steps, comma-separated
RANK_ENV = "RANK"  # set by torchrun: this process's global rank


class TrainerSettings(EnvSettings):
    """The environment of a team's trainer that the command backend starts (a process kind of its own): what this
    module reads, read when asked (`TrainerSettings.from_env()`). None: not set."""

    progress_file: str | None = None
    eval_steps: str | None = None
    rank: str | None = None

    ENV_NAMES: ClassVar[Mapping[str, str]] = {
        "progress_file": PROGRESS_FILE_ENV, "eval_steps": EVAL_STEPS_ENV, "rank": RANK_ENV}


# Names the backend gives a meaning of its own; extra metrics may not take them.
_RESERVED = frozenset({"step", METRIC.FD, "metric_name"})
# MLflow's metric-name alphabet, less the space (a name is also a JSON key and a dashboard label).
_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")


def _rank(settings: TrainerSettings) -> int:
    """This process's rank: torch.distributed's when a process group is up (without importing torch), else torchrun's
    `RANK`, else 0."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank())
    raw = (settings.rank or "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"RANK={raw!r} in the environment is not an integer rank") from None


def _real(name: str, value: Any, *, non_negative: bool = True) -> float:
    """`value` as a finite float (>= 0 unless told otherwise), or an InputError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = " (a tensor: pass .item())" if hasattr(value, "item") else ""
        raise InputError(f"{name} must be a real number, got {type(value).__name__} {value!r}{hint}")
    out = float(value)
    if not math.isfinite(out):
        extra = "; a diverged run reports report_divergence(step)" if name == "fd" else ""
        raise InputError(f"{name} must be finite, got {out}{extra}")
    if non_negative and out < 0:
        raise InputError(f"{name} must be >= 0, got {out}")
    return out


def _step(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"step must be an int > 0, got {type(value).__name__} {value!r}")
    step = int(value)
    if step <= 0:
        raise InputError(f"step must be an int > 0, got {step}")
    return step


def _parse_eval_steps(raw: str) -> frozenset[int]:
    try:
        steps = frozenset(int(s) for s in raw.split(",") if s.strip())
    except ValueError:
        raise InputError(f"{EVAL_STEPS_ENV}={raw!r} is not a comma-separated list of steps") from None
    return steps


class ProgressReporter:
    """Appends the trainer's checkpoint records to one progress file (the module docstring says what is checked).

    `path`: the progress file; default `SCALESWEEP_PROGRESS_FILE`, and None when that is unset (then nothing is
    written). `eval_steps`: the steps a checkpoint may be reported at; default `SCALESWEEP_EVAL_STEPS`, and any step
    when neither is given. `rank`: default torch.distributed's or `RANK`; only rank 0 writes.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, eval_steps: Iterable[int] | None = None,
                 rank: int | None = None) -> None:
        settings = TrainerSettings.from_env()
        if path is None:
            path = settings.progress_file or None
        self.path = Path(path) if path is not None else None
        if eval_steps is None:
            self.eval_steps = _parse_eval_steps(settings.eval_steps or "") or None
        else:
            self.eval_steps = frozenset(_step(s) for s in eval_steps) or None
        self.rank = _rank(settings) if rank is None else rank
        self.last_step = 0

    @property
    def writes(self) -> bool:
        """Whether calls write: rank 0 with a progress file."""
        return self.rank == 0 and self.path is not None

    def checkpoint(
        self,
        step: int,
        fd: float,
        *,
        effective_time_s: float | None = None,
        optimizer_time_s: float | None = None,
        step_time_s: float | None = None,
        val_loss: float | None = None,
        metrics: Mapping[str, float] | None = None,
        metric_name: str | None = None,
    ) -> dict[str, Any] | None:
        """Record one checkpoint: its FD, the training time so far (`effective_time_s`: what the study's
        time-to-best reads), other timings and any extra metrics. Returns the record written, or None on a rank
        that does not write."""
        record: dict[str, Any] = {"step": self._next_step(step), METRIC.FD: _real("fd", fd)}
        timings = {METRIC.EFFECTIVE_TIME_S: effective_time_s, METRIC.OPTIMIZER_TIME_S: optimizer_time_s,
                   METRIC.STEP_TIME_S: step_time_s}
        for name, value in timings.items():
            if value is not None:
                record[name] = _real(name, value)
        if val_loss is not None:
            record[METRIC.VAL_LOSS] = _real("val_loss", val_loss, non_negative=False)
        for name, value in (metrics or {}).items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise InputError(f"metrics: name {name!r} must be letters, digits and _ . - / only")
            if name in _RESERVED or name in record:
                raise InputError(f"metrics: {name!r} is set by its own argument; allowed extra names are any others")
            record[name] = _real(f"metrics[{name!r}]", value, non_negative=False)
        if metric_name is not None:
            if not isinstance(metric_name, str) or not _NAME.match(metric_name):
                raise InputError(f"metric_name must name what the FD was computed on (e.g. 'fd_dinov2'), got "
                                 f"{metric_name!r}")
            record["metric_name"] = metric_name
        return self._write(record)

    def divergence(self, step: int) -> dict[str, Any] | None:
        """Record that the run diverged at `step` (its loss or FD went non-finite): the backend marks the trial
        DIVERGED there. Any step after the last one reported, not only an eval step."""
        step = _step(step)
        self._after_last(step)
        self.last_step = step
        return self._write({"step": step, METRIC.FD: math.nan})

    def _next_step(self, value: Any) -> int:
        step = _step(value)
        if self.eval_steps is not None and step not in self.eval_steps:
            shown = sorted(self.eval_steps)
            listed = shown if len(shown) <= 12 else [*shown[:6], "...", *shown[-3:]]
            raise InputError(f"step {step} is not one of the trial's eval steps {listed} ({EVAL_STEPS_ENV})")
        self._after_last(step)
        self.last_step = step
        return step

    def _after_last(self, step: int) -> None:
        if step <= self.last_step:
            raise InputError(f"step must grow from call to call: {step} after {self.last_step} (one call per "
                             "checkpoint)")

    def _write(self, record: dict[str, Any]) -> dict[str, Any] | None:
        if self.rank != 0 or self.path is None:
            return None
        line = (json.dumps(record) + "\n").encode()
        # One write() on an O_APPEND descriptor: the line lands whole, after whatever is there, even while the
        # backend reads the file.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return record


_default: ProgressReporter | None = None


def _reporter() -> ProgressReporter:
    """The process's reporter, made from the environment on first use (again if the progress file changed)."""
    global _default
    path = TrainerSettings.from_env().progress_file or None
    if _default is None or (str(_default.path) if _default.path else None) != path:
        _default = ProgressReporter()
    return _default


def report_checkpoint(step: int, fd: float, **kwargs: Any) -> dict[str, Any] | None:
    """`ProgressReporter.checkpoint` on the reporter the environment describes (the module docstring)."""
    return _reporter().checkpoint(step, fd, **kwargs)


def report_divergence(step: int) -> dict[str, Any] | None:
    """`ProgressReporter.divergence` on the reporter the environment describes."""
    return _reporter().divergence(step)
