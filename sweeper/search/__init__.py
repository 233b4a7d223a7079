"""The search: which trial runs next, and running it on Ray Tune.

- `_planner`: the Optuna study that plans the sweep's points (`Planner`, `TrialRequest`, `SAMPLERS`), told what
  MLflow already holds so a resumed sweep never re-runs a finished trial;
- `_hooks`: what the Tune adapters ask of the driver (`TuneHooks`, `DriverHooks`), as protocols;
- `_tune`: the Tune adapters (searcher, ASHA scheduler, stopper, monitor) over those hooks;
- `_tune_stage`: the Tune stage (`run_tune`: start or attach to Ray, run Tune, turn signals into a cancel);
- `_trainable`: one trial attempt inside a Ray worker (`run_trial_attempt`), through a backend looked up by name
  (`BACKENDS`);
- `_trainers`: the registered trainers a command backend may name (`load_trainers`, `resolve_trainer`,
  `with_trainer`).

Ray, Tune and Optuna are imported inside the calls that need them.
"""

from __future__ import annotations

from ._hooks import DriverHooks
from ._planner import FINISHED, SAMPLERS, Planner, TrialRequest, list_search_methods
from ._trainable import BACKENDS, checkpoint_path, list_backends
from ._trainers import RegisteredTrainer, load_trainers, resolve_trainer, with_trainer
from ._tune_stage import remove_left_sessions, run_tune

__all__ = [
    "BACKENDS",
    "FINISHED",
    "SAMPLERS",
    "DriverHooks",
    "Planner",
    "RegisteredTrainer",
    "TrialRequest",
    "checkpoint_path",
    "list_backends",
    "list_search_methods",
    "load_trainers",
    "remove_left_sessions",
    "resolve_trainer",
    "run_tune",
    "with_trainer",
]
