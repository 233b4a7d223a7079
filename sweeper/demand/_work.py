"""The total work of a submission, in training-step units: what `SCALESWEEP_MAX_WORK` caps.

A trial costs its training steps plus its evaluations: one evaluation generates `fd_samples` images with
`sample_steps` model calls each, so it costs `fd_samples x sample_steps / batch_size` steps (a training step
processes `batch_size` images; a sampling call is a forward pass, cheaper than a step's forward and backward, so
this over-counts evaluation, on the safe side); a tracking evaluation likewise with `track_samples` and
`track_sample_steps`. A submission's work is the sum over every trial it plans: search points x seeds, each
baseline setting x seeds, the confirmation (a transfer's: `sweeper.transfer.transfer_work`).
Retries are not counted (they run only after a failure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..specs import SweepSpec

__all__ = ["sweep_work", "trial_work"]


def trial_work(trial: Mapping[str, Any]) -> int:
    """One trial's work in step units, from a TrialConfig mapping (its steps and evaluation settings)."""
    from trials import TrialConfig

    cfg = TrialConfig.model_validate(dict(trial))
    per_eval = math.ceil(cfg.eval.fd_samples * cfg.eval.sample_steps / cfg.batch_size)
    per_track = math.ceil(cfg.eval.track_samples * cfg.eval.track_sample_steps / cfg.batch_size)
    return cfg.steps + len(cfg.resolved_eval_steps) * per_eval + len(cfg.resolved_track_steps) * per_track


def sweep_work(spec: SweepSpec) -> int:
    """Every trial the sweep plans: its search points on every seed, each baseline setting on every seed, and the
    confirmation's points on their fresh seeds."""
    arm = {"name": spec.search.arm}
    seed = spec.seeds[0]
    search = trial_work(spec.trial_config(arm, seed))
    points = spec.search.grid_size if spec.search.method == "grid" else spec.search.budget or 0
    total = int(points) * len(spec.seeds) * search
    for b in spec.baselines:
        one = trial_work(spec.trial_config({"name": b.arm}, seed, b.rung, horizon=b.horizon,
                                           eval_steps=spec.baseline_eval_steps(b)))
        total += len(b.variants()) * len(spec.seeds) * one
    return total + spec.confirm.top * len(spec.confirm_seeds) * search

