"""Time to best quality, its robust variant, volatility flags, the common target and savings."""

from __future__ import annotations

import math

import pytest

from scaling import ScalingError, ScalingInputError
from scaling.targets import Checkpoints, savings, time_to_best, time_to_common_target

# A run shaped like the paper's 4B one: FD settles near 42 and jumps to 62.89 at 45k before coming back.
STEPS = [5000 * (i + 1) for i in range(12)]  # 5k .. 60k
TIMES = [0.5 * s for s in STEPS]  # effective seconds, 0.5 s per step
FD_4B = [120.0, 85.0, 66.0, 55.0, 49.0, 46.0, 44.0, 42.6, 62.89, 42.1, 41.8, 41.9]


def test_paper_volatile_checkpoint_is_flagged_and_best_is_kept_apart_from_endpoint() -> None:
    r = time_to_best(STEPS, TIMES, FD_4B)
    assert r.volatile_indices == (8,)
    assert r.volatile_steps == (45000,)
    assert r.best_step == 55000
    assert r.best_fd == 41.8
    assert r.best_time_s == 27500.0
    assert r.endpoint_step == 60000
    assert r.endpoint_fd == 41.9
    assert not r.endpoint_is_best
    assert r.n_checkpoints == 12
    assert not r.diverged


def test_robust_variant_picks_the_earlier_checkpoint_within_two_percent() -> None:
    r = time_to_best(STEPS, TIMES, FD_4B)
    # The spike is left out, then a centred median of 3: 40k -> median(44, 42.6, 42.1) = 42.6,
    # 50k -> 42.1, 55k -> 41.9, 60k (end, window of 2) -> 41.85, the smoothed best.
    assert r.smoothed_best_fd == pytest.approx(41.85)
    assert r.smoothed_fd[7] == pytest.approx(42.6)
    assert math.isnan(r.smoothed_fd[8])
    assert r.smoothed_fd[-1] == pytest.approx(41.85)
    # 42.6 <= 41.85 * 1.02 = 42.687, and the 35k checkpoint (smoothed 44) is not.
    assert r.robust_index == 7
    assert r.robust_step == 40000
    assert r.robust_time_s == 20000.0
    assert r.robust_fd == 42.6
    assert r.robust_time_s < r.best_time_s
    # A tighter tolerance moves the robust checkpoint later: 41.85 * 1.005 = 42.06 is first met at 55k.
    assert time_to_best(STEPS, TIMES, FD_4B, tol=0.005).robust_step == 55000


def test_volatility_tolerance_and_end_points() -> None:
    fd = [50.0, 45.0, 49.5, 44.0, 43.0]  # a 10% bump at index 2
    assert time_to_best(range(5), range(5), fd).volatile_indices == ()
    assert time_to_best(range(5), range(5), fd, volatility_tol=0.05).volatile_indices == (2,)
    # An end point has one neighbour only and is never volatile, however bad.
    assert time_to_best(range(3), range(3), [50.0, 45.0, 90.0]).volatile_indices == ()
    # Worse than one neighbour only is not volatile.
    assert time_to_best(range(3), range(3), [100.0, 70.0, 60.0]).volatile_indices == ()


def test_diverged_checkpoints_are_reported_and_never_best() -> None:
    fd = [60.0, 50.0, 44.0, 80.0, math.nan, math.inf]
    r = time_to_best(range(0, 600, 100), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], fd)
    assert r.diverged
    assert r.diverged_indices == (4, 5)
    assert r.best_step == 200
    assert math.isnan(r.endpoint_fd)  # the endpoint diverged: reported as such, not replaced by best-seen
    # Index 3 sits next to a diverged checkpoint: no second neighbour, so not volatile.
    assert r.volatile_indices == ()
    assert math.isnan(r.smoothed_fd[4]) and math.isnan(r.smoothed_fd[5])


