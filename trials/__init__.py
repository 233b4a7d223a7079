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

from typing import TYPE_CHECKING

from ._errors import (
    InputError,
    JobError,
    JobFailedError,
    ScalesweepError,
    TrialError,
    validation_error_message,
    validation_messages,
    validation_text,
)
from ._lazy import homes_of, lazy_attributes
from ._proctree import (
    JOB_TAG_ENV,
    TRIAL_TAG_ENV,
    adopt_orphans,
    descendants,
    end_tagged,
    process_alive,
    process_table,
    reap_children,
    tag_values,
    tagged_pids,
)
from ._redact import uri_secrets, without_credentials
from ._settings import EnvSettings, TrialSettings

if TYPE_CHECKING:
    from ._command import PLACEHOLDERS, CommandConfig, run_command_trial
    from ._commandline import CommandLine
    from ._config import CPU_AUX_LR, DataConfig, EvalConfig, TrialConfig, TrialResult, default_eval_steps
    from ._run import metric_floor, run_trial
    from ._tracking import DEFAULT_EXPERIMENT, DEFAULT_TRACKING_URI, RunLogger, TrackingConfig, ensure_store, flatten

# Imported on first use (module __getattr__ below): `import trials.optim` or `from trials import ScalesweepError`
# must not pay for torch, the trial loop and its tracking code (a few seconds), nor need the `sweep` extra.
_LAZY = {
    "._command": ("PLACEHOLDERS", "CommandConfig", "run_command_trial"),
    "._commandline": ("CommandLine",),
    "._config": ("CPU_AUX_LR", "DataConfig", "EvalConfig", "TrialConfig", "TrialResult", "default_eval_steps"),
    "._run": ("metric_floor", "run_trial"),
    "._tracking": ("DEFAULT_EXPERIMENT", "DEFAULT_TRACKING_URI", "RunLogger", "TrackingConfig", "ensure_store",
                    "flatten"),
}
_SUBPACKAGES = ("data", "flow", "metrics", "models", "optim", "text")

__all__ = [
    "CPU_AUX_LR",
    "DEFAULT_EXPERIMENT",
    "DEFAULT_TRACKING_URI",
    "JOB_TAG_ENV",
    "PLACEHOLDERS",
    "TRIAL_TAG_ENV",
    "CommandConfig",
    "CommandLine",
    "DataConfig",
    "EnvSettings",
    "EvalConfig",
    "InputError",
    "JobError",
    "JobFailedError",
    "RunLogger",
    "ScalesweepError",
    "TrackingConfig",
    "TrialConfig",
    "TrialError",
    "TrialResult",
    "TrialSettings",
    "adopt_orphans",
    "default_eval_steps",
    "descendants",
    "end_tagged",
    "ensure_store",
    "flatten",
    "lazy_attributes",
    "metric_floor",
    "process_alive",
    "process_table",
    "reap_children",
    "run_command_trial",
    "run_trial",
    "tag_values",
    "tagged_pids",
    "uri_secrets",
    "validation_error_message",
    "validation_messages",
    "validation_text",
    "without_credentials",
]


__getattr__, __dir__ = lazy_attributes(__name__, globals(), homes_of(_LAZY), _SUBPACKAGES)
