"""How a ratio between two arms changes with model size: a line in log-log space, tested by prediction.

The study's answer at each rung is a ratio at equal quality, periodic over Muon: time, or steps, paired per seed.
Its trend with size is `log r = a + b * log10(N / N0)`, N the rung's block-matrix parameters and N0 their
geometric mean, so `b` is the change of log r per decade of size and `a` the log ratio at the ladder's centre.

Intervals honest to both kinds of noise. A rung's mean log ratio carries the seeds' noise (sd / sqrt(n)) and a
rung-level deviation from any line (the rung's own data, horizon and target). The fit is ordinary least squares on
the rung means, one point per rung, so every rung counts once; its residual variance estimates both together, with
R - 2 degrees of freedom for R rungs. Few rungs estimate that variance badly, so a second estimate puts a floor
under it: a bootstrap over seeds within each rung (resampling each rung's seeds and refitting) gives the spread
the seeds alone cause. Each standard error is the larger of the two, and every interval takes Student's t with
R - 2 degrees of freedom. With fewer than 3 rungs there is no residual and no interval: refused.

The test before the answer. The largest rung is held out: the line fitted to the others predicts it, with a
prediction interval for a new rung's mean (the line's uncertainty plus the residual variance, which a new rung's
mean carries too), and the observed mean either falls inside (a pass) or not (a miss, reported as one). Only then
is the line refitted on every rung and extrapolated to the sizes asked for, each labelled an extrapolation and
given with its interval and its distance past the largest rung in decades. An extrapolation may add a known log
ratio per size (`offsets`), e.g. a per-step ratio taken from a cost model at that width while the line carries the
steps ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..errors import ScalingInputError
from ..stats import LEVEL, t_quantile

__all__ = ["TimeRatioFit", "fit_time_ratio"]

MIN_FIT_RUNGS = 3  # a line through R points leaves R - 2 degrees of freedom for its residual: at least one


@dataclass(frozen=True)
class _Line:
    """OLS of rung means on x = log10(N / N0): intercept, slope, their covariance from the residual (None at df 0)."""

    x: np.ndarray
    y: np.ndarray
    intercept: float
    slope: float
    residual_var: float  # residual variance of a rung mean about the line, df = len(x) - 2
    sxx: float

    @property
    def df(self) -> int:
        return len(self.x) - 2

    def at(self, x: float) -> float:
        return self.intercept + self.slope * x

    def se_line(self, x: float, var: float) -> float:
        """Standard error of the line's value at x for a rung-mean variance `var`."""
        return math.sqrt(var * (1 / len(self.x) + (x - self.x.mean()) ** 2 / self.sxx))


def _ols(x: np.ndarray, y: np.ndarray) -> _Line:
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    resid = y - (intercept + slope * x)
    df = len(x) - 2
    return _Line(x, y, intercept, slope, float((resid**2).sum() / df) if df > 0 else float("nan"), sxx)


def _check(rungs: Mapping[str, tuple[float, Sequence[float]]]) -> dict[str, tuple[float, np.ndarray]]:
    out: dict[str, tuple[float, np.ndarray]] = {}
    for name, (params, values) in rungs.items():
        if not (isinstance(params, int | float) and math.isfinite(params) and params > 0):
            raise ScalingInputError(f"rung {name!r}: parameters must be a positive finite number, got {params!r}")
        arr = np.asarray(list(values), dtype=float)
        if arr.size == 0 or not np.isfinite(arr).all():
            raise ScalingInputError(f"rung {name!r}: log ratios must be one or more finite numbers per seed")
        out[name] = (float(params), arr)
    if len({p for p, _ in out.values()}) != len(out):
        raise ScalingInputError("two rungs have the same parameter count: a size trend needs distinct sizes")
    return dict(sorted(out.items(), key=lambda kv: kv[1][0]))


