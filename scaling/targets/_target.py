"""Time to a declared quality target, and the plateau check, from one run's quality curve.

Both read a lower-is-better quality curve (FD) sampled at checkpoints, as a trial's dense tracking evaluations
give it: `steps` strictly increasing, `times_s` the cumulative effective training time at each checkpoint.

- `time_to_target`: the first crossing of a target declared before the runs (AlgoPerf's and MLPerf Training's
  "time to result"), located by linear interpolation between the two checkpoints that bracket it, in step and
  in effective time alike. Never extrapolated: a run that ends above the target has not reached it.
- `plateau`: how fast the curve still falls over the last part of the run. A run still improving fast at its
  end is under-trained, and its time to best (or any size fit over it) mixes model size with training length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ScalingInputError
from ._time_to_best import _as_float_array

__all__ = [
    "DEFAULT_PLATEAU_MAX_DROP",
    "DEFAULT_PLATEAU_WINDOW",
    "Plateau",
    "TimeToTarget",
    "plateau",
    "quality_curve",
    "target_value",
    "time_to_target",
]

# The last third of a run: the paper's deciding checkpoints (2/3, 5/6, 6/6) sit in it, so a curve still falling
# steeply there makes the objective depend on where the horizon was cut.
DEFAULT_PLATEAU_WINDOW = 1 / 3
# A run whose fitted quality still falls by more than 10% over that last third is "still improving fast". At the
# default 1800-step trial AdamW's FD fell 283 -> 254 over its last third (10%) and vanilla Muon's 109 -> 84
# (23%): both would be flagged, which is the point of the flag (README, "What the default trial measures").
DEFAULT_PLATEAU_MAX_DROP = 0.10


@dataclass(frozen=True)
class TimeToTarget:
    """Whether a run reached the target, and the (interpolated) step and effective time at which it did.

    `left_censored`: already below the target at its first checkpoint, so the crossing happened somewhere before
    it and `step` and `time_s` are upper bounds, not measurements."""

    reached: bool
    step: float | None
    time_s: float | None
    left_censored: bool = False


def quality_curve(
    steps: ArrayLike, times_s: ArrayLike, values: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    s, t, v = _as_float_array("steps", steps), _as_float_array("times_s", times_s), _as_float_array("values", values)
    if not (len(t) == len(s) and len(v) == len(s)):
        raise ScalingInputError(
            f"steps, times_s and values must have equal lengths, got {len(s)}, {len(t)} and {len(v)}"
        )
    if len(s) == 0:
        raise ScalingInputError("steps: at least one checkpoint is needed")
    if not np.all(np.isfinite(s)) or np.any(np.diff(s) <= 0):
        raise ScalingInputError(f"steps must be finite and strictly increasing, got {s.tolist()}")
    if not np.all(np.isfinite(t)) or np.any(t < 0) or np.any(np.diff(t) < 0):
        raise ScalingInputError(f"times_s must be finite, >= 0 and non-decreasing along the steps, got {t.tolist()}")
    # NaN or +inf marks a checkpoint without a quality value (a diverged evaluation); -inf is never a distance.
    if np.any(np.isneginf(v)):
        raise ScalingInputError(f"values must not be -inf (NaN or +inf marks a missing checkpoint), got {v.tolist()}")
    return s, t, v


def target_value(target: float) -> float:
    """`target` as a finite float, or a ScalingInputError naming it."""
    try:
        goal = float(target)
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(f"target must be a number, got {target!r}") from exc
    if not math.isfinite(goal):
        raise ScalingInputError(f"target must be a finite number, got {target!r}")
    return goal


def time_to_target(steps: ArrayLike, times_s: ArrayLike, values: ArrayLike, target: float) -> TimeToTarget:
    """First crossing of `target` by the lower-is-better curve `values`, interpolated between checkpoints.

    At the first checkpoint `i` with `values[i] <= target`: exactly there when `values[i] == target` or when
    it is the first checkpoint (nothing before it to interpolate from) or its predecessor has no value (NaN);
    otherwise linearly between checkpoints `i - 1` and `i`, with the same fraction in step and in time.
    Not reached (`reached=False`, step and time None) when no checkpoint is at or below the target: the curve
    is never extrapolated past its last checkpoint. Raises ScalingInputError (a ValueError) naming the bad
    argument: lengths that differ, steps not strictly increasing, times that decrease, a non-finite target.
    """
    s, t, v = quality_curve(steps, times_s, values)
    goal = target_value(target)
    with np.errstate(invalid="ignore"):
        hits = np.flatnonzero(v <= goal)  # NaN compares False: a missing checkpoint never reaches
    if not len(hits):
        return TimeToTarget(reached=False, step=None, time_s=None)
    i = int(hits[0])
    if i == 0 or v[i] == goal or not math.isfinite(v[i - 1]):
        return TimeToTarget(reached=True, step=float(s[i]), time_s=float(t[i]),
                            left_censored=bool(i == 0 and v[i] < goal))
    frac = (v[i - 1] - goal) / (v[i - 1] - v[i])  # in (0, 1): v[i-1] > goal > v[i]
    return TimeToTarget(
        reached=True,
        step=float(s[i - 1] + frac * (s[i] - s[i - 1])),
        time_s=float(t[i - 1] + frac * (t[i] - t[i - 1])),
    )


@dataclass(frozen=True)
class Plateau:
    """How much the fitted quality still falls over the last `window` of a run.

    `drop` is the relative fall of the least-squares line through log(value) against step over the window,
    `1 - exp(slope * window_steps)`: 0.1 means the curve lost 10% of its value over the window (positive:
    still improving). `undertrained` is `drop > max_drop`; `rising` is the other direction, `drop < -max_drop`:
    the curve got worse by more than max_drop over the window (overfitting, or an unstable end), which a
    "plateau ok" must not hide. `n_points` checkpoints fell in the window; with fewer than 3 there is no slope to
    trust and `drop` is None (and the run is not flagged, but `checked` is False so a report can say so).
    """

    drop: float | None
    undertrained: bool
    checked: bool
    n_points: int
    window: float
    max_drop: float
    rising: bool = False


def plateau(
    steps: ArrayLike,
    values: ArrayLike,
    *,
    horizon: float | None = None,
    window: float = DEFAULT_PLATEAU_WINDOW,
    max_drop: float = DEFAULT_PLATEAU_MAX_DROP,
) -> Plateau:
    """The plateau check of one run: the quality slope over the last `window` (fraction) of its `horizon`.

    `horizon` defaults to the last step. Checkpoints without a finite positive value are left out. A log-linear
    fit over at least 3 checkpoints is used rather than first-vs-last so that one noisy evaluation at either end
    cannot flag (or clear) a run on its own.
    """
    s = _as_float_array("steps", steps)
    v = _as_float_array("values", values)
    if len(s) != len(v):
        raise ScalingInputError(f"steps and values must have equal lengths, got {len(s)} and {len(v)}")
    if len(s) and (not np.all(np.isfinite(s)) or np.any(np.diff(s) <= 0)):
        raise ScalingInputError(f"steps must be finite and strictly increasing, got {s.tolist()}")
    if not (0 < window <= 1):
        raise ScalingInputError(f"window must be a fraction in (0, 1], got {window!r}")
    if not (math.isfinite(max_drop) and 0 <= max_drop < 1):
        raise ScalingInputError(f"max_drop must be a fraction in [0, 1), got {max_drop!r}")
    end = float(horizon) if horizon is not None else (float(s[-1]) if len(s) else 0.0)
    if not math.isfinite(end) or end <= 0:
        raise ScalingInputError(f"horizon must be a positive number of steps, got {horizon!r}")
    start = end * (1 - window)
    with np.errstate(invalid="ignore"):
        keep = (s >= start - 1e-9) & np.isfinite(v) & (v > 0)
    n = int(keep.sum())
    if n < 3:
        return Plateau(drop=None, undertrained=False, checked=False, n_points=n, window=window, max_drop=max_drop)
    slope = float(np.polyfit(s[keep], np.log(v[keep]), 1)[0])
    drop = 1.0 - math.exp(slope * (end - start))
    return Plateau(drop=drop, undertrained=drop > max_drop, checked=True, n_points=n, window=window,
                   max_drop=max_drop, rising=drop < -max_drop)

