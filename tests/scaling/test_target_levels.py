"""Steps-to-target fits per target level (`scaling.fits.fit_target_levels`), on synthetic runs with known crossings:
FD falls linearly from 300 at `slope x (N0 / N)^0.3` per step, so steps to any level L are (300 - L) / that, an
exponent of -0.3 at every level. Rungs whose targets differ (250 at cpu-xs, 230 at cpu-s, 210 at cpu-m) fitted at
their own targets mix size with the target's difficulty (exponent -0.59); fitted per level they give -0.3."""

from __future__ import annotations

import math

import pytest

from scaling import ScalingInputError, TransferRun
from scaling.fits import fit_scaling, fit_target_levels, target_levels

SIZES = {"cpu-xs": 300_000, "cpu-s": 1_000_000, "cpu-m": 2_300_000}
TARGETS = {"cpu-xs": 250.0, "cpu-s": 230.0, "cpu-m": 210.0}
SLOPE = {"periodic": 8.0, "adamw": 5.0}
TRACK = tuple(range(2, 25, 2))  # horizon 24: the first point (step 2) is above every level, no left-censoring


def _run(rung: str, arm: str, seed: int, *, slow: float = 1.0, state: str = "SUCCEEDED") -> TransferRun:
    rate = SLOPE[arm] * (SIZES["cpu-xs"] / SIZES[rung]) ** 0.3 / slow
    track = tuple((s, 0.01 * s, 300.0 - rate * s) for s in TRACK)
    return TransferRun(rung=rung, parameters=SIZES[rung], arm=arm, seed=seed, lr=0.02, lr_rule="unchanged",
                       lr_base=0.02, K=None, gamma=None, run_id=f"{rung}-{arm}-{seed}", state=state,
                       trial_key=f"{arm}.{rung},seed={seed}", attempt=0, checkpoints=track[-3:], track=track,
                       horizon=24)


def _steps(arm: str, rung: str, level: float) -> float:
    return (300.0 - level) / (SLOPE[arm] * (SIZES["cpu-xs"] / SIZES[rung]) ** 0.3)


RUNS = [_run(g, a, s) for g in SIZES for a in SLOPE for s in (0, 1)]


def test_levels_are_the_distinct_declared_targets_loosest_first() -> None:
    # 250 and 250 x (1 + 1e-12) are one level (rounding in a rule's arithmetic), 230 another.
    assert target_levels({"cpu-xs": 250.0, "cpu-s": 230.0, "cpu-m": 250.0 * (1 + 1e-12)}) == pytest.approx(
        (250.0, 230.0), rel=1e-11)
    with pytest.raises(ScalingInputError, match=r"no target at rungs \['cpu-s'\]"):
        target_levels({"cpu-xs": 250.0, "cpu-s": None})


def test_each_level_gives_the_true_exponent_where_the_rungs_own_targets_do_not() -> None:
    levels = fit_target_levels(RUNS, TARGETS, n_boot=0)
    assert levels.levels == (250.0, 230.0, 210.0)
    # The mixed fit: each rung at its own target, as a fit over the runs' own crossings did.
    own = {"periodic": ([float(SIZES[g]) for g in SIZES], [_steps("periodic", g, TARGETS[g]) for g in SIZES])}
    mixed = fit_scaling(own, form="A*N^-alpha", alpha_bounds=(-3, 3), n_boot=0).params["periodic"]["alpha"]
    # Least squares in log space through the three (size, own-target steps) points: the slope of their logs.
    x = [math.log(SIZES[g]) for g in SIZES]
    y = [math.log(_steps("periodic", g, TARGETS[g])) for g in SIZES]
    mx, my = sum(x) / 3, sum(y) / 3
    slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum((a - mx) ** 2 for a in x)
    assert mixed == pytest.approx(-slope, abs=1e-4)
    assert mixed < -0.55  # nearly twice the true exponent: size mixed with the targets' difficulty
    for level in levels.levels:
        for endpoint in ("first", "sustained"):  # straight falling curves: the sustained crossing is the first
            at = levels.at(level, endpoint)
            assert at.fit is not None and at.fit.params["periodic"]["alpha"] == pytest.approx(-0.3, abs=1e-4)
            assert at.data.cells["periodic"]["cpu-m"]["restricted_mean"] == pytest.approx(
                _steps("periodic", "cpu-m", level))


def test_a_level_a_rung_does_not_reach_is_censored_there_and_the_headline_has_the_fewest_censored() -> None:
    """AdamW at 5 per step reaches 210 only at cpu-xs by step 24 (cpu-s needs 25.8 steps, cpu-m 33.2) and 230
    not at cpu-m (25.8): censored there, each such cell refused and named. The headline is 250, where no run is
    censored."""
    levels = fit_target_levels(RUNS, TARGETS, n_boot=0)
    assert levels.headline == 250.0 and levels.at().censored == 0
    assert [levels.at(v).censored for v in levels.levels] == [0, 2, 4]
    at_230 = levels.at(230.0)
    assert at_230.data.cells["adamw"]["cpu-m"] == {**at_230.data.cells["adamw"]["cpu-m"], "reached": 0,
                                                    "right_censored": 2, "restricted_mean": 24.0}
    assert "adamw at cpu-m: 2 of 2 runs did not reach 230 (first) by step 24" in at_230.data.refused
    assert at_230.fit is not None and at_230.fit.sizes["adamw"] == (3e5, 1e6)  # fitted on the two rungs it reached
    assert "adamw" not in levels.at(210.0).data.data  # one rung left: refused, said so
    assert "adamw: fewer than two rungs left to fit" in levels.at(210.0).data.refused
    doc = levels.to_dict()
    assert doc["headline"] == 250.0 and doc["fits"]["210"]["first"]["censored"] == 4
    assert doc["fits"]["250"]["sustained"]["fit"]["alpha"]["periodic"] == pytest.approx(-0.3, abs=1e-4)


def test_a_seed_that_misses_the_level_is_counted_at_the_horizon_not_dropped() -> None:
    # periodic seed 2 at cpu-m twice as slow: 90 / 2.17 = 41.5 steps to 210, past the horizon of 24; a diverged
    # seed at cpu-s never reaches either. Both stay in their cells, right-censored at 24.
    runs = [*RUNS, _run("cpu-m", "periodic", 2, slow=2.0), _run("cpu-s", "periodic", 2, state="DIVERGED", slow=9.0),
            _run("cpu-xs", "periodic", 2)]
    cell = fit_target_levels(runs, TARGETS, n_boot=0).at(210.0).data.cells["periodic"]
    fast = _steps("periodic", "cpu-m", 210.0)
    assert (cell["cpu-m"]["n"], cell["cpu-m"]["right_censored"]) == (3, 1)
    assert cell["cpu-m"]["restricted_mean"] == pytest.approx((2 * fast + 24.0) / 3)
    assert (cell["cpu-s"]["n"], cell["cpu-s"]["right_censored"]) == (3, 1)


def test_one_target_for_every_rung_is_one_level() -> None:
    levels = fit_target_levels(RUNS, dict.fromkeys(SIZES, 230.0), n_boot=0)
    assert levels.levels == (230.0,) and levels.headline == 230.0
    with pytest.raises(ScalingInputError, match="no fit at level 250"):
        levels.at(250.0)
