"""Steps to target as a survival time: the sustained crossing and the steps above the target beside the first
crossing, censoring kept (never dropped), the restricted mean per arm from a Kaplan-Meier curve, the paired ratio of
restricted means with a bootstrap over seeds, the time saving built on it, and the data a size fit may take from
censored runs.

Definitions (docs/targets.md, "Sustained crossing, censoring and the restricted mean"):

- **first crossing**: `time_to_target`, the first point at or below the target, interpolated from the point before.
- **sustained crossing**: the first step after which the run stays at or below the target through its horizon: the
  crossing into the last stretch of points that are all at or below it, interpolated like the first crossing.
  A run whose last point is above the target (or has no value), or that stopped before its horizon, has none.
- **steps above the target**: the steps in [0, horizon] a run spends above the target (`steps_above`); per run
  (`run_steps_above`) known for a run observed through its horizon, right-censored at its steps above so far for
  one that stopped early. The comparisons judge claims on it and the first crossing (scaling.claims).
- **censoring**: a run that never reaches (or, sustained, does not hold to its horizon) is *right-censored* at the
  last step it was observed (the horizon for a run that finished); a run already at or below the target at its
  first point is *left-censored*: the crossing happened at or before that point and is counted there (an upper
  bound), and the counts say how many.
- **restricted mean steps to target** (restricted at the horizon `tau`): the area under the arm's Kaplan-Meier
  curve of "not yet reached" from 0 to `tau`, the mean of min(steps to target, tau) when every censored run is
  censored at `tau`; unlike a mean over the runs that reached, it keeps every seed, and a seed that did not reach
  counts as "at least tau" rather than vanishing.
- **steps ratio**: restricted mean of arm a / restricted mean of arm b, seeds paired: its interval from a bootstrap
  over seeds (the same seed indices for both arms, each arm's Kaplan-Meier curve redone per resample); the log
  ratio's bootstrap standard error (scaled by sqrt(n / (n - 1)): resampling n seeds from n shrinks the spread by
  (n - 1) / n) with a Student-t quantile on n - 1 degrees of freedom, since a percentile interval over 3-6 seeds is
  too narrow (with 3 seeds there are 10 distinct resamples). Measured coverage: tests/scaling/test_injection.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .errors import ScalingInputError
from .records import TransferRun
from .stats import LEVEL, check_n_boot, t_quantile, two_sided_t_p
from .targets import TimeToTarget, quality_curve, target_value, time_to_target

__all__ = [
    "DEFAULT_SURVIVAL_BOOT",
    "CensoredFitData",
    "Crossing",
    "RestrictedMean",
    "RestrictedRatio",
    "SurvivalSaving",
    "censored_fit_data",
    "crossings",
    "km_restricted_means",
    "one_target",
    "restricted_mean",
    "restricted_ratio",
    "restricted_saving",
    "run_crossings",
    "run_steps_above",
    "steps_above",
    "sustained_crossing",
]

Status = Literal["reached", "right_censored", "left_censored"]
Endpoint = Literal["first", "sustained"]
# What a steps-to-target comparison reads per run: the two crossings, and the steps spent above the target
# (`run_steps_above`), the endpoint judged beside the first crossing (scaling.claims).
ComparisonEndpoint = Literal["first", "sustained", "steps_above"]
# Enough resamples that the bootstrap standard error moves by about 2 % between bootstrap seeds (its relative
# error is about 1 / sqrt(2 B)), at a cost of milliseconds for the 3-12 seeds a study has.
DEFAULT_SURVIVAL_BOOT = 1000


def sustained_crossing(steps: ArrayLike, times_s: ArrayLike, values: ArrayLike, target: float, *,
                       horizon: float | None = None) -> TimeToTarget:
    """The first step after which the lower-is-better curve stays at or below `target` through its horizon.

    The last point above the target (or without a value) is `j`; the crossing is interpolated between `j` and
    `j + 1` as `time_to_target` interpolates (at `j + 1` itself when `j` has no value), never extrapolated. Not
    reached when the last point is above the target or has no value, or when the curve stops before `horizon`
    (the run was not observed through it). Every point at or below: the crossing is at the first point,
    `left_censored` when that point is strictly below. Same errors as `time_to_target`.
    """
    s, t, v = quality_curve(steps, times_s, values)
    goal = target_value(target)
    if horizon is not None and s[-1] < float(horizon):
        return TimeToTarget(reached=False, step=None, time_s=None)
    with np.errstate(invalid="ignore"):
        above = ~(v <= goal)  # NaN is above: a point without a value does not hold the target
    if above[-1]:
        return TimeToTarget(reached=False, step=None, time_s=None)
    if not above.any():
        return TimeToTarget(reached=True, step=float(s[0]), time_s=float(t[0]), left_censored=bool(v[0] < goal))
    j = int(np.flatnonzero(above)[-1])
    # From the last point above on, the tail is a curve whose only crossing is its first: `time_to_target`'s rule.
    return time_to_target(s[j:], t[j:], v[j:], goal)


def steps_above_rows(steps: NDArray[np.float64], values: NDArray[np.float64], target: float, horizon: float
                     ) -> NDArray[np.float64]:
    """`steps_above` of each row of `values` (runs x points on the increasing `steps`), vectorised: the injection
    simulation measures thousands of runs with it."""
    with np.errstate(invalid="ignore"):
        above = ~(values <= target)  # NaN: no value, so not holding the target
    v0, v1 = values[:, :-1], values[:, 1:]
    a0, a1 = above[:, :-1], above[:, 1:]
    width = np.diff(steps)[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        # One end above, the other at or below: the line between them is above for this share of the stretch.
        share = np.where(a0, (v0 - target) / (v0 - v1), (v1 - target) / (v1 - v0))
    inside = np.where(a0 & a1, 1.0, np.where(~a0 & ~a1, 0.0, np.where(np.isfinite(share), share, 1.0)))
    tail = np.where(above[:, -1], max(float(horizon) - float(steps[-1]), 0.0), 0.0)
    return np.asarray(float(steps[0]) + (inside * width).sum(axis=1) + tail)


def steps_above(steps: ArrayLike, values: ArrayLike, target: float, *, horizon: float) -> float:
    """The steps in [0, `horizon`] the lower-is-better curve spends above `target`: the stretch before its first
    point (training starts above any target), between points the share of each stretch the straight line between
    them is above (a point without a value counts as above), and from the last point to the horizon as the last
    point is. For a run that crosses once and holds it equals the first crossing; a run that comes back above adds
    the steps it spends there, where the sustained crossing jumps to the horizon (docs/targets.md: the injection
    simulation's coverage of both)."""
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    if s.ndim != 1 or s.size == 0 or s.shape != v.shape or np.any(np.diff(s) <= 0) or not np.all(np.isfinite(s)):
        raise ScalingInputError(f"steps must increase strictly, with one value each, got {s.tolist()} and "
                                f"{v.tolist()}")
    tau = _check_horizon(horizon)
    if s[-1] > tau:
        # Points past the horizon lie outside [0, horizon]: the curve is cut there, its value at the horizon read
        # off the straight line between the points around it (a missing value stays missing: above).
        k = int(np.searchsorted(s, tau, side="right"))  # the points at or before the horizon
        if k == 0:
            return tau  # the horizon comes before the first point: above throughout
        if s[k - 1] < tau:
            share = (tau - s[k - 1]) / (s[k] - s[k - 1])
            s, v = np.append(s[:k], tau), np.append(v[:k], v[k - 1] + share * (v[k] - v[k - 1]))
        else:
            s, v = s[:k], v[:k]
    return float(steps_above_rows(s, v[None, :], target_value(target), tau)[0])


@dataclass(frozen=True)
class Crossing:
    """One run's steps to target as a survival time: `step` is the crossing (reached), the first point
    (left_censored: an upper bound) or the last step observed (right_censored: a lower bound)."""

    step: float
    status: Status
    time_s: float | None = None  # effective seconds at the crossing (reached or left-censored)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step) and self.step >= 0):
            raise ScalingInputError(f"a crossing's step must be finite and >= 0, got {self.step!r}")
        if self.status not in ("reached", "right_censored", "left_censored"):
            raise ScalingInputError(f"unknown crossing status {self.status!r}; allowed: reached, right_censored, "
                                    "left_censored")

    @classmethod
    def of(cls, hit: TimeToTarget, last_step: float) -> Crossing:
        """From `time_to_target` or `sustained_crossing`: not reached -> right-censored at `last_step`."""
        if not hit.reached or hit.step is None:
            return cls(float(last_step), "right_censored")
        return cls(float(hit.step), "left_censored" if hit.left_censored else "reached", hit.time_s)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def crossings(steps: ArrayLike, times_s: ArrayLike, values: ArrayLike, target: float, *,
              horizon: float | None = None) -> dict[Endpoint, Crossing]:
    """{"first": ..., "sustained": ...} of one run's curve against `target`, each a `Crossing`; a run that did not
    reach is right-censored at its last point."""
    s = np.asarray(steps, dtype=float)
    first = time_to_target(steps, times_s, values, target)
    held = sustained_crossing(steps, times_s, values, target, horizon=horizon)
    last = float(s[-1]) if s.size else 0.0
    return {"first": Crossing.of(first, last), "sustained": Crossing.of(held, last)}


def _curve_points(run: TransferRun) -> tuple[tuple[int, float, float], ...]:
    return run.track or run.checkpoints


def run_crossings(run: TransferRun, target: float, horizon: float) -> dict[Endpoint, Crossing]:
    """Both crossings of one transfer run (its tracking curve when it has one), censoring by how it ended: a
    succeeded run is observed through `horizon`; a diverged one keeps a first crossing made before it blew up but
    neither reaches later nor holds (right-censored at `horizon`); one that failed is observed up to its last point;
    a run without points is right-censored at 0."""
    points = _curve_points(run)
    if not points:
        empty = Crossing(0.0, "right_censored")
        return {"first": empty, "sustained": empty}
    s, t, v = zip(*points, strict=True)
    if run.state == "DIVERGED":
        # Training blew up: a crossing before that stands, but it neither reaches later nor holds to the horizon.
        first, never = crossings(s, t, v, target)["first"], Crossing(horizon, "right_censored")
        return {"first": first if first.status != "right_censored" else never, "sustained": never}
    # A succeeded run is observed through its horizon; one that failed only up to its last point.
    return crossings(s, t, v, target, horizon=horizon if run.state == "SUCCEEDED" else None)


def run_steps_above(run: TransferRun, target: float, horizon: float) -> Crossing:
    """The steps one transfer run spends above `target` up to `horizon` (`steps_above`, on its tracking curve when
    it has one) as a survival time, censored by how the run ended. A succeeded run is observed through the horizon:
    its value is known (status `reached`). A diverged one counts as above from its last point to the horizon (a
    run that blew up does not come back below): known as well. One that failed or was cancelled is observed only
    to its last point: its steps above so far are a lower bound, right-censored there, which the Kaplan-Meier
    restricted mean takes as "at least that" (known when that point is at or past the horizon). A run without
    points is right-censored at 0."""
    tau = _check_horizon(horizon)
    points = _curve_points(run)
    if not points:
        return Crossing(0.0, "right_censored")
    s, _, v = zip(*points, strict=True)
    last = float(s[-1])
    if run.state == "SUCCEEDED":
        return Crossing(steps_above(s, v, target, horizon=tau), "reached")
    seen = steps_above(s, v, target, horizon=min(last, tau))
    if run.state == "DIVERGED":
        return Crossing(seen + max(tau - last, 0.0), "reached")
    return Crossing(seen, "reached" if last >= tau else "right_censored")


def _counts(cs: Sequence[Crossing]) -> dict[str, int]:
    return {status: sum(c.status == status for c in cs) for status in ("reached", "right_censored", "left_censored")}


@dataclass(frozen=True)
class RestrictedMean:
    """One arm's restricted mean steps to target (area under its Kaplan-Meier curve up to `horizon`) and its
    censoring counts. `curve` is the Kaplan-Meier step function: (step, fraction not yet reached after it)."""

    mean: float
    horizon: float
    n: int
    reached: int
    right_censored: int
    left_censored: int
    curve: tuple[tuple[float, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "curve": [list(p) for p in self.curve]}


def km_restricted_means(times: NDArray[np.float64], events: NDArray[np.bool_], horizon: float) -> NDArray[np.float64]:
    """Restricted mean of each row of `times` (rows x seeds; `events` True where the target was reached) under its
    Kaplan-Meier curve, up to `horizon`. Ties: events before censorings at the same step (a run censored at t was
    at risk at t), and d tied events at risk k multiply by (1 - 1/k)...(1 - 1/(k - d + 1)) = 1 - d/k, the usual
    factor, so sorting and taking one factor per run is exact. Past the last observation the curve stays flat."""
    t = np.minimum(times, horizon)
    e = events & (times <= horizon)  # reached after the horizon: censored at it
    n = t.shape[1]
    # Sort by step, events first among equal steps (lexsort's last key is primary).
    order = np.lexsort((~e, t), axis=1)
    ts = np.take_along_axis(t, order, axis=1)
    es = np.take_along_axis(e, order, axis=1)
    at_risk = n - np.arange(n)  # (n,): runs still at risk at the i-th sorted one
    factor = np.where(es, 1.0 - 1.0 / at_risk, 1.0)
    survival = np.cumprod(factor, axis=1)  # after each sorted run
    widths = np.diff(np.concatenate([np.zeros((t.shape[0], 1)), ts, np.full((t.shape[0], 1), horizon)], axis=1),
                     axis=1)  # (rows, n + 1): [0, t1], [t1, t2], ..., [tn, horizon]
    before = np.concatenate([np.ones((t.shape[0], 1)), survival], axis=1)
    return np.asarray((before * widths).sum(axis=1))


def _as_arrays(cs: Sequence[Crossing]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    # A left-censored crossing counts as reached at its first point: an upper bound, counted in the result.
    return (np.array([c.step for c in cs], dtype=float),
            np.array([c.status != "right_censored" for c in cs], dtype=bool))


def _check_horizon(horizon: float) -> float:
    try:
        tau = float(horizon)
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(f"horizon must be a number of steps, got {horizon!r}") from exc
    if not (math.isfinite(tau) and tau > 0):
        raise ScalingInputError(f"horizon must be a finite number of steps > 0, got {horizon!r}")
    return tau


def restricted_mean(cs: Sequence[Crossing], horizon: float) -> RestrictedMean:
    """The restricted mean steps to target of one arm's runs (`Crossing`s), restricted at `horizon` steps."""
    tau = _check_horizon(horizon)
    if not cs:
        raise ScalingInputError("restricted_mean needs at least one run's crossing")
    times, events = _as_arrays(cs)
    mean = float(km_restricted_means(times[None, :], events[None, :], tau)[0])
    order = np.lexsort((~events, np.minimum(times, tau)))
    survival, points = 1.0, []
    for i, k in enumerate(order):
        if events[k] and times[k] <= tau:
            survival *= 1.0 - 1.0 / (len(times) - i)
            points.append((float(times[k]), survival))
    return RestrictedMean(mean=mean, horizon=tau, n=len(cs), curve=tuple(points), **_counts(cs))


@dataclass(frozen=True)
class RestrictedRatio:
    """Arm a's restricted mean steps to target over arm b's, seeds paired, with a bootstrap-over-seeds interval.

    `log_se` is the bootstrap standard error of the log ratio (None with one seed or no spread to resample);
    `p_value` the two-sided test of ratio 1 on it (t, n - 1 degrees of freedom), the number Holm corrects.
    `censoring` holds each arm's counts (reached, right_censored, left_censored): no seed is left out."""

    ratio: float
    lo: float | None
    hi: float | None
    log_se: float | None
    p_value: float | None
    n: int
    level: float
    n_boot: int
    horizon: float
    endpoint: str
    a: RestrictedMean
    b: RestrictedMean
    names: tuple[str, str] = ("a", "b")
    seeds: tuple[int | str, ...] = ()
    method: str = ("restricted mean steps to target (Kaplan-Meier, restricted at the horizon) a / b, seeds paired; "
                   "interval: log ratio +- t(n-1) x bootstrap-over-seeds standard error x sqrt(n / (n - 1))")

    @property
    def censoring(self) -> dict[str, dict[str, int]]:
        return {name: {"reached": rm.reached, "right_censored": rm.right_censored, "left_censored": rm.left_censored}
                for name, rm in zip(self.names, (self.a, self.b), strict=True)}

    @property
    def includes_one(self) -> bool:
        return self.lo is None or self.hi is None or self.lo <= 1.0 <= self.hi

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.ratio, "lo": self.lo, "hi": self.hi, "log_se": self.log_se, "p_value": self.p_value,
                "n": self.n, "level": self.level, "n_boot": self.n_boot, "horizon": self.horizon,
                "endpoint": self.endpoint, "censoring": self.censoring, "seeds": [str(s) for s in self.seeds],
                "restricted_mean": {name: rm.to_dict() for name, rm in zip(self.names, (self.a, self.b), strict=True)},
                "method": self.method}


def _paired(a: Mapping[Any, Crossing], b: Mapping[Any, Crossing]) -> list[Any]:
    if set(a) != set(b):
        raise ScalingInputError(
            f"the two arms must hold the same seeds (a run that failed is a crossing right-censored at its last "
            f"step, not a missing seed): only in a {sorted(map(str, set(a) - set(b)))}, only in b "
            f"{sorted(map(str, set(b) - set(a)))}")
    if not a:
        raise ScalingInputError("restricted_ratio needs at least one paired seed")
    return sorted(a, key=str)


def boot_log_se(boot_logs: NDArray[np.float64], n: int) -> NDArray[np.float64]:
    """The standard error of a log ratio over `n` paired seeds from its bootstrap replicates (last axis: the
    replicates, one row per study): their sd scaled by sqrt(n / (n - 1)), since resampling n seeds from n shrinks
    the spread by (n - 1) / n. One replicate has no spread: 0. `restricted_ratio` and the injection simulation's
    thousands of studies at once both take it from here."""
    if boot_logs.shape[-1] < 2:
        return np.zeros(boot_logs.shape[:-1])
    return np.asarray(boot_logs.std(axis=-1, ddof=1) * math.sqrt(n / (n - 1)))


def restricted_ratio(a: Mapping[Any, Crossing], b: Mapping[Any, Crossing], *, horizon: float,
                     names: tuple[str, str] = ("a", "b"), endpoint: str = "first", n_boot: int = DEFAULT_SURVIVAL_BOOT,
                     seed: int = 0, level: float = LEVEL) -> RestrictedRatio:
    """Restricted mean steps to target of arm `a` / arm `b` (seed -> `Crossing`, the same seeds in both), with a
    bootstrap over seeds (the module docstring: why a t quantile on the bootstrap standard error)."""
    tau = _check_horizon(horizon)
    check_n_boot(n_boot)
    if not 0 < level < 1:
        raise ScalingInputError(f"level must be in (0, 1), got {level!r}")
    seeds = _paired(a, b)
    ta, ea = _as_arrays([a[s] for s in seeds])
    tb, eb = _as_arrays([b[s] for s in seeds])
    rm_a, rm_b = restricted_mean([a[s] for s in seeds], tau), restricted_mean([b[s] for s in seeds], tau)
    n = len(seeds)
    center = math.log(rm_a.mean / rm_b.mean)
    log_se, lo, hi, p = None, None, None, None
    if n > 1:
        idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))  # (B, n): the same seeds for both arms
        logs = np.log(km_restricted_means(ta[idx], ea[idx], tau)) - np.log(km_restricted_means(tb[idx], eb[idx], tau))
        log_se = float(boot_log_se(logs, n))
        half = t_quantile(level, n - 1) * log_se
        lo, hi = math.exp(center - half), math.exp(center + half)
        p = two_sided_t_p(center, log_se, n - 1)
    return RestrictedRatio(ratio=math.exp(center), lo=lo, hi=hi, log_se=log_se, p_value=p, n=n, level=level,
                           n_boot=n_boot, horizon=tau, endpoint=endpoint, a=rm_a, b=rm_b, names=names,
                           seeds=tuple(seeds))


