"""What one trial's parts cost on this machine, measured once and kept: the calibration a plan prices with.

A trial's time is its setup (data, reference features, model), its training steps and its evaluations. Each is
measured by running the real trial of that rung and shape for `CALIBRATION_STEPS` training steps and one full
evaluation (no MLflow, no checkpoints), and stored as JSON under `$SCALESWEEP_CACHE_DIR/calibration/` (default
`~/.cache/scalesweep/calibration/`), one file per key. The key holds what changes the cost: the machine's CPU model
and core count, the torch version, the rung and the trial's shape (data set, image size, patch, batch, text encoder,
threads, precision, device, workers, the optimizer family, and the evaluation's sizes). Learning rates, seeds and
step counts are not in it: they do not change what a step costs. A later plan with the same key reads the file
(`source == "cache"`); a missing one is measured then (`source == "measured now"`).

A trial worker's start (a fresh process importing torch, Ray, MLflow and the trainer before its first trial; Tune
reuses it for the next ones) is measured once per machine and torch version by timing those imports in as many
new processes at once as the machine has cores (`worker_start`: a job's workers start together), cached beside the
rungs' files.

A tracking evaluation is not timed apart: its cost is the full evaluation's scaled by images x sampler steps
(`track_s`, modelled). The mean training step includes the first step's one-off work (allocations, the first
Newton-Schulz), as a short trial's own steps do.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import SweepError

__all__ = ["CALIBRATION_STEPS", "StepCost", "calibration_dir", "calibration_key", "machine", "step_cost",
           "worker_start"]

# Timed training steps of a calibration: enough to average the first step's one-off work over a few steady ones,
# few enough that a missing calibration of a CPU rung costs seconds.
CALIBRATION_STEPS = 5
# The optimizer families whose step costs differ: Newton-Schulz every step (muon and its controls), every K steps
# (periodic), none (adamw, rownorm).
_FAMILY = {"muon": "muon", "muon_twin": "muon", "muon_extra_ns": "muon_extra_ns", "periodic": "periodic",
           "adamw": "adamw", "rownorm": "rownorm"}

Source = Literal["cache", "measured now"]


@dataclass(frozen=True)
class StepCost:
    """One rung and trial shape's measured costs, in seconds: a training step, a full evaluation, a tracking
    evaluation (modelled from the full one), the trial's setup; where the figure came from and when."""

    rung: str
    key: str
    step_s: float
    eval_s: float
    track_s: float
    setup_s: float
    source: Source
    measured_at: str
    shape: dict[str, Any]

    def trial_s(self, steps: int, evals: int, tracks: int) -> float:
        """One trial's seconds: its setup, steps and evaluations."""
        return self.setup_s + steps * self.step_s + evals * self.eval_s + tracks * self.track_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def machine() -> dict[str, Any]:
    """This machine as the calibration's key reads it: CPU model, cores, torch version."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count() or 1, "torch": torch.__version__}


def calibration_dir() -> Path:
    """`$SCALESWEEP_CACHE_DIR/calibration`, else `~/.cache/scalesweep/calibration`."""
    from trials import TrialSettings

    raw = TrialSettings.from_env().cache_dir
    return (Path(raw).expanduser() if raw else Path.home() / ".cache" / "scalesweep") / "calibration"


def _shape(cfg: Any) -> dict[str, Any]:
    """What of a validated TrialConfig changes a step's or an evaluation's cost."""
    ev = cfg.eval
    return {
        "rung": cfg.rung, "data": cfg.data.name, "image_size": cfg.data.image_size, "patch": cfg.resolved_patch,
        "batch_size": cfg.batch_size, "text_encoder": cfg.text_encoder, "text_max_length": cfg.text_max_length,
        "threads": cfg.threads, "precision": cfg.precision, "device": cfg.device, "workers": cfg.workers,
        "optimizer": _FAMILY.get(cfg.optimizer.name, cfg.optimizer.name), "ema": ev.ema_decay is not None,
        "eval": {"extractor": ev.extractor, "extractor_options": ev.extractor_options, "fd_samples": ev.fd_samples,
                 "reference_samples": ev.reference_samples, "sample_steps": ev.sample_steps,
                 "val_samples": ev.val_samples, "batch_size": ev.batch_size},
    }


def calibration_key(trial: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(key, what it is made of) of a TrialConfig mapping on this machine."""
    from trials import TrialConfig

    cfg = TrialConfig.model_validate(dict(trial))
    parts = {"machine": machine(), "shape": _shape(cfg)}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"{cfg.rung}-{digest}", parts


