"""The Ray Tune side of a sweep: searcher, ASHA scheduler, stopper and callback, each delegating to the sweep's
hooks (`_hooks.TuneHooks`, which the driver implements): this module does not know the driver.

Module-level classes (Tune pickles its config into the experiment folder: classes defined in a function would be
pickled by value with the driver they close over); each drops its driver reference when pickled, since the sweep's
state lives in MLflow, not in Tune's experiment checkpoint. Imported only by the driver process: it imports Ray.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray import tune
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler
from ray.tune.search import Searcher

from ._planner import FINISHED

if TYPE_CHECKING:
    from ._hooks import TuneHooks

__all__ = ["tune_parts"]


class _Unpicklable:
    """Tune pickles its configuration; the driver (MLflow client, locks) stays behind."""

    _driver: TuneHooks | None

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_driver"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._driver = None

    @property
    def driver(self) -> TuneHooks:
        if self._driver is None:
            raise RuntimeError("this Tune component was unpickled without its sweep driver")
        return self._driver


class SweepSearcher(_Unpicklable, Searcher):
    """Trials come from the sweep's planner; outcomes go back to it (and to the trials' MLflow runs)."""

    def __init__(self, driver: TuneHooks) -> None:
        super().__init__(metric="objective_so_far", mode="min")
        self._driver = driver

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        out = self.driver.suggest(trial_id)
        return Searcher.FINISHED if out == FINISHED else out  # type: ignore[return-value]  # Tune's FINISHED is a str

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.driver.on_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        self.driver.on_complete(trial_id, result, error)

    def save(self, checkpoint_path: str) -> None:
        # The sweep's state lives in MLflow (the ledger); Tune's copy is only a marker.
        Path(checkpoint_path).write_text(json.dumps({"ledger": "mlflow", "sweep_id": self.driver.sweep_id}))

    def restore(self, checkpoint_path: str) -> None:
        return None


def _role(trial: Any) -> str:
    return str(trial.config.get("job", {}).get("role", "search"))


class SweepASHA(_Unpicklable, AsyncHyperBandScheduler):
    """ASHA over the search trials only (baselines always run their horizon). It tells the driver when it stops a
    trial before its last eval step: a prune. At the last eval step its STOP is just the end of the trial."""

    def __init__(self, driver: TuneHooks, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._driver = driver

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        if _role(trial) == "search":
            super().on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if trial.trial_id not in self._trial_info:
            return self.CONTINUE
        decision = super().on_trial_result(tune_controller, trial, result)
        if decision == self.STOP and result.get("eval_index", self._max_t) < self._max_t:
            self.driver.on_prune(trial.trial_id, int(result["eval_index"]))
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if trial.trial_id in self._trial_info:
            super().on_trial_complete(tune_controller, trial, result)
            self._trial_info.pop(trial.trial_id, None)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._trial_info.pop(trial.trial_id, None)


class CancelStopper(_Unpicklable, tune.Stopper):
    """Stops every trial when the sweep is cancelled (cancel file, SIGTERM, SIGINT)."""

    def __init__(self, driver: TuneHooks) -> None:
        self._driver = driver

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return self.driver.cancel_requested()


class Monitor(_Unpicklable, tune.Callback):
    """Status file and progress lines on every Tune step; error text onto failed trials' runs."""

    def __init__(self, driver: TuneHooks) -> None:
        self._driver = driver

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        self.driver.tick()

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        run_id = trial.config.get("job", {}).get("run_id")
        if run_id:
            self.driver.on_error(run_id, _error_text(trial))


def _error_text(trial: Any) -> str:
    try:
        lines = Path(trial.error_file).read_text(encoding="utf-8", errors="replace").strip().splitlines()
        return lines[-1] if lines else "unknown error"
    except (OSError, TypeError):
        return "unknown error (no error file)"


def tune_parts(driver: TuneHooks) -> tuple[Any, Any, Any, Any]:
    """The searcher, scheduler (ASHA or FIFO), stopper and callback of one sweep run."""
    es = driver.early_stopping
    scheduler: Any = FIFOScheduler()
    if es.method == "asha":
        scheduler = SweepASHA(
            driver,
            time_attr="eval_index",
            metric="objective_so_far",
            mode="min",
            max_t=driver.n_evals,
            grace_period=es.grace_evals,
            reduction_factor=es.reduction_factor,
        )
    return SweepSearcher(driver), scheduler, CancelStopper(driver), Monitor(driver)
