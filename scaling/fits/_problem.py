"""The fit's data and its optimisation problem: the arms' (sizes, values) parsed and checked, the design (groups
of an arm and a size), the bounded problem in internal parameters, its minimisation from a grid of starts, and
the diagnostics of a form on the data (identifiability, misspecification). `_fit` builds on these; the method and
the flags are described there."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ScalingInputError
from ._forms import INTERNAL, Form

Array = NDArray[np.float64]
IntArray = NDArray[np.int64]
# arm -> (sizes, values): values aligned with sizes, or one such list per seed (seeds first).
FitData = Mapping[str, tuple[ArrayLike, ArrayLike]]

# log-space margins for the data-derived boxes of log A0 and log E: a factor e^15 ~ 3e6 beyond the data.
_LOG_MARGIN = 15.0
_AT_BOUND_RTOL = 1e-6
_GRID_ALPHA = (0.1, 0.3, 0.6, 1.0)
_GRID_E_FRACTION = (0.0, 0.3, 0.6, 0.9)  # E as a fraction of the arm's smallest value; 0 -> a tiny E
_NON_IDENTIFIABLE_MIN_DOF = 1.0  # residual degrees of freedom at or below which an arm is flagged (`_fit`'s rule)

# ----------------------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class _ArmData:
    sizes: Array  # (k,) distinct sizes, ascending
    logy: tuple[Array, ...]  # k arrays: log of each observation (seed) at that size

    @property
    def means(self) -> Array:
        """Arithmetic means of the observations at each size (the values a reader would quote)."""
        return np.array([np.exp(v).mean() for v in self.logy])


def _parse_arm(arm: str, entry: Any) -> _ArmData:
    try:
        sizes_in, values_in = entry
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(f"arm {arm!r}: expected (sizes, values), got {type(entry).__name__}") from exc
    try:
        sizes = np.asarray(sizes_in, dtype=np.float64)
        values = np.asarray(values_in, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScalingInputError(
            f"arm {arm!r}: sizes and values must be numbers (values: one list aligned with sizes, or one "
            f"such list per seed): {exc}"
        ) from exc
    if sizes.ndim != 1 or len(sizes) == 0:
        raise ScalingInputError(f"arm {arm!r}: sizes must be a non-empty list of numbers, got shape {sizes.shape}")
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2 or values.shape[1] != len(sizes):
        raise ScalingInputError(
            f"arm {arm!r}: values must be aligned with the {len(sizes)} sizes (one list, or one list per "
            f"seed), got shape {values.shape}"
        )
    if not np.all(np.isfinite(sizes)) or np.any(sizes <= 0):
        raise ScalingInputError(f"arm {arm!r}: sizes must be finite parameter counts > 0, got {sizes.tolist()}")
    # Log-space fits need positive values; a NaN is a diverged run, which must be dropped (or its seed list
    # shortened) by the caller, not silently by the fit, since dropping it flatters the arm.
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ScalingInputError(f"arm {arm!r}: values must be finite and > 0, got {values.tolist()}")
    distinct = np.unique(sizes)
    if len(distinct) < 2:
        raise ScalingInputError(f"arm {arm!r}: at least 2 distinct sizes are needed, got {distinct.tolist()}")
    logv = np.log(values)
    groups = tuple(logv[:, sizes == s].ravel() for s in distinct)
    return _ArmData(sizes=distinct, logy=groups)


def _parse(data: FitData) -> dict[str, _ArmData]:
    if not isinstance(data, Mapping) or not data:
        raise ScalingInputError("data must be a non-empty mapping arm name -> (sizes, values)")
    out: dict[str, _ArmData] = {}
    for arm, entry in data.items():
        if not isinstance(arm, str) or not arm:
            raise ScalingInputError(f"arm names must be non-empty strings, got {arm!r}")
        out[arm] = _parse_arm(arm, entry)
    return out


@dataclass(frozen=True)
class _Design:
    """Observations flattened for the objective, grouped by (arm, size) for the seed bootstrap."""

    arm_idx: IntArray  # (n,)
    x: Array  # (n,) log(N / N0)
    logy: Array  # (n,)
    group: IntArray  # (n,) index of the (arm, size) group, observations sorted by group
    group_start: IntArray  # (g,)
    group_size: IntArray  # (g,)


def _design(arms: Sequence[str], data: Mapping[str, _ArmData], log_n0: float) -> _Design:
    arm_idx: list[int] = []
    group: list[int] = []
    starts: list[int] = []
    sizes: list[int] = []
    x: list[float] = []
    logy: list[float] = []
    g = 0
    for i, arm in enumerate(arms):
        d = data[arm]
        for s, ly in zip(d.sizes, d.logy, strict=True):
            starts.append(len(logy))
            sizes.append(len(ly))
            arm_idx += [i] * len(ly)
            x += [math.log(s) - log_n0] * len(ly)
            logy += ly.tolist()
            group += [g] * len(ly)
            g += 1
    return _Design(
        arm_idx=np.array(arm_idx, dtype=np.int64),
        x=np.array(x, dtype=np.float64),
        logy=np.array(logy, dtype=np.float64),
        group=np.array(group, dtype=np.int64),
        group_start=np.array(starts, dtype=np.int64),
        group_size=np.array(sizes, dtype=np.int64),
    )


# ----------------------------------------------------------------------------------------------------------
# The optimisation problem


class _Problem:
    """Slots of the joint parameter vector, their boxes, and the Huber objective with its gradient."""

    def __init__(
        self,
        form: Form,
        arms: Sequence[str],
        share: Sequence[str],
        logy_range: tuple[float, float],
        alpha_bounds: tuple[float, float],
        delta: float | None,
    ) -> None:
        self.form = form
        self.arms = tuple(arms)
        self.delta = delta  # None: least squares
        lmin, lmax = logy_range
        box = {
            "a": (lmin - _LOG_MARGIN, lmax + _LOG_MARGIN),
            "alpha": alpha_bounds,
            "e": (lmin - _LOG_MARGIN, lmax),
        }
        self.internal = tuple(INTERNAL[p] for p in form.params)
        self.slots: dict[str, IntArray] = {}
        labels: list[str] = []
        lower: list[float] = []
        upper: list[float] = []
        for public, name in zip(form.params, self.internal, strict=True):
            if public in share:
                self.slots[name] = np.full(len(arms), len(labels), dtype=np.int64)
                labels.append(public)
                lower.append(box[name][0])
                upper.append(box[name][1])
            else:
                self.slots[name] = np.arange(len(labels), len(labels) + len(arms), dtype=np.int64)
                labels += [f"{public}[{arm}]" for arm in arms]
                lower += [box[name][0]] * len(arms)
                upper += [box[name][1]] * len(arms)
        self.labels = tuple(labels)
        self.lower = np.array(lower)
        self.upper = np.array(upper)
        self.bounds = list(zip(lower, upper, strict=True))
        self.n_slots = len(labels)

    def per_arm(self, theta: Array) -> dict[str, Array]:
        """Internal parameter name -> (arms,) values; for a (B, slots) theta, (B, arms)."""
        return {name: theta[..., idx] for name, idx in self.slots.items()}

    def log_model(self, theta: Array, design: _Design) -> Array:
        p = {name: v[design.arm_idx] for name, v in self.per_arm(theta).items()}
        return self.form.log_model(p, design.x)

    def objective(self, theta: Array, design: _Design, logy: Array) -> tuple[float, Array]:
        # The loss is divided by delta so that its scale (and L-BFGS-B's tolerances) do not depend on delta:
        # in the linear regime each residual then contributes |r|, in the quadratic one r^2 / (2 delta).
        p = {name: v[design.arm_idx] for name, v in self.per_arm(theta).items()}
        f, df = self.form.log_model_and_grad(p, design.x)
        r = logy - f
        if self.delta is None:
            loss = float(0.5 * np.sum(r * r))
            dloss_df = -r
        else:
            absr = np.abs(r)
            quad = absr <= self.delta
            loss = float(np.sum(np.where(quad, 0.5 * r * r / self.delta, absr - 0.5 * self.delta)))
            dloss_df = -np.clip(r, -self.delta, self.delta) / self.delta
        grad = np.zeros(self.n_slots)
        for name, idx in self.slots.items():
            grad += np.bincount(idx[design.arm_idx], weights=dloss_df * df[name], minlength=self.n_slots)
        return loss, grad

    def at_bound(self, theta: Array) -> list[str]:
        tol = _AT_BOUND_RTOL * (self.upper - self.lower)
        hit = (theta <= self.lower + tol) | (theta >= self.upper - tol)
        return [self.labels[i] for i in np.flatnonzero(hit)]


@dataclass(frozen=True)
class _Solution:
    theta: Array
    loss: float  # scaled Huber loss (divided by delta)
    success: bool
    message: str


# The point fit is solved tightly. A bootstrap replicate only needs its parameters to a small fraction of the
# interval's width: looser tolerances there cut the cost of a fit by several times on flat (at-bound,
# non-identifiable) problems, where L-BFGS-B otherwise spends hundreds of evaluations on the last digits.
_POINT_OPTIONS = {"maxiter": 2000, "ftol": 1e-13, "gtol": 1e-9}
_BOOT_OPTIONS = {"maxiter": 500, "ftol": 1e-10, "gtol": 1e-6}


def _minimise(
    problem: _Problem, design: _Design, logy: Array, starts: Sequence[Array], options: dict[str, float] | None = None
) -> list[_Solution]:
    # scipy is imported where it is used: importing scipy.optimize costs most of a second, and
    # ``time_to_best`` users (dashboards) should not pay for it.
    from scipy import optimize

    out = []
    for start in starts:
        res = optimize.minimize(
            problem.objective,
            np.clip(start, problem.lower, problem.upper),
            args=(design, logy),
            jac=True,
            method="L-BFGS-B",
            bounds=problem.bounds,
            options=options or _POINT_OPTIONS,
        )
        x = np.asarray(res.x, dtype=np.float64)
        out.append(_Solution(x, float(res.fun), bool(res.success), str(res.message)))
    out.sort(key=lambda s: s.loss)
    return out


def _solve(
    problem: _Problem, design: _Design, logy: Array, starts: Sequence[Array], options: dict[str, float] | None = None
) -> tuple[list[_Solution], _Solution | None]:
    """All starts' solutions (best first) and the converged best, or None when no minimum can be vouched for.

    The best is accepted when it, or another start that reached the same loss within 1e-7, reported success.
    Otherwise it is restarted once: L-BFGS-B can stop with an abnormal line search at a kink of the Huber loss
    while sitting at the minimum, and a fresh start (steepest descent first) that converges, or cannot lower
    the loss, confirms it.
    """
    solutions = _minimise(problem, design, logy, starts, options)
    best = solutions[0]
    tol = 1e-7 * (1.0 + abs(best.loss))
    if any(s.success and s.loss <= best.loss + tol for s in solutions):
        return solutions, best
    again = _minimise(problem, design, logy, [best.theta], options)[0]
    if again.success or again.loss >= best.loss - tol:
        return solutions, again if again.loss < best.loss else best
    return solutions, None


def _grid_starts(problem: _Problem, design: _Design, logy: Array, share: Sequence[str]) -> list[Array]:
    """Starting points: a grid over alpha (and E as a fraction of the smallest value), A solved in closed
    form."""
    n_arms = len(problem.arms)
    alpha_lo, alpha_hi = problem.lower[problem.slots["alpha"][0]], problem.upper[problem.slots["alpha"][0]]
    alphas = sorted({float(np.clip(a, alpha_lo, alpha_hi)) for a in _GRID_ALPHA})
    fractions = _GRID_E_FRACTION if problem.form.has_offset else (0.0,)
    arm_min = np.array([np.min(np.exp(logy[design.arm_idx == i])) for i in range(n_arms)])
    starts = []
    for alpha in alphas:
        for frac in fractions:
            e_arm = np.full(n_arms, np.min(arm_min) * frac) if "E" in share else arm_min * frac
            e_arm = np.maximum(e_arm, arm_min * 1e-4)  # frac 0 -> an E four decades below the data
            theta = np.zeros(problem.n_slots)
            theta[problem.slots["alpha"]] = alpha
            offset = e_arm[design.arm_idx] if problem.form.has_offset else 0.0
            # log A0 that centres the power-law term on the data, given alpha and E: mean of log(y - E) +
            # alpha x.
            a_obs = np.log(np.exp(logy) - offset) + alpha * design.x
            a_arm = np.array([a_obs[design.arm_idx == i].mean() for i in range(n_arms)])
            theta[problem.slots["a"]] = a_arm.mean() if "A" in share else a_arm
            if problem.form.has_offset:
                theta[problem.slots["e"]] = np.log(e_arm.min()) if "E" in share else np.log(e_arm)
            starts.append(theta)
    return starts


def _distinct(solutions: Sequence[_Solution], limit: int) -> list[Array]:
    picked: list[Array] = []
    for s in solutions:
        if len(picked) == limit:
            break
        if all(np.max(np.abs(s.theta - p) / (1.0 + np.abs(p))) > 1e-4 for p in picked):
            picked.append(s.theta)
    return picked


# ----------------------------------------------------------------------------------------------------------
# Diagnostics


def _effective_params(form: Form, share: Sequence[str], n_arms: int) -> float:
    return sum(1.0 / n_arms if p in share else 1.0 for p in form.params)


def _is_non_identifiable(form: Form, share: Sequence[str], data: Mapping[str, _ArmData]) -> list[str]:
    p = _effective_params(form, share, len(data))
    return [arm for arm, d in data.items() if len(d.sizes) - p <= _NON_IDENTIFIABLE_MIN_DOF]


def _misspecification(
    problem: _Problem,
    theta: Array,
    data: Mapping[str, _ArmData],
    share: Sequence[str],
    log_n0: float,
    p_threshold: float,
) -> tuple[dict[str, float], list[str]]:
    """p-value per tested arm, and notes for the arms that could not be tested."""
    from scipy import stats

    p_eff = _effective_params(problem.form, share, len(data))
    per_arm = problem.per_arm(theta)
    pvalues: dict[str, float] = {}
    notes: list[str] = []
    for i, arm in enumerate(problem.arms):
        d = data[arm]
        k = len(d.sizes)
        n = sum(len(v) for v in d.logy)
        x = np.log(d.sizes) - log_n0
        params = {name: float(v[i]) for name, v in per_arm.items()}
        f, df = problem.form.log_model_and_grad({k_: np.full(k, v) for k_, v in params.items()}, x)
        means = np.array([v.mean() for v in d.logy])
        m = np.array([len(v) for v in d.logy])
        if n > k and k - p_eff > 0:
            ss_lof = float(np.sum(m * (means - f) ** 2))
            ss_pe = float(sum(np.sum((v - v.mean()) ** 2) for v in d.logy))
            dof_lof, dof_pe = k - p_eff, n - k
            if ss_pe <= 0:
                pvalues[arm] = 0.0 if ss_lof > 0 else 1.0
            else:
                stat = (ss_lof / dof_lof) / (ss_pe / dof_pe)
                pvalues[arm] = float(stats.f.sf(stat, dof_lof, dof_pe))
            continue
        n_form = len(problem.form.params)
        dof = k - n_form - 1
        if n == k and dof >= 1:
            # Linearised nested F-test: does a quadratic in log N explain residuals the form's own directions
            # (its Jacobian columns) cannot? Systematic curvature is what a wrong form leaves behind.
            r = means - f
            jac = np.column_stack([df[name] for name in problem.internal])
            quad = (x - x.mean()) ** 2
            rss0 = float(np.sum((r - jac @ np.linalg.lstsq(jac, r, rcond=None)[0]) ** 2))
            z = np.column_stack([jac, quad])
            rss1 = float(np.sum((r - z @ np.linalg.lstsq(z, r, rcond=None)[0]) ** 2))
            if rss1 <= 1e-300:
                pvalues[arm] = 0.0 if rss0 - rss1 > 1e-300 else 1.0
            else:
                stat = (rss0 - rss1) / (rss1 / dof)
                pvalues[arm] = float(stats.f.sf(max(stat, 0.0), 1, dof))
            continue
        notes.append(
            f"misspecification untested for arm {arm!r}: {k} sizes and {n} values leave no degrees of "
            f"freedom for a lack-of-fit or curvature test"
        )
    return pvalues, notes
