"""The injection simulation: known steps ratios and per-step time ratios injected into real recorded quality curves,
censoring included, run through the analysis (`crossings`, `restricted_ratio`, `restricted_saving`), to measure how
often its 95 % intervals cover the truth.

The model of a study's seeds, built on recorded curves (tests/scaling/data/curves.csv: tracking FD of real trials):

- each simulated seed draws one recorded curve c (its shape, its evaluation noise), a seed speed u (log-normal,
  shared by both arms: a seed fixes init and data order, so arms on one seed are alike) and, per arm, its own speed
  e (log-normal, independent) and multiplicative evaluation noise on every point;
- arm a (the searched arm) reads c(s / (r u e_a)) at step s, arm b (the baseline) c(s / (u e_b)): a needs r times
  b's steps to reach any level, by construction (time-rescaling; linear between recorded points, the ends flat);
- both are read on one tracking grid up to the horizon, as a study reads them, so a seed whose crossing falls
  past the horizon is right-censored and one already below at the first point is left-censored;
- the timing stage gives `timing_rounds` per-round log ratios a / b around log(q) with sd `timing_sd` (0.025:
  the thread-CPU log sd per round measured in issue 51's review).

What the analysis estimates is the ratio of restricted means (restricted at the horizon), which equals r only when
no run is censored; the truth it is checked against is that ratio in the model's population, computed from
`truth_seeds` simulated seeds (r = 1 gives exactly 1 by symmetry), and `InjectionCoverage` reports r beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..errors import ScalingInputError
from ..stats import LEVEL, t_quantile
from ..survival import (
    DEFAULT_SURVIVAL_BOOT,
    Crossing,
    Endpoint,
    boot_log_se,
    km_restricted_means,
    restricted_ratio,
    restricted_saving,
    saving_variance,
    steps_above_rows,
)
from ._controls import ControlKind, control_outcome

__all__ = [
    "ControlSimulation",
    "InjectionCoverage",
    "RecordedCurve",
    "control_simulation",
    "grid_crossings",
    "injection_coverage",
    "study_log_ratios",
]

Array = NDArray[np.float64]


@dataclass(frozen=True)
class RecordedCurve:
    """One real run's quality curve: steps (strictly increasing) and values (lower is better, finite: the
    simulation stretches the curve between its points, so a missing one has nothing to stand for)."""

    steps: tuple[float, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        s, v = np.asarray(self.steps, dtype=float), np.asarray(self.values, dtype=float)
        if s.ndim != 1 or s.shape != v.shape or s.size < 2:
            raise ScalingInputError(f"a recorded curve needs at least 2 points and as many values as steps, got "
                                    f"{s.size} steps and {v.size} values")
        if np.any(np.diff(s) <= 0) or not (np.all(np.isfinite(s)) and np.all(np.isfinite(v))):
            raise ScalingInputError("a recorded curve's steps must increase strictly and its values be finite")


@dataclass(frozen=True)
class InjectionCoverage:
    """How often the analysis' intervals covered the truth over `replications` simulated studies of `n_seeds` seeds.

    `coverage_*` are fractions; `mc_se` is the Monte-Carlo standard error of a coverage near `level`
    (sqrt(level (1 - level) / replications)). `censored_fraction` is the share of runs right-censored per arm."""

    endpoint: str
    steps_ratio: float  # r, injected
    step_time_ratio: float  # q, injected
    true_restricted_ratio: float
    true_saving_pct: float
    replications: int
    n_seeds: int
    level: float
    coverage_steps: float
    coverage_saving: float
    mean_ratio: float  # geometric mean of the estimates
    censored_fraction: dict[str, float]
    left_censored_fraction: dict[str, float]
    mc_se: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grid_crossings(steps: Array, values: Array, target: float, endpoint: Endpoint) -> tuple[Array, NDArray[np.int8]]:
    """First or sustained crossing of each row of `values` (runs x points on the grid `steps`), as `crossings` finds
    it one run at a time: (step, status) with status 0 reached, 1 right-censored (at the last step), 2
    left-censored. Vectorised for the simulation's thousands of runs; tests check it equals `crossings`."""
    rows, points = values.shape
    with np.errstate(invalid="ignore"):
        below = values <= target  # NaN: not below
    if endpoint == "first":
        reached = below.any(axis=1)
        i = np.argmax(below, axis=1)
    else:
        reached = below[:, -1]
        above = ~below
        last_above = points - 1 - np.argmax(above[:, ::-1], axis=1)
        i = np.where(above.any(axis=1), last_above + 1, 0)
        i = np.minimum(i, points - 1)
    prev = np.maximum(i - 1, 0)
    v_i = values[np.arange(rows), i]
    v_p = values[np.arange(rows), prev]
    exact = (i == 0) | (v_i == target) | ~np.isfinite(v_p)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(exact, 1.0, (v_p - target) / (v_p - v_i))
    step = np.where(exact, steps[i], steps[prev] + frac * (steps[i] - steps[prev]))
    status = np.where(~reached, 1, np.where((i == 0) & (v_i < target), 2, 0)).astype(np.int8)
    step = np.where(reached, step, steps[-1])
    return step, status


