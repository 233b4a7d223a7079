"""One training run: the model ladder, data, optimizer, train loop, FD evaluation and timing.

Knows nothing of Ray or HTTP. `run_trial(config)` is the entry point; subpackages hold the parts:
`trials.optim` (optimizers and routing), `trials.models` (MMDiT and its size ladder), `trials.data`
(captioned image sets), `trials.text` (text encoders), `trials.metrics` (Fréchet distance, feature extractors)
and `trials.flow` (rectified-flow objective and sampler).
"""

from __future__ import annotations

from ._command import PLACEHOLDERS, CommandConfig, run_command_trial
from ._config import CPU_AUX_LR, DataConfig, EvalConfig, TrialConfig, TrialResult, default_eval_steps
from ._errors import TrialError
from ._run import metric_floor, run_trial
from ._tracking import DEFAULT_EXPERIMENT, DEFAULT_TRACKING_URI, RunLogger, TrackingConfig, ensure_store

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
