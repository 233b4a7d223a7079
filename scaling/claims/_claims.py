"""Statistics a reader can check: one alpha budget for the whole family of comparisons and looks, the power stated
at the level a claim must pass, P(best) printed as a probability only where the bootstrap can say one, and the
warning a chosen point gets when its mean is worse than every baseline's, significant or not.

Why one budget: a study judges m comparisons (rungs x baselines x measures) and may look L times as seeds are added
(`RoundsSpec`). Holm over the m comparisons at each look, at alpha / L per look (Bonferroni over the looks), keeps
the chance of any false claim, over every comparison and every look, at most alpha. The most significant comparison
must then pass alpha / (L m) (Holm's first step), the least alpha / L; a power stated at 0.05 for a claim that must
pass 0.05 / 12 overstates what the study could show, so the power here is stated at the first step's level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import ScalingInputError
from ..stats import holm_rejections, t_quantile

__all__ = [
    "MIN_SEEDS_P_BEST",
    "AlphaBudget",
    "ChoiceWarning",
    "CoPrimaryPower",
    "PowerStatement",
    "alpha_budget",
    "choice_warning",
    "co_primary_power",
    "holm_in_budget",
    "p_best_text",
    "pair_power_bounds",
    "power_at_alpha",
]

# A paired bootstrap over n seeds has C(2n - 1, n) distinct resamples: 10 at 3 seeds, 35 at 4, 126 at 5. Below 5 a
# "probability of being best" is a count over a handful of resamples, a number with two decimals it does not hold.
MIN_SEEDS_P_BEST = 5
POWER = 0.8  # the power the detectable effect is stated at (the convention of power analyses)


@dataclass(frozen=True)
class AlphaBudget:
    """One family-wise error `alpha` for `comparisons` comparisons judged at each of `looks` looks."""

    alpha: float
    comparisons: int
    looks: int

    @property
    def per_look(self) -> float:
        """The family-wise level Holm uses over the comparisons at one look."""
        return self.alpha / self.looks

    @property
    def first_step(self) -> float:
        """The level the most significant comparison must pass (Holm's first step at one look): the level a
        single claim is held to, at which power is stated."""
        return self.alpha / (self.looks * self.comparisons)

    def text(self) -> str:
        return (f"alpha {self.alpha:g} over {self.comparisons} comparison(s) and {self.looks} look(s): Holm at "
                f"{self.per_look:.3g} per look, the strongest claim must pass {self.first_step:.3g}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_look": self.per_look, "first_step": self.first_step, "text": self.text()}


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScalingInputError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def alpha_budget(alpha: float, *, comparisons: int, looks: int = 1) -> AlphaBudget:
    """The study's alpha budget: `alpha` (0 < alpha < 0.5) over `comparisons` x `looks`."""
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 0.5):
        raise ScalingInputError(f"alpha must be in (0, 0.5), got {alpha!r}")
    return AlphaBudget(float(alpha), _count("comparisons", comparisons), _count("looks", looks))


def holm_in_budget(p_values: Mapping[Any, float | None], budget: AlphaBudget) -> tuple[set[Any], dict[Any, float]]:
    """Holm over one look's comparisons at the budget's per-look level: (rejected keys, Holm-adjusted p's). A key's
    claim stands when its adjusted p is at most `budget.per_look`."""
    if len(p_values) > budget.comparisons:
        raise ScalingInputError(f"{len(p_values)} p-values for a budget of {budget.comparisons} comparisons: the "
                                "budget must count every comparison judged")
    return holm_rejections(p_values, budget.per_look)


