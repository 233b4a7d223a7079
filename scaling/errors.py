"""Errors raised by ``scaling``: one base class, so callers can catch everything from here at once."""

from __future__ import annotations

from trials import InputError, ScalesweepError

__all__ = [
    "ExtrapolationRefused",
    "FitFailed",
    "ScalingError",
    "ScalingInputError",
]


class ScalingError(ScalesweepError):
    """Base class of every error raised by ``scaling``."""


class ScalingInputError(ScalingError, InputError):  # a ValueError, as before
    """Run records or fit data that cannot be used as given: mismatched lengths, non-finite or non-positive
    values, steps out of order, an unknown arm or parameter name."""


class FitFailed(ScalingError, RuntimeError):
    """No starting point of the optimizer converged, so there is no fit to report."""


class ExtrapolationRefused(ScalingError):
    """A prediction was asked for further beyond the fitted sizes than the fit allows
    (``max_extrapolation``)."""

