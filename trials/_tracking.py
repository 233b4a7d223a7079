"""MLflow logging for one run, always through an explicit run id (`MlflowClient`), never a global active run.

A trial may run in a Ray worker next to other trials, or be resumed after a crash: a process-global "active run"
would mix them up. Everything here takes the run id it writes to.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# `provenance_tags` lives with the tag names it writes; it is re-exported here for the callers that import it
# from this module.
from .record import EXPERIMENT_KIND_TAG, PARENT_TAG, flatten, provenance_tags

__all__ = [
    "DEFAULT_EXPERIMENT",
    "DEFAULT_TRACKING_URI",
    "RunLogger",
    "TrackingConfig",
    "ensure_store",
    "provenance_tags",
]

# The embedded default: a SQLite file in the working directory (MLflow's own default is a file store, which
# MLflow 3 deprecates). Artifacts go to a folder beside the database.
DEFAULT_TRACKING_URI = "sqlite:///scalesweep-mlflow.db"
DEFAULT_EXPERIMENT = "scalesweep"


class TrackingConfig(BaseModel):
    """Where a run's numbers go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tracking_uri: str = Field(DEFAULT_TRACKING_URI, description="MLflow tracking URI: sqlite:///file.db or http(s)://")
    experiment: str = Field(DEFAULT_EXPERIMENT, min_length=1, description="Experiment name (one per study).")
    run_id: str | None = Field(None, description="Log into this existing run (made by a sweep) instead of a new one.")
    parent_run_id: str | None = Field(None, description="Nest a new run under this parent (sweep or transfer).")
    run_name: str | None = Field(None, description="Display name of a new run.")
    tags: dict[str, str] = Field(default_factory=dict, description="Extra tags set on the run.")

    def open_run(self) -> RunLogger:
        """A logger into this config's run: the existing `run_id`, or a new run made now. `trials.record.trial_run`
        opens a trial's run through this, so the run record needs no import of this module."""
        return RunLogger(self)


def _artifact_root(tracking_uri: str) -> str | None:
    """For a SQLite store, a folder beside the database; servers choose their own artifact root."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///")).resolve()
        return (db.parent / "mlartifacts").as_uri()
    return None


# A study's experiment holds training runs, so it is tagged (`EXPERIMENT_KIND_TAG`) as model development.
EXPERIMENT_KIND = "custom_model_development"


def ensure_store(tracking_uri: str, experiment: str = DEFAULT_EXPERIMENT) -> str:
    """Create the tracking store (once: concurrent first-time creation of a SQLite store corrupts its schema) and
    the experiment if missing, tagged `mlflow.experimentKind = custom_model_development` (an existing experiment
    without a kind gets the tag too); returns the experiment id."""
    from mlflow import MlflowClient

    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri.removeprefix("sqlite:///")).resolve().parent.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is not None:
        if EXPERIMENT_KIND_TAG not in (found.tags or {}):  # made before the tag, or by hand: never override a kind
            client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
        return str(found.experiment_id)
    try:
        return str(client.create_experiment(experiment, artifact_location=_artifact_root(tracking_uri),
                                            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND}))
    except Exception:  # another process created it between our look-up and create
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise
        return str(found.experiment_id)


class RunLogger:
    """Logs params, metrics at step, tags and artifacts into one MLflow run, by id."""

    def __init__(self, config: TrackingConfig) -> None:
        from mlflow import MlflowClient

        self.config = config
        self.client = MlflowClient(tracking_uri=config.tracking_uri)
        if config.run_id is not None:
            self.run_id = config.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            experiment_id = ensure_store(config.tracking_uri, config.experiment)
            tags = dict(config.tags)
            if config.parent_run_id:
                tags[PARENT_TAG] = config.parent_run_id
            run = self.client.create_run(experiment_id, tags=tags, run_name=config.run_name)
            self.run_id = run.info.run_id
        if config.run_id is not None and config.tags:
            self.set_tags(config.tags)

    @property
    def experiment_id(self) -> str:
        return str(self.client.get_run(self.run_id).info.experiment_id)

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Params are write-once in MLflow: re-logging the same value (a resumed trial) is fine, skip existing."""
        from mlflow.entities import Param

        existing = self.client.get_run(self.run_id).data.params
        fresh = [Param(k, str(v)[:6000]) for k, v in flatten(params).items() if k not in existing]
        for i in range(0, len(fresh), 100):  # MLflow's batch limit is 100 params
            self.client.log_batch(self.run_id, params=fresh[i : i + 100])

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        """One batch per call: a single `log_metric` costs ~23 ms on a SQLite store."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, int(step)) for k, v in metrics.items()]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_dict(self, data: Any, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

    def finish(self, status: str = "FINISHED") -> None:
        """`status`: FINISHED, FAILED or KILLED (MLflow's terminal states)."""
        self.client.set_terminated(self.run_id, status=status)

