"""Fréchet distance: checked against the scipy.linalg.sqrtm formula, closed forms and its known biases."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg
import torch

from trials.metrics import (
    FDInfinityResult,
    FeatureError,
    FeatureStats,
    FrechetNumericalError,
    feature_statistics,
    frechet_distance,
    frechet_distance_from_stats,
    frechet_distance_infinity,
)


def _oracle(x_a: np.ndarray, x_b: np.ndarray, offset: float = 0.0) -> float:
    """The textbook formula with scipy's general matrix square root (pytorch-fid's route)."""
    mu_a, mu_b = x_a.mean(0), x_b.mean(0)
    s_a = np.cov(x_a, rowvar=False) + offset * np.eye(x_a.shape[1])
    s_b = np.cov(x_b, rowvar=False) + offset * np.eye(x_a.shape[1])
    covmean = scipy.linalg.sqrtm(s_a @ s_b).real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(s_a) + np.trace(s_b) - 2 * np.trace(covmean))


def _correlated(rng: np.random.Generator, n: int, d: int, shift: float = 0.0) -> np.ndarray:
    mixing = rng.standard_normal((d, d)) / np.sqrt(d)
    return rng.standard_normal((n, d)) @ mixing + shift + rng.standard_normal(d)


@pytest.mark.parametrize("d", [16, 64])
def test_matches_sqrtm_oracle(d: int) -> None:
    rng = np.random.default_rng(d)
    x_a = _correlated(rng, 4 * d, d)
    x_b = _correlated(rng, 3 * d, d, shift=0.5)
    expected = _oracle(x_a, x_b)
    assert frechet_distance(x_a, x_b) == pytest.approx(expected, rel=1e-8)
    assert frechet_distance(x_b, x_a) == pytest.approx(expected, rel=1e-8)  # symmetric


def test_identical_sets_give_zero() -> None:
    x = _correlated(np.random.default_rng(0), 500, 32)
    assert frechet_distance(x, x) == pytest.approx(0.0, abs=1e-9 * np.trace(np.cov(x, rowvar=False)))


def test_closed_form_for_diagonal_gaussians() -> None:
    rng = np.random.default_rng(1)
    mu_a, mu_b = rng.standard_normal(10), rng.standard_normal(10)
    std_a, std_b = rng.uniform(0.5, 2.0, 10), rng.uniform(0.5, 2.0, 10)
    a = FeatureStats(mu=mu_a, sigma=np.diag(std_a**2), n=1000)
    b = FeatureStats(mu=mu_b, sigma=np.diag(std_b**2), n=1000)
    expected = ((mu_a - mu_b) ** 2).sum() + ((std_a - std_b) ** 2).sum()
    assert frechet_distance_from_stats(a, b) == pytest.approx(expected, rel=1e-12)


def test_float32_features_with_large_means_keep_float64_precision() -> None:
    # FD is translation invariant, so features near 50 must give the FD of the same features near 0.
    # docs/design.md: float32 covariances lost 1e-2 of FD at means near 50.
    rng = np.random.default_rng(2)
    x_a = (50.0 + _correlated(rng, 2000, 48)).astype(np.float32)
    x_b = (50.0 + _correlated(rng, 2000, 48, shift=0.1)).astype(np.float32)
    centred = frechet_distance(x_a.astype(np.float64) - 50.0, x_b.astype(np.float64) - 50.0)
    assert frechet_distance(x_a, x_b) == pytest.approx(centred, rel=1e-9)
    assert feature_statistics(x_a).sigma.dtype == np.float64


def test_torch_and_numpy_inputs_agree() -> None:
    rng = np.random.default_rng(3)
    x_a, x_b = _correlated(rng, 300, 20), _correlated(rng, 300, 20, shift=1.0)
    from_numpy = frechet_distance(x_a, x_b)
    assert frechet_distance(torch.from_numpy(x_a), torch.from_numpy(x_b)) == from_numpy
    assert frechet_distance(torch.from_numpy(x_a), x_b) == from_numpy
    as_float32 = frechet_distance(torch.from_numpy(x_a).float(), torch.from_numpy(x_b).float())
    assert as_float32 == pytest.approx(from_numpy, rel=1e-5)


def test_singular_covariance_uses_eps_fallback() -> None:
    rng = np.random.default_rng(4)
    x_a, x_b = rng.standard_normal((10, 32)), rng.standard_normal((12, 32)) + 0.2  # N < d: rank-deficient
    with pytest.warns(RuntimeWarning, match="singular"):
        fd = frechet_distance(x_a, x_b)
    assert np.isfinite(fd)
    assert fd == pytest.approx(_oracle(x_a, x_b, offset=1e-6), rel=1e-4)


def test_well_conditioned_input_does_not_warn() -> None:
    rng = np.random.default_rng(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frechet_distance(rng.standard_normal((200, 8)), rng.standard_normal((200, 8)))


def test_stats_round_trip_through_npz(tmp_path) -> None:
    rng = np.random.default_rng(6)
    x_a, x_b = _correlated(rng, 400, 24), _correlated(rng, 400, 24, shift=0.3)
    reference = feature_statistics(x_b, extractor="fd_pixels")
    reference.save(tmp_path / "reference.npz")
    loaded = FeatureStats.load(tmp_path / "reference.npz")
    assert loaded.n == 400 and loaded.extractor == "fd_pixels"
    np.testing.assert_array_equal(loaded.sigma, reference.sigma)
    via_stats = frechet_distance_from_stats(feature_statistics(x_a), loaded)
    assert via_stats == frechet_distance(x_a, x_b)


def test_statistics_from_different_feature_spaces_refuse_comparison() -> None:
    x = np.random.default_rng(7).standard_normal((50, 4))
    with pytest.raises(FeatureError, match="different feature spaces"):
        frechet_distance_from_stats(
            feature_statistics(x, extractor="fd_pixels"), feature_statistics(x, extractor="fd_dinov2")
        )


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (np.zeros((10, 3)), np.zeros((10, 4)), "dimensions differ"),
        (np.zeros((1, 3)), np.zeros((10, 3)), "at least 2 samples"),
        (np.zeros(10), np.zeros((10, 1)), "2-D"),
        (np.full((10, 3), np.nan), np.zeros((10, 3)), "NaN"),
    ],
)
def test_invalid_features_raise(a: np.ndarray, b: np.ndarray, match: str) -> None:
    with pytest.raises(FeatureError, match=match):
        frechet_distance(a, b)


def test_indefinite_covariance_raises_typed_error() -> None:
    good = FeatureStats(mu=np.zeros(3), sigma=np.eye(3), n=10)
    indefinite = FeatureStats(mu=np.zeros(3), sigma=np.diag([1.0, 1.0, -0.5]), n=10)
    with pytest.raises(FrechetNumericalError, match="negative eigenvalue"):
        frechet_distance_from_stats(good, indefinite)
    with pytest.raises(FrechetNumericalError), pytest.warns(RuntimeWarning):
        frechet_distance_from_stats(indefinite, good)


def test_fd_infinity_removes_small_sample_bias() -> None:
    rng = np.random.default_rng(8)
    d = 32  # the k/N bias grows like d^2 and the subset noise like d: at small d noise hides the line
    mu_a, mu_b = np.zeros(d), np.full(d, 0.1)
    std_a, std_b = np.ones(d), np.full(d, 1.2)
    true_fd = ((mu_a - mu_b) ** 2).sum() + ((std_a - std_b) ** 2).sum()  # 1.6
    generated = mu_a + std_a * rng.standard_normal((1500, d))
    reference = feature_statistics(mu_b + std_b * rng.standard_normal((50_000, d)))

    result = frechet_distance_infinity(generated, reference, seed=0, repeats=2)
    assert isinstance(result, FDInfinityResult)
    fd_n = frechet_distance_from_stats(feature_statistics(generated), reference)
    assert result.sizes == tuple(np.unique(np.linspace(300, 1500, 15).round().astype(int)))
    assert result.values[-1] == pytest.approx(fd_n)  # the largest "subset" is the whole set
    assert result.slope > 0  # biased upward: smaller N, larger FD
    assert result.r_squared > 0.9  # linear in 1/N
    assert result.fd_infinity < fd_n
    assert abs(result.fd_infinity - true_fd) < 0.5 * abs(fd_n - true_fd)
    assert frechet_distance_infinity(generated, reference, seed=0, repeats=2) == result  # deterministic


def test_fd_infinity_validates_sizes() -> None:
    x = np.random.default_rng(9).standard_normal((100, 4))
    with pytest.raises(FeatureError, match="subset sizes"):
        frechet_distance_infinity(x, x, sizes=[50, 200])
    with pytest.raises(FeatureError, match="2 distinct"):
        frechet_distance_infinity(x, x, sizes=[50, 50])


def _gaussians_d128(n: int, seed: int) -> tuple[np.ndarray, FeatureStats, float]:
    """Generated (n, 128) Gaussian features, a large reference's statistics, and the true FD between the two laws."""
    rng = np.random.default_rng(seed)
    d = 128
    mu_a, mu_b = np.zeros(d), np.full(d, 0.3)
    std_a, std_b = np.ones(d), np.full(d, 1.5)
    true_fd = float(((mu_a - mu_b) ** 2).sum() + ((std_a - std_b) ** 2).sum())  # 11.52 + 32 = 43.52
    generated = mu_a + std_a * rng.standard_normal((n, d))
    reference = feature_statistics(mu_b + std_b * rng.standard_normal((100_000, d)))
    return generated, reference, true_fd


