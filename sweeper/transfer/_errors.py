"""The transfer's error: one class, a `SweepError` (a transfer is a multi-rung sweep run by the same job runner)."""

from __future__ import annotations

from ..errors import SweepError

__all__ = ["TransferError"]


class TransferError(SweepError):  # a JobError and a RuntimeError, as before
    """A transfer that cannot start or be read as asked: a sweep with no chosen pair, a work folder that holds
    another transfer or none, a spec changed on resume."""
