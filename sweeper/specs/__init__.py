"""The typed, strict sweep spec: what to search, on which rung and horizon, how to run it, where to record it.

- `_models`: `SweepSpec` (validated; `load_spec`, `read_spec`) and `redact_spec`; `_sections` its sections;
  `_values` the searchable parameters, their caps and text (`format_params`, `canonical_value`) and the tags;
- `checks`: the checks every job spec shares (a transfer's too): the caps, free-form data's shape and numbers,
  seeds and the `trial` section, as functions and as field types;
What a job asks of the workers (work, memory) is estimated from the typed spec in `sweeper.demand`.

A spec is validated once, where it enters (a file, a mapping, a request); everything after takes the typed spec.
"""

from __future__ import annotations

from ._models import SweepSpec, load_spec, read_spec, redact_spec
from ._sections import (
    BaselineSpec,
    BuiltinBackend,
    CommandBackend,
    ConfirmSpec,
    EarlyStoppingSpec,
    ExecutionSpec,
    ParamRange,
    RetrySpec,
    SearchSpec,
    SelectionSpec,
    SweepTracking,
)
from ._values import SEARCH_PARAMS, canonical_value, format_params

__all__ = [
    "SEARCH_PARAMS",
    "BaselineSpec",
    "BuiltinBackend",
    "CommandBackend",
    "ConfirmSpec",
    "EarlyStoppingSpec",
    "ExecutionSpec",
    "ParamRange",
    "RetrySpec",
    "SearchSpec",
    "SelectionSpec",
    "SweepSpec",
    "SweepTracking",
    "canonical_value",
    "format_params",
    "load_spec",
    "read_spec",
    "redact_spec",
]
