"""Errors raised by ``dashboards``: one base class, so callers can catch everything from here at once."""

from __future__ import annotations

from trials import InputError, ScalesweepError

__all__ = ["DashboardError", "DashboardInputError"]


class DashboardError(ScalesweepError):
    """Base class of every error raised by ``dashboards``."""


class DashboardInputError(DashboardError, InputError):  # a ValueError, as before
    """Records, fits or options that cannot be drawn as given: an unknown field, a malformed series, a chosen pair
    outside the grid, a figure name that is not a safe file name."""
