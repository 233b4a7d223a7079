"""A transfer's trial run as a plain record (its last attempt): what the analysis in `scaling` reads. The sweeper's
transfer job builds these from MLflow (`sweeper.transfer._job.read_runs`); `scaling` itself reads no MLflow.

The MLflow names behind each field are the sweeper's and the trials' (README, "MLflow names"): params
`rung`, `seed`, `optimizer.name`, `optimizer.lr`, `optimizer.refresh_every`, `optimizer.gamma`, `steps`; metrics
at step `fd` and `effective_time_s`, and the dense tracking curve `fd_track` with `track_effective_time_s`; tags
`scalesweep.trial_key`, `scalesweep.attempt`, `scalesweep.status`, `model.parameters`, `fd.metric_name`,
`fd.samples`, and the transfer's own `scalesweep.lr_rule`, `scalesweep.lr_base`; with the scenes-cnn extractor also
`alignment` (the share of samples whose every attribute matches the caption) at each eval step. Of a retried
trial only its last attempt counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["TransferRun"]

@dataclass(frozen=True)
class TransferRun:
    """One trial of a transfer (its last attempt). `checkpoints` are (step, effective_time_s, fd) at the eval
    steps it reached, FD NaN where it diverged. `lr` is the learning rate the run used, `lr_rule` the rule that
    carried it from `lr_base` at the sweep's rung; K and gamma only for the arms they shape."""

    rung: str
    parameters: int | None
    arm: str
    seed: int
    lr: float | None
    lr_rule: str | None
    lr_base: float | None
    K: int | None
    gamma: float | None
    run_id: str
    state: str  # SUCCEEDED | DIVERGED | FAILED | PRUNED | CANCELLED | RUNNING | PENDING
    trial_key: str
    attempt: int
    checkpoints: tuple[tuple[int, float, float], ...]
    metric_name: str | None = None
    fd_samples: int | None = None
    git_sha: str | None = None
    # The dense tracking curve (step, effective_time_s, fd_track), empty for runs without one, and the run's horizon.
    track: tuple[tuple[int, float, float], ...] = ()
    horizon: int | None = None
    track_samples: int | None = None
    # FD - FD-infinity at the deciding checkpoints (step, bias): the small-sample bias, where the trial estimated it.
    fd_bias: tuple[tuple[int, float], ...] = ()
    # The alignment score at the eval steps (step, effective_time_s, all-correct share; higher is better), empty for
    # runs whose extractor does not read captions (every set but scenes).
    alignment: tuple[tuple[int, float, float], ...] = ()

    @property
    def endpoint_alignment(self) -> float | None:
        """The all-correct share at the last eval step with one; None without alignment."""
        return self.alignment[-1][2] if self.alignment else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rung": self.rung, "parameters": self.parameters, "arm": self.arm, "seed": self.seed, "lr": self.lr,
            "lr_rule": self.lr_rule, "lr_base": self.lr_base, "K": self.K, "gamma": self.gamma,
            "run_id": self.run_id, "state": self.state, "trial_key": self.trial_key, "attempt": self.attempt,
            "checkpoints": [[s, t, None if math.isnan(f) else f] for s, t, f in self.checkpoints],
        }
