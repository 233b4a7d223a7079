"""The injection simulation (issue 51, item 1): known steps ratios (0.8, 1.0, 1.2) and a known per-step ratio
injected into real recorded curves (tests/scaling/data/curves.csv, written by record_curves.py beside it), censoring
included, run through the analysis; its 95 % intervals must cover the truth within 2 points. And the controls: a
negative control comes out null, a positive control (identical updates, known per-step cost) shows its saving.

4,000 replications per case (`injection_coverage`'s default, each study's interval from the analysis' own 1,000
bootstrap resamples): the Monte-Carlo standard error of a coverage near 95 % is sqrt(0.95 x 0.05 / 4000) = 0.34
points, so a 2-point band is 5.8 standard errors wide on each side: a sound method does not fail it by chance, and
a method that covers 93 % or less fails it nearly always."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from scaling.controls import RecordedCurve, control_simulation, grid_crossings, injection_coverage, study_log_ratios
from scaling.survival import Crossing, restricted_ratio, steps_above

DATA = Path(__file__).with_name("data") / "curves.csv"
REPLICATIONS = 4000
# The controls' simulation runs the analysis study by study (its verdicts need the whole result): fewer studies.
CONTROL_REPLICATIONS = 1200
# Read the simulated runs up to step 300 of the recorded 480: an arm 0.8x as fast with a slow seed reads the
# recorded curve up to about 480, so the simulation stays on measured points.
HORIZON = 300.0


def _curves() -> list[RecordedCurve]:
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with DATA.open() as f:
        for row in csv.DictReader(f):
            runs.setdefault((row["arm"], row["seed"]), []).append((float(row["step"]), float(row["fd_track"])))
    return [RecordedCurve(tuple(s for s, _ in v), tuple(fd for _, fd in v)) for v in runs.values()]


CURVES = _curves()
# The target by the final_mean rule: 1.1 x the recorded runs' mean final tracking FD (a level reached on the way to
# each run's plateau, so some runs come back above it and the sustained crossing differs from the first).
TARGET = 1.1 * sum(c.values[-1] for c in CURVES) / len(CURVES)


def test_the_recorded_curves_are_real_runs_of_both_arms() -> None:
    assert len(CURVES) == 8 and all(len(c.steps) == 22 and c.steps[-1] == 480 for c in CURVES)
    assert TARGET == pytest.approx(414.4, abs=0.1)
    # The pattern the sustained crossing exists for: runs below the target on the way and above it at the end.
    back_above = [c for c in CURVES if min(c.values) <= TARGET < c.values[-1]]
    assert len(back_above) >= 1


# The sustained crossing at 0.8 is measured below the band: test_sustained_coverage_falls_short_... below.
@pytest.mark.parametrize(("endpoint", "steps_ratio"),
                         [("first", 0.8), ("first", 1.0), ("first", 1.2), ("sustained", 1.0), ("sustained", 1.2)])
def test_the_intervals_cover_the_injected_truth_within_two_points(endpoint: str, steps_ratio: float) -> None:
    c = injection_coverage(CURVES, steps_ratio=steps_ratio, step_time_ratio=0.85, target=TARGET, horizon=HORIZON,
                           endpoint=endpoint, replications=REPLICATIONS)  # type: ignore[arg-type]
    assert abs(c.coverage_steps - 0.95) <= 0.02, c
    assert abs(c.coverage_saving - 0.95) <= 0.02, c
    # Censoring is in the simulation: the slower arm misses the target by the horizon on some seeds.
    slower = "a" if steps_ratio >= 1 else "b"
    assert c.censored_fraction[slower] > 0.05, c
    # Restricted at the horizon the ratio is pulled toward 1 where runs are censored; r = 1 stays exactly 1.
    if steps_ratio == 1.0:
        assert c.true_restricted_ratio == pytest.approx(1.0, abs=0.01)
    else:
        assert min(1.0, steps_ratio) <= c.true_restricted_ratio <= max(1.0, steps_ratio)
    assert c.true_saving_pct == pytest.approx(100 * (1 - c.true_restricted_ratio * 0.85))
    # The estimates centre on the truth (geometric mean over replications, within 2 %).
    assert c.mean_ratio == pytest.approx(c.true_restricted_ratio, rel=0.02)


def test_sustained_coverage_falls_short_when_the_faster_arm_comes_back_up() -> None:
    """The limitation docs/targets.md states, and why. With the searched arm 0.8x the steps it reads the recorded
    curves further along; one of the 8 (Muon, seed 3) dips below the target from step 291 to 333 and is above it
    from 354 on, so on the seeds drawing it the faster arm no longer holds at the horizon (75 % right-censored)
    while the slower arm, still inside the dip, holds: a per-seed ratio near 1.05 where the other 7 curves give
    0.80-0.86. The per-seed values are skewed (skewness 1.2 of the ratio's influence values, 0.0-0.15 in the
    other five cases), and no seed-resampling interval covers that at 6 seeds: the 46 % of studies that draw no
    such seed centre on 0.82 against a truth of 0.85 and cover 80 %, those that draw one cover 98 %. The delta
    method, Fieller's interval, bootstrap-t and Johnson's skew-corrected t did no better (90.2-90.3 %, BCa 80 %);
    12 seeds give 90.6 %, 24 seeds 93.7 %; without that curve 93.4 %. Kept as a test so the number cannot drift;
    `steps_above` is the endpoint that covers (test_the_steps_spent_above_the_target_are_covered_...)."""
    c = injection_coverage(CURVES, steps_ratio=0.8, step_time_ratio=0.85, target=TARGET, horizon=HORIZON,
                           endpoint="sustained", replications=REPLICATIONS)
    assert 0.86 <= c.coverage_steps <= 0.92, c
    assert c.censored_fraction["a"] > 0.05


@pytest.mark.parametrize("steps_ratio", [0.8, 1.0, 1.2])
def test_the_steps_spent_above_the_target_are_covered_where_the_sustained_crossing_is_not(steps_ratio: float) -> None:
    """The continuous alternative to the sustained crossing (`steps_above`): the faster arm's seeds that come back
    above the target add the steps they spend there instead of jumping to the horizon, so the per-seed values are
    not skewed and the same interval covers within 2 points at every injected ratio, 0.8 included."""
    c = injection_coverage(CURVES, steps_ratio=steps_ratio, step_time_ratio=0.85, target=TARGET, horizon=HORIZON,
                           endpoint="steps_above", replications=REPLICATIONS)
    assert abs(c.coverage_steps - 0.95) <= 0.02, c
    assert abs(c.coverage_saving - 0.95) <= 0.02, c
    assert c.censored_fraction == {"a": 0.0, "b": 0.0}  # observed through the horizon: nothing to censor
    # Between 1 and r (the truth is itself simulated: 100,000 seeds, about 0.001 of Monte-Carlo error).
    assert min(1.0, steps_ratio) - 0.005 <= c.true_restricted_ratio <= max(1.0, steps_ratio) + 0.005
    assert c.mean_ratio == pytest.approx(c.true_restricted_ratio, rel=0.02)


def test_steps_above_the_target_count_a_return_above_and_equal_a_held_first_crossing() -> None:
    # First crossing 30/35 of the way from 100 to 200 (185.7); back above from 250 (45 -> 55 crosses 50 halfway)
    # to 333.3 (55 -> 40 crosses it a third of the way): 185.7 + 83.3.
    assert steps_above([100, 200, 300, 400], [80, 45, 55, 40], 50, horizon=400) == pytest.approx(
        100 + 100 * 30 / 35 + 50 + 100 / 3)
    assert steps_above([100, 200, 300, 400], [80, 45, 40, 40], 50, horizon=400) == pytest.approx(100 + 100 * 30 / 35)
    # Stopped above the target before the horizon: above to the horizon. A point without a value counts as above.
    assert steps_above([100, 200, 300], [80, 45, 55], 50, horizon=400) == pytest.approx(185.714 + 50 + 100, abs=1e-3)
    assert steps_above([100, 200, 300], [80, math.nan, 40], 50, horizon=300) == pytest.approx(300.0)


def test_the_vectorised_studies_are_restricted_ratio_study_by_study() -> None:
    """`study_log_ratios` (what `injection_coverage` analyses its thousands of studies with) gives each study the
    log ratio and bootstrap standard error `restricted_ratio(..., seed=k)` gives study k, censoring included."""
    grid = np.round(np.linspace(50, HORIZON, 20))
    rng = np.random.default_rng(3)
    curve = np.asarray(CURVES[3].values)
    rows = np.interp(grid[None, :] / rng.uniform(0.7, 1.3, (24, 1)), np.asarray(CURVES[3].steps), curve)
    sa, ka = grid_crossings(grid, rows[:12], TARGET, "sustained")
    sb, kb = grid_crossings(grid, rows[12:], TARGET, "sustained")
    assert 0 < int(np.sum(ka == 1)) < 12  # some runs right-censored at the horizon, some reached
    center, se = study_log_ratios(sa.reshape(4, 3), ka.reshape(4, 3), sb.reshape(4, 3), kb.reshape(4, 3),
                                  horizon=HORIZON, n_boot=200)
    status = ("reached", "right_censored", "left_censored")
    for k in range(4):
        a = {i: Crossing(float(sa[3 * k + i]), status[ka[3 * k + i]]) for i in range(3)}  # type: ignore[arg-type]
        b = {i: Crossing(float(sb[3 * k + i]), status[kb[3 * k + i]]) for i in range(3)}  # type: ignore[arg-type]
        ratio = restricted_ratio(a, b, horizon=HORIZON, n_boot=200, seed=k)
        assert math.log(ratio.ratio) == pytest.approx(center[k], abs=1e-12)
        assert ratio.log_se == pytest.approx(se[k], rel=1e-9)


@pytest.mark.parametrize("endpoint", ["first", "sustained"])
def test_a_negative_control_comes_out_null_at_its_stated_rate(endpoint: str) -> None:
    sim = control_simulation(CURVES, "negative", target=TARGET, horizon=HORIZON, endpoint=endpoint,  # type: ignore[arg-type]
                             replications=CONTROL_REPLICATIONS)
    # Three checks at alpha / 3 each: a sound pipeline fails the control at most 5 % of the time.
    assert sim.pass_rate >= 0.95 - 0.02, sim
    assert sim.mean_steps_ratio == pytest.approx(1.0, abs=0.01) and abs(sim.mean_saving_pct) < 1.0


def test_a_positive_control_shows_steps_ratio_one_and_its_known_saving() -> None:
    sim = control_simulation(CURVES, "positive", target=TARGET, horizon=HORIZON, step_cost=1.15,
                             replications=CONTROL_REPLICATIONS)
    assert sim.expected_saving_pct == pytest.approx(100 * (1 - 1 / 1.15))
    assert sim.mean_steps_ratio == 1.0  # identical updates: the same crossings, so exactly 1
    assert sim.pass_rate >= 0.99, sim
    assert sim.mean_saving_pct == pytest.approx(sim.expected_saving_pct, abs=0.5)
    assert math.isclose(sim.check_failures["steps_ratio"], 0)


def test_a_recorded_curve_must_be_a_curve() -> None:
    from scaling import ScalingInputError

    with pytest.raises(ScalingInputError, match="at least 2 points"):
        RecordedCurve((1.0,), (2.0,))
    with pytest.raises(ScalingInputError, match="increase strictly"):
        RecordedCurve((2.0, 1.0), (2.0, 1.0))
    with pytest.raises(ScalingInputError, match="finite"):
        RecordedCurve((1.0, 2.0), (2.0, math.nan))
