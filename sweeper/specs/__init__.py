"""The typed, strict sweep spec: what to search, on which rung and horizon, how to run it, where to record it.

- `_models`: `SweepSpec` and its sections (validated; `load_spec`, `read_spec`), `format_params`, `redact_spec`;
- `checks`: the checks every job spec shares (a transfer's too): the caps, free-form data's shape and numbers,
  seeds and the `trial` section, as functions and as field types;
- `_work`: what a sweep asks of the cluster, in training-step units (`sweep_work`, `trial_work`);
- `_memory`: what one trial holds in memory, estimated from its spec (`trial_memory_bytes`, `sweep_memory`).

A spec is validated once, where it enters (a file, a mapping, a request); everything after takes the typed spec.
"""

from __future__ import annotations

from ._memory import TrialMemory, sweep_memory, trial_memory, trial_memory_bytes
from ._models import (
    SEARCH_PARAMS,
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
    SweepSpec,
    SweepTracking,
    canonical_value,
    format_params,
    load_spec,
    read_spec,
    redact_spec,
)
from ._work import sweep_work, trial_work

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
    "TrialMemory",
    "canonical_value",
    "format_params",
    "load_spec",
    "read_spec",
    "redact_spec",
    "sweep_memory",
    "sweep_work",
    "trial_memory",
    "trial_memory_bytes",
    "trial_work",
]