_STATUS = ("reached", "right_censored", "left_censored")
# What a simulated study measures per run: a crossing (`grid_crossings`), or the steps spent above the target
# (`steps_above`: fully observed up to the horizon, so never censored), the continuous alternative to the sustained
# crossing that docs/targets.md measures beside it.
Measure = Literal["first", "sustained", "steps_above"]


def _measure(grid: Array, values: Array, target: float, endpoint: Measure, horizon: float
             ) -> tuple[Array, NDArray[np.int8]]:
    if endpoint == "steps_above":
        return steps_above_rows(grid, values, target, horizon), np.zeros(len(values), dtype=np.int8)
    return grid_crossings(grid, values, target, endpoint)


def _simulate(curves: Sequence[RecordedCurve], grid: Array, factors: Array, pick: NDArray[np.int64], noise: Array
              ) -> Array:
    """Each row's curve: recorded curve `pick[k]` stretched by `factors[k]` in steps, read on `grid`, times
    `noise[k]` per point."""
    out = np.empty((len(factors), len(grid)))
    for c, curve in enumerate(curves):
        rows = np.flatnonzero(pick == c)
        if rows.size:
            x = grid[None, :] / factors[rows, None]
            out[rows] = np.interp(x, np.asarray(curve.steps), np.asarray(curve.values))
    return out * noise


def _arms(curves: Sequence[RecordedCurve], grid: Array, n: int, r: float, rng: np.random.Generator, seed_sd: float,
          arm_sd: float, eval_sd: float) -> tuple[Array, Array]:
    pick = rng.integers(0, len(curves), size=n)
    u = np.exp(seed_sd * rng.standard_normal(n))
    fa = r * u * np.exp(arm_sd * rng.standard_normal(n))
    fb = u * np.exp(arm_sd * rng.standard_normal(n))
    na = np.exp(eval_sd * rng.standard_normal((n, len(grid))))
    nb = np.exp(eval_sd * rng.standard_normal((n, len(grid))))
    return _simulate(curves, grid, fa, pick, na), _simulate(curves, grid, fb, pick, nb)


def study_log_ratios(steps_a: Array, status_a: NDArray[np.int8], steps_b: Array, status_b: NDArray[np.int8], *,
                     horizon: float, n_boot: int = DEFAULT_SURVIVAL_BOOT) -> tuple[Array, Array]:
    """(log restricted-mean ratio a / b, its bootstrap standard error) of each study, one study per row of the
    (studies x seeds) crossings `grid_crossings` gives, exactly as `restricted_ratio(..., seed=k)` finds them for
    study k (the same resampled seed indices), thousands of studies at once. Every right-censored run must be
    censored at `horizon` (the simulation's grid ends there): the restricted mean is then the mean of
    min(step, horizon) over the seeds, and a resample's mean is its counts of each seed times those values."""
    studies, n = steps_a.shape
    if np.any((status_a == 1) & (steps_a < horizon)) or np.any((status_b == 1) & (steps_b < horizon)):
        raise ScalingInputError("study_log_ratios needs every right-censored run censored at the horizon")
    xa, xb = np.minimum(steps_a, horizon), np.minimum(steps_b, horizon)
    center = np.log(xa.mean(axis=1) / xb.mean(axis=1))
    se = np.empty(studies)
    for k in range(studies):
        idx = np.random.default_rng(k).integers(0, n, size=(n_boot, n))  # restricted_ratio's draw for seed=k
        counts = (idx[:, :, None] == np.arange(n)).sum(axis=1)  # (B, n): how often each seed was drawn
        se[k] = boot_log_se(np.log(counts @ xa[k]) - np.log(counts @ xb[k]), n)
    return center, se


