"""The project's statistics, in one place: paired differences over seeds with Student-t intervals, the mean of
paired values with its interval, and each point's probability of being best under a paired bootstrap over seeds.
The sweep's selection (`sweeper.select_point`) and the analyses here (`verify_transfer`, the per-rung report)
both use it. Pure numpy (scipy for the t quantile, imported when first needed).

Why paired: a seed fixes the initial weights, the data order and the evaluation noise, and every point (and every
arm) runs on the same seeds, so most of the seed-to-seed spread is shared. Differences per seed cancel it; the
bootstrap therefore resamples *seed indices*, the same indices for every point.

Intervals are Student-t intervals on the per-seed paired differences (exact under normal seed noise, and honest at
the 3-6 seeds a study affords, where a percentile bootstrap interval is too narrow: with 3 seeds it is just the
range of the differences). The bootstrap gives the probabilities of being best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "LEVEL",
    "PairedDifference",
    "bootstrap_p_best",
    "check_n_boot",
    "holm_rejections",
    "mean_interval",
    "paired_difference",
    "pooled_se",
    "seed_matrix",
    "t_interval",
    "t_p_value",
    "t_quantile",
    "two_sided_t_p",
]

LEVEL = 0.95  # interval level of every paired difference


def t_quantile(level: float, dof: float) -> float:
    """Two-sided Student-t quantile (e.g. 4.303 for 95 % with 2 degrees of freedom); `dof` may be fractional
    (Welch-Satterthwaite)."""
    from scipy import stats  # imported here to keep `import scaling` light

    return float(stats.t.ppf(0.5 + level / 2, dof))


@dataclass(frozen=True)
class PairedDifference:
    """Mean over seeds of a - b (per seed), its standard error and a Student-t interval; lower objective is better,
    so a negative mean says a is better than b."""

    mean: float
    sd: float | None  # sample sd of the per-seed differences (None with one seed)
    se: float | None
    interval: tuple[float, float] | None  # None with one seed
    n: int
    level: float = LEVEL

    @property
    def includes_zero(self) -> bool:
        """True when the interval does not exclude zero (or there is no interval): no claim either way."""
        return self.interval is None or self.interval[0] <= 0.0 <= self.interval[1]

    def describe(self, a: str = "a", b: str = "b", unit: str = "") -> str:
        """One sentence: 'a - b = +3.1 FD, 95 % CI [-2.0, +8.2], n=6 (the interval includes zero: no difference
        shown)'."""
        u = f" {unit}" if unit else ""
        if self.interval is None:
            return f"{a} - {b} = {self.mean:+.3g}{u}, n={self.n} (one seed: no interval, a single run)"
        lo, hi = self.interval
        text = f"{a} - {b} = {self.mean:+.3g}{u}, {self.level:.0%} CI [{lo:+.3g}, {hi:+.3g}], n={self.n}"
        if self.includes_zero:
            return text + " (the interval includes zero: no difference shown)"
        return text + f" ({a if self.mean < 0 else b} is better)"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "interval": list(self.interval) if self.interval else None,
                "includes_zero": self.includes_zero}


def t_p_value(d: PairedDifference) -> float | None:
    """Two-sided p-value of the paired t test of `d.mean` = 0 (None with one seed)."""
    if d.sd is None or d.se is None:
        return None
    return two_sided_t_p(d.mean, d.se, d.n - 1)


def two_sided_t_p(mean: float, se: float, df: float) -> float:
    """Two-sided p of the Student-t statistic mean / se with `df` degrees of freedom (Welch's may be fractional).
    With no spread at all, 0 when the mean differs from zero and 1 when it is zero."""
    if se == 0:
        return 1.0 if mean == 0 else 0.0
    from scipy import stats

    return float(2 * stats.t.sf(abs(mean) / se, df))


def holm_rejections(p_values: Mapping[Any, float | None], alpha: float) -> tuple[set[Any], dict[Any, float]]:
    """Holm's step-down correction across the comparisons in `p_values` (key -> two-sided p; None counts as 1):
    the keys whose hypothesis is rejected with the family-wise error rate held at `alpha`, and every key's
    Holm-adjusted p-value (max over the sorted prefix of (m - i) x p_(i), capped at 1)."""
    ordered = sorted(p_values, key=lambda k: 1.0 if p_values[k] is None else float(p_values[k]))  # type: ignore[arg-type]
    m = len(ordered)
    adjusted: dict[Any, float] = {}
    running = 0.0
    for i, key in enumerate(ordered):
        p = 1.0 if p_values[key] is None else float(p_values[key])  # type: ignore[arg-type]
        running = max(running, min(1.0, (m - i) * p))
        adjusted[key] = running
    return {k for k, p in adjusted.items() if p <= alpha}, adjusted


