"""The size trend of a ratio (`scaling.fits.fit_time_ratio`): a synthetic ladder with a known trend is recovered
within its interval at about the stated rate, the held-out largest rung is predicted (and a rung off the trend is a
miss), extrapolations are labelled and carry their offsets, and a fit with too few rungs is refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling.errors import ScalingInputError
from scaling.fits import fit_time_ratio

PARAMS = [1.2e5, 3.5e5, 1.0e6, 3.0e6, 9.0e6]  # 1.9 decades, as a 5-rung CPU ladder
TRUE_SLOPE, TRUE_CENTRE = -0.06, math.log(0.92)  # log ratio per decade; log ratio at the ladder's centre


def _ladder(rng: np.random.Generator, *, seeds: int = 5, seed_sd: float = 0.05, rung_sd: float = 0.01,
            slope: float = TRUE_SLOPE, shift_largest: float = 0.0) -> dict[str, tuple[float, list[float]]]:
    centre = np.mean(np.log10(PARAMS))
    out = {}
    for i, p in enumerate(PARAMS):
        mean = TRUE_CENTRE + slope * (math.log10(p) - centre) + rng.normal(0, rung_sd)
        mean += shift_largest if i == len(PARAMS) - 1 else 0.0
        out[f"r{i}"] = (p, list(mean + rng.normal(0, seed_sd, seeds)))
    return out


def test_a_synthetic_ladder_recovers_its_trend_and_its_held_out_rung() -> None:
    rng = np.random.default_rng(7)
    covered = passed = 0
    slopes = []
    sims = 120
    for i in range(sims):
        fit = fit_time_ratio(_ladder(rng), n_boot=300, seed=i)
        lo, hi = fit.slope_interval
        covered += lo <= TRUE_SLOPE <= hi
        passed += fit.holdout is not None and fit.holdout["passed"]
        slopes.append(fit.slope_per_decade)
    # 95 % intervals, the larger of two standard errors: at least nominal coverage, within simulation noise
    assert covered / sims >= 0.90 and passed / sims >= 0.90
    assert abs(np.mean(slopes) - TRUE_SLOPE) < 0.02  # unbiased: the mean estimate sits on the truth


def test_a_strong_trend_is_identified_and_a_flat_one_is_not() -> None:
    rng = np.random.default_rng(3)
    steep = fit_time_ratio(_ladder(rng, slope=-0.3, seed_sd=0.02, rung_sd=0.005), n_boot=300)
    assert steep.slope_excludes_zero and steep.slope_interval[1] < 0
    assert steep.df == 3 and steep.fitted_on == ["r0", "r1", "r2", "r3", "r4"]
    flat = fit_time_ratio(_ladder(rng, slope=0.0, seed_sd=0.08, rung_sd=0.03), n_boot=300)
    assert not flat.slope_excludes_zero


def test_a_largest_rung_off_the_trend_is_reported_as_a_miss() -> None:
    rng = np.random.default_rng(11)
    fit = fit_time_ratio(_ladder(rng, seed_sd=0.02, rung_sd=0.005, shift_largest=0.5), n_boot=300)
    assert fit.holdout is not None
    assert fit.holdout["rung"] == "r4" and fit.holdout["fitted_on"] == ["r0", "r1", "r2", "r3"]
    assert not fit.holdout["passed"] and fit.holdout["observed"] > fit.holdout["interval"][1]
    assert any("MISS" in line for line in fit.lines())


def test_extrapolations_are_labelled_and_add_their_offsets() -> None:
    rng = np.random.default_rng(5)
    ladder = _ladder(rng)
    sizes = {"paper-1.3b": 1.34e9, "paper-15b": 15.2e9}
    plain = fit_time_ratio(ladder, extrapolate=sizes, n_boot=300)
    shifted = fit_time_ratio(ladder, extrapolate=sizes, offsets={"paper-15b": math.log(0.8)}, n_boot=300)
    for name in sizes:
        e = plain.extrapolation[name]
        assert e["label"] == "extrapolation" and e["decades_past_largest"] > 2
        assert e["interval"][0] < e["log_ratio"] < e["interval"][1]
        assert e["ratio"] == pytest.approx(math.exp(e["log_ratio"]))
    # further out, wider
    width = {n: e["interval"][1] - e["interval"][0] for n, e in plain.extrapolation.items()}
    assert width["paper-15b"] > width["paper-1.3b"]
    assert shifted.extrapolation["paper-15b"]["log_ratio"] == pytest.approx(
        plain.extrapolation["paper-15b"]["log_ratio"] + math.log(0.8))
    assert shifted.extrapolation["paper-1.3b"] == plain.extrapolation["paper-1.3b"]
    assert set(plain.to_dict()) >= {"holdout", "extrapolation", "slope_per_decade", "slope_interval"}


@pytest.mark.parametrize(("rungs", "kwargs", "says"), [
    ({f"r{i}": (PARAMS[i], [0.0, 0.1]) for i in range(3)}, {}, "at least 3 rungs to fit plus the one held out"),
    ({f"r{i}": (PARAMS[i], [0.0, 0.1]) for i in range(2)}, {"holdout": None}, "at least 3 rungs"),
    ({"a": (1e5, [0.0]), "b": (1e5, [0.1]), "c": (1e6, [0.0]), "d": (1e7, [0.0])}, {}, "same parameter count"),
    ({"a": (1e5, [float("nan")]), "b": (1e6, [0.1]), "c": (1e7, [0.0]), "d": (1e8, [0.0])}, {}, "finite"),
    ({"a": (-1.0, [0.0]), "b": (1e6, [0.1]), "c": (1e7, [0.0]), "d": (1e8, [0.0])}, {}, "positive"),
    ({f"r{i}": (PARAMS[i], [0.0, 0.1]) for i in range(4)}, {"offsets": {"x": 0.1}}, "not asked for"),
])
def test_a_fit_that_cannot_be_judged_is_refused_with_its_reason(rungs, kwargs, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ScalingInputError, match=says):
        fit_time_ratio(rungs, n_boot=50, **kwargs)
