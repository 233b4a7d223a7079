"""The trial's settings: every environment variable a trial process (and the code it shares with the drivers)
reads, named and read here and nowhere else in `trials`, through the one settings mechanism
(`trials.core.EnvSettings`).

| variable | what it does |
|---|---|
| `SCALESWEEP_DINOV2_PATH` | the local DINOv2 weights folder the `dinov2` feature extractor loads |
| `SCALESWEEP_CACHE_DIR` | where the `shapes-cnn` extractor keeps its trained network (default `~/.cache/scalesweep`) |
| `SCALESWEEP_GIT_SHA` | the code version a run's provenance records (default: asked of git) |
| `CC` | the C compiler the native Muon kernel is built with (default: `cc`, `gcc` or `clang` on PATH) |

Read when asked for (`TrialSettings.from_env()`), so a value set before a call is the one that call sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from .settings import EnvSettings

__all__ = ["CACHE_DIR_ENV", "CC_ENV", "DINOV2_PATH_ENV", "GIT_SHA_ENV", "TrialSettings"]

DINOV2_PATH_ENV = "SCALESWEEP_DINOV2_PATH"
CACHE_DIR_ENV = "SCALESWEEP_CACHE_DIR"
GIT_SHA_ENV = "SCALESWEEP_GIT_SHA"
CC_ENV = "CC"


class TrialSettings(EnvSettings):
    """The trial's environment (None: not set)."""

    dinov2_path: str | None = None
    cache_dir: str | None = None
    git_sha: str | None = None
    compiler: str | None = None

    ENV_NAMES: ClassVar[Mapping[str, str]] = {
        "dinov2_path": DINOV2_PATH_ENV, "cache_dir": CACHE_DIR_ENV, "git_sha": GIT_SHA_ENV, "compiler": CC_ENV}