@dataclass(frozen=True)
class TimeRatioFit:
    """A log ratio against log10 size: the trend per decade, the held-out rung's prediction, the extrapolations.

    Every figure is a log ratio (natural log) unless named `ratio`; `ratio = exp(log ratio)`, so 0.9 is a 10 %
    saving. `slope_per_decade` is the change of log ratio per factor 10 in block-matrix parameters.
    """

    rungs: dict[str, dict[str, Any]]  # name -> params, n, mean log ratio, its seed sd
    fitted_on: list[str]
    df: int
    level: float
    slope_per_decade: float
    slope_interval: tuple[float, float]
    slope_excludes_zero: bool
    se_source: str  # "residual" or "seed bootstrap": which standard error was the larger (the one used)
    holdout: dict[str, Any] | None
    extrapolation: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The fits' `time_ratio` section (plain JSON types)."""
        return asdict(self)

    def lines(self) -> list[str]:
        """The trend, the hold-out verdict and the extrapolations, one line each."""
        lo, hi = self.slope_interval
        out = [f"log ratio per decade of block parameters: {self.slope_per_decade:+.3f} [{lo:+.3f}, {hi:+.3f}] "
               f"({self.level:.0%}, t with {self.df} df over rungs {', '.join(self.fitted_on)}; se from the "
               f"{self.se_source})"]
        if self.holdout is not None:
            h = self.holdout
            lo_r, hi_r = h["interval_ratio"]
            out.append(f"held out {h['rung']}: predicted ratio {h['predicted_ratio']:.3f} [{lo_r:.3f}, {hi_r:.3f}], "
                       f"observed {h['observed_ratio']:.3f}: "
                       f"{'pass' if h['passed'] else 'MISS'} (fitted on {', '.join(h['fitted_on'])})")
        for name, e in self.extrapolation.items():
            out.append(f"extrapolation to {name} ({e['params']:.3g} parameters, {e['decades_past_largest']:.2f} "
                       f"decades past the largest rung): ratio {e['ratio']:.3f} [{e['interval_ratio'][0]:.3f}, "
                       f"{e['interval_ratio'][1]:.3f}]")
        return out


def _seed_bootstrap_var(data: Mapping[str, tuple[float, np.ndarray]], names: Sequence[str], log_n0: float,
                        xs: Sequence[float], n_boot: int, seed: int) -> tuple[float, np.ndarray]:
    """Variance of the slope, and of the line at each of `xs`, when each rung's seeds are resampled and refitted
    (0 with fewer than 2 replicates: the residual alone then sets every standard error)."""
    if n_boot < 2:
        return 0.0, np.zeros(len(xs))
    rng = np.random.default_rng(seed)
    x = np.array([math.log10(data[n][0]) - log_n0 for n in names])
    # (n_boot, R): each rung's mean over its seeds drawn with replacement
    y = np.stack([data[n][1][rng.integers(0, data[n][1].size, (n_boot, data[n][1].size))].mean(axis=1)
                  for n in names], axis=1)
    xc = x - x.mean()
    slopes = (y * xc).sum(axis=1) / (xc**2).sum()  # (n_boot,) OLS slope of every draw at once
    intercepts = y.mean(axis=1) - slopes * x.mean()
    values = intercepts[:, None] + slopes[:, None] * np.asarray(xs, dtype=float)[None, :]  # (n_boot, len(xs))
    return float(slopes.var(ddof=1)), values.var(axis=0, ddof=1)


def _fit(data: Mapping[str, tuple[float, np.ndarray]], names: Sequence[str], log_n0: float,
         at: Sequence[float], n_boot: int, seed: int) -> tuple[_Line, float, list[float], str]:
    """The line over `names`, the slope's se and the rung-mean variance to use at each x in `at` (the larger of the
    residual's and the seed bootstrap's), and which one was larger for the slope."""
    x = np.array([math.log10(data[n][0]) - log_n0 for n in names])
    y = np.array([data[n][1].mean() for n in names])
    line = _ols(x, y)
    boot_slope_var, boot_at_var = _seed_bootstrap_var(data, names, log_n0, at, n_boot, seed)
    resid_slope_var = line.residual_var / line.sxx
    source = "residual" if resid_slope_var >= boot_slope_var else "seed bootstrap"
    se_slope = math.sqrt(max(resid_slope_var, boot_slope_var))
    # a rung-mean variance equivalent to the bootstrap's spread of the line at x, so both are on one scale
    var_at = [max(line.residual_var, bv / (line.se_line(v, 1.0) ** 2)) for v, bv in zip(at, boot_at_var, strict=True)]
    return line, se_slope, var_at, source


def _held_out(data: Mapping[str, tuple[float, np.ndarray]], names: Sequence[str], log_n0: float, level: float,
              n_boot: int, seed: int) -> dict[str, Any]:
    """The line over every rung but the largest, its prediction of the largest with a prediction interval for a new
    rung's mean, and whether the observed mean falls inside."""
    out, fit_names = names[-1], list(names[:-1])
    x_out = math.log10(data[out][0]) - log_n0
    line, _, var_at, _ = _fit(data, fit_names, log_n0, [x_out], n_boot, seed)
    # a new rung's mean: the line's uncertainty there plus the variance a rung mean has about the line
    se = math.sqrt(line.se_line(x_out, var_at[0]) ** 2 + var_at[0])
    q = t_quantile(level, line.df)
    pred = line.at(x_out)
    observed = float(data[out][1].mean())
    interval = (pred - q * se, pred + q * se)
    return {"rung": out, "fitted_on": fit_names, "params": data[out][0], "predicted": pred, "interval": interval,
            "observed": observed, "passed": bool(interval[0] <= observed <= interval[1]),
            "predicted_ratio": math.exp(pred), "interval_ratio": (math.exp(interval[0]), math.exp(interval[1])),
            "observed_ratio": math.exp(observed), "df": line.df}


