"""What a token allows, in code: REST specs run only registered trainers, the service's secrets never reach the
processes it starts, and reads show specs with the trainer environment redacted (docs/security.md)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from fastapi.exceptions import RequestValidationError

from sweeper import SweepSpec
from sweeper.demand import TrialMemory
from sweeper.search import RegisteredTrainer
from sweeper.settings import TRAINERS_ENV
from sweeper.specs import CommandBackend
from trials.core import SERVICE_SECRET_ENV

from .settings import Settings

if TYPE_CHECKING:
    from sweeper.transfer import TransferSpec

__all__ = ["TrustedHosts", "check_launch", "check_memory", "check_rest_paths", "check_rest_spec", "check_rungs",
           "check_work", "forget_secret_env",
           "install_log_redaction", "scrub_env"]

# Fields of a command backend that only a registered trainer may set over REST.
_OPERATOR_ONLY = ("command", "env", "cwd")


def _refuse(loc: tuple[str | int, ...], message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", *loc), "msg": message, "type": "value_error"}])


# Keys that name a file or folder wherever they appear in a trial section (a dataset's or an extractor's options
# pass through to constructors: `root`, `cache_dir`, `path`, `captions_file`, a team's own `weights_path`, ...).
_PATH_KEY = re.compile(r"(^|_)(root|path|paths|dir|dirs|directory|folder|file|files|filename|cache|weights|"
                       r"checkpoint|checkpoints|ckpt|home|prefix|location|uri|url)$", re.IGNORECASE)
# A file name inside an already-checked folder (`captions_file: captions.jsonl` below a registered root).
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


def _looks_like_path(value: str) -> bool:
    return (value.startswith(("/", "~", ".", "\\")) or "/" in value or "\\" in value or "://" in value
            or re.match(r"^[A-Za-z]:", value) is not None)


def _inside(value: str, roots: Sequence[Path]) -> bool:
    """An absolute path, without `..`, inside a registered folder once symbolic links are resolved."""
    pure = PurePosixPath(value)
    if not pure.is_absolute() or ".." in pure.parts or "\\" in value:
        return False
    real = Path(os.path.realpath(value))
    return any(real == root or root in real.parents for root in roots)


def _path_fields(value: Any, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str, bool]]:
    """(location, string, named as a path by its key) for every string in free-form data."""
    if isinstance(value, Mapping):
        for k, item in value.items():
            if isinstance(item, str):
                yield (*where, str(k)), item, bool(_PATH_KEY.search(str(k)))
            else:
                yield from _path_fields(item, (*where, str(k)))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, str):
                yield (*where, f"[{i}]"), item, False
            else:
                yield from _path_fields(item, (*where, f"[{i}]"))


def check_rest_paths(trial: Mapping[str, Any], roots: Sequence[Path], where: tuple[str, ...] = ("trial",)) -> None:
    """Refuse, as a 422 naming the field, any value of a trial section that can name a file or folder on the server
    (a checkpoint folder, a dataset root, a captions file, a cache, weights, whatever a dataset's or extractor's
    options pass on) unless it lies in a location the operator registered (`SCALESWEEP_DATA_PATHS`). A plain file
    name under a key like `captions_file` stays allowed: it is read inside a root that was itself checked."""
    resolved = [Path(os.path.realpath(r)) for r in roots]
    for loc, value, path_key in _path_fields(trial, where):
        named = path_key or _looks_like_path(value)
        if not named or _inside(value, resolved):
            continue
        if path_key and loc[-1].lower().endswith(("file", "filename")) and _PLAIN_NAME.match(value):
            continue
        where_ok = (f"registered: {[str(r) for r in roots]}" if roots
                    else "none is registered (the operator sets SCALESWEEP_DATA_PATHS)")
        raise _refuse(loc, (
            "names a file or folder on the server; over REST a spec may only name a location the operator "
            f"registered, as an absolute path inside it ({where_ok}); the local CLI (scalesweep sweep run) takes "
            "any path"))


def check_work(total: int, limit: int, what: str) -> None:
    """Refuse (422) a submission whose total work, in training-step units, is over the service's limit."""
    if total > limit:
        raise _refuse((), (
            f"this {what}'s total work is {total:,} training-step units (every trial's steps plus its evaluations' "
            f"sampling), above this service's limit of {limit:,} (SCALESWEEP_MAX_WORK); run fewer points, seeds, "
            "baselines or steps, or ask the operator to raise the limit"))


def check_rungs(rungs: Mapping[tuple[str | int, ...], str], allowed: Sequence[str]) -> None:
    """Refuse (422, naming the field) a rung the operator did not allow over REST (`SCALESWEEP_REST_RUNGS`)."""
    for loc, rung in rungs.items():
        if rung not in allowed:
            raise _refuse(loc, (
                f"rung {rung!r} is not offered over REST by this service; allowed: {list(allowed)} "
                "(SCALESWEEP_REST_RUNGS, set by the operator)"))


def check_memory(estimates: Mapping[tuple[str | int, ...], TrialMemory], limit: int, what: str) -> None:
    """Refuse (422) a job whose largest trial's estimated memory is over `limit` bytes; the errors name the
    rung's field and the trial fields the estimate grows with, and the detail gives the estimate by part."""
    over = {loc: m for loc, m in estimates.items() if m.total > limit}
    if not over:
        return
    loc, m = max(over.items(), key=lambda item: item[1].total)
    gb = 1e9
    message = (
        f"one trial of this {what} needs an estimated {m.total / gb:,.1f} GB ({m.parameters:,} parameters: "
        f"{m.state / gb:,.1f} GB of weights, gradients, optimizer state and EMA; {m.activations / gb:,.1f} GB of "
        f"activations at its batch and image size; {m.images / gb:,.1f} GB of evaluation images), above this "
        f"service's limit of {limit / gb:,.1f} GB a trial (SCALESWEEP_MAX_TRIAL_MEMORY_GB); choose a smaller rung, "
        "batch_size, data.image_size or eval sample counts, or ask the operator to raise the limit")
    fields = [loc, ("trial", "batch_size"), ("trial", "data", "image_size")]
    raise RequestValidationError([{"loc": ("body", *f), "msg": message, "type": "value_error"} for f in fields])