@dataclass(frozen=True)
class SurvivalSaving:
    """The time saving 1 - steps ratio x per-step time ratio, in %, on the restricted-mean steps ratio: its log is
    the sum of two independent estimates (seeds, timing rounds), so the standard errors add in quadrature and the
    t quantile takes Welch-Satterthwaite degrees of freedom. Positive: arm a is faster."""

    pct: float
    lo: float | None
    hi: float | None
    p_value: float | None
    steps: RestrictedRatio
    step_time_ratio: float
    step_time_lo: float | None
    step_time_hi: float | None
    timing_rounds: int
    step_time_p_value: float | None  # the per-step ratio's own test of 1 (t over timing rounds)
    se_seeds_log: float | None
    se_timing_log: float | None
    df: float | None
    level: float

    @property
    def detected(self) -> bool:
        """A saving shown: the interval lies above zero."""
        return self.lo is not None and self.lo > 0

    @property
    def verdict(self) -> Literal["saving", "cost", "null"]:
        """'saving' when the interval lies above zero, 'cost' when it lies below (arm a takes longer: a cost shown,
        not a saving), else 'null' (the interval includes zero, or there is none)."""
        if self.detected:
            return "saving"
        return "cost" if self.hi is not None and self.hi < 0 else "null"

    @property
    def includes_zero(self) -> bool:
        return self.lo is None or self.hi is None or self.lo <= 0.0 <= self.hi

    def to_dict(self) -> dict[str, Any]:
        return {"mean": self.pct, "lo": self.lo, "hi": self.hi, "p_value": self.p_value, "level": self.level,
                "n": self.steps.n, "steps_ratio": self.steps.ratio,
                "step_time_ratio": {"mean": self.step_time_ratio, "lo": self.step_time_lo, "hi": self.step_time_hi,
                                    "rounds": self.timing_rounds, "p_value": self.step_time_p_value},
                "se_seeds_log": self.se_seeds_log, "se_timing_log": self.se_timing_log, "df": self.df,
                "detected": self.detected, "verdict": self.verdict,
                "definition": "1 - restricted-mean steps ratio x per-step time ratio, in % (positive: a is faster)"}