def fit_time_ratio(
    rungs: Mapping[str, tuple[float, Sequence[float]]],
    *,
    holdout: str | None = "largest",
    extrapolate: Mapping[str, float] | None = None,
    offsets: Mapping[str, float] | None = None,
    level: float = LEVEL,
    n_boot: int = 2000,
    seed: int = 0,
) -> TimeRatioFit:
    """Fit log ratio against log10 size over `rungs` ({name: (block-matrix parameters, per-seed log ratios)}).

    `holdout="largest"` (the default) first fits every rung but the largest and predicts it; None skips the test.
    `n_boot` below 2 skips the seed bootstrap (the residual alone sets the standard errors: `se_source`
    "residual"). `extrapolate` ({name: parameters}) asks for the refitted line's value at other sizes, each plus
    `offsets[name]` (a log ratio, e.g. a per-step ratio from a cost model) where given. The fit needs at least 3
    rungs (4 with a hold-out): fewer is refused with `ScalingInputError`, as is a non-finite value or a repeated size.
    """
    data = _check(rungs)
    names = list(data)
    need = MIN_FIT_RUNGS + (holdout is not None)
    if len(names) < need:
        raise ScalingInputError(
            f"a size trend needs at least {MIN_FIT_RUNGS} rungs to fit{' plus the one held out' if holdout else ''}"
            f" ({need} in all), got {len(names)}: {names}; a line through fewer leaves no residual to judge it by")
    if holdout not in (None, "largest"):
        raise ScalingInputError(f"holdout must be 'largest' or None, got {holdout!r}")
    if not 0 < level < 1:
        raise ScalingInputError(f"level must be in (0, 1), got {level!r}")
    log_n0 = float(np.mean([math.log10(p) for p, _ in data.values()]))

    def x_of(params: float) -> float:
        return math.log10(params) - log_n0

    def ratio(lo_hi: tuple[float, float]) -> tuple[float, float]:
        return (math.exp(lo_hi[0]), math.exp(lo_hi[1]))

    held = _held_out(data, names, log_n0, level, n_boot, seed) if holdout is not None else None

    targets = dict(extrapolate or {})
    for name, params in targets.items():
        if not (isinstance(params, int | float) and math.isfinite(params) and params > 0):
            raise ScalingInputError(f"extrapolate[{name!r}]: parameters must be a positive finite number, "
                                    f"got {params!r}")
    unknown = set(offsets or {}) - set(targets)
    if unknown:
        raise ScalingInputError(f"offsets name sizes not asked for in extrapolate: {sorted(unknown)}")
    xs = [x_of(float(p)) for p in targets.values()]
    line, se_slope, var_at, source = _fit(data, names, log_n0, xs, n_boot, seed)
    q = t_quantile(level, line.df)
    largest = max(p for p, _ in data.values())
    extrapolation: dict[str, dict[str, Any]] = {}
    for (name, params), x, var in zip(targets.items(), xs, var_at, strict=True):
        offset = float((offsets or {}).get(name, 0.0))
        value = line.at(x) + offset
        se = line.se_line(x, var)
        interval = (value - q * se, value + q * se)
        extrapolation[name] = {"label": "extrapolation", "params": float(params), "log_ratio": value,
                               "interval": interval, "ratio": math.exp(value), "interval_ratio": ratio(interval),
                               "offset": offset, "decades_past_largest": math.log10(params / largest)}
    slope_interval = (line.slope - q * se_slope, line.slope + q * se_slope)
    summary = {n: {"params": p, "n": int(v.size), "mean": float(v.mean()),
                   "sd": float(v.std(ddof=1)) if v.size > 1 else None, "ratio": math.exp(float(v.mean()))}
               for n, (p, v) in data.items()}
    excludes_zero = not slope_interval[0] <= 0 <= slope_interval[1]
    return TimeRatioFit(rungs=summary, fitted_on=names, df=line.df, level=level, slope_per_decade=line.slope,
                        slope_interval=slope_interval, slope_excludes_zero=excludes_zero, se_source=source,
                        holdout=held, extrapolation=extrapolation)
