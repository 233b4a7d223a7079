"""The trial's settings: every environment variable a trial process (and the code it shares with the drivers)
reads, named and read here and nowhere else in `trials`; and `EnvSettings`, the one way a process kind's settings
object reads its variables (the drivers' `sweeper.DriverSettings` is one too).

| variable | what it does |
|---|---|
| `SCALESWEEP_DINOV2_PATH` | the local DINOv2 weights folder the `dinov2` feature extractor loads |
| `SCALESWEEP_CACHE_DIR` | where the `shapes-cnn` extractor keeps its trained network (default `~/.cache/scalesweep`) |
| `SCALESWEEP_GIT_SHA` | the code version a run's provenance records (default: asked of git) |
| `CC` | the C compiler the native Muon kernel is built with (default: `cc`, `gcc` or `clang` on PATH) |

Read when asked for (`TrialSettings.from_env()`), so a value set before a call is the one that call sees.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

__all__ = ["CACHE_DIR_ENV", "CC_ENV", "DINOV2_PATH_ENV", "GIT_SHA_ENV", "EnvSettings", "TrialSettings"]

DINOV2_PATH_ENV = "SCALESWEEP_DINOV2_PATH"
CACHE_DIR_ENV = "SCALESWEEP_CACHE_DIR"
GIT_SHA_ENV = "SCALESWEEP_GIT_SHA"
CC_ENV = "CC"


@dataclass(frozen=True)
class EnvSettings:
    """A process kind's environment, as read at one moment. A subclass declares its fields and, in `VARIABLES`,
    each field's variable and default (None: unset); `from_env` reads those variables and nothing else."""

    VARIABLES: ClassVar[Mapping[str, tuple[str, str | None]]] = {}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        env = os.environ if environ is None else environ
        return cls(**{name: env.get(variable, default) for name, (variable, default) in cls.VARIABLES.items()})


@dataclass(frozen=True)
class TrialSettings(EnvSettings):
    """The trial's environment (None: not set)."""

    dinov2_path: str | None
    cache_dir: str | None
    git_sha: str | None
    compiler: str | None

    VARIABLES: ClassVar[Mapping[str, tuple[str, str | None]]] = {
        "dinov2_path": (DINOV2_PATH_ENV, None), "cache_dir": (CACHE_DIR_ENV, None), "git_sha": (GIT_SHA_ENV, None),
        "compiler": (CC_ENV, None)}
