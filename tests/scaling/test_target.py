"""time_to_target and the plateau check, on numbers."""

from __future__ import annotations

import math

import pytest

from scaling import ScalingInputError
from scaling.targets import Plateau, TimeToTarget, plateau, time_to_target

STEPS = [600, 800, 1000, 1200]
TIMES = [30.0, 40.0, 52.0, 60.0]
FD = [300.0, 200.0, 150.0, 120.0]


def test_crossing_is_interpolated_in_step_and_time() -> None:
    # 175 lies halfway from 200 (step 800, 40 s) to 150 (step 1000, 52 s).
    r = time_to_target(STEPS, TIMES, FD, 175.0)
    assert r == TimeToTarget(reached=True, step=900.0, time_s=46.0)
    # A quarter of the way from 300 to 200: step 650, time 32.5 s.
    r = time_to_target(STEPS, TIMES, FD, 275.0)
    assert r.step == pytest.approx(650.0) and r.time_s == pytest.approx(32.5)


def test_crossing_exactly_at_a_checkpoint_returns_it() -> None:
    assert time_to_target(STEPS, TIMES, FD, 150.0) == TimeToTarget(True, 1000.0, 52.0)
    assert time_to_target(STEPS, TIMES, FD, 120.0) == TimeToTarget(True, 1200.0, 60.0)


def test_first_crossing_counts_even_if_the_curve_rises_again() -> None:
    r = time_to_target([1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0], [10.0, 4.0, 9.0, 3.0], 5.0)
    assert r.step == pytest.approx(1 + 5 / 6) and r.time_s == pytest.approx(1 + 5 / 6)


def test_reached_at_the_first_checkpoint_is_that_checkpoint_and_flagged_left_censored() -> None:
    # Already below 400 at the first checkpoint: the crossing was earlier, so 600 is an upper bound.
    assert time_to_target(STEPS, TIMES, FD, 400.0) == TimeToTarget(True, 600.0, 30.0, left_censored=True)
    # Exactly at the target there: a crossing measured at that checkpoint, not censored.
    exact = time_to_target(STEPS, TIMES, FD, float(FD[0]))
    assert exact.reached and exact.step == 600.0 and not exact.left_censored
    assert not time_to_target(STEPS, TIMES, FD, 200.0).left_censored  # an interpolated crossing


def test_unreached_target_is_never_extrapolated() -> None:
    assert time_to_target(STEPS, TIMES, FD, 119.9) == TimeToTarget(False, None, None)


def test_a_missing_checkpoint_neither_reaches_nor_is_interpolated_from() -> None:
    fd = [300.0, math.nan, 150.0, 120.0]
    assert time_to_target(STEPS, TIMES, fd, 175.0) == TimeToTarget(True, 1000.0, 52.0)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1, 2, 3], [1.0, 2.0], [3.0, 2.0, 1.0], 2.0), "equal lengths"),
        (([1, 3, 2], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], 2.0), "steps must be finite and strictly increasing"),
        (([1, 1, 2], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], 2.0), "steps must be"),
        (([1, 2, 3], [1.0, 3.0, 2.0], [3.0, 2.0, 1.0], 2.0), "times_s must be"),
        (([1, 2, 3], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], math.nan), "target must be a finite number"),
        (([1, 2, 3], [1.0, 2.0, 3.0], [3.0, 2.0, 1.0], "x"), "target must be a number"),
        (([], [], [], 1.0), "at least one checkpoint"),
    ],
)
def test_bad_input_names_the_argument(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        time_to_target(*args)
    with pytest.raises(ScalingInputError):
        time_to_target(*args)


def test_plateau_flags_a_curve_still_falling_fast() -> None:
    steps = [600, 800, 1000, 1200, 1400, 1600, 1800]
    falling = [400 * 0.9 ** (s / 200) for s in steps]  # -10% per 200 steps: 1 - 0.9^3 = 27.1% over 600 steps
    check = plateau(steps, falling, horizon=1800)
    assert check.checked and check.n_points == 4  # 1200 .. 1800
    assert check.drop == pytest.approx(1 - 0.9**3)
    assert check.undertrained
    flat = [100, 90, 85, 82, 81, 80.5, 80.2]
    check = plateau(steps, flat, horizon=1800)
    # The least-squares slope of log FD over 1200..1800 (82, 81, 80.5, 80.2) is -3.63896e-5 per step, so the drop
    # over the 600-step window is 1 - exp(600 · slope) = 2.1597 %.
    assert check.drop == pytest.approx(0.021597119212, rel=1e-9) and not check.undertrained
    assert plateau(steps, flat, horizon=1800, max_drop=0.01).undertrained


def test_plateau_needs_three_points_in_the_window() -> None:
    check = plateau([1200, 1500, 1800], [300.0, 200.0, 100.0], window=0.2)  # only 1500 and 1800 in 1440..1800
    assert check == Plateau(drop=None, undertrained=False, checked=False, n_points=2, window=0.2, max_drop=0.1)
    with pytest.raises(ValueError, match="window"):
        plateau([1, 2, 3], [3.0, 2.0, 1.0], window=0)


def test_plateau_flags_a_rising_tail_too() -> None:
    steps = [600, 800, 1000, 1200, 1400, 1600, 1800]
    rising = [400 * 1.1 ** (s / 200) for s in steps]  # +10 % per 200 steps: worse by 1.1^3 - 1 = 33.1 %
    check = plateau(steps, rising, horizon=1800)
    assert check.checked and check.drop == pytest.approx(1 - 1.1**3)
    assert check.rising and not check.undertrained
    slight = [100.0, 99.0, 98.0, 98.5, 99.0, 99.5, 100.0]  # up 1.5 % over the window: neither flag
    check = plateau(steps, slight, horizon=1800)
    assert check.drop < 0 and not check.rising and not check.undertrained