def injection_coverage(
    curves: Sequence[RecordedCurve], *, steps_ratio: float, step_time_ratio: float, target: float, horizon: float,
    endpoint: Measure = "first", n_seeds: int = 6, replications: int = 4000, grid_points: int = 20,
    grid_from: float = 1 / 6, seed_sd: float = 0.08, arm_sd: float = 0.05, eval_sd: float = 0.03,
    timing_rounds: int = 5, timing_sd: float = 0.025, n_boot: int = DEFAULT_SURVIVAL_BOOT,
    truth_seeds: int = 100_000, level: float = LEVEL, seed: int = 0,
) -> InjectionCoverage:
    """Simulate `replications` studies of `n_seeds` paired seeds with arm a needing `steps_ratio` x arm b's steps and
    a / b per-step time `step_time_ratio` (module docstring), analyse each as `restricted_ratio` (at `endpoint`,
    restricted at `horizon`, a whole number of steps) and `restricted_saving` do (`study_log_ratios`: the same
    numbers, vectorised), and count how often the intervals cover the truth. `endpoint` "steps_above" measures each
    run by `steps_above` instead of a crossing, analysed alike (its mean over seeds is its restricted mean)."""
    if not curves:
        raise ScalingInputError("injection_coverage needs at least one recorded curve")
    if not (steps_ratio > 0 and step_time_ratio > 0 and horizon > 0 and float(horizon).is_integer()):
        raise ScalingInputError("steps_ratio, step_time_ratio and horizon must be > 0 and the horizon a whole number "
                                f"of steps, got {steps_ratio!r}, {step_time_ratio!r}, {horizon!r}")
    if n_seeds < 2 or replications < 1 or timing_rounds < 2:
        raise ScalingInputError("n_seeds and timing_rounds must be >= 2 and replications >= 1 (an interval needs a "
                                "spread)")
    rng = np.random.default_rng(seed)
    grid = np.round(np.linspace(grid_from * horizon, horizon, grid_points))
    # The truth: the population's restricted-mean ratio a / b under the model, from many simulated seeds.
    ta, tb = _arms(curves, grid, truth_seeds, steps_ratio, rng, seed_sd, arm_sd, eval_sd)
    sa, ka = _measure(grid, ta, target, endpoint, horizon)
    sb, kb = _measure(grid, tb, target, endpoint, horizon)
    true_a_over_b = float(km_restricted_means(sa[None, :], (ka != 1)[None, :], horizon)[0]
                          / km_restricted_means(sb[None, :], (kb != 1)[None, :], horizon)[0])
    true_saving = 100 * (1 - true_a_over_b * step_time_ratio)
    va, vb = _arms(curves, grid, replications * n_seeds, steps_ratio, rng, seed_sd, arm_sd, eval_sd)
    sa, ka = _measure(grid, va, target, endpoint, horizon)
    sb, kb = _measure(grid, vb, target, endpoint, horizon)
    timing = math.log(step_time_ratio) + timing_sd * rng.standard_normal((replications, timing_rounds))
    shape = (replications, n_seeds)
    center, log_se = study_log_ratios(sa.reshape(shape), ka.reshape(shape), sb.reshape(shape), kb.reshape(shape),
                                      horizon=horizon, n_boot=n_boot)
    from scipy import stats  # as scaling.stats: imported when first needed

    half = t_quantile(level, n_seeds - 1) * log_se
    truth_log = math.log(true_a_over_b)
    covered_steps = (center - half <= truth_log) & (truth_log <= center + half)
    # The saving's log is the steps ratio's plus the timing's: restricted_saving's Welch interval, row by row.
    var, df = saving_variance(log_se, n_seeds, timing)
    saving_center = center + timing.mean(axis=1)
    saving_half = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(var)
    true_log_product = math.log(true_a_over_b * step_time_ratio)
    covered_saving = np.abs(saving_center - true_log_product) <= saving_half
    return InjectionCoverage(
        endpoint=endpoint, steps_ratio=steps_ratio, step_time_ratio=step_time_ratio,
        true_restricted_ratio=true_a_over_b, true_saving_pct=true_saving, replications=replications,
        n_seeds=n_seeds, level=level, coverage_steps=float(covered_steps.mean()),
        coverage_saving=float(covered_saving.mean()), mean_ratio=float(np.exp(center.mean())),
        censored_fraction={"a": float(np.mean(ka == 1)), "b": float(np.mean(kb == 1))},
        left_censored_fraction={"a": float(np.mean(ka == 2)), "b": float(np.mean(kb == 2))},
        mc_se=math.sqrt(level * (1 - level) / replications))


