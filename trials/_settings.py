"""The trial's settings: every environment variable a trial process (and the code it shares with the drivers)
reads, named and read here and nowhere else in `trials`.

| variable | what it does |
|---|---|
| `SCALESWEEP_DINOV2_PATH` | the local DINOv2 weights folder the `dinov2` feature extractor loads |
| `SCALESWEEP_CACHE_DIR` | where the `shapes-cnn` extractor keeps its trained network (default `~/.cache/scalesweep`) |
| `SCALESWEEP_GIT_SHA` | the code version a run's provenance records (default: asked of git) |

Read when asked for (`TrialSettings.from_env()`), so a value set before a call is the one that call sees.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CACHE_DIR_ENV", "DINOV2_PATH_ENV", "GIT_SHA_ENV", "TrialSettings"]

DINOV2_PATH_ENV = "SCALESWEEP_DINOV2_PATH"
CACHE_DIR_ENV = "SCALESWEEP_CACHE_DIR"
GIT_SHA_ENV = "SCALESWEEP_GIT_SHA"


@dataclass(frozen=True)
class TrialSettings:
    """The trial's environment, as read at one moment (None: not set)."""

    dinov2_path: str | None
    cache_dir: str | None
    git_sha: str | None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TrialSettings:
        env = os.environ if environ is None else environ
        return cls(dinov2_path=env.get(DINOV2_PATH_ENV), cache_dir=env.get(CACHE_DIR_ENV),
                   git_sha=env.get(GIT_SHA_ENV))
