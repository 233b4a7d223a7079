"""The remote command line's settings (`scalesweep remote`, `api.cli`): light on purpose, so the client does not
need the service's extra. The service's own: `api.service.Settings`; the local deployment's:
`api.deploy_local.DeploySettings`; all three read the environment through `trials.core.EnvSettings`.

| variable | process | what it does |
|---|---|---|
| `SCALESWEEP_SERVER` | remote CLI | the service's base URL (default `http://127.0.0.1:8000`) |
| `SCALESWEEP_API_TOKEN` | remote CLI | the token sent |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from trials.core import EnvSettings

__all__ = ["API_TOKEN_ENV", "ClientSettings"]

API_TOKEN_ENV = "SCALESWEEP_API_TOKEN"


class ClientSettings(EnvSettings):
    """The remote command line's environment (None: not set)."""

    server: str | None = None
    api_token: str | None = None

    ENV_NAMES: ClassVar[Mapping[str, str]] = {"server": "SCALESWEEP_SERVER", "api_token": API_TOKEN_ENV}
