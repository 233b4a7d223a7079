"""Which searched hyperparameter mattered: Optuna's importance evaluators on a sweep's points, with the seeds' spread.

The sweep's scored points (every seed succeeded) become a throw-away in-memory Optuna study, one trial per point
with the point's objective (mean over seeds), and Optuna's evaluator splits the objective's variance between the
searched parameters (those with more than one value: K, gamma, lr where searched).

The seeds enter twice, so a reader can tell an importance from noise:
- **a paired bootstrap over seeds**: the same resampled seeds for every point, the points' means recomputed and the
  importances with them; each parameter's importance gets a 5-95 % interval and the share of resamples in which it
  ranks first;
- **the seed as a factor**: the same evaluator on one trial per (point, seed), with the seed as a categorical
  parameter, unnormalised, so each parameter's share of the per-trial variance stands beside the seed's own share.
  A parameter whose share is below the seed's moved the objective less than the choice of seed did.

The default evaluator is fANOVA (a random forest's functional ANOVA), not PED-ANOVA (Optuna 5's default): on a
small grid PED-ANOVA's top quantile holds one or two trials and its ranking is unreliable. On a 3 x 3 grid whose
objective depends only on K (10 + 3K + 0.1 gamma), PED-ANOVA gave gamma 0.88 and K 0.12, fANOVA K 0.99
(Optuna 5.1; `pytest tests/sweeper/test_importance.py -k ped_anova` checks the ranking).
`evaluator="ped-anova"` is there for large random or TPE studies.
"""

from __future__ import annotations

import math
import random
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import SweepError
from ..selection import PointSummary

__all__ = ["EVALUATORS", "ParamImportance", "SweepImportance", "sweep_importance"]

EVALUATORS = ("fanova", "ped-anova")
SEED_FACTOR = "seed"
# Below this many scored points a variance split says nothing a reader could act on.
MIN_POINTS = 3


@dataclass
class ParamImportance:
    """One searched parameter's importance for the sweep's objective."""

    param: str
    importance: float  # share of the points' objective variance, normalised over the searched parameters
    interval: tuple[float, float] | None = None  # 5-95 % over the paired bootstrap of seeds; None with one seed
    p_first: float | None = None  # share of bootstrap resamples in which it ranks first
    variance_share: float | None = None  # unnormalised share of the per-(point, seed) variance, seed as a factor

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepImportance:
    """The importances of a sweep's searched parameters, most important first."""

    evaluator: str
    n_points: int
    seeds: list[int]
    n_boot: int
    params: list[ParamImportance]
    seed_share: float | None = None  # the seed's own share of the per-(point, seed) variance
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "method": self.method}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SweepImportance:
        """Back from `to_dict()` (e.g. a REST answer), to print its `lines()`."""
        params = [ParamImportance(**{**p, "interval": tuple(p["interval"]) if p.get("interval") else None})
                  for p in doc["params"]]
        return cls(evaluator=doc["evaluator"], n_points=doc["n_points"], seeds=list(doc["seeds"]),
                   n_boot=doc["n_boot"], params=params, seed_share=doc.get("seed_share"),
                   notes=list(doc.get("notes") or []))

    @property
    def method(self) -> str:
        return (f"Optuna's {self.evaluator} evaluator on {self.n_points} points' mean objectives over seeds "
                f"{self.seeds}; interval and P(first) from {self.n_boot} paired bootstrap resamples of the seeds; "
                "variance shares from one trial per (point, seed) with the seed as a factor")

    def lines(self) -> list[str]:
        """The importance table as text."""
        out = [f"importance ({self.evaluator}, {self.n_points} points, seeds {self.seeds}):",
               f"  {'param':<10} {'importance':>10} {'5-95 %':>16} {'P(first)':>8} {'var. share':>10}"]
        for p in self.params:
            interval = f"[{p.interval[0]:.2f}, {p.interval[1]:.2f}]" if p.interval else "-"
            out.append(f"  {p.param:<10} {p.importance:>10.2f} {interval:>16} "
                       f"{'-' if p.p_first is None else f'{p.p_first:.2f}':>8} "
                       f"{'-' if p.variance_share is None else f'{p.variance_share:.2f}':>10}")
        if self.seed_share is not None:
            out.append(f"  {'seed':<10} {'':>10} {'':>16} {'':>8} {self.seed_share:>10.2f}  (the seeds' own share)")
        out += [f"  note: {n}" for n in self.notes]
        return out


def distribution_of(values: Sequence[float | int]) -> Any:
    from optuna.distributions import FloatDistribution, IntDistribution

    low, high = min(values), max(values)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return IntDistribution(int(low), int(high))
    # A learning rate spans decades: its variance split is read on the log scale it was searched on.
    log = low > 0 and high / low >= 10
    return FloatDistribution(float(low), float(high), log=log)


def _evaluator(name: str, seed: int) -> Any:
    from optuna.importance import FanovaImportanceEvaluator, PedAnovaImportanceEvaluator

    if name == "fanova":
        # 16 trees, not Optuna's 64: on a sweep's few points the forests agree to about 0.01 either way (measured:
        # sd of K's importance over forest seeds 0.012 with 16 trees, 0.009 with 64), at a quarter of the time,
        # which a bootstrap of 100 resamples repeats.
        return FanovaImportanceEvaluator(n_trees=16, seed=seed)
    if name == "ped-anova":
        return PedAnovaImportanceEvaluator()
    raise SweepError(f"importance evaluator {name!r} is not one of {', '.join(EVALUATORS)}")


