"""Scaling-law fits: recovery of known laws, interval coverage, flags, hold-out errors and input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling import ExtrapolationRefused, ScalingError, ScalingInputError
from scaling.fits import ScalingFit, fit_scaling

LADDER = np.array([0.3e9, 1.3e9, 4e9, 9e9, 15e9])  # parameter counts, a 5-rung ladder
ALPHA = 0.3


def power_law(sizes: np.ndarray, a: float = 3000.0, alpha: float = ALPHA, e: float = 0.0) -> np.ndarray:
    return e + a * sizes**-alpha


def noisy(clean: np.ndarray, rel: float, seeds: int, rng: np.random.Generator) -> np.ndarray:
    """(seeds, sizes) values with multiplicative (log-normal) noise of relative size ``rel``."""
    return clean * np.exp(rng.normal(0.0, rel, (seeds, len(clean))))


# --------------------------------------------------------------------------------------------------------------
# Recovery


def test_power_law_parameters_recovered_with_seed_bootstrap() -> None:
    rng = np.random.default_rng(0)
    y = noisy(power_law(LADDER), 0.01, 3, rng)
    fit = fit_scaling({"muon": (LADDER, y)}, form="A*N^-alpha", n_boot=200, seed=1)
    assert fit.bootstrap == "seed"
    assert fit.params["muon"]["alpha"] == pytest.approx(ALPHA, abs=0.01)
    assert fit.params["muon"]["A"] == pytest.approx(3000.0, rel=0.2)
    lo, hi = fit.intervals["muon"]["alpha"]
    assert lo < ALPHA < hi
    assert hi - lo < 0.05
    assert fit.flags == set()
    assert fit.converged and fit.n_boot_ok == 200
    # Hold-out at 15e9 from the other four rungs beats carrying the 9e9 value forward by a wide margin.
    assert fit.loo_error["muon"] is not None and fit.loo_error["muon"] < 0.02
    assert fit.loo_baseline_error["muon"] == pytest.approx((15 / 9) ** ALPHA - 1, abs=0.02)


def test_offset_power_law_recovered() -> None:
    sizes = np.geomspace(1e8, 3e10, 6)
    rng = np.random.default_rng(0)
    y = noisy(power_law(sizes, e=20.0), 0.005, 3, rng)
    fit = fit_scaling({"periodic": (sizes, y)}, n_boot=100, seed=0)
    p = fit.params["periodic"]
    assert p["E"] == pytest.approx(20.0, rel=0.03)
    assert p["alpha"] == pytest.approx(ALPHA, abs=0.03)
    assert fit.intervals["periodic"]["E"][0] < 20.0 < fit.intervals["periodic"]["E"][1]
    assert fit.intervals["periodic"]["alpha"][0] < ALPHA < fit.intervals["periodic"]["alpha"][1]
    assert fit.flags == set()


def test_predict_point_and_interval() -> None:
    rng = np.random.default_rng(2)
    y = noisy(power_law(LADDER), 0.01, 3, rng)
    fit = fit_scaling({"muon": (LADDER, y)}, form="A*N^-alpha", n_boot=200, seed=0)
    point, lo, hi = fit.predict("muon", 20e9)
    assert lo < point < hi
    assert point == pytest.approx(float(power_law(np.array([20e9]))[0]), rel=0.02)
    p = fit.params["muon"]
    assert point == pytest.approx(p["A"] * 20e9 ** -p["alpha"], rel=1e-9)
    # Interval widens away from the middle of the data.
    _, lo_mid, hi_mid = fit.predict("muon", 2e9)
    assert (hi - lo) / point > (hi_mid - lo_mid) / point


def test_shared_alpha_joint_fit_gives_one_exponent_for_three_arms() -> None:
    rng = np.random.default_rng(3)
    truth = {"adamw": (25.0, 3000.0), "muon": (20.0, 2800.0), "periodic": (21.0, 2900.0)}
    sizes = np.geomspace(1e8, 3e10, 5)
    data = {arm: (sizes, noisy(power_law(sizes, a, e=e), 0.005, 2, rng)) for arm, (e, a) in truth.items()}
    fit = fit_scaling(data, share=("alpha",), n_boot=40, seed=0)
    alphas = {arm: fit.params[arm]["alpha"] for arm in data}
    assert len(set(alphas.values())) == 1
    assert alphas["muon"] == pytest.approx(ALPHA, abs=0.05)
    assert len({fit.intervals[arm]["alpha"] for arm in data}) == 1
    assert fit.params["adamw"]["E"] == pytest.approx(25.0, rel=0.05)
    assert fit.params["muon"]["E"] == pytest.approx(20.0, rel=0.05)
    assert fit.params["adamw"]["E"] != fit.params["muon"]["E"]  # E is per arm
    assert "non_identifiable" not in fit.flags


def test_replicates_as_repeated_sizes_equal_seed_lists() -> None:
    rng = np.random.default_rng(4)
    y = noisy(power_law(LADDER), 0.01, 2, rng)
    as_seeds = fit_scaling({"a": (LADDER, y)}, form="A*N^-alpha", n_boot=30, seed=5)
    as_rows = fit_scaling({"a": (np.concatenate([LADDER, LADDER]), y.ravel())}, form="A*N^-alpha", n_boot=30, seed=5)
    assert as_rows.params["a"]["alpha"] == pytest.approx(as_seeds.params["a"]["alpha"], rel=1e-9)
    assert as_rows.bootstrap == as_seeds.bootstrap == "seed"


def test_same_seed_same_intervals() -> None:
    rng = np.random.default_rng(5)
    data = {"a": (LADDER, noisy(power_law(LADDER), 0.02, 1, rng)[0])}
    one = fit_scaling(data, form="A*N^-alpha", n_boot=50, seed=11)
    two = fit_scaling(data, form="A*N^-alpha", n_boot=50, seed=11)
    assert one.bootstrap == "parametric"
    assert one.intervals == two.intervals


# --------------------------------------------------------------------------------------------------------------
# Coverage: the 95% intervals must hold the true exponent in >= 90% of repeated synthetic studies.


@pytest.mark.parametrize(("seeds", "draws"), [(3, 40), (1, 40)], ids=["seed-bootstrap", "parametric"])
def test_interval_coverage_of_the_true_exponent(seeds: int, draws: int) -> None:
    covered = 0
    widths = []
    for d in range(draws):
        rng = np.random.default_rng(1000 + d)
        y = noisy(power_law(LADDER), 0.03, seeds, rng)
        fit = fit_scaling({"x": (LADDER, y)}, form="A*N^-alpha", n_boot=100, seed=d)
        lo, hi = fit.intervals["x"]["alpha"]
        covered += lo <= ALPHA <= hi
        widths.append(hi - lo)
    assert covered / draws >= 0.9
    # Coverage bought with useless intervals would pass the line above: they must also be informative.
    assert float(np.median(widths)) < 0.1


# --------------------------------------------------------------------------------------------------------------
# Flags


def _four_rung_three_arms() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(6)
    sizes = np.array([0.4e9, 1.3e9, 4e9, 9e9])
    truth = {"adamw": (25.0, 3000.0), "muon": (20.0, 2800.0), "periodic": (21.0, 2900.0)}
    return {arm: (sizes, noisy(power_law(sizes, a, e=e), 0.01, 2, rng)) for arm, (e, a) in truth.items()}


def test_three_parameters_on_four_sizes_is_non_identifiable_and_shared_alpha_is_offered() -> None:
    fit = fit_scaling(_four_rung_three_arms(), n_boot=10, boot_starts=1)
    assert "non_identifiable" in fit.flags
    assert "adamw" in fit.flag_details["non_identifiable"]
    assert fit.suggestion is not None and "share=('alpha',)" in fit.suggestion
    alt = fit.alternative
    assert isinstance(alt, ScalingFit)
    assert alt.share == ("alpha",) and alt.form == "E+A*N^-alpha"
    assert "non_identifiable" not in alt.flags
    assert len({alt.params[arm]["alpha"] for arm in alt.arms}) == 1
    assert alt.alternative is None


def test_single_arm_on_four_sizes_is_offered_the_pure_power_law() -> None:
    data = _four_rung_three_arms()
    fit = fit_scaling({"muon": data["muon"]}, n_boot=10, boot_starts=1)
    assert "non_identifiable" in fit.flags
    assert fit.alternative is not None and fit.alternative.form == "A*N^-alpha"


def test_power_law_on_three_sizes_is_non_identifiable() -> None:
    sizes = LADDER[:3]
    fit = fit_scaling({"a": (sizes, power_law(sizes))}, form="A*N^-alpha", n_boot=0)
    assert "non_identifiable" in fit.flags
    assert fit.alternative is None and fit.suggestion is not None and "add sizes" in fit.suggestion


def test_wrong_form_is_flagged_misspecified() -> None:
    rng = np.random.default_rng(7)
    # The truth has a floor E = 20 that a pure power law cannot bend to.
    y = noisy(power_law(LADDER, e=20.0), 0.01, 3, rng)
    fit = fit_scaling({"a": (LADDER, y)}, form="A*N^-alpha", n_boot=20)
    assert "misspecified" in fit.flags
    assert "arm 'a'" in fit.flag_details["misspecified"]
    # Curvature test without seeds, on a longer ladder.
    sizes = np.geomspace(0.3e9, 30e9, 7)
    single = noisy(power_law(sizes, e=20.0), 0.005, 1, rng)[0]
    assert "misspecified" in fit_scaling({"a": (sizes, single)}, form="A*N^-alpha", n_boot=0).flags
    # The right form on the same kind of data is not flagged.
    good = fit_scaling({"a": (LADDER, noisy(power_law(LADDER), 0.01, 3, rng))}, form="A*N^-alpha", n_boot=0)
    assert "misspecified" not in good.flags


def test_offset_collapsing_to_zero_is_at_bound() -> None:
    rng = np.random.default_rng(8)
    fit = fit_scaling({"a": (LADDER, noisy(power_law(LADDER), 0.01, 3, rng))}, n_boot=0)
    assert "at_bound" in fit.flags
    assert fit.at_bound_params == ("E[a]",)
    assert fit.params["a"]["E"] < 1e-3


def test_extrapolation_refused_with_reason() -> None:
    fit = fit_scaling({"muon": (LADDER, power_law(LADDER))}, form="A*N^-alpha", n_boot=20)
    assert "extrapolation_refused" not in fit.flags
    fit.predict("muon", 2 * 15e9)  # exactly at the limit is allowed
    with pytest.raises(ExtrapolationRefused, match=r"max_extrapolation=2") as info:
        fit.predict("muon", 60e9)
    message = str(info.value)
    assert "'muon'" in message and "4x the largest fitted size 1.5e+10" in message
    assert "allow_extrapolation=True" in message
    assert "extrapolation_refused" in fit.flags
    assert isinstance(info.value, ScalingError)
    point, lo, hi = fit.predict("muon", 60e9, allow_extrapolation=True)
    assert point == pytest.approx(float(power_law(np.array([60e9]))[0]), rel=1e-3)
    assert lo <= point <= hi
    permissive = fit_scaling(
        {"muon": (LADDER, power_law(LADDER))}, form="A*N^-alpha", n_boot=0, allow_extrapolation=True
    )
    point, lo, hi = permissive.predict("muon", 60e9)
    assert math.isnan(lo) and math.isnan(hi)  # n_boot=0: no bootstrap distribution
    tighter = fit_scaling({"muon": (LADDER, power_law(LADDER))}, form="A*N^-alpha", n_boot=0, max_extrapolation=1.2)
    with pytest.raises(ExtrapolationRefused):
        tighter.predict("muon", 20e9)


# --------------------------------------------------------------------------------------------------------------
# Input checks


GOOD = (LADDER, power_law(LADDER))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({}, "non-empty mapping"),
        ([GOOD], "non-empty mapping"),
        ({"a": (LADDER, [1.0, 2.0])}, "aligned with the 5 sizes"),
        ({"a": (LADDER, [[1.0] * 5, [1.0] * 4])}, "must be numbers"),
        ({"a": (LADDER, [1.0, 2.0, 0.0, 3.0, 4.0])}, "finite and > 0"),
        ({"a": (LADDER, [1.0, 2.0, math.nan, 3.0, 4.0])}, "finite and > 0"),
        ({"a": ([1e9, -1e9], [1.0, 2.0])}, "parameter counts > 0"),
        ({"a": ([1e9, 1e9], [1.0, 2.0])}, "at least 2 distinct sizes"),
        ({"a": LADDER}, r"expected \(sizes, values\)"),
        ({"": GOOD}, "non-empty strings"),
    ],
)
def test_bad_data_raise(data: object, match: str) -> None:
    with pytest.raises(ScalingInputError, match=match):
        fit_scaling(data, n_boot=0)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"form": "A*N^-beta"}, r"unknown form 'A\*N\^-beta'; choices"),
        ({"share": ("E",), "form": "A*N^-alpha"}, r"cannot share \['E'\]"),
        ({"share": ("A",)}, "needs 'alpha' shared too"),
        ({"huber_delta": 0.0}, "huber_delta"),
        ({"n_boot": -1}, "n_boot"),
        ({"level": 1.0}, "level"),
        ({"bootstrap": "jackknife"}, "unknown bootstrap"),
        ({"bootstrap": "seed"}, "at least 2 seeds"),
        ({"alpha_bounds": (1.0, 0.5)}, "alpha_bounds"),
        ({"max_extrapolation": 0.5}, "max_extrapolation"),
    ],
)
def test_bad_settings_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ScalingInputError, match=match):
        fit_scaling({"a": GOOD, "b": GOOD}, **{"n_boot": 0, **kwargs})


def test_predict_bad_input() -> None:
    fit = fit_scaling({"a": GOOD}, form="A*N^-alpha", n_boot=0)
    with pytest.raises(ScalingInputError, match=r"unknown arm 'b'; fitted arms: \['a'\]"):
        fit.predict("b", 1e9)
    with pytest.raises(ScalingInputError, match="> 0"):
        fit.predict("a", 0.0)


def test_no_residual_degrees_of_freedom_gives_no_intervals() -> None:
    sizes = LADDER[:2]
    fit = fit_scaling({"a": (sizes, power_law(sizes))}, form="A*N^-alpha", n_boot=50)
    assert fit.bootstrap == "none" and fit.n_boot_ok == 0
    assert any("no residual degrees of freedom" in note for note in fit.notes)
    assert all(math.isnan(v) for v in fit.intervals["a"]["alpha"])
    assert fit.params["a"]["alpha"] == pytest.approx(ALPHA, abs=1e-6)
    point, lo, hi = fit.predict("a", 1e9)
    assert point == pytest.approx(float(power_law(np.array([1e9]))[0]), rel=1e-6)
    assert math.isnan(lo) and math.isnan(hi)
