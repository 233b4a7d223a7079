"""The small core every package shares: the error root and its kinds (`trials.core.errors`), the one settings
mechanism (`EnvSettings`), redaction and the one list of the service's secret variables, the process tree
(`trials.core.proctree`: tagged processes, ending them, adopting orphans), the one YAML/JSON reader
(`read_mapping`) and lazy faces (`lazy_face`).

It sits under `trials` because `trials` is the lowest layer (imports point api -> sweeper -> trials), so every
package can use it; it imports nothing but the standard library, pydantic and (to read YAML) pyyaml. Names load on
first use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from . import lazy

if TYPE_CHECKING:
    from . import errors, proctree
    from .errors import (
        InputError,
        JobError,
        JobFailedError,
        ScalesweepError,
        TrialError,
        field_location,
        register_union_forms,
        validation_error_message,
        validation_messages,
        validation_text,
    )
    from .files import parse_mapping, read_mapping
    from .lazy import homes_of, lazy_attributes, lazy_face
    from .redact import SERVICE_SECRET_ENV, uri_secrets, without_credentials
    from .settings import EnvSettings

__all__, __getattr__, __dir__ = lazy.lazy_face(__name__, globals())