def pooled_se(diffs: Sequence[PairedDifference]) -> float | None:
    """The standard error of a paired difference pooled over comparisons: the median of their per-seed sds, /
    sqrt(n), from the differences that have a spread (None when none has). The median, not the mean of variances:
    one erratic comparison can neither widen its own margin nor everyone else's."""
    spread = sorted(float(d.sd) for d in diffs if d.sd is not None)
    if not spread:
        return None
    n = next(d.n for d in diffs if d.sd is not None)
    return float(np.median(spread)) / math.sqrt(n)


def _check_values(name: str, values: Sequence[float]) -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name}: give a non-empty list of per-seed objectives, got {list(values)!r}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: per-seed objectives must be finite numbers, got {arr.tolist()}")
    return arr


def t_interval(values: Sequence[float] | np.ndarray, *, level: float = LEVEL) -> PairedDifference:
    """The mean of paired values (one per seed, or per timing round) with a Student-t interval at `level`; one
    value has no spread, so no standard error and no interval. The one implementation of the t interval."""
    d = np.asarray(values, dtype=float)
    n = int(d.size)
    mean = float(d.mean())
    if n < 2:
        return PairedDifference(mean=mean, sd=None, se=None, interval=None, n=n, level=level)
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    half = t_quantile(level, n - 1) * se
    return PairedDifference(mean=mean, sd=sd, se=se, interval=(mean - half, mean + half), n=n, level=level)


def paired_difference(a: Sequence[float], b: Sequence[float], *, level: float = LEVEL) -> PairedDifference:
    """Paired mean difference a - b over seeds (index i is the same seed in both), with a Student-t interval."""
    x, y = _check_values("a", a), _check_values("b", b)
    if x.size != y.size:
        raise ValueError(f"a and b must hold one value per seed each, aligned by seed; got {x.size} and {y.size}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return t_interval(x - y, level=level)


def mean_interval(values: Sequence[float], level: float = LEVEL) -> dict[str, Any]:
    """`t_interval` as a report's JSON: {mean, lo, hi, n, level}; one value -> no interval, labelled 'one run'."""
    p = t_interval(values, level=level)
    if p.interval is None:
        return {"mean": p.mean, "lo": None, "hi": None, "n": p.n, "label": "one run"}
    return {"mean": p.mean, "lo": p.interval[0], "hi": p.interval[1], "n": p.n, "level": level}


def check_n_boot(n_boot: Any) -> None:
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1, got {n_boot!r}")


def seed_matrix(objectives: Mapping[Any, Sequence[float]]) -> tuple[list[Any], np.ndarray]:
    """(keys, points x seeds array) from a mapping of point -> per-seed objectives, checked: non-empty, finite,
    the same number of seeds for every point."""
    if not isinstance(objectives, Mapping) or not objectives:
        raise ValueError("objectives: give a non-empty mapping of point -> per-seed objectives")
    keys = list(objectives)
    rows = [_check_values(f"objectives[{key!r}]", objectives[key]) for key in keys]
    sizes = {key: int(r.size) for key, r in zip(keys, rows, strict=True)}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"objectives: every point needs the same number of seeds (aligned by seed); got {sizes}")
    return keys, np.vstack(rows)


def bootstrap_p_best(values: np.ndarray, *, n_boot: int, seed: int) -> np.ndarray:
    """P(point is best) for each row of `values` (points x seeds) under a paired bootstrap over seed indices: the
    same resampled indices for every point; a resample's tied winners share it equally. Sums to 1."""
    n = values.shape[1]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))  # (B, n): one resample of seeds, shared by every point
    means = values[:, idx].mean(axis=2)  # (P, B)
    low = means.min(axis=0)  # (B,)
    # Identical points give bit-identical resampled means; a relative 1e-12 also absorbs summation-order noise.
    wins = means <= low + 1e-12 * np.maximum(1.0, np.abs(low))
    share = wins / wins.sum(axis=0)
    p = share.mean(axis=1)
    return np.asarray(p / p.sum())
