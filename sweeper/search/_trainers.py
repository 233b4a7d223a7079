"""Registered trainers: the external trainers an operator allows the service to run, by name.

A token holder may submit sweeps, not commands. Over REST the command backend therefore names a trainer
(`backend: {name: command, trainer: fsdp-mmdit}`) that the operator registered on the server in a YAML or JSON
file (`SCALESWEEP_TRAINERS=/etc/scalesweep/trainers.yaml`):

    trainers:
      fsdp-mmdit:
        command: ["torchrun", "--nproc-per-node", "8", "/opt/train.py", "--K", "{K}", "--gamma", "{gamma}",
                  "--steps", "{steps}", "--seed", "{seed}", "--progress", "{progress_file}"]
        env: {NCCL_DEBUG: WARN}          # fixed: a spec cannot add to it
        cwd: /opt/trainer                # optional
        timeout_s: 86400                 # optional; a spec may ask for less, never more
        description: our FSDP2 trainer   # optional

(the top-level `trainers:` key may be left out). The spec fills the command's documented placeholders with the
trial's own values (`trials.PLACEHOLDERS`: optimizer, K, gamma, lr, steps, seed, ...); it can never set the
command, its environment or its working directory. The local CLI runs free-form commands as before: there the
user already owns the shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trials import CommandLine
from trials.core import read_mapping, validation_messages

from ..errors import SweepError
from ..settings import TRAINERS_ENV, DriverSettings

if TYPE_CHECKING:
    from ..specs import SweepSpec

__all__ = ["RegisteredTrainer", "load_trainers", "resolve_trainer", "with_trainer"]

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class RegisteredTrainer(BaseModel):
    """One trainer the operator allows: its command template and fixed environment."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    command: CommandLine = Field(
        ..., min_length=1, description="Argument list (or one shell-like string) with trials' {placeholders}."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Fixed extra environment of the trainer.")
    cwd: str | None = Field(None, description="Working directory; None = the driver's work folder.")
    timeout_s: float | None = Field(None, gt=0, description="Longest a trial may run; a spec may only lower it.")
    description: str = Field("", max_length=500, description="What this trainer is, for people reading specs.")


def load_trainers(source: str | Path | None = None) -> dict[str, RegisteredTrainer]:
    """The registered trainers from a YAML/JSON file (default: $SCALESWEEP_TRAINERS; none when it is unset).

    Raises SweepError with one line naming the file (or the variable) for a missing or invalid registry."""
    if source is None:
        source = DriverSettings.from_env().trainers
        if not source:
            return {}
        where = f"{TRAINERS_ENV}={source}"
    else:
        where = str(source)
    data: Any = read_mapping(source, what="a trainer registry (trainer names -> {command, env, cwd, timeout_s})",
                             error=SweepError, where=where,
                             missing=lambda _: SweepError(f"{where}: no trainer registry file there"), empty={})
    if isinstance(data, Mapping) and set(data) == {"trainers"}:
        data = data["trainers"]
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise SweepError(f"{where}: a trainer registry maps trainer names to {{command, env, cwd, timeout_s}}")
    import re

    trainers: dict[str, RegisteredTrainer] = {}
    for name, entry in data.items():
        if not isinstance(name, str) or not re.match(_NAME_PATTERN, name):
            raise SweepError(f"{where}: trainer name {name!r} must match {_NAME_PATTERN}")
        try:
            trainers[name] = RegisteredTrainer.model_validate(entry)
        except ValidationError as exc:
            raise SweepError(f"{where}: {validation_messages(exc, name)}") from None
    return trainers


def resolve_trainer(backend: Mapping[str, Any], trainers: Mapping[str, RegisteredTrainer]) -> dict[str, Any]:
    """A command backend that names a registered trainer, with the trainer's command, env and cwd filled in (the
    trainer's name kept for the record). A spec's timeout may lower the trainer's, never raise it."""
    name = backend.get("trainer")
    if name not in trainers:
        known = sorted(trainers) or f"none: the operator registers trainers with {TRAINERS_ENV}"
        raise SweepError(f"backend.trainer: no registered trainer {name!r}; registered: {known}")
    entry = trainers[str(name)]
    timeout = backend.get("timeout_s")
    if entry.timeout_s is not None:
        timeout = entry.timeout_s if timeout is None else min(float(timeout), entry.timeout_s)
    return {**dict(backend), "command": list(entry.command), "env": dict(entry.env), "cwd": entry.cwd,
            "timeout_s": timeout}


def with_trainer(spec: SweepSpec, trainers: Mapping[str, RegisteredTrainer]) -> SweepSpec:
    """`spec` with its registered trainer's command filled in from `trainers` (`resolve_trainer`): the one fill-in,
    done where the spec enters its first process (the service for a REST job, `run_sweep` for a local file). A spec
    with no trainer to fill in (the builtin backend, a command given) is returned as it is. The spec was validated
    where it came in: only the resolved backend is new, and only it is checked."""
    from ..specs import CommandBackend

    backend = spec.backend
    if not isinstance(backend, CommandBackend) or backend.command is not None:
        return spec
    resolved = resolve_trainer(backend.model_dump(mode="json"), trainers)
    return spec.model_copy(update={"backend": CommandBackend.model_validate(resolved)})
