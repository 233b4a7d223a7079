"""Forwards to `trials.core.lazy` for `trials.optim`'s face (edited on another branch), until it imports the
core."""

from .core.lazy import homes_of, lazy_attributes

__all__ = ["homes_of", "lazy_attributes"]
