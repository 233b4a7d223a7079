"""What a transfer saves: time to best per run, the searched arm's saving against each baseline per rung (seeds
paired), and each seed's time to a common target."""

from __future__ import annotations

import contextlib
import math
from typing import Any

from scaling import ScalingInputError, TransferRun
from scaling.targets import Checkpoints, CommonTarget, Savings, TimeToBest, time_to_common_target
from scaling.targets import savings as paired_savings
from scaling.targets import time_to_best as run_time_to_best

from ._record import ResultRecord

__all__ = ["common_targets_of", "savings_of", "succeeded_of", "time_to_best_of"]


def time_to_best_of(result: ResultRecord, **kwargs: Any) -> dict[str, TimeToBest]:
    """Run id -> `time_to_best` of its checkpoints, for runs that succeeded or diverged part-way (keyword
    arguments go to `time_to_best`: tol, volatility_tol)."""
    out: dict[str, TimeToBest] = {}
    for run in result.runs:
        if run.state not in ("SUCCEEDED", "DIVERGED") or not run.checkpoints:
            continue
        if not any(math.isfinite(f) for _, _, f in run.checkpoints):
            continue
        steps, times, fds = zip(*run.checkpoints, strict=True)
        try:
            out[run.run_id] = run_time_to_best(steps, times, fds, **kwargs)
        except ScalingInputError:
            if kwargs:
                raise  # the caller's tolerances are wrong, not the run
            continue  # records that cannot be read as checkpoints (e.g. a clock reset): left out
    return out


def succeeded_of(result: ResultRecord) -> list[tuple[TransferRun, TimeToBest]]:
    ttb = time_to_best_of(result)
    return [(r, ttb[r.run_id]) for r in result.runs if r.state == "SUCCEEDED" and r.run_id in ttb]


def savings_of(result: ResultRecord, *, robust: bool = False) -> dict[str, dict[str, Savings]]:
    """Rung -> baseline arm -> time to best saved by the searched arm, in % of the baseline's (positive:
    faster), seeds paired, with the seed spread. Rungs or baselines without a common seed are left out."""
    by_rung: dict[str, dict[str, dict[int | str, float | TimeToBest]]] = {}
    for run, ttb in succeeded_of(result):
        by_rung.setdefault(run.rung, {}).setdefault(run.arm, {})[run.seed] = ttb
    out: dict[str, dict[str, Savings]] = {}
    for rung in result.plan.rungs:
        times = by_rung.get(rung, {})
        if result.searched_arm not in times:
            continue
        for base in (a for a in result.plan.arms if a != result.searched_arm and a in times):
            try:
                s = paired_savings({result.searched_arm: times[result.searched_arm], base: times[base]},
                            periodic=result.searched_arm, baselines=[base], robust=robust)
            except ScalingInputError:
                continue  # no seed in common
            out.setdefault(rung, {})[base] = s[base]
    return out


def common_targets_of(result: ResultRecord) -> dict[str, dict[int, CommonTarget]]:
    """Rung -> seed -> each arm's time to reach the worst arm's smoothed best FD x 1.02 (time_to_common_target),
    for seeds where at least two arms succeeded."""
    by: dict[str, dict[int, dict[str, Checkpoints]]] = {}
    for run in result.runs:
        if run.state == "SUCCEEDED" and run.checkpoints:
            by.setdefault(run.rung, {}).setdefault(run.seed, {})[run.arm] = Checkpoints.from_rows(run.checkpoints)
    out: dict[str, dict[int, CommonTarget]] = {}
    for rung, seeds in by.items():
        for seed, arms in seeds.items():
            if len(arms) >= 2:
                with contextlib.suppress(ScalingInputError):
                    out.setdefault(rung, {})[seed] = time_to_common_target(arms)
    return out