@dataclass(frozen=True)
class ControlSimulation:
    """How often a control came out as it must (`control_outcome(...).passed`) over `replications` simulated
    studies, with the mean estimated saving beside the expected one. `check_failures` counts each check's
    failures (a negative control's checks are 95 % intervals: each fails about 5 % of the time by chance)."""

    control: str
    replications: int
    n_seeds: int
    pass_rate: float
    mean_saving_pct: float
    expected_saving_pct: float
    mean_steps_ratio: float
    check_failures: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def control_simulation(
    curves: Sequence[RecordedCurve], kind: ControlKind, *, target: float, horizon: float, step_cost: float = 1.15,
    endpoint: Endpoint = "first", n_seeds: int = 6, replications: int = 1000, grid_points: int = 20,
    grid_from: float = 1 / 6, seed_sd: float = 0.08, arm_sd: float = 0.05, eval_sd: float = 0.03,
    timing_rounds: int = 5, timing_sd: float = 0.025, n_boot: int = 400, seed: int = 0,
) -> ControlSimulation:
    """Simulate the `kind` control through the analysis (`injection_coverage`'s model of seeds on recorded curves).

    negative: two arms alike in distribution (each its own arm speed and evaluation noise, as two runs of one
    configuration differ where training is not bit-identical) and per-step timing alike (log ratio 0).
    positive: identical updates, so both arms have the very same curve on every seed; arm b does `step_cost` x arm
    a's work per step, so a / b per step is 1 / step_cost and the expected saving is 1 - 1 / step_cost."""
    if kind not in ("negative", "positive"):
        raise ScalingInputError(f"unknown control {kind!r}; allowed: negative, positive")
    if not step_cost > 0:
        raise ScalingInputError(f"step_cost must be > 0, got {step_cost!r}")
    rng = np.random.default_rng(seed)
    grid = np.round(np.linspace(grid_from * horizon, horizon, grid_points))
    va, vb = _arms(curves, grid, replications * n_seeds, 1.0, rng, seed_sd, arm_sd, eval_sd)
    if kind == "positive":
        vb = va  # identical updates: the same curve, point for point
    sa, ka = grid_crossings(grid, va, target, endpoint)
    sb, kb = grid_crossings(grid, vb, target, endpoint)
    q = 1.0 if kind == "negative" else 1.0 / step_cost
    timing = math.log(q) + timing_sd * rng.standard_normal((replications, timing_rounds))
    passed, savings, log_ratios = 0, 0.0, 0.0
    failures: dict[str, int] = {}
    for k in range(replications):
        rows = range(k * n_seeds, (k + 1) * n_seeds)
        a = {i: Crossing(float(sa[j]), _STATUS[ka[j]]) for i, j in enumerate(rows)}  # type: ignore[arg-type]
        b = {i: Crossing(float(sb[j]), _STATUS[kb[j]]) for i, j in enumerate(rows)}  # type: ignore[arg-type]
        saving = restricted_saving(restricted_ratio(a, b, horizon=horizon, endpoint=endpoint, n_boot=n_boot, seed=k),
                                   timing[k])
        outcome = control_outcome(kind, saving)
        passed += outcome.passed
        for check in outcome.checks:
            failures[check.quantity] = failures.get(check.quantity, 0) + (not check.passed)
        savings += saving.pct
        log_ratios += math.log(saving.steps.ratio)
    return ControlSimulation(control=kind, replications=replications, n_seeds=n_seeds,
                             pass_rate=passed / replications, mean_saving_pct=savings / replications,
                             expected_saving_pct=100 * (1 - q), mean_steps_ratio=math.exp(log_ratios / replications),
                             check_failures=failures)
