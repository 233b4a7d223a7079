"""The selection rule under the project's measured seed noise: an erratic worse point is not preferred, and how
often the rule picks a point more than 2 % worse than the true best (the old rule, each point's own standard
error, beside it). `pytest -s` prints the table that docs/decisions.md quotes."""

from __future__ import annotations

import numpy as np
import pytest

from scaling.stats import paired_difference
from sweeper import select_point

# A 3 x 3 grid over K and gamma with true objectives (FD, lower is better) 0-9 % above the best, the cheapest
# (largest K) point 3 % worse; one point erratic (its own seed noise 5x the others').
TRUE = {
    (2, 0.1): 254.0, (2, 0.15): 250.0, (2, 0.25): 258.0,
    (3, 0.1): 257.0, (3, 0.15): 252.0, (3, 0.25): 262.0,
    (4, 0.1): 266.0, (4, 0.15): 257.5, (4, 0.25): 272.0,
}
ERRATIC = (4, 0.25)
SEED_SD = 18.0  # shared by every point of a seed (the objective's seed sd measured at cpu-xs: 16-23 FD)
POINT_SD = 6.0  # each point's own noise on top of it
ERRATIC_SD = 30.0


def _own_se_choice(objectives: dict) -> tuple:
    """The rule before 2026-12-03: candidates within their own paired standard error; the larger K wins."""
    keys = list(objectives)
    means = {k: float(np.mean(v)) for k, v in objectives.items()}
    best = min(keys, key=lambda k: (means[k], k))
    candidates = [k for k in keys
                  if paired_difference(objectives[k], objectives[best]).mean
                  <= (paired_difference(objectives[k], objectives[best]).se or 0.0)]
    return min(candidates, key=lambda k: (-k[0], means[k], k))


def simulate(n: int, reps: int, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    best_true = min(TRUE.values())
    out = {"pooled_worse": 0, "own_worse": 0, "pooled_erratic": 0, "own_erratic": 0}
    for _ in range(reps):
        shared = rng.normal(0.0, SEED_SD, n)
        objectives = {k: list(v + shared + rng.normal(0.0, ERRATIC_SD if k == ERRATIC else POINT_SD, n))
                      for k, v in TRUE.items()}
        pooled = select_point(objectives, n_boot=1).chosen
        own = _own_se_choice(objectives)
        out["pooled_worse"] += TRUE[pooled] > 1.02 * best_true
        out["own_worse"] += TRUE[own] > 1.02 * best_true
        out["pooled_erratic"] += pooled == ERRATIC
        out["own_erratic"] += own == ERRATIC
    return {k: v / reps for k, v in out.items()}


def test_an_erratic_worse_point_does_not_win_by_its_own_noise() -> None:
    """The issue's case: a point +40 worse with a paired SE of about 100, beside steady points within a few FD of
    the best. Its own SE made it a candidate (and, as the largest K, the choice); the pooled margin does not."""
    best = [240.0, 262.0, 251.0]
    objectives = {(2, 0.15): best}
    for k, (g, offset) in enumerate([(0.1, 5.0), (0.25, 7.0)] * 4):
        objectives[(2 + k // 3, g + k)] = [b + offset + d for b, d in zip(best, (0.5, -0.4, 0.2), strict=True)]
    erratic = [b + d for b, d in zip(best, (215.0, -110.0, 15.0), strict=True)]  # mean +40, paired SE about 95
    objectives[(9, 0.15)] = erratic
    assert paired_difference(erratic, best).se > 90 and paired_difference(erratic, best).mean == pytest.approx(40)
    assert _own_se_choice(objectives) == (9, 0.15)  # the old rule: chosen on its noise
    sel = select_point(objectives, n_boot=200)
    assert (9, 0.15) not in sel.candidates and sel.chosen != (9, 0.15)
    assert sel.chosen[0] == max(k for k, _ in sel.candidates)


@pytest.mark.parametrize("n", [3, 6])
def test_the_pooled_rule_picks_a_worse_point_less_often_than_each_points_own_se(n: int) -> None:
    rates = simulate(n, reps=400)
    print(f"\nn={n}: picks > 2 % worse than the true best: pooled {rates['pooled_worse']:.1%}, own SE "
          f"{rates['own_worse']:.1%}; picks the erratic point: pooled {rates['pooled_erratic']:.1%}, own SE "
          f"{rates['own_erratic']:.1%} (400 simulated studies)")
    # Measured (400 studies): n=3: worse 31.0 % vs 44.0 %, erratic 11.8 % vs 25.2 %; n=6: 15.8 % vs 29.0 %, 7.5 %
    # vs 18.0 %. (The erratic point still wins where its noise makes it the lowest mean: no margin can stop that.)
    assert rates["pooled_erratic"] <= 0.6 * rates["own_erratic"]
    assert rates["pooled_worse"] <= 0.8 * rates["own_worse"]
