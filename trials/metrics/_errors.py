"""Errors raised by ``trials.metrics``: one base class, so callers can catch everything from here at once."""

from __future__ import annotations

from ..core.errors import InputError, ScalesweepError

__all__ = [
    "ExtractorUnavailableError",
    "FeatureError",
    "FrechetNumericalError",
    "MetricsError",
    "UnknownExtractorError",
]


class MetricsError(ScalesweepError):
    """Base class of every error raised by ``trials.metrics``."""


class FeatureError(MetricsError, InputError):  # a ValueError, as before
    """Features or images of the wrong shape, dtype or with non-finite values."""


class FrechetNumericalError(MetricsError, ArithmeticError):
    """The Fréchet distance could not be computed reliably (covariances not positive semi-definite)."""


class UnknownExtractorError(MetricsError, InputError):
    """No feature extractor is registered under the requested name."""


class ExtractorUnavailableError(MetricsError, RuntimeError):
    """An extractor cannot be built here: weights not found or an optional dependency not installed."""
