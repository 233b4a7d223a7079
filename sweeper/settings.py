"""The driver's settings: every environment variable a sweep or transfer driver process reads, named and read
here and nowhere else in the sweeper. The service sets them when it starts a driver (`api.service._jobs`), by
these names.

| variable | what the driver does with it |
|---|---|
| `RAY_ADDRESS` | the Ray cluster to attach to when the spec names none (else a local Ray) |
| `SCALESWEEP_TRAINERS` | the operator's trainer registry (YAML/JSON) for the command backend |
| `SCALESWEEP_CANCEL_GRACE_S` | seconds a cancel may take before the driver closes its runs and exits (default 8) |
| `SCALESWEEP_TRANSFER_ID`, `SCALESWEEP_SOURCE_SWEEP_ID` | the service's ids, named in a transfer's stored report |

Read when asked for (`DriverSettings.from_env()`), so a value set before a call is the one that call sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import field_validator

from trials.core import EnvSettings

__all__ = ["DEFAULT_GRACE_S", "GRACE_ENV", "SOURCE_SWEEP_ID_ENV", "TRAINERS_ENV", "TRANSFER_ID_ENV", "DriverSettings"]

RAY_ADDRESS_ENV = "RAY_ADDRESS"
TRAINERS_ENV = "SCALESWEEP_TRAINERS"
GRACE_ENV = "SCALESWEEP_CANCEL_GRACE_S"
TRANSFER_ID_ENV = "SCALESWEEP_TRANSFER_ID"
SOURCE_SWEEP_ID_ENV = "SCALESWEEP_SOURCE_SWEEP_ID"
# Seconds a cancel may take before the driver closes its runs and exits regardless: below the 10 s a service
# typically waits between SIGTERM and SIGKILL of a driver's process group.
DEFAULT_GRACE_S = "8"


class DriverSettings(EnvSettings):
    """The driver's environment, as read at one moment (raw values; each use parses its own)."""

    ray_address: str | None = None
    trainers: str = ""  # the registry file, "" when unset
    cancel_grace: str = DEFAULT_GRACE_S  # seconds, as set (parsed when a cancel arms its deadline)
    transfer_id: str | None = None
    source_sweep_id: str | None = None

    ENV_NAMES: ClassVar[Mapping[str, str]] = {
        "ray_address": RAY_ADDRESS_ENV, "trainers": TRAINERS_ENV, "cancel_grace": GRACE_ENV,
        "transfer_id": TRANSFER_ID_ENV, "source_sweep_id": SOURCE_SWEEP_ID_ENV}

    @field_validator("trainers")
    @classmethod
    def _stripped(cls, trainers: str) -> str:
        return trainers.strip()

    @property
    def cancel_grace_s(self) -> float:
        return float(self.cancel_grace)