@dataclass(frozen=True)
class PowerStatement:
    """What a paired study of `n` seeds could detect at the two-sided level `alpha`, from the observed spreads: the
    smallest saving detected with probability `power` (`detectable_pct`), the power to detect `effect_pct`, and the
    seeds that would give that power for it (None when the timing's spread alone forbids it at 1000 seeds)."""

    alpha: float
    power: float
    n: int
    se_log: float
    df: float
    detectable_pct: float
    effect_pct: float
    power_for_effect: float
    seeds_for_effect: int | None

    def text(self) -> str:
        seeds = self.seeds_for_effect if self.seeds_for_effect is not None else "> 1000 (the timing's spread)"
        return (f"at alpha {self.alpha:.3g} with {self.n} seeds: a saving of {self.detectable_pct:.0f} % is "
                f"detected with {100 * self.power:.0f} % power; power for {self.effect_pct:g} %: "
                f"{100 * self.power_for_effect:.0f} %; seeds for {100 * self.power:.0f} % power at "
                f"{self.effect_pct:g} %: {seeds}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text()}


def _se_df_over(var_seed: float, seeds: NDArray[np.int64], var_t: float | None,
                df_t: float | None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The standard error of a log time ratio over `seeds` paired seeds (each seed count of the array at once) and
    its Welch-Satterthwaite degrees of freedom: the seeds' variance `var_seed` / n plus the timing's `var_t` over
    `df_t` degrees of freedom (None: no timing spread)."""
    per_seed = var_seed / seeds
    var = per_seed + (var_t or 0.0)
    dof = np.maximum(seeds - 1, 1).astype(float)
    denom = per_seed**2 / dof + (var_t**2 / df_t if var_t and df_t else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denom > 0, var**2 / denom, dof)
    return np.sqrt(var), df


def _se_df(var_seed: float, n: int, var_t: float | None, df_t: float | None) -> tuple[float, float]:
    se, df = _se_df_over(var_seed, np.array([n]), var_t, df_t)
    return float(se[0]), float(df[0])


def _power_tails(effect_log: float, se: float, df: float, alpha: float) -> tuple[float, float]:
    """(P(the two-sided t test at `alpha` rejects in the effect's direction), P(it rejects the other way)) for a true
    log effect `effect_log` with standard error `se`: the shifted-t approximation."""
    from scipy import stats

    if se <= 0:
        return (1.0, 0.0) if effect_log != 0 else (alpha / 2, alpha / 2)
    crit = t_quantile(1 - alpha, df)
    shift = abs(effect_log) / se
    return float(stats.t.sf(crit - shift, df)), float(stats.t.cdf(-crit - shift, df))


def _power(effect_log: float, se: float, df: float, alpha: float) -> float:
    """P(the two-sided t test at `alpha` rejects) for a true log effect `effect_log` with standard error `se` (the
    far tail's share is negligible at the effects that matter)."""
    return sum(_power_tails(effect_log, se, df, alpha))


def _check_power_args(n: int, alpha: float, power: float, effect_pct: float) -> None:
    _count("n", n)
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ScalingInputError(f"alpha and power must be in (0, 1), got {alpha!r} and {power!r}")
    if not 0 < effect_pct < 100:
        raise ScalingInputError(f"effect_pct must be a saving in (0, 100) %, got {effect_pct!r}")


def power_at_alpha(*, sd_seed_log: float, n: int, alpha: float, var_timing_log: float | None = None,
                   df_timing: float | None = None, power: float = POWER, effect_pct: float = 10.0,
                   max_seeds: int = 1000) -> PowerStatement:
    """The power statement of a time saving at `alpha` (give `AlphaBudget.first_step`): `sd_seed_log` is the sd
    over seeds of the per-seed log steps ratio (or the bootstrap standard error x sqrt(n)), `var_timing_log` the
    squared standard error of the per-step log ratio over `df_timing` + 1 timing rounds (None: no timing spread)."""
    if not (math.isfinite(sd_seed_log) and sd_seed_log >= 0):
        raise ScalingInputError(f"sd_seed_log must be finite and >= 0, got {sd_seed_log!r}")
    _check_power_args(n, alpha, power, effect_pct)
    var_seed = sd_seed_log**2
    se, df = _se_df(var_seed, n, var_timing_log, df_timing)
    detectable_log = (t_quantile(1 - alpha, df) + t_quantile(2 * power - 1, df)) * se
    effect_log = -math.log(1 - effect_pct / 100)
    needed = next((m for m in range(2, max_seeds + 1)
                   if _power(effect_log, *_se_df(var_seed, m, var_timing_log, df_timing), alpha) >= power), None)
    return PowerStatement(alpha=alpha, power=power, n=n, se_log=se, df=df,
                          detectable_pct=100 * (1 - math.exp(-detectable_log)), effect_pct=effect_pct,
                          power_for_effect=_power(effect_log, se, df, alpha), seeds_for_effect=needed)


# How a statement names the endpoints (`scaling.claims.ENDPOINTS`); any other name is printed as given.
_ENDPOINT_WORDS = {"first": "first crossing", "steps_above": "steps above the target",
                   "sustained": "sustained crossing"}


@dataclass(frozen=True)
class CoPrimaryPower:
    """The power of a claim that needs every co-primary endpoint (`endpoints`: endpoint -> its own `PowerStatement`,
    all at one `alpha`, `n` and `effect_pct`; None for an endpoint with no ratio, on which no claim can stand).

    The claim stands only where every endpoint rejects, in the saving's direction: `toward` holds each endpoint's
    chance of that (its power less the far tail, a claim of a cost). Their joint law is not estimated (a correlation
    of the two endpoints over 4 to 6 paired seeds has a standard error near (1 - r^2) / sqrt(n - 3), 0.6 to 1), so
    the claim's power is bounded whatever it is: at least `lo` = max(0, sum of `toward` - (k - 1)) (the claim fails
    only where some endpoint fails, and those chances add at most), at most `hi` = min of `toward` (it needs the
    weakest endpoint). `seeds_for_effect`: the fewest seeds at which the conservative bound `lo` reaches `power`
    (None past `max_seeds`, or where an endpoint has no ratio)."""

    alpha: float
    power: float
    n: int
    effect_pct: float
    endpoints: dict[str, PowerStatement | None]
    toward: dict[str, float]
    lo: float
    hi: float
    seeds_for_effect: int | None
    max_seeds: int = 1000

    def text(self) -> str:
        names = {e: _ENDPOINT_WORDS.get(e, e) for e in self.endpoints}
        missing = [names[e] for e, s in self.endpoints.items() if s is None]
        head = f"the claim ({' and '.join(names.values())}, both)"
        if missing:
            return f"{head}: {' and '.join(missing)} has no ratio, so no claim can stand (power 0)"
        per = ", ".join(f"{names[e]} {100 * p:.0f} %" for e, p in self.toward.items())
        seeds = self.seeds_for_effect if self.seeds_for_effect is not None else f"> {self.max_seeds}"
        return (f"{head}: power for {self.effect_pct:g} % at alpha {self.alpha:.3g} with {self.n} seeds between "
                f"{100 * self.lo:.0f} % and {100 * self.hi:.0f} % (each, in the saving's direction: {per}); seeds "
                f"for {100 * self.power:.0f} % power on both (the lower bound): {seeds}")

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "power": self.power, "n": self.n, "effect_pct": self.effect_pct,
                "endpoints": {e: s.to_dict() if s is not None else None for e, s in self.endpoints.items()},
                "toward": dict(self.toward), "lo": self.lo, "hi": self.hi,
                "seeds_for_effect": self.seeds_for_effect, "max_seeds": self.max_seeds, "text": self.text()}


def pair_power_bounds(powers: Sequence[float]) -> tuple[float, float]:
    """Bounds on the chance that every one of k events happens, from each one's chance alone (Frechet): (max(0,
    sum - (k - 1)), min). Two endpoints of power 0.9 and 0.8: both with a chance between 0.7 and 0.8."""
    if not powers:
        raise ScalingInputError("powers must hold at least one endpoint's power, got none")
    for i, p in enumerate(powers):
        if not (isinstance(p, (int, float)) and 0 <= p <= 1):
            raise ScalingInputError(f"powers[{i}] must be a probability in [0, 1], got {p!r}")
    return max(0.0, sum(powers) - (len(powers) - 1)), float(min(powers))


def _toward_over_seeds(sd_seed_log: float, seeds: NDArray[np.int64], var_t: float | None, df_t: float | None,
                       effect_log: float, alpha: float) -> NDArray[np.float64]:
    """`_power_tails`' first term (rejection in the effect's direction) at each seed count in `seeds` at once, with
    `_se_df_over`'s standard error and degrees of freedom: a thousand seed counts in one call."""
    from scipy import stats

    se, df = _se_df_over(sd_seed_log**2, seeds, var_t, df_t)
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(se > 0, abs(effect_log) / se, np.inf)
    crit = stats.t.ppf(1 - alpha / 2, df)
    return np.asarray(stats.t.sf(crit - shift, df), dtype=float)


def co_primary_power(*, sd_seed_log: Mapping[str, float | None], n: int, alpha: float,
                     var_timing_log: float | None = None, df_timing: float | None = None, power: float = POWER,
                     effect_pct: float = 10.0, max_seeds: int = 1000) -> CoPrimaryPower:
    """The power of a claim that needs every endpoint in `sd_seed_log` (endpoint -> the sd over seeds of its
    per-seed log steps ratio, as for `power_at_alpha`; None: the endpoint has no ratio), each tested at `alpha`
    (give `AlphaBudget.first_step`) on the same `n` paired seeds and timing rounds, for a saving of `effect_pct` at
    every endpoint: each endpoint's `power_at_alpha` and the bounds on them all (`CoPrimaryPower`)."""
    if not sd_seed_log:
        raise ScalingInputError("sd_seed_log must map each co-primary endpoint to its sd, got none")
    for endpoint, sd in sd_seed_log.items():
        if sd is not None and not (isinstance(sd, (int, float)) and math.isfinite(sd) and sd >= 0):
            raise ScalingInputError(f"sd_seed_log[{endpoint!r}] must be finite and >= 0 (or None: no ratio), got "
                                    f"{sd!r}")
    _check_power_args(n, alpha, power, effect_pct)
    _count("max_seeds", max_seeds)
    statements = {e: None if sd is None else power_at_alpha(
        sd_seed_log=sd, n=n, alpha=alpha, var_timing_log=var_timing_log, df_timing=df_timing, power=power,
        effect_pct=effect_pct, max_seeds=max_seeds) for e, sd in sd_seed_log.items()}
    effect_log = -math.log(1 - effect_pct / 100)

    def toward(seeds: NDArray[np.int64]) -> dict[str, NDArray[np.float64]]:
        return {e: np.zeros(seeds.shape) if sd is None else
                _toward_over_seeds(sd, seeds, var_timing_log, df_timing, effect_log, alpha)
                for e, sd in sd_seed_log.items()}

    at_n = {e: float(p[0]) for e, p in toward(np.array([n])).items()}
    lo, hi = pair_power_bounds(list(at_n.values()))
    # The bound is at most each endpoint's power, so no seed count below the largest single endpoint's can do.
    singles = [s.seeds_for_effect if s is not None else None for s in statements.values()]
    needed = None
    if None not in singles:
        seeds = np.arange(max(s for s in singles if s is not None), max_seeds + 1)
        reach = np.flatnonzero(sum(toward(seeds).values()) - (len(sd_seed_log) - 1) >= power)
        needed = int(seeds[reach[0]]) if reach.size else None
    return CoPrimaryPower(alpha=alpha, power=power, n=n, effect_pct=effect_pct, endpoints=statements,
                          toward=at_n, lo=lo, hi=hi, seeds_for_effect=needed, max_seeds=max_seeds)


def p_best_text(p: float | None, n_seeds: int) -> str:
    """P(best) as a reader should see it: a probability with `MIN_SEEDS_P_BEST` seeds or more, else "too few seeds
    (n=3)" (the bootstrap over 3 seeds has 10 distinct resamples); "-" when there is none."""
    if p is None:
        return "-"
    if n_seeds < MIN_SEEDS_P_BEST:
        return f"too few seeds (n={n_seeds})"
    return f"{p:.2f}"


@dataclass(frozen=True)
class ChoiceWarning:
    """A chosen point whose mean objective (lower is better) is worse than every baseline's, with per-seed counts:
    `worse_on[b]` = (seeds on which the choice is worse than baseline b, common seeds); `worse_than_all` = seeds on
    which it is worse than every baseline, of `n` seeds common to all."""

    chosen: str
    chosen_mean: float
    baseline_means: dict[str, float]
    worse_on: dict[str, tuple[int, int]]
    worse_than_all: int
    n: int

    def text(self) -> str:
        names = list(self.baseline_means)
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"
        counts = {self.worse_on[b] for b in names}
        if len(counts) == 1 and counts == {(self.worse_than_all, self.n)}:
            seeds = f"on {self.worse_than_all} of {self.n} seeds"
        else:
            per_base = ", ".join(f"{b} on {k} of {m}" for b, (k, m) in self.worse_on.items())
            seeds = (f"on average; per seed, than {per_base} and than all of them on {self.worse_than_all} of "
                     f"{self.n} seeds")
        means = ", ".join(f"{b} {v:.4g}" for b, v in self.baseline_means.items())
        return (f"the chosen {self.chosen} is worse than {joined} {seeds} (mean {self.chosen_mean:.4g} against "
                f"{means}), whether or not the difference is significant; the grid may lie outside the useful range")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "worse_on": {b: list(v) for b, v in self.worse_on.items()}, "text": self.text()}


def choice_warning(chosen: str, chosen_per_seed: Mapping[Any, float],
                   baselines: Mapping[str, Mapping[Any, float]]) -> ChoiceWarning | None:
    """The warning for the chosen line when its mean over the seeds it shares with every baseline is worse (higher)
    than each baseline's mean over the same seeds; None when it beats or ties at least one, or there is no
    baseline or no common seed."""
    if not baselines:
        return None
    common: Sequence[Any] = sorted(set(chosen_per_seed).intersection(*map(set, baselines.values())), key=str)
    if not common:
        return None
    mean = sum(chosen_per_seed[s] for s in common) / len(common)
    means = {b: sum(v[s] for s in common) / len(common) for b, v in baselines.items()}
    if not all(mean > m for m in means.values()):
        return None
    worse_on = {b: (sum(chosen_per_seed[s] > v[s] for s in common), len(common)) for b, v in baselines.items()}
    all_count = sum(all(chosen_per_seed[s] > v[s] for v in baselines.values()) for s in common)
    return ChoiceWarning(chosen=chosen, chosen_mean=mean, baseline_means=means, worse_on=worse_on,
                         worse_than_all=all_count, n=len(common))