def test_single_checkpoint_and_ties() -> None:
    r = time_to_best([100], [12.5], [30.0])
    assert (r.best_step, r.robust_step, r.endpoint_step) == (100, 100, 100)
    assert r.best_time_s == r.robust_time_s == 12.5
    # Ties go to the earliest checkpoint.
    assert time_to_best([1, 2, 3], [1.0, 2.0, 3.0], [40.0, 30.0, 30.0]).best_step == 2


def test_checkpoints_from_rows() -> None:
    rows = list(zip(STEPS, TIMES, FD_4B, strict=True))
    ckpt = Checkpoints.from_rows(rows)
    assert ckpt.steps == tuple(STEPS)
    r = time_to_best(*ckpt)
    assert (r.best_step, r.robust_step, r.volatile_steps) == (55000, 40000, (45000,))


@pytest.mark.parametrize(
    ("steps", "times", "fd", "match"),
    [
        ([1, 2], [1.0, 2.0], [3.0], "equal lengths"),
        ([], [], [], "at least one checkpoint"),
        ([2, 1], [1.0, 2.0], [3.0, 3.0], "strictly increasing"),
        ([1, 1], [1.0, 2.0], [3.0, 3.0], "strictly increasing"),
        ([1.5, 2], [1.0, 2.0], [3.0, 3.0], "whole numbers"),
        ([1, 2], [1.0, math.nan], [3.0, 3.0], "finite"),
        ([1, 2], [2.0, 1.0], [3.0, 3.0], "must not decrease"),
        ([1, 2], [1.0, 2.0], [3.0, -1.0], "fd must be >= 0"),
        ([1, 2], [1.0, 2.0], [math.nan, math.nan], "every checkpoint diverged"),
        ([1, 2], [1.0, 2.0], ["a", 3.0], "sequence of numbers"),
    ],
)
def test_bad_checkpoints_raise(steps: list, times: list, fd: list, match: str) -> None:
    with pytest.raises(ScalingInputError, match=match):
        time_to_best(steps, times, fd)


def test_bad_tolerances_raise() -> None:
    with pytest.raises(ScalingError, match="tol"):
        time_to_best([1], [1.0], [1.0], tol=-0.1)
    with pytest.raises(ScalingError, match="volatility_tol"):
        time_to_best([1], [1.0], [1.0], volatility_tol=math.nan)


def test_common_target_is_the_worst_arms_smoothed_best() -> None:
    steps = [1000, 2000, 3000, 4000, 5000]
    arms = {
        # smoothed (median of 3, ends mean of 2): 75, 70, 60, 55, 52.5 -> best 52.5
        "adamw": Checkpoints(steps, [10.0, 20.0, 30.0, 40.0, 50.0], [80.0, 70.0, 60.0, 55.0, 50.0]),
        # smoothed: 57.5, 55, 50, 48, 47 -> first <= 53.55 at 3000
        "muon": Checkpoints(steps, [12.0, 24.0, 36.0, 48.0, 60.0], [60.0, 55.0, 50.0, 48.0, 46.0]),
        # plain tuples work too; smoothed: 62.5, 58, 53, 50, 49 -> first <= 53.55 at 3000
        "periodic": (steps, [9.0, 18.0, 27.0, 36.0, 45.0], [65.0, 60.0, 53.0, 50.0, 47.0]),
    }
    r = time_to_common_target(arms)
    assert r.reference_arm == "adamw"
    assert r.target_fd == pytest.approx(52.5 * 1.02)
    assert r.step == {"adamw": 5000, "muon": 3000, "periodic": 3000}
    assert r.time_s == {"adamw": 50.0, "muon": 36.0, "periodic": 27.0}
    assert r.diverged_arms == ()


