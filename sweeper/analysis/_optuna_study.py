"""A sweep written to an Optuna RDB storage, one study per sweep, so Optuna's own tools open it as they are.

    scalesweep sweep optuna out/sweeps/tiny [--storage sqlite:///optuna.db]
    optuna-dashboard sqlite:///optuna.db     # or optuna.visualization.plot_* on optuna.load_study(...)

The sweeper keeps its ledger in MLflow and rebuilds its Optuna sampler from it in memory; this writes a copy for
reading. Each trial that counts (the latest attempt of each trial: `TrialRecord`) becomes one Optuna trial:

- params: the searched ones (K, gamma, lr, ...), the `seed` and the `arm` (periodic, adamw, muon), so a slice or a
  parallel-coordinates plot can colour by seed or arm;
- value: the trial's objective (mean FD at the sweep's eval steps) for a finished trial; state COMPLETE, or FAIL,
  PRUNED or RUNNING as recorded;
- intermediate values: the FD at each eval step (so the dashboard's intermediate-value plot shows the curves);
- user attributes: the trial key, point key, role, MLflow run id, the FD's feature space, optimizer seconds per
  step and Newton-Schulz calls; the study's user attributes name the sweep, its MLflow parent run and its choice.

Writing again replaces the sweep's study (the storage mirrors the ledger; nothing else is lost). Distributions come
from the values the trials took: integers as `IntDistribution`, floats as `FloatDistribution` (log scale when
they span a decade or more, as a learning rate does), seed and arm as categorical.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SweepError
from ..selection import TrialRecord, latest_attempts
from ._importance import distribution_of

if TYPE_CHECKING:
    from ._result import SweepResult

__all__ = ["OPTUNA_STATES", "default_optuna_storage", "optuna_study_name", "write_optuna_study"]

# The sweeper's trial states as Optuna's: a cancelled trial (interrupted, resumable) is shown as FAIL with its
# state kept in the user attributes; PENDING trials never ran and are not written.
OPTUNA_STATES = {"SUCCEEDED": "COMPLETE", "FAILED": "FAIL", "PRUNED": "PRUNED", "RUNNING": "RUNNING",
                 "CANCELLED": "FAIL"}


def optuna_study_name(result: SweepResult) -> str:
    """The study's name in the storage: the sweep's name and id (names repeat across sweeps, ids do not)."""
    return f"{result.name or 'sweep'}-{result.sweep_id}"


def default_optuna_storage(workdir: str | Path) -> str:
    """SQLite beside the sweep's work folder: `<workdir>/optuna.db`."""
    return f"sqlite:///{Path(workdir).resolve() / 'optuna.db'}"


def _distributions(trials: Sequence[TrialRecord]) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution

    names = sorted({k for t in trials for k in t.params})
    out: dict[str, Any] = {k: distribution_of([t.params[k] for t in trials if k in t.params]) for k in names}
    out["seed"] = CategoricalDistribution(sorted({t.seed for t in trials}))
    out["arm"] = CategoricalDistribution(sorted({t.arm for t in trials}))
    return out


def _frozen(rec: TrialRecord, distributions: dict[str, Any]) -> Any:
    from optuna.trial import TrialState, create_trial

    state = TrialState[OPTUNA_STATES[rec.status]]
    params = {**rec.params, "seed": rec.seed, "arm": rec.arm}
    value = rec.objective if state == TrialState.COMPLETE else None
    if state == TrialState.COMPLETE and (value is None or not math.isfinite(value)):
        state, value = TrialState.FAIL, None  # finished without a finite objective (diverged): not a value
    attrs = {"trial_key": rec.trial_key, "point_key": rec.point_key, "role": rec.role, "attempt": rec.attempt,
             "scalesweep_state": rec.status, "mlflow_run_id": rec.run_id, "fd_metric_name": rec.metric_name,
             "optimizer_step_time_s": rec.optimizer_step_time_s, "ns5_calls": rec.ns5_calls,
             "steps_done": rec.steps_done, "error": rec.error}
    return create_trial(state=state, value=value, params=params,
                        distributions={k: distributions[k] for k in params},
                        intermediate_values={int(s): float(v) for s, v in rec.fd.items() if math.isfinite(v)},
                        user_attrs={k: v for k, v in attrs.items() if v is not None})


def write_optuna_study(result: SweepResult, storage: str, *, study_name: str | None = None) -> str:
    """Write `result`'s trials to `storage` (an Optuna RDB URL) as one study; returns the study's name."""
    import optuna

    from trials import without_credentials

    name = study_name or optuna_study_name(result)
    trials = [t for t in latest_attempts(result.trials).values() if t.status != "PENDING"]
    if not trials:
        raise SweepError(f"sweep {result.sweep_id} has no trial that ran yet: nothing to write to Optuna")
    try:
        optuna.delete_study(study_name=name, storage=storage)
    except KeyError:
        pass  # no study of that name yet
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    distributions = _distributions(trials)
    study.add_trials([_frozen(t, distributions) for t in trials])
    selection = result.selection
    for key, value in {
        "scalesweep_sweep_id": result.sweep_id, "sweep_name": result.name, "state": result.state,
        "mlflow_tracking_uri": without_credentials(result.tracking_uri), "mlflow_experiment": result.experiment,
        "mlflow_parent_run_id": result.parent_run_id, "eval_steps": result.eval_steps, "seeds": result.seeds,
        "objective": f"mean FD at eval steps {result.eval_steps} (per trial; a point's objective is the mean "
                     "over its seeds)",
        "chosen": selection.point.point_key if selection is not None else None,
        "chosen_params": selection.params if selection is not None else None,
        "rule": selection.rule if selection is not None else None,
    }.items():
        study.set_user_attr(key, value)
    return name
