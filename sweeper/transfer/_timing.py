"""The transfer's timing stage: each arm's seconds per training step at each rung, measured in short runs of the
real trial, one after another (the analysis of those times, `scaling.median_step_times` and the paired ratios, is
pure and lives in `scaling`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from scaling.rungs import TimingSpec, median_step_times

__all__ = ["measure_step_time_runs", "measure_step_times"]


def measure_step_times(
    trial: Mapping[str, Any], rows: Sequence[tuple[str, str, Mapping[str, Any]]], timing: TimingSpec, threads: int = 1
) -> dict[str, dict[str, float]]:
    """Rung -> arm -> seconds per training step: the median of `measure_step_time_runs`."""
    return median_step_times(measure_step_time_runs(trial, rows, timing, threads=threads))


def measure_step_time_runs(
    trial: Mapping[str, Any], rows: Sequence[tuple[str, str, Mapping[str, Any]]], timing: TimingSpec, threads: int = 1
) -> dict[str, dict[str, list[float]]]:
    """Rung -> arm -> seconds per training step of each timing round, each from a short run of its own, one after
    another: `timing.repeats` rounds over every (rung, arm), the order within a rung rotated by one arm each round
    so no arm is always first (a drifting machine then moves every arm alike, and round i of two arms is a pair).

    Each is the built-in trial (`trial` as the transfer's runs get it) for `warmup + steps` steps; its effective
    time between the two tiny evaluations at `warmup` and `warmup + steps` divided by `steps`. Evaluation is
    shrunk to nothing (pooled pixels, 16 images, one sampler step): it is outside the timed window anyway.
    """
    from trials import run_trial

    out: dict[str, dict[str, list[float]]] = {}
    by_rung: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for rung, arm, optimizer in rows:
        by_rung.setdefault(rung, []).append((arm, optimizer))
    for round_ in range(timing.repeats):
        for rung, arms in by_rung.items():
            shift = round_ % len(arms)
            for arm, optimizer in arms[shift:] + arms[:shift]:
                cfg = {k: v for k, v in trial.items() if k not in ("tracking", "checkpoint_dir")}
                cfg.update(rung=rung, optimizer=dict(optimizer), seed=0, steps=timing.warmup + timing.steps,
                           eval_steps=[timing.warmup, timing.warmup + timing.steps], threads=threads)
                cfg["eval"] = {"extractor": "pixels", "extractor_options": {"size": 4}, "fd_samples": 16,
                               "reference_samples": 16, "sample_steps": 1, "val_samples": 1, "track_points": 0}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # 16 samples give a singular covariance: that FD is never read
                    result = run_trial(cfg)
                clock = result.effective_time_s
                if timing.warmup in clock and timing.warmup + timing.steps in clock:
                    per_step = (clock[timing.warmup + timing.steps] - clock[timing.warmup]) / timing.steps
                    out.setdefault(rung, {}).setdefault(arm, []).append(per_step)
    return out
