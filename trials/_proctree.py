"""Forwards to `trials.core.proctree`, the process tree's one home, for `trials._command` (edited on another
branch), until it imports the core."""

from .core.proctree import TRIAL_TAG_ENV, end_tagged, new_tag, start_reaper

__all__ = ["TRIAL_TAG_ENV", "end_tagged", "new_tag", "start_reaper"]
