"""The project's one error root, its two kinds, and the one way to word a pydantic validation error.

Every package's own base error derives from `ScalesweepError`, so a caller (the CLI, the service) can catch all
of the project's expected failures at once and let anything else surface as the bug it is:

- `InputError` (also a `ValueError`): the input cannot be used as given: a config, a spec, records, a name.
- `JobError` (also a `RuntimeError`): a trial, sweep or transfer could not start, resume, be read or cancelled as
  asked (a work folder in the wrong state, a failed external command).
- `JobFailedError`: a job's driver broke down mid-run; the job is recorded as FAILED and can be resumed. The CLI
  exits 1 for these and 2 for every other expected error.

The package bases keep their historical Python bases too (`SweepError` and `TrialError` are `RuntimeError`s,
`ModelError` a `ValueError`), so older `except` clauses still catch them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = [
    "InputError",
    "JobError",
    "JobFailedError",
    "ScalesweepError",
    "TrialError",
    "field_location",
    "register_union_forms",
    "validation_error_message",
    "validation_messages",
    "validation_text",
]


class ScalesweepError(Exception):
    """Root of every error the project raises on purpose."""


class InputError(ScalesweepError, ValueError):
    """An input (config, spec, records, name, option) that cannot be used as given."""


class JobError(ScalesweepError, RuntimeError):
    """A job (trial, sweep, transfer) that cannot run, resume, be read or be cancelled as asked."""


class JobFailedError(JobError):
    """A job's driver failed mid-run; the job is recorded as FAILED and can be resumed."""


class TrialError(JobError):
    """A trial could not run as configured, or its external command failed."""


# field name -> the tags of its discriminated union's forms (e.g. a transfer's `rungs`: "list" or "mapping"):
# pydantic puts the tag in an error's location ("rungs.mapping.cpu-s.workers"), where a reader wrote no such key.
_UNION_FORMS: dict[str, frozenset[str]] = {}


def register_union_forms(field: str, tags: Sequence[str]) -> None:
    """Leave the union's form tags `tags` out of the location of any error under a top-level field `field`."""
    _UNION_FORMS[field] = _UNION_FORMS.get(field, frozenset()) | frozenset(tags)


def field_location(loc: Sequence[Any]) -> tuple[Any, ...]:
    """An error location as the reader wrote the value: a registered union's form tag after its field (at the top,
    or after FastAPI's request part "body") is dropped: ("body", "rungs", "mapping", "cpu-s", "workers") ->
    ("body", "rungs", "cpu-s", "workers")."""
    out = tuple(loc)
    for i in (0, 1):
        if len(out) > i + 1 and isinstance(out[i], str) and out[i + 1] in _UNION_FORMS.get(out[i], ()):
            return (*out[:i + 1], *out[i + 2:])
    return out


def validation_text(error: Mapping[str, Any]) -> str:
    """One pydantic error's message. pydantic words a validator's ValueError as "Value error, <our message>": the
    prefix only adds noise, so it is dropped."""
    return str(error.get("msg", "")).removeprefix("Value error, ")


def validation_messages(
    exc: ValidationError | Sequence[Mapping[str, Any]],
    prefix: str = "",
    *,
    with_field: bool = True,
    field: Callable[[Sequence[Any]], str] | None = None,
) -> str:
    """Every error of a pydantic ValidationError (or a list of its error dicts, as FastAPI hands them over) as
    'prefix.field.path: message', joined by '; '.

    `with_field=False` leaves the field path out (the prefix alone names the value); `field` words a location
    another way (e.g. as the environment variable that set it). An error without a location is its message."""
    parts = []
    for err in exc if isinstance(exc, Sequence) else exc.errors():
        loc = field_location(err["loc"]) if with_field else ()
        if field is not None and loc:
            where = ".".join(p for p in (prefix, field(loc)) if p)
        else:
            where = ".".join(str(p) for p in (prefix, *loc) if p != "")
        parts.append(f"{where}: {validation_text(err)}" if where else validation_text(err))
    return "; ".join(parts)


def validation_error_message(
    exc: ValidationError, what: str | None = None, *, field: Callable[[Sequence[Any]], str] | None = None
) -> str:
    """One line for a pydantic ValidationError: 'invalid <what>: field: message; ...' (`what` defaults to the
    model's title)."""
    return f"invalid {what or exc.title}: {validation_messages(exc, field=field)}"
