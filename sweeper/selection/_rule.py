"""Decisions that carry their uncertainty: a paired bootstrap over seeds, each point's probability of being best,
paired differences with intervals, and the documented choice rule. No MLflow, no Ray.

The statistics (paired differences with Student-t intervals, the paired bootstrap of P(best)) are `scaling.stats`,
shared with the transfer's analysis; this module holds the choice rule only.

The choice rule (`select_point`), stated once here and recorded with every selection:
  1. the best point is the one with the lowest mean objective over seeds (ties: the smaller key);
  2. the candidates are the points whose paired mean difference to the best is within one *pooled* standard error:
     the median over the other points of the sd of their per-seed differences to the best, / sqrt(n), the same
     margin for every point (as in cross-validation's one-SE rule, where the margin is not each model's own). A
     point's own standard error would reward an erratic point with a wide margin of its own noise; the median
     keeps one erratic point from widening anyone's margin (tests/sweeper/test_selection_noise.py). With a single
     seed there is no standard error, and the
     candidates are the points within `tie_tolerance` (relative) of the best instead;
  3. among the candidates the larger K wins (fewer Newton-Schulz refreshes: cheaper), then the lower mean, then
     the smaller key (`tie_break="larger_K"`; with `"none"` the best point is chosen).
The one-standard-error rule is the usual guard against choosing on noise: a point the data cannot tell apart from
the best is as good a bet, and the cheaper one is preferred.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scaling.stats import (
    LEVEL,
    PairedDifference,
    bootstrap_p_best,
    check_n_boot,
    paired_difference,
    pooled_se,
    seed_matrix,
)

__all__ = [
    "Selection",
    "select_point",
    "select_points_by_key",
]


@dataclass(frozen=True)
class Selection:
    """The outcome of `select_point`: the chosen point, every point's probability of being best, and each point's
    paired difference to the best (point - best, per seed) with its standard error and interval.

    Keys are the keys of the `objectives` mapping (`(K, gamma)` tuples from `select_point`)."""

    chosen: Any
    p_best: dict[Any, float]
    best_by_mean: Any
    means: dict[Any, float]
    diff_to_best: dict[Any, PairedDifference]
    candidates: list[Any]  # points the rule could not tell apart from the best (within one SE, or the tolerance)
    n: int  # seeds
    n_boot: int
    seed: int
    rule: str
    tie_break: str
    tie_tolerance: float
    level: float = LEVEL
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: keys as strings (`str(key)`, or 'K=3,gamma=0.15' for the sweep's point keys)."""
        def k(key: Any) -> str:
            if isinstance(key, tuple):
                return ",".join(str(v) for v in key)
            return key if isinstance(key, str) else str(key)

        return {
            "chosen": k(self.chosen),
            "best_by_mean": k(self.best_by_mean),
            "p_best": {k(p): v for p, v in self.p_best.items()},
            "means": {k(p): v for p, v in self.means.items()},
            "diff_to_best": {k(p): d.to_dict() for p, d in self.diff_to_best.items()},
            "candidates": [k(p) for p in self.candidates],
            "n": self.n, "n_boot": self.n_boot, "seed": self.seed, "rule": self.rule,
            "tie_break": self.tie_break, "tie_tolerance": self.tie_tolerance, "level": self.level,
            "notes": list(self.notes),
        }


