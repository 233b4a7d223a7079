"""The base exception of `sweeper` (spec problems are pydantic ValidationErrors, raised at the edge)."""

from __future__ import annotations

from trials import JobError, JobFailedError

__all__ = ["SweepError", "SweepFailedError"]


class SweepError(JobError):  # a RuntimeError, as before
    """A sweep could not be started, resumed, cancelled or read as asked."""


class SweepFailedError(SweepError, JobFailedError):
    """The driver itself failed mid-sweep (not a trial: those are recorded and retried); the sweep is FAILED."""
