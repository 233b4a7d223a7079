"""What one trial scores: the mean FD at the declared eval steps (`mean_fd`, the paper's), or the steps it takes to
reach a declared FD target (`steps_to_target`, the quantity a transfer judges). Pure functions, no Ray, no MLflow.

Steps to target is the first crossing of `scaling.targets.time_to_target` (the transfer's reading of a curve: the
first checkpoint at or below the target, linearly interpolated from the one before, never extrapolated) on the
trial's tracking curve (`fd_track`) or on its FD at the eval steps (`fd`).

A trial that never reaches the target is *censored*: it is scored `horizon x final FD / target`, finite and strictly
above the horizon (its final FD is above the target), so

- every trial that reaches ranks before every trial that does not (a crossing is at most the horizon);
- censored trials rank among themselves by their final FD (the nearer the target, the better);
- the score is continuous at the boundary: a trial that just reaches at its horizon scores the horizon, one that
  just misses scores just above it. The selection rules take means and paired differences over seeds, so a cliff
  (say, a fixed penalty of 10 x the horizon) would let one censored seed swamp a point's mean and its standard
  error, while a rank-only scheme has no number to pair. Optuna, which minimises the point's mean, sees a finite
  value that still orders censored points by how near they came.

The score is therefore "at least the horizon" for a censored trial, not a measured number of steps: the selection
counts the censored seeds of every point (`PointSummary.censored_seeds`) and says so beside the choice.

While a trial runs, its live objective (`steps_to_target_so_far`) is the same rule applied to the curve seen so far
with the step reached as the horizon: the score the trial would get if it ended now. Once crossed it is the final
score already; before, it is above the step reached, so above every trial that has crossed by then.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scaling.targets import time_to_target

__all__ = [
    "TargetScore",
    "describe_objective",
    "is_censored",
    "steps_to_target_score",
    "steps_to_target_so_far",
]


@dataclass(frozen=True)
class TargetScore:
    """One trial against the target: its score (the objective), whether and where it first crossed."""

    score: float  # the crossing step (reached) or horizon x final / target (censored)
    reached: bool
    step: float | None  # the interpolated first crossing; None when censored
    final: float  # the curve's value at its last checkpoint
    horizon: int
    left_censored: bool = False  # at or below the target at its first checkpoint: `step` is an upper bound


def steps_to_target_score(curve: Mapping[int, float], target: float, horizon: int,
                          times_s: Mapping[int, float] | None = None) -> TargetScore:
    """Score one finished trial's lower-is-better `curve` (step -> FD) against `target`: its first crossing
    (`scaling.targets.time_to_target`) when it reaches, else `horizon x final / target` (module docstring).

    Raises ValueError for an empty curve, a final value that is not finite (the trial cannot be scored), a target
    that is not a finite number above 0, or a horizon before the curve's last step."""
    if not (isinstance(target, int | float) and math.isfinite(target) and target > 0):
        raise ValueError(f"target must be a finite FD above 0, got {target!r}")
    steps = sorted(curve)
    if not steps:
        raise ValueError("the trial has no checkpoint on its curve: it cannot be scored by steps to target")
    if horizon < steps[-1]:
        raise ValueError(f"horizon {horizon} is before the curve's last step {steps[-1]}")
    values = [float(curve[s]) for s in steps]
    if not math.isfinite(values[-1]):
        raise ValueError(f"the curve has no finite FD at its last step {steps[-1]}: it cannot be scored")
    times = [float((times_s or {}).get(s, 0.0)) for s in steps]
    if any(b < a for a, b in itertools.pairwise(times)):
        times = [0.0] * len(steps)  # only the step is read here; a clock that went back must not refuse the trial
    hit = time_to_target(steps, times, values, target)
    if hit.reached and hit.step is not None:
        return TargetScore(hit.step, True, hit.step, values[-1], horizon, hit.left_censored)
    return TargetScore(horizon * values[-1] / target, False, None, values[-1], horizon)


def steps_to_target_so_far(curve: Mapping[int, float], target: float, step: int) -> float:
    """A running trial's steps-to-target objective at `step`: `steps_to_target_score` on the checkpoints of `curve`
    at or before `step` (those after it are not seen yet), with `step` as the horizon. The score the trial would
    get if it ended now, on the final objective's scale:

    - crossed by `step`: the crossing, the final score already (the first crossing reads only the checkpoints up to
      it, all seen);
    - not yet: `step x latest FD / target`, above `step` and so above every trial that crossed by then; among trials
      not yet crossed at one step it orders them by their latest FD, as the final rule orders censored trials. It
      is not a bound on the final score: the trial may still cross before it, or end censored above it.

    At the step the trial ends, on its whole curve, it equals the trial's final objective. Raises ValueError as
    `steps_to_target_score` does, e.g. when the latest checkpoint's FD is not finite."""
    return steps_to_target_score({s: v for s, v in curve.items() if s <= step}, target, step).score


def is_censored(score: float, steps_done: int) -> bool:
    """Whether a trial's steps-to-target score says it never reached: only a censored score exceeds the steps the
    trial ran (a crossing is at most its horizon)."""
    return score > steps_done


def describe_objective(objective: str, *, target: float | None = None, curve: str = "fd_track",
                       eval_steps: Any = None, seeds: Any = None) -> str:
    """The objective in words, as a sweep's table and `best` document state it."""
    over = f"mean over seeds {list(seeds)} of " if seeds is not None else "mean over seeds of "
    if objective == "steps_to_target":
        return (f"{over}the steps to reach {curve} <= {target:g} (first crossing, interpolated; a trial that never "
                "reaches scores horizon x final / target, above every trial that reaches)")
    steps = f" {list(eval_steps)}" if eval_steps is not None else ""
    return f"{over}the mean FD at eval steps{steps}"