def select_points_by_key(
    objectives: Mapping[Any, Sequence[float]],
    refresh_every: Mapping[Any, float | None],
    *,
    n_boot: int = 2000,
    seed: int = 0,
    tie_break: Literal["larger_K", "none"] = "larger_K",
    tie_tolerance: float = 0.01,
    order: Mapping[Any, str] | None = None,
    rule: Literal["one_se", "cheapest_within"] = "one_se",
    tolerance: float = 0.03,
    cost: Mapping[Any, float | None] | None = None,
    cost_name: str = "cost",
) -> Selection:
    """`select_point` for points with any keys: `refresh_every[key]` is the point's K (None when K is not known,
    e.g. an lr-only search; the larger-K preference then does not apply). `order[key]` breaks remaining ties.

    `rule="cheapest_within"` chooses on the quality-cost front instead: the candidates are the points whose paired
    mean difference to the best is within `tolerance` of the best's mean (relative), and among them the lowest
    `cost[key]` wins (`cost_name` says what it is, e.g. Newton-Schulz calls per step); without a cost for every
    candidate, the larger K (fewer refreshes) stands in for it."""
    check_n_boot(n_boot)
    if rule not in ("one_se", "cheapest_within"):
        raise ValueError(f"rule must be 'one_se' or 'cheapest_within', got {rule!r}")
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance must be in [0, 1), got {tolerance}")
    if tie_break not in ("larger_K", "none"):
        raise ValueError(f"tie_break must be 'larger_K' or 'none', got {tie_break!r}")
    if not 0 <= tie_tolerance < 1:
        raise ValueError(f"tie_tolerance must be in [0, 1), got {tie_tolerance}")
    keys, values = seed_matrix(objectives)
    name = {key: (order or {}).get(key, str(key)) for key in keys}
    n = int(values.shape[1])
    means = {key: float(values[i].mean()) for i, key in enumerate(keys)}
    best_i = min(range(len(keys)), key=lambda i: (means[keys[i]], name[keys[i]]))
    best = keys[best_i]
    diffs = {key: paired_difference(values[i], values[best_i]) for i, key in enumerate(keys)}
    if rule == "cheapest_within":
        chosen, candidates, said, notes = _cheapest_within(keys, means, best, diffs, name, refresh_every,
                                                           tolerance=tolerance, cost=cost, cost_name=cost_name)
    else:
        chosen, candidates, said, notes = _within_one_se(keys, means, best, diffs, name, refresh_every, n=n,
                                                         tie_break=tie_break, tie_tolerance=tie_tolerance)
    p = bootstrap_p_best(values, n_boot=n_boot, seed=seed)
    return Selection(
        chosen=chosen,
        p_best={key: float(p[i]) for i, key in enumerate(keys)},
        best_by_mean=best,
        means=means,
        diff_to_best=diffs,
        candidates=sorted(candidates, key=lambda key: (means[key], name[key])),
        n=n,
        n_boot=n_boot,
        seed=seed,
        rule=said,
        tie_break=tie_break,
        tie_tolerance=tie_tolerance,
        notes=notes,
    )


def select_point(objectives: Mapping[Any, Sequence[float]], *, n_boot: int = 2000, seed: int = 0,
                 tie_break: Literal["larger_K", "none"] = "larger_K", tie_tolerance: float = 0.01) -> Selection:
    """Choose a `(K, gamma)` point from per-seed objectives (lower is better), with its uncertainty.

    `objectives` maps a `(K, gamma)` tuple to a list of per-seed objectives, index i being the same seed for every
    point. The rule (module docstring): among points whose paired mean difference to the lowest-mean point is
    within one pooled standard error, the largest K, then the lower mean. `p_best` comes from `n_boot` paired bootstrap
    resamples of the seeds (`seed` seeds the resampling) and sums to 1; tied points share it.
    Raises ValueError for an empty mapping, unequal seed counts, non-finite values or keys that are not
    `(K, gamma)` tuples.
    """
    if not isinstance(objectives, Mapping) or not objectives:
        raise ValueError("objectives: give a non-empty mapping of (K, gamma) -> per-seed objectives")
    ks: dict[Hashable, float | None] = {}
    for key in objectives:
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(v, int | float) for v in key)):
            raise ValueError(f"objectives: keys are (K, gamma) tuples of numbers, got {key!r}")
        ks[key] = float(key[0])
    return select_points_by_key(objectives, ks, n_boot=n_boot, seed=seed, tie_break=tie_break,
                                tie_tolerance=tie_tolerance)


