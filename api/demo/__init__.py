"""`scalesweep demo` (or `python -m api.demo`): the whole study from one command, through the service as a user
would run it, with the client's public functions only. What it does, stage by stage: `api.demo._demo`.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core.lazy import lazy_face

if TYPE_CHECKING:
    from ._demo import PROFILES, DemoError, DemoProfile, add_arguments, demo_sweep_spec, run

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
