"""The base exception of `trials` for run-level failures (configuration problems are pydantic ValidationErrors)."""

from __future__ import annotations

__all__ = ["TrialError"]


class TrialError(RuntimeError):
    """A trial could not run as configured, or its external command failed."""