def _within_one_se(keys: list[Any], means: dict[Any, float], best: Any, diffs: dict[Any, PairedDifference],
                   name: dict[Any, str], refresh_every: Mapping[Any, float | None], *, n: int, tie_break: str,
                   tie_tolerance: float) -> tuple[Any, list[Any], str, list[str]]:
    """`select_points_by_key`'s default rule, (chosen, candidates, the rule in words, notes): the points within one
    pooled standard error of the best (a relative tolerance with one seed), the larger K among them."""
    notes = []
    if n >= 2:
        margin = pooled_se([diffs[key] for key in keys if key != best]) or 0.0
        candidates = [key for key in keys if diffs[key].mean <= margin]
        said = ("lowest mean objective over seeds is the reference; points whose paired mean difference to it is "
                f"within one pooled standard error ({margin:.4g}, the same for every point) are candidates")
    else:
        limit = means[best] + tie_tolerance * abs(means[best])
        candidates = [key for key in keys if means[key] <= limit]
        said = (f"one seed, so no standard error: points within {tie_tolerance:.1%} of the lowest objective are "
                "candidates")
        notes.append("one seed: the probabilities of being best are 1 for the best point (shared by exact ties) "
                     "and carry no information about seed noise")
    ks = {key: refresh_every.get(key) for key in candidates}
    if tie_break == "larger_K" and all(v is not None for v in ks.values()):
        chosen = min(candidates, key=lambda key: (-float(ks[key]), means[key], name[key]))  # type: ignore[arg-type]
        said += "; among them the larger K wins (cheaper), then the lower mean"
    else:
        chosen = min(candidates, key=lambda key: (means[key], name[key]))
        said += "; among them the lower mean wins"
        if tie_break == "larger_K":
            notes.append("K is not known for every candidate: the larger-K preference was not applied")
    return chosen, candidates, said, notes


def _cheapest_within(keys: list[Any], means: dict[Any, float], best: Any, diffs: dict[Any, PairedDifference],
                     name: dict[Any, str], refresh_every: Mapping[Any, float | None], *, tolerance: float,
                     cost: Mapping[Any, float | None] | None, cost_name: str) -> tuple[Any, list[Any], str, list[str]]:
    """`select_points_by_key`'s front rule, (chosen, candidates, the rule in words, notes): the cheapest point
    within `tolerance` of the best (paired mean)."""
    margin = tolerance * abs(means[best])
    candidates = [key for key in keys if diffs[key].mean <= margin]
    notes: list[str] = []
    costs = {key: (cost or {}).get(key) for key in candidates}
    said = (f"points whose paired mean difference to the lowest-mean point is within {tolerance:.1%} of its mean "
            f"({margin:.4g}) are candidates")
    if all(v is not None and math.isfinite(v) for v in costs.values()):
        chosen = min(candidates, key=lambda key: (float(costs[key]), means[key], name[key]))  # type: ignore[arg-type]
        said += f"; among them the lowest {cost_name} wins, then the lower mean"
    elif all(refresh_every.get(key) is not None for key in candidates):
        chosen = min(candidates, key=lambda key: (-float(refresh_every[key]), means[key], name[key]))  # type: ignore[arg-type]
        said += "; among them the larger K wins (fewer refreshes), then the lower mean"
        notes.append(f"{cost_name} is not known for every candidate: the larger K stood in for it")
    else:
        chosen = min(candidates, key=lambda key: (means[key], name[key]))
        said += "; among them the lower mean wins"
        notes.append(f"neither {cost_name} nor K is known for every candidate: the lower mean decided")
    chosen_diff = diffs[chosen]
    if chosen != best and chosen_diff.interval is not None and chosen_diff.interval[1] > margin:
        notes.append(f"the chosen point's paired interval reaches {chosen_diff.interval[1]:+.4g}, beyond the "
                     f"tolerance {margin:.4g}: within it on the mean only (n={chosen_diff.n})")
    return chosen, candidates, said, notes
