"""select_point and paired differences, on numbers: winners, ties, the one-SE rule, pairing, bad input."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from sweeper import PairedDifference, paired_difference, select_point


def test_a_clear_winner_gets_p_best_near_one() -> None:
    rng = np.random.default_rng(1)
    objectives = {(k, g): list(60.0 + rng.normal(0, 2, 6)) for k in (3, 4) for g in (0.15, 0.25)}
    objectives[(2, 0.10)] = list(40.0 + rng.normal(0, 2, 6))  # 20 FD better at a seed spread of 2
    sel = select_point(objectives)
    assert sel.chosen == (2, 0.10) and sel.best_by_mean == (2, 0.10)
    assert sel.p_best[(2, 0.10)] > 0.99
    assert sum(sel.p_best.values()) == pytest.approx(1.0)
    assert set(sel.p_best) == set(objectives) and sel.n == 6 and sel.n_boot == 2000
    far = sel.diff_to_best[(4, 0.25)]
    assert far.interval is not None and far.interval[0] > 10 and not far.includes_zero


def test_identical_points_share_the_probability() -> None:
    same = [40.0, 55.0, 47.0]
    sel = select_point({(3, 0.15): same, (3, 0.25): list(same), (4, 0.35): [80.0, 90.0, 85.0]})
    assert sel.p_best[(3, 0.15)] == pytest.approx(0.5) and sel.p_best[(3, 0.25)] == pytest.approx(0.5)
    assert sel.p_best[(4, 0.35)] == 0.0 and sum(sel.p_best.values()) == pytest.approx(1.0)


def test_the_rule_picks_the_larger_K_within_one_standard_error() -> None:
    best = [40.0, 50.0, 45.0, 42.0]
    near = [b + d for b, d in zip(best, [4.0, -2.0, 3.0, -1.0], strict=True)]  # mean +1.0, SE of the diffs 1.47
    far = [b + d for b, d in zip(best, [6.0, 14.0, 8.0, 12.0], strict=True)]  # mean +10.0, SE 1.83
    sel = select_point({(2, 0.15): best, (4, 0.15): near, (3, 0.15): far})
    d = sel.diff_to_best[(4, 0.15)]
    assert d.mean == pytest.approx(1.0) and d.se == pytest.approx(statistics.stdev([4, -2, 3, -1]) / 2)
    # within one pooled SE: the median of the two others' difference sds (2.94 and 3.65) / sqrt(4) = 1.65
    assert d.mean < statistics.median([statistics.stdev([4, -2, 3, -1]), statistics.stdev([6, 14, 8, 12])]) / 2
    assert sel.best_by_mean == (2, 0.15) and sel.chosen == (4, 0.15)  # the cheaper K wins the tie
    assert sel.candidates == [(2, 0.15), (4, 0.15)]
    assert "one pooled standard error" in sel.rule and "larger K" in sel.rule
    # Without the K preference the lowest mean wins; a consistent +1.0 (SE 0) is no tie at all.
    assert select_point({(2, 0.15): best, (4, 0.15): near}, tie_break="none").chosen == (2, 0.15)
    steady = [b + 1.0 for b in best]
    assert select_point({(2, 0.15): best, (4, 0.15): steady}).chosen == (2, 0.15)


def test_pairing_removes_the_shared_seed_noise() -> None:
    # Seeds differ by 30 FD, far above the 2 FD between the points; the difference is the same on every seed.
    shared = [20.0, 50.0, 80.0, 35.0, 65.0]
    sel = select_point({(3, 0.15): shared, (3, 0.25): [s + 2.0 for s in shared]})
    assert sel.p_best[(3, 0.15)] == 1.0 and sel.chosen == (3, 0.15)
    unpaired_se = math.sqrt(2 * statistics.variance(shared) / len(shared))
    assert unpaired_se > 10 and sel.diff_to_best[(3, 0.25)].se == pytest.approx(0.0, abs=1e-12)


def test_the_bootstrap_is_reproducible_and_seeded() -> None:
    # Every point is best on some seed: each wins some resamples, none all.
    obj = {(2, 0.15): [40.0, 60.0, 52.0, 47.0], (3, 0.15): [55.0, 45.0, 50.0, 49.0],
           (4, 0.15): [50.0, 52.0, 44.0, 51.0]}
    a, b = select_point(obj, seed=7), select_point(obj, seed=7)
    assert a.p_best == b.p_best
    assert select_point(obj, seed=8).p_best != a.p_best
    assert all(0.0 < v < 1.0 for v in a.p_best.values())  # noisy points: nobody is certain


def test_one_seed_falls_back_to_the_tolerance() -> None:
    sel = select_point({(2, 0.15): [40.0], (4, 0.15): [40.3], (3, 0.15): [45.0]})
    assert sel.chosen == (4, 0.15) and sel.n == 1  # 40.3 is within 1 % of 40.0
    assert sel.p_best == {(2, 0.15): 1.0, (4, 0.15): 0.0, (3, 0.15): 0.0}
    assert sel.diff_to_best[(4, 0.15)].interval is None and sel.notes


@pytest.mark.parametrize(
    ("objectives", "message"),
    [
        ({}, "non-empty mapping"),
        ({(3, 0.15): [1.0, 2.0], (4, 0.15): [1.0]}, "same number of seeds"),
        ({(3, 0.15): [1.0, float("nan")]}, "finite"),
        ({(3, 0.15): [1.0, float("inf")]}, "finite"),
        ({(3, 0.15): []}, "non-empty list"),
        ({"K=3": [1.0]}, "(K, gamma) tuples"),
    ],
)
def test_bad_input_is_a_clear_error(objectives: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        select_point(objectives)


def test_bad_options_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="n_boot"):
        select_point({(3, 0.15): [1.0]}, n_boot=0)
    with pytest.raises(ValueError, match="tie_break"):
        select_point({(3, 0.15): [1.0]}, tie_break="smaller_K")  # type: ignore[arg-type]


def test_paired_difference_on_the_readme_numbers() -> None:
    # periodic - Muon on fresh seeds 6-11 (FD): a mean of +20.9 with sd 28.9 over six seeds.
    diffs = [53.9, 40.3, -0.4, 45.6, -13.5, -0.4]
    d = paired_difference(diffs, [0.0] * 6)
    assert d.mean == pytest.approx(20.9167, abs=1e-3) and d.sd == pytest.approx(28.866, abs=1e-3) and d.n == 6
    assert d.interval is not None
    half = 2.5706 * d.sd / math.sqrt(6)  # t(0.975, 5) = 2.5706
    assert d.interval == pytest.approx((d.mean - half, d.mean + half), abs=1e-3)
    assert d.includes_zero and "includes zero" in d.describe("periodic", "muon", "FD")
    clear = paired_difference([1.0, 2.0, 3.0], [10.0, 11.0, 12.5])
    assert not clear.includes_zero and "(a is better)" in clear.describe()
    assert isinstance(clear, PairedDifference) and clear.to_dict()["includes_zero"] is False
    with pytest.raises(ValueError, match="aligned by seed"):
        paired_difference([1.0, 2.0], [1.0])
