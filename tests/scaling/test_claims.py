"""Statistics a reader can check: one alpha budget over comparisons and looks, power at the level a claim must
pass, P(best) withheld below 5 seeds, and the chosen line's warning when it is worse than every baseline."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from scaling import ScalingInputError
from scaling.claims import MIN_SEEDS_P_BEST, alpha_budget, choice_warning, holm_in_budget, p_best_text, power_at_alpha


def test_alpha_budget_spreads_alpha_over_looks_then_comparisons() -> None:
    # The evidence profile: 3 rungs x 2 baselines, 2 looks: each look at 0.025, the strongest claim at 0.05 / 12.
    b = alpha_budget(0.05, comparisons=6, looks=2)
    assert b.per_look == pytest.approx(0.025)
    assert b.first_step == pytest.approx(0.05 / 12)
    assert "0.00417" in b.text() and "0.025" in b.text()
    assert b.to_dict()["first_step"] == pytest.approx(0.05 / 12)
    with pytest.raises(ScalingInputError, match="comparisons must be an integer >= 1"):
        alpha_budget(0.05, comparisons=0)
    with pytest.raises(ScalingInputError, match="alpha must be in"):
        alpha_budget(0.5, comparisons=1)


def test_holm_in_budget_tests_at_the_per_look_level_and_counts_every_comparison() -> None:
    b = alpha_budget(0.05, comparisons=3, looks=2)
    # Holm at 0.025: 0.005 x 3 = 0.015 passes; 0.011 x 2 = 0.022 passes; 0.03 does not.
    rejected, adjusted = holm_in_budget({"a": 0.005, "b": 0.011, "c": 0.03}, b)
    assert rejected == {"a", "b"} and adjusted["c"] == pytest.approx(0.03)
    # At 0.05 (one look) 0.03 would also stand: the looks cost something.
    rejected, _ = holm_in_budget({"a": 0.005, "b": 0.011, "c": 0.03}, alpha_budget(0.05, comparisons=3))
    assert rejected == {"a", "b", "c"}
    with pytest.raises(ScalingInputError, match="must count every comparison"):
        holm_in_budget({"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.1}, b)


def test_power_at_alpha_uses_the_t_quantiles_of_the_claims_level() -> None:
    sd, n = 0.1, 6
    at_05 = power_at_alpha(sd_seed_log=sd, n=n, alpha=0.05)
    se = sd / math.sqrt(n)
    detectable = (stats.t.ppf(1 - 0.025, n - 1) + stats.t.ppf(0.8, n - 1)) * se
    assert at_05.se_log == pytest.approx(se) and at_05.df == pytest.approx(5)
    assert at_05.detectable_pct == pytest.approx(100 * (1 - math.exp(-detectable)))
    # At the Holm first step of 6 comparisons and 2 looks the same study detects only a larger saving.
    strict = power_at_alpha(sd_seed_log=sd, n=n, alpha=0.05 / 12)
    assert strict.detectable_pct > at_05.detectable_pct
    assert strict.power_for_effect < at_05.power_for_effect
    assert strict.seeds_for_effect > at_05.seeds_for_effect  # type: ignore[operator]
    # Power at the detectable effect is the power asked for (the shifted-t approximation, to 1 %).
    back = power_at_alpha(sd_seed_log=sd, n=n, alpha=0.05, effect_pct=at_05.detectable_pct)
    assert back.power_for_effect == pytest.approx(0.8, abs=0.01)
    assert "at alpha 0.05 with 6 seeds" in at_05.text()


def test_power_at_alpha_with_a_wide_timing_spread_needs_more_than_any_seed_count() -> None:
    p = power_at_alpha(sd_seed_log=0.05, n=6, alpha=0.01, var_timing_log=0.2**2, df_timing=2)
    assert p.seeds_for_effect is None and "> 1000" in p.text()
    with pytest.raises(ScalingInputError, match="effect_pct"):
        power_at_alpha(sd_seed_log=0.05, n=6, alpha=0.01, effect_pct=0)


def test_p_best_is_a_probability_only_from_five_seeds() -> None:
    assert MIN_SEEDS_P_BEST == 5
    assert p_best_text(0.23, 2) == "too few seeds (n=2)"
    assert p_best_text(0.23, 4) == "too few seeds (n=4)"
    assert p_best_text(0.234, 5) == "0.23"
    assert p_best_text(None, 9) == "-"


def test_choice_worse_than_every_baseline_on_every_seed_says_so_with_counts() -> None:
    # The grid at lr 8: every point 8x worse than both baselines, 2 seeds.
    w = choice_warning("K=3,gamma=0.15", {0: 800.0, 1: 820.0},
                       {"adamw": {0: 101.0, 1: 99.0}, "muon": {0: 95.0, 1: 97.0}})
    assert w is not None
    assert w.worse_on == {"adamw": (2, 2), "muon": (2, 2)} and (w.worse_than_all, w.n) == (2, 2)
    assert "worse than adamw and muon on 2 of 2 seeds" in w.text()
    assert w.chosen_mean == pytest.approx(810.0) and w.baseline_means == {"adamw": 100.0, "muon": 96.0}
    assert w.to_dict()["worse_on"] == {"adamw": [2, 2], "muon": [2, 2]}


def test_choice_warning_counts_per_baseline_when_the_seeds_disagree() -> None:
    # Worse on average than both (101.5 against 100 and 98.3), better than adamw on seeds 1 and 2 and than muon on
    # seed 2: not significant, still said, with the counts per baseline.
    w = choice_warning("p", {0: 110.0, 1: 100.5, 2: 94.0}, {"adamw": {0: 100.0, 1: 101.0, 2: 99.0},
                                                           "muon": {0: 100.0, 1: 100.0, 2: 95.0}})
    assert w is not None
    assert w.worse_on == {"adamw": (1, 3), "muon": (2, 3)} and w.worse_than_all == 1
    assert ("worse than adamw and muon on average; per seed, than adamw on 1 of 3, muon on 2 of 3 and than all of "
            "them on 1 of 3 seeds") in w.text()


def test_no_warning_when_the_choice_beats_or_ties_a_baseline() -> None:
    assert choice_warning("p", {0: 96.0, 1: 96.0}, {"adamw": {0: 100.0, 1: 100.0}, "muon": {0: 95.0, 1: 95.0}}) is None
    assert choice_warning("p", {0: 100.0}, {"adamw": {0: 100.0}}) is None
    assert choice_warning("p", {0: 200.0}, {}) is None
    assert choice_warning("p", {0: 200.0}, {"adamw": {1: 100.0}}) is None  # no common seed
