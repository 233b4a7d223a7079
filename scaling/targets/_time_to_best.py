"""Time to best quality from one run's checkpoints, time to a common target across arms, and time savings.

Definitions (docs/design.md, "Definitions"):
- effective training time: wall-clock spent in training steps, cumulative at each checkpoint (seconds);
- time to best quality: the effective time at the checkpoint with the best (lowest) FD;
- robust variant: the first checkpoint whose *smoothed* FD is within ``tol`` (relative) of the smoothed best.

Checkpoints that cannot describe the trend are left out of the smoothing and of the robust choice:
- diverged checkpoints: FD is NaN or +inf (a run that blew up has no FD, and a number would be a lie);
- volatile checkpoints: FD worse than *both* neighbours by more than ``volatility_tol`` (relative), like the
  paper's 4B run at 45k (62.89 between neighbours near 42). Only interior checkpoints with finite neighbours
  can be volatile: an end point, or one next to a diverged checkpoint, has no second neighbour to compare
  with.

The smoothing is a centred rolling median of 3 over the remaining checkpoints in order (so a dropped spike's
two neighbours become adjacent), shrinking to a window of 2 (the mean of the two) at the ends.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ScalingInputError

__all__ = [
    "DEFAULT_TOL",
    "DEFAULT_VOLATILITY_TOL",
    "Checkpoints",
    "CommonTarget",
    "Savings",
    "TimeToBest",
    "savings",
    "time_to_best",
    "time_to_common_target",
]

# The paper's robust variant: the first checkpoint within 2% of the best (docs/design.md).
DEFAULT_TOL = 0.02
# 20% above both neighbours: FD on EMA weights moves by a few percent between checkpoints, while the paper's
# volatile 4B checkpoint sat ~50% above its neighbours; 20% separates the two with room on both sides.
DEFAULT_VOLATILITY_TOL = 0.2


class Checkpoints(NamedTuple):
    """One run's checkpoints as three aligned sequences: training step, cumulative effective time (s), FD."""

    steps: ArrayLike
    effective_time_s: ArrayLike
    fd: ArrayLike

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[int, float, float]]) -> Checkpoints:
        """Build from rows of ``(step, effective_time_s, fd)``."""
        try:
            steps, times, fds = zip(*rows, strict=True) if len(rows) else ((), (), ())
        except (TypeError, ValueError) as exc:
            raise ScalingInputError(f"checkpoint rows must be (step, effective_time_s, fd) triples: {exc}") from exc
        return cls(tuple(steps), tuple(times), tuple(fds))


@dataclass(frozen=True)
class TimeToBest:
    """Best, robust and endpoint quality of one run, with the checkpoints that were left out and why.

    Indices refer to positions in the input checkpoints. Times are effective training seconds.
    """

    n_checkpoints: int
    best_index: int
    best_step: int
    best_time_s: float
    best_fd: float
    smoothed_fd: tuple[float, ...]  # NaN where a checkpoint was left out (diverged or volatile)
    smoothed_best_fd: float
    robust_index: int
    robust_step: int
    robust_time_s: float
    robust_fd: float  # the raw FD at the robust checkpoint, not the smoothed one
    endpoint_step: int
    endpoint_time_s: float
    endpoint_fd: float  # NaN when the last checkpoint diverged: endpoint and best-seen are never merged
    volatile_indices: tuple[int, ...]
    volatile_steps: tuple[int, ...]
    diverged_indices: tuple[int, ...]
    tol: float
    volatility_tol: float

    @property
    def diverged(self) -> bool:
        """Whether any checkpoint had no finite FD."""
        return bool(self.diverged_indices)

    @property
    def endpoint_is_best(self) -> bool:
        """Whether the last checkpoint is the best one (the endpoint FD then equals the best-seen FD)."""
        return self.best_index == self.n_checkpoints - 1


@dataclass(frozen=True)
class CommonTarget:
    """Time for each arm at one rung to reach a common FD target.

    The target is the worst arm's smoothed best FD times ``1 + tol``, so every arm that trained normally
    reaches it and the times compare the same quality. ``time_s[arm]`` is None when the arm never reached it.
    """

    target_fd: float
    reference_arm: str  # the arm with the worst smoothed best FD, which sets the target
    tol: float
    time_s: dict[str, float | None]
    step: dict[str, int | None]
    diverged_arms: tuple[str, ...]  # arms with no finite FD at all: left out of the target, time None


