"""The settings of the processes that talk to the service or start it, not the service itself: the remote command
line (`scalesweep remote`, `api.cli`) and the local deployment (`api.deploy_local`). Light on purpose (no
pydantic-settings): the client does not need the service's dependencies. The service's own: `api._settings`.

| variable | process | what it does |
|---|---|---|
| `SCALESWEEP_SERVER` | remote CLI | the service's base URL (default `http://127.0.0.1:8000`) |
| `SCALESWEEP_API_TOKEN` | remote CLI, local deployment | the token sent (remote) or given to its service |
| `SCALESWEEP_MAX_CONCURRENT_SWEEPS` | local deployment | passed on to its service (default 2) |
| `SCALESWEEP_RECONCILE` | local deployment | passed on to its service (default `resume`) |
| `RAY_WORKER_NUM_CPUS`, `RAY_HEAD_NUM_CPUS` | local deployment | CPUs of its Ray worker (default 2) and head (0) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from trials import EnvSettings

__all__ = ["ClientSettings", "DeploySettings"]

API_TOKEN_ENV = "SCALESWEEP_API_TOKEN"


@dataclass(frozen=True)
class ClientSettings(EnvSettings):
    """The remote command line's environment (None: not set)."""

    server: str | None
    api_token: str | None

    VARIABLES: ClassVar[Mapping[str, tuple[str, str | None]]] = {
        "server": ("SCALESWEEP_SERVER", None), "api_token": (API_TOKEN_ENV, None)}


@dataclass(frozen=True)
class DeploySettings(EnvSettings):
    """The local deployment's environment: what it passes on to the service it starts, and its Ray's size."""

    api_token: str | None
    max_concurrent_sweeps: str
    reconcile: str
    worker_cpus: str
    head_cpus: str

    VARIABLES: ClassVar[Mapping[str, tuple[str, str | None]]] = {
        "api_token": (API_TOKEN_ENV, None), "max_concurrent_sweeps": ("SCALESWEEP_MAX_CONCURRENT_SWEEPS", "2"),
        "reconcile": ("SCALESWEEP_RECONCILE", "resume"), "worker_cpus": ("RAY_WORKER_NUM_CPUS", "2"),
        "head_cpus": ("RAY_HEAD_NUM_CPUS", "0")}
