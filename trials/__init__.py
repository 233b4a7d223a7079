"""One training run: the model ladder, data, optimizer, train loop, FD evaluation and timing.

Knows nothing of Ray or HTTP. `run_trial(config)` is the entry point; subpackages hold the parts:
`trials.optim` (optimizers and routing), `trials.models` (MMDiT and its size ladder), `trials.data`
(captioned image sets), `trials.text` (text encoders), `trials.metrics` (Fréchet distance, feature extractors)
and `trials.flow` (rectified-flow objective and sampler). `trials.record` owns the run record in MLflow: tag and
metric names, run states, the reader, and the context manager both trial backends open their runs with.

`trials.core` is the small core every package shares (the error root, the settings mechanism, redaction and the
service's secret variables, the process tree, lazy faces, the registry of named factories, the trial's settings).
This face names the error root and its kinds, and `without_credentials`, because the other packages raise and
redact through `trials`; every other core name is imported from `trials.core` (or `trials.core.proctree`).

The names below load on first use, so `import trials.record` (the sweeper, the dashboards) or `import
trials.optim` does not pull in torch's training stack, MLflow or the feature extractors.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.lazy import lazy_face

if TYPE_CHECKING:
    from . import core, data, flow, metrics, models, optim, record, text
    from ._command import PLACEHOLDERS, CommandConfig, run_command_trial
    from ._commandline import CommandLine
    from ._config import CPU_AUX_LR, TrialConfig, TrialResult, default_eval_steps
    from ._run import metric_floor, run_trial
    from ._tracking import DEFAULT_EXPERIMENT, TrackingConfig, ensure_store
    from .core.errors import InputError, JobError, JobFailedError, ScalesweepError, TrialError
    from .core.redact import without_credentials
    from .core.trial_settings import TrialSettings

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
del lazy_face  # the tool that wrote the face, not a name on it
