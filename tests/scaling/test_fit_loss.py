"""The fit's loss follows the data (least squares without replicates, Huber with), and the pure-power-law
fallback says that it changes what is estimated."""

from __future__ import annotations

import numpy as np
import pytest

from scaling import ScalingInputError
from scaling.fits import fit_scaling

SIZES = np.array([3e5, 1e6, 2.3e6, 4.5e6, 9e6])


def _curve(sizes: np.ndarray) -> np.ndarray:
    return 50 * (sizes / 1e5) ** -0.4


def test_one_value_per_size_fits_least_squares_and_replicates_fit_huber() -> None:
    rng = np.random.default_rng(1)
    single = fit_scaling({"a": (SIZES, _curve(SIZES) * np.exp(rng.normal(0, 0.05, 5)))}, form="A*N^-alpha", n_boot=0)
    assert single.loss_function == "least_squares" and "one value per size" in single.loss_reason
    seeds = [_curve(SIZES) * np.exp(rng.normal(0, 0.05, 5)) for _ in range(3)]
    replicated = fit_scaling({"a": (SIZES, seeds)}, form="A*N^-alpha", n_boot=0)
    assert replicated.loss_function == "huber" and "replicate" in replicated.loss_reason
    forced = fit_scaling({"a": (SIZES, seeds[0])}, form="A*N^-alpha", n_boot=0, loss="huber")
    assert forced.loss_function == "huber"
    with pytest.raises(ScalingInputError, match="unknown loss 'l1'; choices"):
        fit_scaling({"a": (SIZES, seeds[0])}, loss="l1")  # type: ignore[arg-type]


def test_huber_at_small_delta_passes_through_points_where_least_squares_averages() -> None:
    rng = np.random.default_rng(2)
    y = _curve(SIZES) * np.exp(rng.normal(0, 0.05, 5))
    residuals = {}
    for loss in ("huber", "least_squares"):
        fit = fit_scaling({"a": (SIZES, y)}, form="A*N^-alpha", n_boot=0, loss=loss)  # type: ignore[arg-type]
        pred = np.array([fit.predict("a", s)[0] for s in SIZES])
        residuals[loss] = np.abs(np.log(y) - np.log(pred))
    assert (residuals["huber"] < 1e-3).sum() >= 2  # an L1 fit through 2 of the 5 points
    assert (residuals["least_squares"] < 1e-3).sum() == 0
    # Least squares minimises the squared log residuals: it cannot lose on its own criterion.
    assert (residuals["least_squares"] ** 2).sum() < (residuals["huber"] ** 2).sum()


def test_least_squares_hold_out_error_beats_huber_without_replicates() -> None:
    rng = np.random.default_rng(0)
    errors: dict[str, list[float]] = {"huber": [], "least_squares": [], "carry_forward": []}
    for _ in range(40):
        y = _curve(SIZES) * np.exp(rng.normal(0, 0.05, 5))
        for loss in ("huber", "least_squares"):
            fit = fit_scaling({"a": (SIZES, y)}, form="A*N^-alpha", n_boot=0, loss=loss)  # type: ignore[arg-type]
            errors[loss].append(fit.loo_error["a"])
        errors["carry_forward"].append(fit.loo_baseline_error["a"])
    mean = {k: float(np.mean(v)) for k, v in errors.items()}
    assert mean["least_squares"] < mean["huber"] < mean["carry_forward"]


def test_pure_power_law_fallback_says_it_changes_the_estimate() -> None:
    sizes = np.array([3e5, 1e6, 2.3e6, 4.5e6])
    fit = fit_scaling({"a": (sizes, 20 + 400 * (sizes / 1e5) ** -0.5)}, n_boot=0)  # E+A*N^-alpha on 4 sizes
    assert "non_identifiable" in fit.flags
    assert fit.alternative is not None and fit.alternative.form == "A*N^-alpha"
    assert fit.suggestion is not None
    assert "changes what is estimated" in fit.suggestion and "not as a fix" in fit.suggestion