def _importances(rows: Sequence[tuple[dict[str, Any], float]], distributions: dict[str, Any], evaluator: str,
                 seed: int, *, normalize: bool) -> dict[str, float]:
    """The evaluator's importances on one in-memory study of `rows` (params, value)."""
    import optuna
    from optuna.importance import get_param_importances

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize")
    study.add_trials([optuna.trial.create_trial(params=params, distributions=distributions, value=value)
                      for params, value in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `normalize` is marked experimental in Optuna 5
        found = get_param_importances(study, evaluator=_evaluator(evaluator, seed), normalize=normalize)
    return {k: float(v) for k, v in found.items()}


def sweep_importance(points: Sequence[PointSummary], *, evaluator: str = "fanova", n_boot: int = 100,
                     seed: int = 0) -> SweepImportance:
    """The importance of each searched parameter for the sweep's objective (see the module's docstring).

    `points` are the sweep's search points; only those scored on every seed count. Raises `SweepError` when fewer
    than three points were scored or no parameter took two values, and when the evaluator itself fails on these
    objectives: an analysis is a view of a finished sweep, and its failure is said, never raised as a crash (with
    objectives near 1e308 the sums of squares inside fANOVA overflow and Optuna asserts)."""
    try:
        return _sweep_importance(points, evaluator=evaluator, n_boot=n_boot, seed=seed)
    except SweepError:
        raise
    except Exception as exc:  # Optuna's asserts, numpy's and statistics' overflows, sklearn's value errors
        raise SweepError(f"importance: Optuna's {evaluator} evaluator failed on this sweep's objectives "
                         f"({type(exc).__name__}: {str(exc)[:200] or 'no message'})") from exc


def _sweep_importance(points: Sequence[PointSummary], *, evaluator: str, n_boot: int, seed: int) -> SweepImportance:
    if evaluator not in EVALUATORS:
        raise SweepError(f"importance evaluator {evaluator!r} is not one of {', '.join(EVALUATORS)}")
    if not 0 <= n_boot <= 10_000:
        raise SweepError(f"importance n_boot {n_boot} is out of range: 0 to 10000 resamples")
    scored = [p for p in points if p.objective is not None and p.seed_objectives]
    if len(scored) < MIN_POINTS:
        raise SweepError(f"importance needs at least {MIN_POINTS} points scored on every seed; "
                         f"this sweep has {len(scored)}")
    names = sorted({k for p in scored for k in p.params})
    searched = [k for k in names if len({p.params.get(k) for p in scored}) > 1]
    if not searched:
        raise SweepError("importance needs a parameter that took two values or more; "
                         f"every scored point has the same {', '.join(names) or 'parameters'}")
    if any(k not in p.params for p in scored for k in searched):
        raise SweepError(f"importance needs every scored point to set {', '.join(searched)}")
    distributions = {k: distribution_of([p.params[k] for p in scored]) for k in searched}
    seeds = sorted(set.intersection(*(set(p.seed_objectives) for p in scored)))

    def params(p: PointSummary) -> dict[str, Any]:
        return {k: p.params[k] for k in searched}

    main = _importances([(params(p), float(p.objective)) for p in scored],  # type: ignore[arg-type]
                        distributions, evaluator, seed, normalize=True)
    notes = []
    if len(searched) == 1:
        notes.append(f"only {searched[0]} took more than one value: its importance is 1 by construction")

    boots: dict[str, list[float]] = {k: [] for k in searched}
    firsts = dict.fromkeys(searched, 0)
    if len(seeds) > 1 and n_boot and len(searched) > 1:
        rng = random.Random(seed)
        for _ in range(n_boot):
            draw = [rng.choice(seeds) for _ in seeds]  # the same seeds for every point: paired
            rows = [(params(p), statistics.fmean(p.seed_objectives[s] for s in draw)) for p in scored]
            found = _importances(rows, distributions, evaluator, seed, normalize=True)
            for k in searched:
                boots[k].append(found.get(k, 0.0))
            firsts[max(found, key=lambda k: found[k])] += 1
    elif len(seeds) <= 1:
        notes.append("one seed: no bootstrap interval and no seed share")

    shares: dict[str, float] = {}
    if len(seeds) > 1:
        from optuna.distributions import CategoricalDistribution

        per_seed = [({**params(p), SEED_FACTOR: s}, p.seed_objectives[s]) for p in scored for s in seeds]
        shares = _importances(per_seed, {**distributions, SEED_FACTOR: CategoricalDistribution(seeds)},
                              evaluator, seed, normalize=False)

    def interval(values: list[float]) -> tuple[float, float] | None:
        if not values:
            return None
        ordered = sorted(values)
        lo, hi = ordered[int(0.05 * (len(ordered) - 1))], ordered[math.ceil(0.95 * (len(ordered) - 1))]
        return (lo, hi)

    out = [ParamImportance(param=k, importance=main.get(k, 0.0), interval=interval(boots[k]),
                           p_first=(firsts[k] / n_boot) if boots[k] else None,
                           variance_share=shares.get(k) if shares else None)
           for k in searched]
    out.sort(key=lambda p: (-p.importance, p.param))
    return SweepImportance(evaluator=evaluator, n_points=len(scored), seeds=seeds,
                           n_boot=n_boot if any(boots.values()) else 0, params=out,
                           seed_share=shares.get(SEED_FACTOR) if shares else None, notes=notes)
