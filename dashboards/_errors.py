"""Errors raised by ``dashboards``: one base class, so callers can catch everything from here at once."""

from __future__ import annotations

__all__ = ["DashboardError", "DashboardInputError"]


class DashboardError(Exception):
    """Base class of every error raised by ``dashboards``."""


class DashboardInputError(DashboardError, ValueError):
    """Records, fits or options that cannot be drawn as given: an unknown field, a malformed series, a chosen pair
    outside the grid, a figure name that is not a safe file name."""
