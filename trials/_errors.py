"""Forwards to `trials.core.errors`, the errors' one home, for `trials._command` (edited on another branch),
until it imports the core."""

from .core.errors import TrialError

__all__ = ["TrialError"]
