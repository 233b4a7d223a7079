"""Statistics a reader can check: one alpha budget over comparisons and looks, power at the level a claim must
pass, P(best) withheld below 5 seeds, and the chosen line's warning when it is worse than every baseline."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from scaling import ScalingInputError
from scaling.claims import (
    MIN_SEEDS_P_BEST,
    alpha_budget,
    choice_warning,
    co_primary_power,
    holm_in_budget,
    p_best_text,
    pair_power_bounds,
    power_at_alpha,
)


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


def test_pair_power_bounds_by_hand() -> None:
    # Both with chances 0.9 and 0.8: they fail together at most 0.1 + 0.2, and never more often than the weaker.
    assert pair_power_bounds([0.9, 0.8]) == (pytest.approx(0.7), 0.8)
    assert pair_power_bounds([0.3, 0.4]) == (0.0, 0.3)
    assert pair_power_bounds([0.9, 0.9, 0.9]) == (pytest.approx(0.7), 0.9)
    with pytest.raises(ScalingInputError, match=r"powers\[1\] must be a probability in \[0, 1\], got 1.2"):
        pair_power_bounds([0.5, 1.2])
    with pytest.raises(ScalingInputError, match="powers must hold at least one"):
        pair_power_bounds([])


def test_co_primary_power_a_case_computed_by_hand() -> None:
    # n = 5 seeds, alpha 0.05: the critical t is t(0.975, 4) = 2.776. A first crossing whose standard error puts a
    # 10 % saving (log 1/0.9 = 0.1054) exactly at the critical value is detected in its direction half the time;
    # steps above with no spread at all detect it always: the pair detects it exactly when the first crossing does.
    n, effect_log = 5, -math.log(0.9)
    crit = stats.t.ppf(0.975, n - 1)
    sd = effect_log / crit * math.sqrt(n)
    pair = co_primary_power(sd_seed_log={"first": sd, "steps_above": 0.0}, n=n, alpha=0.05)
    assert pair.toward == {"first": pytest.approx(0.5), "steps_above": 1.0}
    assert (pair.lo, pair.hi) == (pytest.approx(0.5), pytest.approx(0.5))
    # The first crossing's own statement is the one `power_at_alpha` prints: 0.5 plus the far tail t(4) < -5.55.
    first = pair.endpoints["first"]
    assert first is not None and first.power_for_effect == pytest.approx(0.5 + stats.t.cdf(-2 * crit, n - 1))
    # Two endpoints with that spread: anywhere from never both to half the time.
    both = co_primary_power(sd_seed_log={"first": sd, "steps_above": sd}, n=n, alpha=0.05)
    assert (both.lo, both.hi) == (0.0, pytest.approx(0.5))
    assert ("between 0 % and 50 % (each, in the saving's direction: first crossing 50 %, steps above the target "
            "50 %)") in both.text()


def test_co_primary_power_bounds_are_ordered_below_each_endpoint_and_grow_with_seeds() -> None:
    kw = {"alpha": 0.05 / 12, "var_timing_log": 0.02**2, "df_timing": 19}
    sds = {"first": 0.10, "steps_above": 0.15}
    lows, highs = [], []
    for n in (4, 8, 16, 32, 64, 128):
        p = co_primary_power(sd_seed_log=sds, n=n, **kw)  # type: ignore[arg-type]
        first = power_at_alpha(sd_seed_log=0.10, n=n, **kw)  # type: ignore[arg-type]
        above = power_at_alpha(sd_seed_log=0.15, n=n, **kw)  # type: ignore[arg-type]
        assert 0 <= p.lo <= p.hi <= min(first.power_for_effect, above.power_for_effect) + 1e-12
        assert p.hi == pytest.approx(min(p.toward.values()))
        lows.append(p.lo)
        highs.append(p.hi)
    # At 16 seeds the first crossing alone has 58 % and steps above 25 %: the bound cannot rule out never both.
    assert lows == sorted(lows) and highs == sorted(highs) and lows[2] == 0.0 and lows[-1] > 0.8
    # The pair needs more seeds than either endpoint alone; at that count the lower bound reaches 80 %, one fewer
    # does not.
    p = co_primary_power(sd_seed_log=sds, n=6, **kw)  # type: ignore[arg-type]
    alone = [s.seeds_for_effect or 0 for s in p.endpoints.values() if s is not None]
    assert p.seeds_for_effect is not None and p.seeds_for_effect >= max(alone) > 0
    assert co_primary_power(sd_seed_log=sds, n=p.seeds_for_effect, **kw).lo >= 0.8  # type: ignore[arg-type]
    assert co_primary_power(sd_seed_log=sds, n=p.seeds_for_effect - 1, **kw).lo < 0.8  # type: ignore[arg-type]
    # The first crossing alone (what `power` prints) claims more than the pair can.
    assert p.endpoints["first"].power_for_effect > p.hi  # type: ignore[union-attr]
    assert p.to_dict()["seeds_for_effect"] == p.seeds_for_effect and p.to_dict()["text"] == p.text()


def test_co_primary_power_without_an_endpoints_ratio_is_zero_and_bad_input_is_named() -> None:
    none = co_primary_power(sd_seed_log={"first": 0.1, "steps_above": None}, n=6, alpha=0.01)
    assert (none.lo, none.hi, none.seeds_for_effect) == (0.0, 0.0, None)
    assert none.text().endswith("steps above the target has no ratio, so no claim can stand (power 0)")
    # A timing spread no seed count can beat leaves the pair without a seed count too.
    wide = co_primary_power(sd_seed_log={"first": 0.05, "steps_above": 0.05}, n=6, alpha=0.01,
                            var_timing_log=0.2**2, df_timing=2)
    assert wide.seeds_for_effect is None and "on both (the lower bound): > 1000" in wide.text()
    with pytest.raises(ScalingInputError, match=r"sd_seed_log\['steps_above'\] must be finite and >= 0"):
        co_primary_power(sd_seed_log={"first": 0.1, "steps_above": float("nan")}, n=6, alpha=0.01)
    with pytest.raises(ScalingInputError, match="sd_seed_log must map each co-primary endpoint"):
        co_primary_power(sd_seed_log={}, n=6, alpha=0.01)
    with pytest.raises(ScalingInputError, match="n must be an integer >= 1, got 0"):
        co_primary_power(sd_seed_log={"first": 0.1, "steps_above": None}, n=0, alpha=0.01)
    with pytest.raises(ScalingInputError, match="alpha and power must be in"):
        co_primary_power(sd_seed_log={"first": 0.1}, n=6, alpha=1.5)


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