def test_common_target_with_a_diverged_arm_and_a_lucky_dip() -> None:
    steps = [1, 2, 3, 4, 5]
    arms = {
        "adamw": (steps, [1.0, 2.0, 3.0, 4.0, 5.0], [70.0, 60.0, 55.0, 52.0, 51.0]),  # smoothed best 51.5
        # A single lucky dip to 50 at step 2 does not count: the smoothed FD there is median(80, 50, 58) = 58;
        # step 3 has median(50, 58, 52) = 52 <= 51.5 * 1.02 = 52.53.
        "muon": (steps, [1.0, 2.0, 3.0, 4.0, 5.0], [80.0, 50.0, 58.0, 52.0, 50.0]),
        "broken": (steps, [1.0, 2.0, 3.0, 4.0, 5.0], [math.nan] * 5),
    }
    r = time_to_common_target(arms)
    assert r.reference_arm == "adamw"
    assert r.target_fd == pytest.approx(51.5 * 1.02)
    assert r.step["muon"] == 3
    assert r.time_s["muon"] == 3.0
    assert r.time_s["broken"] is None and r.step["broken"] is None
    assert r.diverged_arms == ("broken",)


def test_common_target_bad_input() -> None:
    with pytest.raises(ScalingInputError, match="at least one arm"):
        time_to_common_target({})
    with pytest.raises(ScalingInputError, match="arm 'muon'"):
        time_to_common_target({"muon": ([1, 2], [1.0], [3.0, 2.0])})
    with pytest.raises(ScalingInputError, match="expected Checkpoints"):
        time_to_common_target({"muon": 3.0})  # type: ignore[dict-item]


def test_savings_single_seed() -> None:
    s = savings({"periodic": 80.0, "muon": 100.0, "adamw": 160.0})
    assert set(s) == {"muon", "adamw"}
    assert s["muon"].mean_pct == pytest.approx(20.0)
    assert s["adamw"].mean_pct == pytest.approx(50.0)
    assert s["muon"].n == 1 and s["muon"].std_pct is None


def test_savings_with_seeds_paired_by_id() -> None:
    s = savings({"periodic": [80.0, 90.0, 85.0], "muon": [100.0, 100.0, 100.0]}, baselines=["muon"])
    assert s["muon"].per_seed_pct == pytest.approx((20.0, 10.0, 15.0))
    assert s["muon"].mean_pct == pytest.approx(15.0)
    assert s["muon"].std_pct == pytest.approx(5.0)
    assert s["muon"].n == 3
    # Mappings pair by seed id; seeds missing on one side are left out.
    s = savings({"periodic": {1: 80.0, 2: 90.0, 7: 10.0}, "adamw": {2: 120.0, 1: 100.0}})
    assert s["adamw"].seeds == (1, 2)
    assert s["adamw"].per_seed_pct == pytest.approx((20.0, 25.0))


def test_savings_from_time_to_best_results() -> None:
    periodic = time_to_best(STEPS, TIMES, FD_4B)  # best at 27500 s, robust at 20000 s
    muon = time_to_best(STEPS, [1.0 * s for s in STEPS], FD_4B)  # the same curve, twice as slow
    assert savings({"periodic": periodic, "muon": muon})["muon"].mean_pct == pytest.approx(50.0)
    assert savings({"periodic": periodic, "muon": 40000.0}, robust=True)["muon"].mean_pct == pytest.approx(50.0)


def test_savings_bad_input() -> None:
    with pytest.raises(ScalingInputError, match="periodic arm 'periodic' not in times"):
        savings({"muon": 1.0})
    with pytest.raises(ScalingInputError, match="baselines"):
        savings({"periodic": 1.0, "muon": 1.0}, baselines=["adamw"])
    with pytest.raises(ScalingInputError, match="no baseline"):
        savings({"periodic": 1.0})
    with pytest.raises(ScalingInputError, match="> 0"):
        savings({"periodic": 1.0, "muon": 0.0})
    with pytest.raises(ScalingInputError, match="no seed in common"):
        savings({"periodic": {1: 1.0}, "muon": {2: 1.0}})
    with pytest.raises(ScalingInputError, match="expected a time"):
        savings({"periodic": [None], "muon": [1.0]})  # type: ignore[list-item]