def test_fd_infinity_grid_starts_at_twice_the_feature_dimension() -> None:
    generated, reference, true_fd = _gaussians_d128(512, seed=11)
    fd_512 = frechet_distance_from_stats(feature_statistics(generated), reference)
    assert fd_512 > 1.15 * true_fd  # the bias the extrapolation removes: about a quarter at N = 4d
    estimates = []
    for seed in range(4):
        result = frechet_distance_infinity(generated, reference, seed=seed)
        assert result.sizes[0] == 256 and result.sizes[-1] == 512  # 2d .. N, never below 2d
        estimates.append(result.fd_infinity)
    assert abs(float(np.mean(estimates)) - true_fd) < 0.08 * true_fd
    assert abs(float(np.mean(estimates)) - true_fd) < 0.5 * (fd_512 - true_fd)


def test_fd_infinity_refuses_subsets_below_twice_the_feature_dimension() -> None:
    generated, reference, _ = _gaussians_d128(512, seed=12)
    with pytest.raises(FeatureError, match=r"subset sizes must lie in \[2d = 256, N = 512\]"):
        frechet_distance_infinity(generated, reference, sizes=[102, 256, 512])  # the old N/5 start
    with pytest.raises(FeatureError, match=r"at least 2d = 256 samples \(d = 128 features\).*got 256"):
        frechet_distance_infinity(generated[:256], reference)