def _track_ratio(cfg: Any) -> float:
    """A tracking evaluation's cost relative to a full one: images x sampler steps."""
    ev = cfg.eval
    return (min(ev.track_samples, ev.fd_samples) * ev.track_sample_steps) / max(1, ev.fd_samples * ev.sample_steps)


def step_cost(trial: Mapping[str, Any], *, measure: bool = True) -> StepCost | None:
    """The calibration of a TrialConfig mapping's rung and shape: from the cache, else measured now (None when it
    is missing and `measure` is off)."""
    from trials import TrialConfig

    cfg = TrialConfig.model_validate(dict(trial))
    key, parts = calibration_key(trial)
    path = calibration_dir() / f"{key}.json"
    try:
        doc = json.loads(path.read_text())
        doc.pop("machine", None)
        cost = StepCost(**{**doc, "source": "cache"})
        return StepCost(**{**cost.to_dict(), "track_s": cost.eval_s * _track_ratio(cfg)})
    except (OSError, ValueError, TypeError):
        pass
    if not measure:
        return None
    cost = _measure(cfg, key, parts["shape"])
    cost = StepCost(**{**cost.to_dict(), "track_s": cost.eval_s * _track_ratio(cfg)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**cost.to_dict(), "machine": parts["machine"]}, indent=2, default=str))
    tmp.replace(path)
    return cost


def _measure(cfg: Any, key: str, shape: dict[str, Any]) -> StepCost:
    """Run the real trial for CALIBRATION_STEPS steps and one full evaluation, without MLflow or checkpoints."""
    from trials import run_trial

    doc = cfg.model_dump(mode="json", exclude={"tracking", "checkpoint_dir"})
    doc.update(steps=CALIBRATION_STEPS, eval_steps=[CALIBRATION_STEPS], seed=0)
    doc["eval"] = {**doc["eval"], "track_points": 0}
    doc["warmup_steps"] = min(int(doc.get("warmup_steps") or 0), CALIBRATION_STEPS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_trial(doc)
    step_s = result.total_effective_time_s / max(1, result.steps_done)
    eval_s = result.eval_time_s
    setup_s = max(0.0, result.wall_time_s - result.total_effective_time_s - eval_s - result.track_eval_time_s)
    return StepCost(rung=cfg.rung, key=key, step_s=step_s, eval_s=eval_s, track_s=eval_s * _track_ratio(cfg),
                    setup_s=setup_s, source="measured now",
                    measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), shape=shape)


# What a Ray trial worker imports before its first trial: the trainable's modules and what they load.
_WORKER_IMPORTS = "import ray, ray.tune, torch, mlflow, optuna, trials, trials.models, sweeper.search"


def worker_start(*, measure: bool = True) -> tuple[float | None, Source | None]:
    """(seconds a trial worker takes to start, where the figure came from): new Python processes, one per core,
    importing what a trial worker imports, timed until the last is done, cached per machine; (None, None) when
    missing and `measure` is off."""
    parts = machine()
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    path = calibration_dir() / f"worker-start-{digest}.json"
    try:
        return float(json.loads(path.read_text())["worker_start_s"]), "cache"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if not measure:
        return None, None
    # As many at once as this machine has cores: a job's workers start together, and share the cores while they do.
    clock = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER_IMPORTS], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(parts["cores"])]
    try:
        for proc in procs:
            proc.wait(timeout=600)
        seconds = time.perf_counter() - clock
    finally:  # a timeout or an interrupt leaves no importer behind
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [p for p in procs if p.returncode != 0]
    if failed:  # a worker that cannot import would make a start of no time at all: not a measurement
        raise SweepError(f"measuring a trial worker's start: `{sys.executable} -c {_WORKER_IMPORTS!r}` exited "
                           f"{failed[0].returncode} (run it to see why)")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"worker_start_s": seconds, "machine": parts,
                               "measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}))
    tmp.replace(path)
    return seconds, "measured now"