def saving_variance(log_se_steps: NDArray[np.float64] | np.float64, n: int, step_time_log_ratios: NDArray[np.float64]
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The saving's log variance and its Welch-Satterthwaite degrees of freedom, from the steps ratio's log
    standard error over `n` seeds and the timing rounds' log ratios (last axis: the rounds; leading axes: one row
    per study, broadcast against `log_se_steps`). No spread at all: n - 1 degrees of freedom."""
    logs = np.asarray(step_time_log_ratios, dtype=float)
    m = logs.shape[-1]
    var_s = np.asarray(log_se_steps, dtype=float) ** 2
    var_t = logs.var(axis=-1, ddof=1) / m if m > 1 else np.zeros(logs.shape[:-1])
    var = var_s + var_t
    with np.errstate(invalid="ignore", divide="ignore"):
        df = var**2 / (var_s**2 / (n - 1) + (var_t**2 / (m - 1) if m > 1 else 0.0))
    return var, np.where(var > 0, df, float(n - 1))


def restricted_saving(steps: RestrictedRatio, step_time_log_ratios: Sequence[float], *,
                      level: float | None = None) -> SurvivalSaving:
    """The time saving on `steps` and the per-step time ratio a / b from timing rounds (`step_time_log_ratios`:
    log(a's seconds per step / b's), one per round, paired by round). One round gives the ratio without a spread."""
    lvl = steps.level if level is None else float(level)
    logs = np.asarray(list(step_time_log_ratios), dtype=float)
    if logs.size == 0 or not np.all(np.isfinite(logs)):
        raise ScalingInputError(f"step_time_log_ratios must hold one finite log ratio per timing round, got "
                                f"{logs.tolist()}")
    m = int(logs.size)
    log_q = float(logs.mean())
    var_t = float(logs.var(ddof=1)) / m if m > 1 else None
    q_half = t_quantile(lvl, m - 1) * math.sqrt(var_t) if var_t is not None else None
    center = math.log(steps.ratio) + log_q
    out: dict[str, Any] = {"lo": None, "hi": None, "p_value": None, "df": None}
    if steps.log_se is not None:
        var, df = saving_variance(np.float64(steps.log_se), steps.n, logs)
        half = t_quantile(lvl, float(df)) * math.sqrt(float(var))
        # A larger product is a smaller saving: the ends swap.
        out = {"lo": 100 * (1 - math.exp(center + half)), "hi": 100 * (1 - math.exp(center - half)),
               "p_value": two_sided_t_p(center, math.sqrt(float(var)), float(df)), "df": float(df)}
    return SurvivalSaving(pct=100 * (1 - math.exp(center)), steps=steps, step_time_ratio=math.exp(log_q),
                          step_time_lo=math.exp(log_q - q_half) if q_half is not None else None,
                          step_time_hi=math.exp(log_q + q_half) if q_half is not None else None,
                          timing_rounds=m, se_seeds_log=steps.log_se,
                          step_time_p_value=None if var_t is None else two_sided_t_p(log_q, math.sqrt(var_t), m - 1),
                          se_timing_log=math.sqrt(var_t) if var_t is not None else None, level=lvl, **out)


# ----------------------------------------------------------------------------------------------------------
# Fits over sizes from censored runs, at one target


def one_target(targets: Mapping[str, float | None], *, rtol: float = 1e-9) -> float:
    """The study's one target from rung -> target value; refuses (naming the values) when the rungs' targets
    differ, because an exponent fitted across targets of different difficulty mixes model size with the target's
    level: fit at one level for every rung (`censored_fit_data(..., target=level)`, once per level if several)."""
    values = {r: v for r, v in targets.items()}
    missing = sorted(r for r, v in values.items() if v is None)
    if missing or not values:
        raise ScalingInputError(f"no target at rungs {missing or '(none given)'}: a size fit needs one target for "
                                "every rung")
    finite = [float(v) for v in values.values() if v is not None]
    lo, hi = min(finite), max(finite)
    if hi - lo > rtol * max(abs(hi), 1.0):
        raise ScalingInputError(
            f"the rungs' targets differ ({dict(sorted(values.items()))}): an exponent across targets of different "
            "difficulty is not a scaling law; declare one target for the study (target.rule fixed, the same value "
            "at every rung) or fit per target level (censored_fit_data(..., target=level) for each level)")
    return finite[0]


@dataclass(frozen=True)
class CensoredFitData:
    """What a size fit of steps to target may take from runs at one target: arm -> (sizes, values) for
    `fit_scaling`, one value per arm and rung (the restricted mean over its seeds), and per arm and rung the counts
    of censored runs, so a reader sees which points are bounds. Cells where at least half the runs are censored
    are refused (listed in `refused`): their restricted mean measures the horizon more than the arm."""

    target: float
    endpoint: str
    data: dict[str, tuple[list[float], list[float]]]
    cells: dict[str, dict[str, dict[str, Any]]]  # arm -> rung -> {parameters, restricted_mean, horizon, counts}
    refused: tuple[str, ...] = field(default=())
    method: str = ("per arm and rung, the restricted mean steps to target over every seed (Kaplan-Meier, restricted "
                   "at the rung's horizon); runs that did not reach are censored, never dropped")

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "endpoint": self.endpoint, "method": self.method,
                "data": {a: [list(s), list(v)] for a, (s, v) in self.data.items()}, "cells": self.cells,
                "refused": list(self.refused)}


# Runs that ended: a fit or comparison counts each (a diverged or failed one censored), never drops one.
_FINISHED = ("SUCCEEDED", "DIVERGED", "FAILED")


def censored_fit_data(runs: Sequence[TransferRun], *, target: float, endpoint: Endpoint = "first",
                      max_censored: float = 0.5) -> CensoredFitData:
    """Per arm, (sizes, restricted mean steps to `target`) over the rungs, from every finished run's quality
    curve (its tracking curve when it has one; a diverged or failed run censored as `run_crossings` says): one
    target for every rung (`scaling.fits.fit_target_levels` fits each declared level in turn). A cell (arm, rung)
    with `max_censored` or more of its runs right-censored is refused and left out, and an arm left with fewer
    than two rungs has no data; both are listed in `refused`, never dropped silently.
    Raises when a run lacks its parameter count or horizon."""
    goal = target_value(target)
    if endpoint not in ("first", "sustained"):
        raise ScalingInputError(f"unknown endpoint {endpoint!r}; allowed: first, sustained")
    cells_runs: dict[tuple[str, str], list[TransferRun]] = {}
    for r in runs:
        # Every finished run counts: a diverged or failed one is censored (`run_crossings`), never dropped.
        if r.state in _FINISHED:
            cells_runs.setdefault((r.arm, r.rung), []).append(r)
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    refused: list[str] = []
    data: dict[str, tuple[list[float], list[float]]] = {}
    # Rungs by size, so each arm's sizes ascend as a reader expects them.
    for (arm, rung), at in sorted(cells_runs.items(), key=lambda kv: (kv[0][0], kv[1][0].parameters or 0, kv[0][1])):
        if any(r.parameters is None or r.horizon is None for r in at):
            raise ScalingInputError(f"runs of {arm} at {rung} lack a parameter count or a horizon: a size fit "
                                    "needs both")
        tau = float(max(r.horizon or 0 for r in at))
        rm = restricted_mean([run_crossings(r, goal, tau)[endpoint] for r in at], tau)
        cell = {"parameters": at[0].parameters, "restricted_mean": rm.mean, "horizon": tau, "n": rm.n,
                "reached": rm.reached, "right_censored": rm.right_censored, "left_censored": rm.left_censored}
        cells.setdefault(arm, {})[rung] = cell
        if rm.right_censored >= max_censored * rm.n:
            refused.append(f"{arm} at {rung}: {rm.right_censored} of {rm.n} runs did not reach {goal:g} "
                           f"({endpoint}) by step {tau:g}")
            continue
        sizes, values = data.setdefault(arm, ([], []))
        sizes.append(float(at[0].parameters))  # type: ignore[arg-type]
        values.append(rm.mean)
    for arm in [a for a, (s, _) in data.items() if len(set(s)) < 2]:
        refused.append(f"{arm}: fewer than two rungs left to fit")
        del data[arm]
    return CensoredFitData(target=goal, endpoint=endpoint, data=data, cells=cells, refused=tuple(refused))
