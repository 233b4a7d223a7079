"""The sustained crossing, censoring, the Kaplan-Meier restricted mean, the paired ratio with its bootstrap interval,
the saving on it, and size-fit data that keep censored runs: on numbers worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling import ScalingInputError, TransferRun
from scaling.controls import grid_crossings
from scaling.fits import fit_scaling
from scaling.survival import (
    Crossing,
    RestrictedRatio,
    censored_fit_data,
    crossings,
    one_target,
    restricted_mean,
    restricted_ratio,
    restricted_saving,
    steps_above,
    sustained_crossing,
)
from scaling.targets import TimeToTarget, time_to_target

STEPS = [1, 2, 3, 4, 5]


def test_sustained_crossing_is_the_entry_into_the_last_stretch_below_the_target() -> None:
    # Crosses 3.5 between 1 and 2 (first), rises to 4 at 3, crosses again between 3 and 4 and stays: sustained.
    values = [5.0, 3.0, 4.0, 2.0, 1.0]
    assert time_to_target(STEPS, STEPS, values, 3.5).step == pytest.approx(1.75)
    assert sustained_crossing(STEPS, [10.0, 20.0, 30.0, 40.0, 50.0], values, 3.5) == TimeToTarget(True, 3.25, 32.5)


def test_a_run_back_above_the_target_at_its_end_has_no_sustained_crossing() -> None:
    # The cpu-m pattern: crossed on the way down, above the target again at the end.
    values = [9.0, 4.0, 3.0, 5.0]
    assert time_to_target(STEPS[:4], STEPS[:4], values, 4.5).reached
    assert sustained_crossing(STEPS[:4], STEPS[:4], values, 4.5) == TimeToTarget(False, None, None)
    # A last point without a value does not hold the target either.
    assert not sustained_crossing(STEPS[:4], STEPS[:4], [9.0, 4.0, 3.0, math.nan], 4.5).reached


def test_a_run_that_stopped_before_its_horizon_is_not_sustained() -> None:
    assert sustained_crossing([1, 2, 3], [1, 2, 3], [9.0, 2.0, 1.0], 5.0).step == pytest.approx(1 + 4 / 7)
    assert not sustained_crossing([1, 2, 3], [1, 2, 3], [9.0, 2.0, 1.0], 5.0, horizon=4).reached


def test_every_point_below_is_left_censored_at_the_first_and_exact_is_not() -> None:
    assert sustained_crossing([1, 2], [1, 2], [2.0, 1.0], 3.0) == TimeToTarget(True, 1.0, 1.0, left_censored=True)
    assert sustained_crossing([1, 2], [1, 2], [3.0, 1.0], 3.0) == TimeToTarget(True, 1.0, 1.0, left_censored=False)
    # A point without a value before the last stretch: the crossing is at the first point after it.
    assert sustained_crossing([1, 2, 3], [1, 2, 3], [math.nan, 2.0, 1.0], 3.0) == TimeToTarget(True, 2.0, 2.0)


def test_sustained_crossing_refuses_what_time_to_target_refuses() -> None:
    with pytest.raises(ScalingInputError, match="strictly increasing"):
        sustained_crossing([2, 1], [1, 2], [1.0, 2.0], 1.5)
    with pytest.raises(ScalingInputError, match="finite number"):
        sustained_crossing([1, 2], [1, 2], [1.0, 2.0], math.inf)


def test_crossings_gives_both_endpoints_and_censors_at_the_last_point() -> None:
    both = crossings(STEPS, STEPS, [5.0, 3.0, 4.0, 2.0, 1.0], 3.5)
    assert both["first"] == Crossing(1.75, "reached", 1.75)
    assert both["sustained"] == Crossing(3.25, "reached", 3.25)
    never = crossings(STEPS, STEPS, [9.0, 8.0, 7.0, 6.0, 5.0], 3.5)
    assert never["first"] == never["sustained"] == Crossing(5.0, "right_censored")
    assert crossings([10, 20], [1, 2], [1.0, 0.5], 3.0)["first"].status == "left_censored"


def test_steps_above_count_only_up_to_the_horizon_when_the_curve_runs_past_it() -> None:
    # 80, 45, 55, 40 at 100..400 against 50: above to 185.7, again from 250 to 333.3 (185.7 + 50 + 33.3 to 400).
    first = 100 + 100 * 30 / 35
    assert steps_above([100, 200, 300, 400], [80, 45, 55, 40], 50, horizon=400) == pytest.approx(first + 50 + 100 / 3)
    # Cut at 275, where the line from 45 to 55 reads 52.5: above from 250 to 275 only.
    assert steps_above([100, 200, 300, 400], [80, 45, 55, 40], 50, horizon=275) == pytest.approx(first + 25)
    assert steps_above([100, 200, 300, 400], [80, 45, 55, 40], 50, horizon=200) == pytest.approx(first)
    assert steps_above([100, 200], [80, 45], 50, horizon=60) == 60.0  # before the first point: above throughout


def test_restricted_mean_is_the_area_under_the_kaplan_meier_curve() -> None:
    # Every censoring at the horizon: the mean of min(T, tau) = (100 + 200 + 300) / 3.
    rm = restricted_mean([Crossing(100, "reached"), Crossing(200, "reached"), Crossing(300, "right_censored")], 300)
    assert rm.mean == pytest.approx(200.0)
    assert (rm.reached, rm.right_censored, rm.left_censored) == (2, 1, 0)
    # A run censored at 150 (stopped early): S = 1 to 100, 3/4 to 200, 3/4 x 1/2 = 3/8 to 300.
    # Area = 100 + 0.75 x 100 + 0.375 x 100 = 212.5; the curve's drops are at the events only.
    rm = restricted_mean([Crossing(100, "reached"), Crossing(150, "right_censored"), Crossing(200, "reached"),
                          Crossing(300, "right_censored")], 300)
    assert rm.mean == pytest.approx(212.5)
    assert rm.curve == ((100.0, 0.75), (200.0, 0.375))


def test_restricted_mean_counts_a_late_crossing_at_the_horizon_and_a_left_censored_one_at_its_point() -> None:
    rm = restricted_mean([Crossing(400, "reached"), Crossing(50, "left_censored")], 300)
    assert rm.mean == pytest.approx((300 + 50) / 2)
    assert rm.left_censored == 1 and rm.reached == 1
    assert restricted_mean([Crossing(300, "right_censored")] * 3, 300).mean == pytest.approx(300.0)
    # Ties: two events at 100 among four at risk drop the curve to 1/2 at once.
    tied = restricted_mean([Crossing(100, "reached"), Crossing(100, "reached"), Crossing(100, "right_censored"),
                            Crossing(300, "right_censored")], 300)
    assert tied.mean == pytest.approx(100 + 0.5 * 200)


def test_restricted_ratio_keeps_censored_seeds_and_counts_them() -> None:
    a = {0: Crossing(120, "reached"), 1: Crossing(300, "right_censored"), 2: Crossing(150, "reached")}
    b = {0: Crossing(100, "reached"), 1: Crossing(200, "reached"), 2: Crossing(50, "left_censored")}
    r = restricted_ratio(a, b, horizon=300, names=("periodic", "muon"))
    assert r.ratio == pytest.approx((120 + 300 + 150) / (100 + 200 + 50))
    assert r.censoring == {"periodic": {"reached": 2, "right_censored": 1, "left_censored": 0},
                           "muon": {"reached": 2, "right_censored": 0, "left_censored": 1}}
    assert r.n == 3 and r.lo is not None and r.hi is not None and r.lo < r.ratio < r.hi
    doc = r.to_dict()
    assert doc["censoring"] == r.censoring and doc["mean"] == r.ratio and doc["endpoint"] == "first"


def test_restricted_ratio_interval_is_t_on_the_bootstrap_standard_error() -> None:
    rng = np.random.default_rng(3)
    a = {s: Crossing(float(200 + 20 * rng.standard_normal()), "reached") for s in range(8)}
    b = {s: Crossing(float(a[s].step / 1.2 * math.exp(0.05 * rng.standard_normal())), "reached") for s in range(8)}
    r = restricted_ratio(a, b, horizon=500, n_boot=4000, seed=1)
    from scipy import stats

    half = stats.t.ppf(0.975, 7) * r.log_se  # type: ignore[operator]
    assert (r.lo, r.hi) == pytest.approx((r.ratio * math.exp(-half), r.ratio * math.exp(half)))
    # Without censoring the restricted means are plain means: the bootstrap standard error of the log ratio of
    # paired means is close to its delta-method value, sd(d_i) / sqrt(n) with d_i = a_i / mean(a) - b_i / mean(b).
    ta, tb = np.array([a[s].step for s in range(8)]), np.array([b[s].step for s in range(8)])
    delta = np.std(ta / ta.mean() - tb / tb.mean(), ddof=1) / math.sqrt(8)
    assert r.log_se == pytest.approx(delta, rel=0.15)
    assert r.p_value is not None and r.p_value < 1e-4  # a 1.2x ratio over 8 tight seeds
    # Reproducible by its seed.
    assert restricted_ratio(a, b, horizon=500, n_boot=4000, seed=1) == r


def test_restricted_ratio_with_identical_arms_is_exactly_one_and_one_seed_has_no_interval() -> None:
    same = {s: Crossing(100.0 + s, "reached") for s in range(4)}
    r = restricted_ratio(same, same, horizon=300)
    assert (r.ratio, r.lo, r.hi, r.log_se, r.p_value) == (1.0, 1.0, 1.0, 0.0, 1.0)
    one = restricted_ratio({0: Crossing(100, "reached")}, {0: Crossing(50, "reached")}, horizon=300)
    assert one.ratio == 2.0 and one.lo is None and one.p_value is None


def test_restricted_ratio_refuses_unpaired_seeds_and_bad_arguments() -> None:
    with pytest.raises(ScalingInputError, match=r"only in a \['2'\]"):
        restricted_ratio({1: Crossing(1, "reached"), 2: Crossing(1, "reached")}, {1: Crossing(1, "reached")},
                         horizon=10)
    with pytest.raises(ScalingInputError, match="horizon"):
        restricted_ratio({1: Crossing(1, "reached")}, {1: Crossing(1, "reached")}, horizon=0)
    with pytest.raises(ScalingInputError, match="status"):
        Crossing(1, "gone")  # type: ignore[arg-type]
    with pytest.raises(ScalingInputError, match="step"):
        Crossing(math.nan, "reached")


def _ratio(log_se: float, ratio: float, n: int) -> RestrictedRatio:
    seeds = {s: Crossing(100.0, "reached") for s in range(n)}
    base = restricted_ratio(seeds, seeds, horizon=300)
    return RestrictedRatio(**{**base.__dict__, "ratio": ratio, "log_se": log_se})


def test_restricted_saving_adds_the_two_variances_with_welch_degrees_of_freedom() -> None:
    steps = _ratio(log_se=0.04, ratio=1.1, n=6)
    logs = [math.log(0.8), math.log(0.82), math.log(0.79), math.log(0.81)]
    s = restricted_saving(steps, logs)
    q = math.exp(sum(logs) / 4)
    assert s.pct == pytest.approx(100 * (1 - 1.1 * q))
    var_t = np.var(logs, ddof=1) / 4
    var = 0.04**2 + var_t
    df = var**2 / (0.04**4 / 5 + var_t**2 / 3)
    from scipy import stats

    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    center = math.log(1.1) + math.log(q)
    assert s.df == pytest.approx(df)
    assert (s.lo, s.hi) == pytest.approx((100 * (1 - math.exp(center + half)), 100 * (1 - math.exp(center - half))))
    assert s.step_time_ratio == pytest.approx(q) and s.timing_rounds == 4
    assert s.detected is (s.lo > 0)  # type: ignore[operator]


def test_restricted_saving_with_one_timing_round_carries_only_the_seeds_spread() -> None:
    s = restricted_saving(_ratio(log_se=0.05, ratio=1.0, n=5), [math.log(0.85)])
    assert s.pct == pytest.approx(15.0)
    assert s.df == pytest.approx(4.0) and s.se_timing_log is None and s.step_time_lo is None
    with pytest.raises(ScalingInputError, match="one finite log ratio per timing round"):
        restricted_saving(_ratio(0.05, 1.0, 5), [])


def test_grid_crossings_equal_crossings_run_by_run() -> None:
    rng = np.random.default_rng(0)
    grid = np.arange(10.0, 110.0, 10.0)
    values = np.exp(rng.normal(0, 0.3, size=(300, 10))) * np.linspace(3, 1, 10)
    values[::17, 4] = np.nan
    for endpoint in ("first", "sustained"):
        step, status = grid_crossings(grid, values, 1.6, endpoint)  # type: ignore[arg-type]
        for k in range(len(values)):
            c = crossings(grid, grid, values[k], 1.6)[endpoint]  # type: ignore[index]
            assert (step[k], ("reached", "right_censored", "left_censored")[status[k]]) == pytest.approx(
                (c.step, c.status)), (endpoint, k)


def test_one_target_refuses_targets_that_differ_between_rungs() -> None:
    assert one_target({"cpu-xs": 400.0, "cpu-s": 400.0}) == 400.0
    with pytest.raises(ScalingInputError, match=r"not a scaling law.*per target level"):
        one_target({"cpu-xs": 471.6, "cpu-s": 454.5, "cpu-m": 428.6})
    with pytest.raises(ScalingInputError, match=r"no target at rungs \['cpu-m'\]"):
        one_target({"cpu-xs": 400.0, "cpu-m": None})


def _run(arm: str, rung: str, params: int, seed: int, values: list[float]) -> TransferRun:
    steps = [100, 200, 300, 400]
    return TransferRun(rung=rung, parameters=params, arm=arm, seed=seed, lr=None, lr_rule=None, lr_base=None, K=None,
                       gamma=None, run_id=f"{arm}-{rung}-{seed}", state="SUCCEEDED", trial_key="k", attempt=0,
                       checkpoints=(), track=tuple((s, float(s), v) for s, v in zip(steps, values, strict=True)),
                       horizon=400)


def test_censored_fit_data_keeps_censored_runs_and_refuses_cells_mostly_censored() -> None:
    runs = [
        # muon reaches 50 at 250, 350 and never (censored at 400) at the three rungs' seed 0; seed 1 alike.
        *[_run("muon", "s", 1_000, seed, [90, 60, 40, 30]) for seed in (0, 1)],
        *[_run("muon", "m", 4_000, seed, [95, 70, 60, 40]) for seed in (0, 1)],
        _run("muon", "l", 16_000, 0, [99, 90, 80, 70]), _run("muon", "l", 16_000, 1, [99, 80, 60, 45]),
        *[_run("adamw", "s", 1_000, seed, [99, 90, 80, 70]) for seed in (0, 1)],
    ]
    data = censored_fit_data(runs, target=50.0)
    # s: 250 (both); m: 350 (both); l: one reaches at 400 - 100 x 5/15 = 366.7, one censored at 400: 1 of 2 -> refused.
    assert data.data == {"muon": ([1_000.0, 4_000.0], [pytest.approx(250.0), pytest.approx(350.0)])}
    assert data.cells["muon"]["l"]["right_censored"] == 1 and data.cells["muon"]["l"]["restricted_mean"] == \
        pytest.approx((300 + 100 * 10 / 15 + 400) / 2)
    assert any("muon at l: 1 of 2 runs did not reach 50" in r for r in data.refused)
    assert any("adamw at s: 2 of 2" in r for r in data.refused)
    loose = censored_fit_data(runs, target=50.0, max_censored=0.75)
    assert loose.data["muon"][1][2] == pytest.approx((300 + 100 * 10 / 15 + 400) / 2)
    fit = fit_scaling(loose.data, form="A*N^-alpha", alpha_bounds=(-3, 3), n_boot=0)
    assert fit.params["muon"]["alpha"] < 0  # steps to target grow with size here


def test_censored_fit_data_needs_sizes_and_horizons() -> None:
    run = _run("muon", "s", 1_000, 0, [90, 60, 40, 30])
    with pytest.raises(ScalingInputError, match="lack a parameter count or a horizon"):
        censored_fit_data([TransferRun(**{**run.__dict__, "horizon": None})], target=50.0)
    with pytest.raises(ScalingInputError, match="unknown endpoint"):
        censored_fit_data([run], target=50.0, endpoint="last")  # type: ignore[arg-type]
