"""What a token allows, in code: REST specs run only registered trainers, the service's secrets never reach the
processes it starts, and reads show specs with the trainer environment redacted (docs/security.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fastapi.exceptions import RequestValidationError

from sweeper import TRAINERS_ENV, RegisteredTrainer, SweepError, resolve_trainer

from ._settings import Settings

__all__ = ["TrustedHosts", "check_rest_spec", "expand_trainer", "scrub_env"]

# Fields of a command backend that only a registered trainer may set over REST.
_OPERATOR_ONLY = ("command", "env", "cwd")


def _refuse(loc: tuple[str, ...], message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", *loc), "msg": message, "type": "value_error"}])


def check_rest_spec(spec: Mapping[str, Any], trainers: Mapping[str, RegisteredTrainer]) -> None:
    """Refuse, as a 422 naming the field, what a token holder may not ask for: a free-form command (or its env or
    working directory), an unregistered trainer, a Ray cluster of its own choosing."""
    backend = spec.get("backend") or {}
    if backend.get("name") == "command":
        for field in _OPERATOR_ONLY:
            if backend.get(field):
                raise _refuse(("backend", field), (
                    f"free-form trainer {field}s are not accepted over REST (a token is not a shell); name a trainer "
                    f"the operator registered in {TRAINERS_ENV} with backend.trainer, or run the sweep with the "
                    "local CLI (scalesweep sweep run)"))
        name = backend.get("trainer")
        if name not in trainers:
            known = sorted(trainers)
            where = f"registered: {known}" if known else f"none is registered (the operator sets {TRAINERS_ENV})"
            raise _refuse(("backend", "trainer"), f"no registered trainer {name!r}; {where}")
    if (spec.get("execution") or {}).get("ray_address"):
        raise _refuse(("execution", "ray_address"), "the Ray cluster is the operator's choice "
                      "(SCALESWEEP_RAY_ADDRESS); remove execution.ray_address")


def expand_trainer(spec: dict[str, Any], trainers: Mapping[str, RegisteredTrainer]) -> dict[str, Any]:
    """The spec a driver runs: a named trainer's command, env and cwd filled in from the registry. A command
    backend without a registered trainer is refused here too (a record stored before trainers were required)."""
    backend = spec.get("backend") or {}
    if backend.get("name") != "command":
        return spec
    if not backend.get("trainer"):
        raise RuntimeError(f"the command backend runs only registered trainers ({TRAINERS_ENV}); this spec has a "
                           "free-form command")
    try:
        return {**spec, "backend": resolve_trainer(backend, trainers)}
    except SweepError as exc:  # the operator removed the trainer since the sweep was submitted
        raise RuntimeError(str(exc)) from None


def scrub_env(env: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """`env` without the service's secrets: their variables, and any variable holding one of their values."""
    secrets = settings.secret_values
    values = {v for v in secrets.values() if v}
    return {k: v for k, v in env.items() if k not in secrets and v not in values}


def child_env(settings: Settings, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of a process the service starts: its own, scrubbed, plus `extra`."""
    return scrub_env({**os.environ, **extra}, settings)


class TrustedHosts:
    """ASGI middleware: answer only requests whose Host is listed (`SCALESWEEP_ALLOWED_HOSTS`); others get a 400
    problem+json, as every other error. `*.example.org` matches subdomains; a port in the header is ignored."""

    def __init__(self, app: Any, hosts: list[str]) -> None:
        self.app = app
        self.exact = {h.lower() for h in hosts if not h.startswith("*.")}
        self.suffixes = tuple(h[1:].lower() for h in hosts if h.startswith("*."))

    def allowed(self, host: str) -> bool:
        host = host.strip().lower()
        name = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
        return name in self.exact or (bool(self.suffixes) and name.endswith(self.suffixes))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
            if not self.allowed(host):
                from ._problems import problem

                response = problem(400, f"Host {host!r} is not one this service answers (SCALESWEEP_ALLOWED_HOSTS)",
                                   instance=scope.get("path"))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

