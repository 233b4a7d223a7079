"""The local deployment's settings (`python -m api.deploy_local`): what it passes on to the service it starts, and
its Ray's size. Light (no service extra), read through `trials.core.EnvSettings`.

| variable | what it does |
|---|---|
| `SCALESWEEP_API_TOKEN` | the token given to its service (default: a new random one) |
| `SCALESWEEP_MAX_CONCURRENT_SWEEPS` | passed on to its service (default 2) |
| `SCALESWEEP_RECONCILE` | passed on to its service (default `resume`) |
| `RAY_WORKER_NUM_CPUS`, `RAY_HEAD_NUM_CPUS` | CPUs of its Ray worker (default 2) and head (0) |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from trials.core import EnvSettings

__all__ = ["DeploySettings"]


class DeploySettings(EnvSettings):
    """The local deployment's environment: what it passes on to the service it starts, and its Ray's size."""

    api_token: str | None = None
    max_concurrent_sweeps: str = "2"
    reconcile: str = "resume"
    worker_cpus: str = "2"
    head_cpus: str = "0"

    ENV_NAMES: ClassVar[Mapping[str, str]] = {
        "api_token": "SCALESWEEP_API_TOKEN", "max_concurrent_sweeps": "SCALESWEEP_MAX_CONCURRENT_SWEEPS",
        "reconcile": "SCALESWEEP_RECONCILE", "worker_cpus": "RAY_WORKER_NUM_CPUS", "head_cpus": "RAY_HEAD_NUM_CPUS"}
