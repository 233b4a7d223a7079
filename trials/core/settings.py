"""One settings mechanism for every process kind: the trial (`trials.TrialSettings`), the driver
(`sweeper.DriverSettings`), the remote client and the local deployment (`api.client.ClientSettings`,
`api.deploy_local.DeploySettings`) and the service (`api.Settings`).

A kind's settings are a frozen pydantic model whose fields each name one environment variable (`ENV_PREFIX` +
the field's name in capitals, or the name given in `ENV_NAMES`); building one reads those variables and nothing
else, arguments given win over the environment, and a value that does not fit its field is a validation error
naming the field. `from_env(environ)` reads another mapping (a child's environment, a test's).

Why pydantic and not pydantic-settings: the light install (`pip install scalesweep`, no extras) has pydantic but
not pydantic-settings, and the trial, the driver and the remote client must read their settings without the
service's extra; what the service used of pydantic-settings (variables named by a prefix, arguments over the
environment, no `.env` file, no JSON-valued variables) is the one validator below. One difference: a variable's
name is matched exactly (pydantic-settings also accepted it in lower case).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

__all__ = ["EnvSettings"]


class EnvSettings(BaseModel):
    """A process kind's environment, as read at one moment. A subclass declares its fields (with defaults) and
    how they are named as variables: `ENV_PREFIX` + FIELD, or `ENV_NAMES[field]`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ENV_PREFIX: ClassVar[str] = ""
    ENV_NAMES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field's environment variable."""
        return {name: cls.ENV_NAMES.get(name, cls.ENV_PREFIX + name.upper()) for name in cls.model_fields}

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> Self:
        """The settings read from `environ` (default: this process's environment); `given` values win."""
        return cls.model_validate(given, context={"environ": os.environ if environ is None else environ})

    @model_validator(mode="before")
    @classmethod
    def _read_environment(cls, given: Any, info: ValidationInfo) -> Any:
        if not isinstance(given, dict):
            return given
        env = (info.context or {}).get("environ", os.environ)
        read = {name: env[variable] for name, variable in cls.variables().items()
                if name not in given and variable in env}
        return {**read, **given}
