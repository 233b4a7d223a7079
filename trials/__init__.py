"""One training run: the model ladder, data, optimizer, train loop, FD evaluation and timing.

Knows nothing of Ray or HTTP. `run_trial(config)` is the entry point; subpackages hold the parts:
`trials.optim` (optimizers and routing), `trials.models` (MMDiT and its size ladder), `trials.data`
(captioned image sets), `trials.text` (text encoders), `trials.metrics` (Fréchet distance, feature extractors)
and `trials.flow` (rectified-flow objective and sampler). `trials.record` owns the run record in MLflow: tag and
metric names, run states, the reader, and the context manager both trial backends open their runs with.

The names below load on first use, so `import trials.record` (the sweeper, the dashboards) or `import
trials.optim` does not pull in torch's training stack, MLflow or the feature extractors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._command import PLACEHOLDERS, CommandConfig, run_command_trial
    from ._config import CPU_AUX_LR, DataConfig, EvalConfig, TrialConfig, TrialResult, default_eval_steps
    from ._errors import TrialError
    from ._run import metric_floor, run_trial
    from ._tracking import DEFAULT_EXPERIMENT, DEFAULT_TRACKING_URI, RunLogger, TrackingConfig, ensure_store

# public name -> the module that defines it
_SOURCES = {
    "PLACEHOLDERS": "_command",
    "CommandConfig": "_command",
    "run_command_trial": "_command",
    "CPU_AUX_LR": "_config",
    "DataConfig": "_config",
    "EvalConfig": "_config",
    "TrialConfig": "_config",
    "TrialResult": "_config",
    "default_eval_steps": "_config",
    "TrialError": "_errors",
    "metric_floor": "_run",
    "run_trial": "_run",
    "DEFAULT_EXPERIMENT": "_tracking",
    "DEFAULT_TRACKING_URI": "_tracking",
    "RunLogger": "_tracking",
    "TrackingConfig": "_tracking",
    "ensure_store": "_tracking",
}

__all__ = [
    "CPU_AUX_LR",
    "DEFAULT_EXPERIMENT",
    "DEFAULT_TRACKING_URI",
    "PLACEHOLDERS",
    "CommandConfig",
    "DataConfig",
    "EvalConfig",
    "RunLogger",
    "TrackingConfig",
    "TrialConfig",
    "TrialError",
    "TrialResult",
    "default_eval_steps",
    "ensure_store",
    "metric_floor",
    "run_command_trial",
    "run_trial",
]


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{source}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_SOURCES})