def check_capacity_at_submission(spec: Any, cpus: float, gpus: float, local_ray: bool = False) -> None:
    """Refuse (422 naming `execution.workers_per_trial`) a job whose one trial needs more CPUs or GPUs than the
    workers have (`SCALESWEEP_MAX_TRIAL_CPUS` / `_GPUS`), or than the Ray it starts for itself has
    (`execution.num_cpus`, with `local_ray`): its placement group would never be scheduled."""
    from sweeper.specs.checks import check_capacity

    try:
        check_capacity(spec, cpus, gpus, local_ray=local_ray)
    except ValueError as exc:  # the field that sets the widest trial's workers (a rung's own, e.g. paper-1.3b)
        field = (getattr(spec, "widest_trial", None) or ("execution.workers_per_trial", 0))[0]
        # the field's location where the job gives it (a rung's name may hold a dot: paper-1.3b), else the
        # section and key its dotted name splits into
        loc = getattr(spec, "widest_loc", None) or tuple(field.split(".", 1))
        raise _refuse(loc, str(exc)) from None


def check_rest_spec(spec: SweepSpec | TransferSpec, trainers: Mapping[str, RegisteredTrainer],
                    data_paths: Sequence[Path] = ()) -> None:
    """Refuse, as a 422 naming the field, what a token holder may not ask for in a typed spec: a free-form command
    (or its env or working directory), an unregistered trainer, a Ray cluster of its own choosing, a path on the
    server outside the registered locations. A transfer has no backend of its own: it runs its sweep's."""
    check_rest_paths(spec.trial, data_paths)
    backend = spec.backend if isinstance(spec, SweepSpec) else None
    if isinstance(backend, CommandBackend):
        for field in _OPERATOR_ONLY:
            if getattr(backend, field):
                raise _refuse(("backend", field), (
                    f"free-form trainer {field}s are not accepted over REST (a token is not a shell); name a trainer "
                    f"the operator registered in {TRAINERS_ENV} with backend.trainer, or run the sweep with the "
                    "local CLI (scalesweep sweep run)"))
        if backend.trainer not in trainers:
            known = sorted(trainers)
            where = f"registered: {known}" if known else f"none is registered (the operator sets {TRAINERS_ENV})"
            raise _refuse(("backend", "trainer"), f"no registered trainer {backend.trainer!r}; {where}")
    if spec.execution is not None and spec.execution.ray_address:
        raise _refuse(("execution", "ray_address"), "the Ray cluster is the operator's choice "
                      "(SCALESWEEP_RAY_ADDRESS); remove execution.ray_address")


def check_launch(spec: Mapping[str, Any], trainers: Mapping[str, RegisteredTrainer]) -> None:
    """Refuse to start a stored job (RuntimeError) whose command backend the registry does not cover: a free-form
    command (a record stored before trainers were required) or a trainer the operator removed since."""
    backend = spec.get("backend") or {}
    if backend.get("name") != "command":
        return
    if not backend.get("trainer"):
        raise RuntimeError(f"the command backend runs only registered trainers ({TRAINERS_ENV}); this spec has a "
                           "free-form command")
    if backend["trainer"] not in trainers:
        known = sorted(trainers) or f"none: the operator registers trainers with {TRAINERS_ENV}"
        raise RuntimeError(f"backend.trainer: no registered trainer {backend['trainer']!r}; registered: {known}")


class _RedactingFactory:
    """A log record factory that writes every record's message without credentials (`Settings.redact`): a log line
    that quotes a URI with its password, from any logger (ours, uvicorn's, a library's), shows neither."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.secrets = inner, set[str]()

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        from trials.core import without_credentials

        record = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it as usual
            return record
        clean = without_credentials(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return record


def install_log_redaction(secrets: set[str]) -> None:
    """Redact `secrets` and URI credentials from every log record of this process from now on (once per process;
    later calls add secrets)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _RedactingFactory):
        factory = _RedactingFactory(factory)
        logging.setLogRecordFactory(factory)
    factory.secrets |= secrets


def forget_secret_env(names: Sequence[str] = SERVICE_SECRET_ENV) -> list[str]:
    """Erase `names` from this process's environment, including the copy `/proc/<pid>/environ` shows; returns
    the names erased.

    `/proc/<pid>/environ` shows the environment block the process was started with, whatever `os.environ` does
    later, and any process of the same user may read it (a trainer included): so each value is overwritten with
    NUL bytes in that block (found through `env_start` in /proc/self/stat, as setproctitle finds argv), then the
    variable is removed (`unsetenv`). Call it once the settings are read. Linux only; elsewhere the variables are
    only removed. Full separation is a separate user for trainers (docs/security.md)."""
    import ctypes

    erased = [n for n in names if n in os.environ]
    try:
        block = Path("/proc/self/environ").read_bytes()
        env_start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[47])
    except (OSError, IndexError, ValueError):  # not Linux
        block, env_start = b"", 0
    offset = 0
    for entry in block.split(b"\0"):
        key, eq, value = entry.partition(b"=")
        if eq and key.decode(errors="replace") in names and value:
            ctypes.memset(env_start + offset + len(key) + 1, 0, len(value))
        offset += len(entry) + 1
    for name in erased:
        os.environ.pop(name, None)
    return erased


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