@dataclass(frozen=True)
class Savings:
    """Time saved by the periodic arm against one baseline, in % of the baseline's time (positive: faster).

    Seeds are paired by seed id; ``std_pct`` is the sample standard deviation over seeds (None with one seed).
    """

    baseline: str
    mean_pct: float
    std_pct: float | None
    n: int
    per_seed_pct: tuple[float, ...]
    seeds: tuple[int | str, ...]


def _check_tolerance(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ScalingInputError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def _as_float_array(name: str, values: ArrayLike) -> NDArray[np.float64]:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(f"{name} must be a sequence of numbers: {exc}") from exc
    if array.ndim != 1:
        raise ScalingInputError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def _validate(
    steps: ArrayLike, effective_time_s: ArrayLike, fd: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    step_arr = _as_float_array("steps", steps)
    time_arr = _as_float_array("effective_time_s", effective_time_s)
    fd_arr = _as_float_array("fd", fd)
    n = len(step_arr)
    if not (len(time_arr) == n and len(fd_arr) == n):
        raise ScalingInputError(
            f"steps, effective_time_s and fd must have equal lengths, got {n}, {len(time_arr)}, {len(fd_arr)}"
        )
    if n == 0:
        raise ScalingInputError("at least one checkpoint is needed")
    if not np.all(np.isfinite(step_arr)) or np.any(step_arr < 0) or np.any(step_arr != np.round(step_arr)):
        raise ScalingInputError(f"steps must be whole numbers >= 0, got {step_arr.tolist()}")
    if np.any(np.diff(step_arr) <= 0):
        raise ScalingInputError(f"steps must be strictly increasing, got {step_arr.astype(np.int64).tolist()}")
    if not np.all(np.isfinite(time_arr)) or np.any(time_arr < 0):
        raise ScalingInputError(f"effective_time_s must be finite and >= 0, got {time_arr.tolist()}")
    # Effective time is cumulative, so a decrease means the records are mixed up (e.g. a resumed run's clock
    # reset).
    if np.any(np.diff(time_arr) < 0):
        raise ScalingInputError(f"effective_time_s must not decrease along the steps, got {time_arr.tolist()}")
    # NaN and +inf are a diverged checkpoint; a negative FD or -inf cannot come out of a Fréchet distance.
    if np.any(fd_arr < 0) or np.any(np.isneginf(fd_arr)):
        raise ScalingInputError(f"fd must be >= 0 (NaN or +inf marks a diverged checkpoint), got {fd_arr.tolist()}")
    return step_arr.astype(np.int64), time_arr, fd_arr


def _volatile(fd: NDArray[np.float64], volatility_tol: float) -> NDArray[np.bool_]:
    flags = np.zeros(len(fd), dtype=bool)
    if len(fd) < 3:
        return flags
    mid, left, right = fd[1:-1], fd[:-2], fd[2:]
    with np.errstate(invalid="ignore"):
        worse = (mid > left * (1 + volatility_tol)) & (mid > right * (1 + volatility_tol))
    flags[1:-1] = worse & np.isfinite(mid) & np.isfinite(left) & np.isfinite(right)
    return flags


def _smooth(fd: NDArray[np.float64], keep: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Centred rolling median of 3 over the kept checkpoints, in order; NaN where a checkpoint is not kept."""
    kept = fd[keep]
    smoothed_kept = np.array([np.median(kept[max(0, i - 1) : i + 2]) for i in range(len(kept))], dtype=np.float64)
    out = np.full(len(fd), np.nan)
    out[keep] = smoothed_kept
    return out


@dataclass(frozen=True)
class _Analysis:
    steps: NDArray[np.int64]
    times: NDArray[np.float64]
    fd: NDArray[np.float64]
    diverged: NDArray[np.bool_]
    volatile: NDArray[np.bool_]
    smoothed: NDArray[np.float64]  # NaN where left out
    smoothed_best: float  # NaN when every checkpoint diverged


def _analyse(steps: ArrayLike, effective_time_s: ArrayLike, fd: ArrayLike, volatility_tol: float) -> _Analysis:
    step_arr, time_arr, fd_arr = _validate(steps, effective_time_s, fd)
    diverged = ~np.isfinite(fd_arr)
    volatile = _volatile(fd_arr, volatility_tol)
    keep = ~diverged & ~volatile
    smoothed = _smooth(fd_arr, keep)
    smoothed_best = float(np.min(smoothed[keep])) if keep.any() else math.nan
    return _Analysis(step_arr, time_arr, fd_arr, diverged, volatile, smoothed, smoothed_best)


def _first_within(analysis: _Analysis, target: float) -> int | None:
    # The comparison is NaN-safe: checkpoints left out have a NaN smoothed FD and never qualify.
    with np.errstate(invalid="ignore"):
        hits = np.flatnonzero(analysis.smoothed <= target)
    return int(hits[0]) if len(hits) else None


def time_to_best(
    steps: ArrayLike,
    effective_time_s: ArrayLike,
    fd: ArrayLike,
    *,
    tol: float = DEFAULT_TOL,
    volatility_tol: float = DEFAULT_VOLATILITY_TOL,
) -> TimeToBest:
    """Best FD, time to best quality, its robust variant, endpoint FD and volatility flags of one run.

    ``steps`` strictly increasing, ``effective_time_s`` cumulative seconds, ``fd`` lower-is-better with NaN
    (or +inf) for a diverged checkpoint. ``tol`` and ``volatility_tol`` are relative (0.02 = 2%).
    Raises ``ScalingInputError`` on malformed input or when every checkpoint diverged.
    """
    tol = _check_tolerance("tol", tol)
    volatility_tol = _check_tolerance("volatility_tol", volatility_tol)
    a = _analyse(steps, effective_time_s, fd, volatility_tol)
    if a.diverged.all():
        raise ScalingInputError("every checkpoint diverged (no finite FD): there is no best checkpoint")
    # nanargmin of the raw FD with diverged checkpoints masked; ties go to the earliest checkpoint.
    best = int(np.argmin(np.where(a.diverged, np.inf, a.fd)))
    robust = _first_within(a, a.smoothed_best * (1 + tol))
    if robust is None:  # cannot happen: the smoothed best itself qualifies; kept as a typed guard, not an assert
        raise ScalingInputError("no checkpoint within tolerance of the smoothed best")
    last = len(a.fd) - 1
    return TimeToBest(
        n_checkpoints=len(a.fd),
        best_index=best,
        best_step=int(a.steps[best]),
        best_time_s=float(a.times[best]),
        best_fd=float(a.fd[best]),
        smoothed_fd=tuple(float(v) for v in a.smoothed),
        smoothed_best_fd=a.smoothed_best,
        robust_index=robust,
        robust_step=int(a.steps[robust]),
        robust_time_s=float(a.times[robust]),
        robust_fd=float(a.fd[robust]),
        endpoint_step=int(a.steps[last]),
        endpoint_time_s=float(a.times[last]),
        endpoint_fd=float(a.fd[last]) if np.isfinite(a.fd[last]) else math.nan,
        volatile_indices=tuple(int(i) for i in np.flatnonzero(a.volatile)),
        volatile_steps=tuple(int(s) for s in a.steps[a.volatile]),
        diverged_indices=tuple(int(i) for i in np.flatnonzero(a.diverged)),
        tol=tol,
        volatility_tol=volatility_tol,
    )


def _as_checkpoints(arm: str, value: Checkpoints | tuple[ArrayLike, ArrayLike, ArrayLike]) -> Checkpoints:
    if isinstance(value, Checkpoints):
        return value
    try:
        steps, times, fds = value
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(
            f"arm {arm!r}: expected Checkpoints or (steps, effective_time_s, fd), got {type(value).__name__}"
        ) from exc
    return Checkpoints(steps, times, fds)


def time_to_common_target(
    arms: Mapping[str, Checkpoints | tuple[ArrayLike, ArrayLike, ArrayLike]],
    *,
    tol: float = DEFAULT_TOL,
    volatility_tol: float = DEFAULT_VOLATILITY_TOL,
) -> CommonTarget:
    """Each arm's first effective time at which its smoothed FD reaches the worst arm's smoothed best x (1 +
    tol).

    ``arms`` maps an arm name to its checkpoints at one rung. Reaching is judged on the smoothed FD (the same
    smoothing as ``time_to_best``), so one lucky checkpoint does not count as reaching a quality level.
    Arms whose every checkpoint diverged do not set the target and get None.
    """
    tol = _check_tolerance("tol", tol)
    volatility_tol = _check_tolerance("volatility_tol", volatility_tol)
    if not arms:
        raise ScalingInputError("at least one arm is needed")
    analyses: dict[str, _Analysis] = {}
    for arm, value in arms.items():
        ckpt = _as_checkpoints(arm, value)
        try:
            analyses[arm] = _analyse(ckpt.steps, ckpt.effective_time_s, ckpt.fd, volatility_tol)
        except ScalingInputError as exc:
            raise ScalingInputError(f"arm {arm!r}: {exc}") from exc
    diverged_arms = tuple(arm for arm, a in analyses.items() if math.isnan(a.smoothed_best))
    finite = {arm: a.smoothed_best for arm, a in analyses.items() if arm not in diverged_arms}
    if not finite:
        raise ScalingInputError("every arm diverged at every checkpoint: there is no target to reach")
    reference = max(finite, key=lambda arm: finite[arm])
    target = finite[reference] * (1 + tol)
    time_s: dict[str, float | None] = {}
    step: dict[str, int | None] = {}
    for arm, a in analyses.items():
        hit = _first_within(a, target)
        time_s[arm] = None if hit is None else float(a.times[hit])
        step[arm] = None if hit is None else int(a.steps[hit])
    return CommonTarget(
        target_fd=target,
        reference_arm=reference,
        tol=tol,
        time_s=time_s,
        step=step,
        diverged_arms=diverged_arms,
    )


SeedTimes = float | TimeToBest | Sequence[float | TimeToBest] | Mapping[int | str, float | TimeToBest]


def _seed_times(arm: str, value: SeedTimes, robust: bool) -> dict[int | str, float]:
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (Sequence, np.ndarray)):
        items = list(enumerate(value))
    else:
        items = [(0, value)]  # a bare value is seed 0
    out: dict[int | str, float] = {}
    for seed, v in items:
        if isinstance(v, TimeToBest):
            t = v.robust_time_s if robust else v.best_time_s
        elif isinstance(v, numbers.Real) and not isinstance(v, bool):
            t = float(v)
        else:
            raise ScalingInputError(
                f"arm {arm!r}, seed {seed!r}: expected a time in seconds or a TimeToBest, got {v!r}"
            )
        # Savings are a ratio to the baseline's time: a zero or non-finite time makes it meaningless.
        if not math.isfinite(t) or t <= 0:
            raise ScalingInputError(f"arm {arm!r}, seed {seed!r}: time to best must be finite and > 0, got {t!r}")
        out[seed] = t
    if not out:
        raise ScalingInputError(f"arm {arm!r}: no seeds given")
    return out


def savings(
    times: Mapping[str, SeedTimes],
    *,
    periodic: str = "periodic",
    baselines: Sequence[str] | None = None,
    robust: bool = False,
) -> dict[str, Savings]:
    """Time to best quality saved by ``periodic`` against each baseline at one rung, in % of the baseline's
    time.

    ``times`` maps arm name to its time to best: a number (seed 0), a sequence (seed i at position i), a
    mapping seed id -> time, or ``TimeToBest`` results in place of numbers (``robust`` picks ``robust_time_s``
    over
    ``best_time_s``). Seeds are paired by id, per seed ``100 * (t_baseline - t_periodic) / t_baseline``, then
    mean, sample std and n over the paired seeds. Baselines default to every other arm. Call it once per rung.
    """
    if periodic not in times:
        raise ScalingInputError(f"periodic arm {periodic!r} not in times; arms: {sorted(times)}")
    chosen = [arm for arm in times if arm != periodic] if baselines is None else list(baselines)
    unknown = [arm for arm in chosen if arm not in times]
    if unknown:
        raise ScalingInputError(f"baselines {unknown} not in times; arms: {sorted(times)}")
    if not chosen:
        raise ScalingInputError("no baseline arm to compare with")
    ours = _seed_times(periodic, times[periodic], robust)
    out: dict[str, Savings] = {}
    for base in chosen:
        theirs = _seed_times(base, times[base], robust)
        seeds = [s for s in ours if s in theirs]
        if not seeds:
            raise ScalingInputError(
                f"no seed in common between {periodic!r} {sorted(map(str, ours))} and {base!r} "
                f"{sorted(map(str, theirs))}"
            )
        pct = np.array([100.0 * (theirs[s] - ours[s]) / theirs[s] for s in seeds])
        out[base] = Savings(
            baseline=base,
            mean_pct=float(pct.mean()),
            std_pct=float(pct.std(ddof=1)) if len(pct) > 1 else None,
            n=len(pct),
            per_seed_pct=tuple(float(p) for p in pct),
            seeds=tuple(seeds),
        )
    return out
