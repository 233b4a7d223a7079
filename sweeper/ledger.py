"""The sweep's record in MLflow: the parent run, one child run per trial attempt, and the ledger read back from them.

MLflow is the system of record, and the ledger a resumed sweep trusts: which trials succeeded, failed, were
pruned or were interrupted is read from the runs' tags, never from Ray's own state (Ray's MLflow callback loses
its trial-to-run mapping after a restore). Every write names its run id; nothing uses MLflow's active run.

Layout (one experiment per study, `tracking.experiment`):

    parent run   name  sweep:<name>
                 tags  scalesweep.kind=sweep, scalesweep.sweep_id=<name>-<8 hex>, scalesweep.sweep_name,
                       scalesweep.fingerprint (spec hash), scalesweep.status (RUNNING | SUCCEEDED | FAILED |
                       CANCELLED), scalesweep.workdir, scalesweep.driver_host, scalesweep.driver_pid,
                       scalesweep.best.<param> (e.g. scalesweep.best.K, scalesweep.best.gamma),
                       scalesweep.best.point_key, scalesweep.best.objective, scalesweep.best.runner_up,
                       scalesweep.best.gap_rel, scalesweep.best.rule (the choice rule, in words),
                       scalesweep.best.p_best (the chosen point's probability of being best), scalesweep.best.seeds,
                       and the spec's extra `tags`
                 params the spec's main fields (rung, horizon, eval_steps, search.method, search.space, seeds, ...)
                 metrics best_objective, best_p_best, runner_up_gap_abs, runner_up_gap_rel, pooled_seed_std,
                       trials_succeeded / _failed / _pruned / _cancelled, points_scored,
                       sweep_wall_s, fit_wall_s, trial_wall_s_sum, ray_init_s, store_init_s, overhead_fraction
                 artifacts spec.json (the validated spec), selection.json (the rank table, the choice, every
                       point's probability of being best and paired difference to the best, paired comparisons
                       with the baselines)
                 MLflow status FINISHED (SUCCEEDED), FAILED, KILLED (CANCELLED), RUNNING while it runs

    child run    name  K=3,gamma=0.15,seed=0 (search) | adamw,seed=0 (baseline); retries add " (attempt N)"
                 tags  mlflow.parentRunId=<parent run id>, scalesweep.kind=trial, scalesweep.sweep_id,
                       scalesweep.trial_key (the name without the attempt), scalesweep.point_key (K=3,gamma=0.15
                       | adamw), scalesweep.role (search | baseline), scalesweep.arm (periodic | adamw | muon ...),
                       scalesweep.seed, scalesweep.attempt (0, 1, ...), scalesweep.params (JSON of the searched
                       values), scalesweep.status (SUCCEEDED | DIVERGED | FAILED | PRUNED | KILLED),
                       scalesweep.steps_done, scalesweep.error (failed runs), scalesweep.stop_reason=pruned (set
                       by the driver when ASHA stops the trial), scalesweep.ray_node and scalesweep.worker_host
                       (where the attempt ran), the spec's and the arm's extra `tags` (a transfer's lineage
                       and lr rule), plus the trial's own tags (fd.*, provenance)
                 params the searched names (K, gamma, ...) and the whole TrialConfig, flattened (optimizer.*, ...)
                 metrics fd, fd_<extractor>, val_loss, effective_time_s, optimizer_time_s, step_time_s at each
                       eval step; loss every log_every steps; objective, best_fd, endpoint_fd, time_to_best_s at
                       the end
                 MLflow status SCHEDULED (created, not started), RUNNING, FINISHED, FAILED (error or diverged),
                       KILLED (pruned, or interrupted: see scalesweep.status)
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trials.record import (
    CANCELLED,
    DIVERGED,
    FAILED,
    KILLED,
    METRIC,
    PARENT_TAG,
    PENDING,
    PRUNED,
    RUNNING,
    SUCCEEDED,
    TAG,
    TERMINAL_STATUS,
    TRIAL_TAG,
    StoredRun,
    parse_int,
    quote,
    read_runs,
    trials_tagged,
)

from .errors import SweepError
from .selection import SweepSelection, TrialRecord
from .specs import redact_spec

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

    from .search import TrialRequest
    from .specs import SweepSpec

__all__ = ["PARENT_TAG", "TAG", "SweepLedger", "parent_run_name", "resolve_tracking_uri", "trial_record"]

def parent_run_name(name: str) -> str:
    return f"sweep:{name}"


def resolve_tracking_uri(uri: str, base: Path | None = None) -> str:
    """A relative SQLite path made absolute (Ray workers run in other directories)."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = Path(uri.removeprefix("sqlite:///"))
        if not path.is_absolute():
            return f"sqlite:///{((base or Path.cwd()) / path).resolve()}"
    return uri


class SweepLedger:
    """Reads and writes one experiment's sweep runs through an explicit `MlflowClient`."""

    def __init__(self, tracking_uri: str, experiment: str) -> None:
        from mlflow import MlflowClient

        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.client: MlflowClient = MlflowClient(tracking_uri=tracking_uri)
        self._experiment_id: str | None = None

    @property
    def experiment_id(self) -> str:
        if self._experiment_id is None:
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                raise SweepError(f"no MLflow experiment {self.experiment!r} at {self.tracking_uri}")
            self._experiment_id = str(found.experiment_id)
        return self._experiment_id

    def ensure_store(self) -> str:
        """Create the store and experiment once, before any trial starts (concurrent first-time creation of a
        SQLite store corrupts its schema)."""
        from trials import ensure_store

        self._experiment_id = ensure_store(self.tracking_uri, self.experiment)
        return self._experiment_id

    # -- the parent run -------------------------------------------------------------------------------------------

    def create_parent(self, spec: SweepSpec, sweep_id: str, workdir: Path) -> str:
        from trials.record import flatten, provenance_tags

        tags = {
            **provenance_tags(),
            **spec.tags,
            TAG.KIND: "sweep",
            TAG.SWEEP_ID: sweep_id,
            TAG.SWEEP_NAME: spec.name,
            TAG.FINGERPRINT: spec.fingerprint(),
            TAG.STATUS: RUNNING,
            TAG.WORKDIR: str(workdir),
        }
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=parent_run_name(spec.name))
        run_id = run.info.run_id
        dump = spec.model_dump(mode="json")
        params = {
            "name": spec.name,
            "rung": spec.rung,
            "horizon": spec.horizon,
            "eval_steps": spec.resolved_eval_steps,
            "seeds": spec.seeds,
            "search.method": spec.search.method,
            "search.space": json.dumps(dump["search"]["space"], sort_keys=True),
            "search.budget": spec.search.budget,
            "search.optimizer": json.dumps(spec.search.optimizer, sort_keys=True),
            "baselines": [b.name for b in spec.baselines],
            "early_stopping.method": spec.early_stopping.method,
            "backend": spec.backend.name,
            "selection.tie_tolerance": spec.selection.tie_tolerance,
            "selection.tie_break": spec.selection.tie_break,
            **flatten(spec.trial, prefix="trial."),
        }
        from mlflow.entities import Param

        batch = [Param(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(batch), 100):
            self.client.log_batch(run_id, params=batch[i : i + 100])
        self.log_spec(run_id, spec)
        return run_id

    def log_spec(self, run_id: str, spec: SweepSpec) -> None:
        """The parent run's `spec.json` (replaced when a sweep is extended)."""
        # Redacted: MLflow is read by everyone who can open its UI; the work folder keeps the full spec.
        self.client.log_dict(run_id, {**redact_spec(spec.model_dump(mode="json")),
                                      "resolved_eval_steps": spec.resolved_eval_steps}, "spec.json")

    def start_parent(self, run_id: str, *, pid: int | None = None) -> None:
        self.client.update_run(run_id, status="RUNNING")
        self.set_tags(run_id, {TAG.STATUS: RUNNING, TAG.DRIVER_HOST: platform.node(),
                               TAG.DRIVER_PID: str(pid or os.getpid())})

    def find_parent(self, sweep: str) -> Run:
        """The parent run of a sweep named by its sweep id, its name (the latest such sweep) or its run id."""
        from mlflow.exceptions import MlflowException

        for key in (TAG.SWEEP_ID, TAG.SWEEP_NAME):
            runs = self.client.search_runs(
                [self.experiment_id],
                filter_string=f"tags.`{TAG.KIND}` = 'sweep' and tags.`{key}` = '{quote(sweep)}'",
                order_by=["attributes.start_time DESC"],
                max_results=1,
            )
            if runs:
                return runs[0]
        try:
            run = self.client.get_run(sweep)
        except MlflowException:
            run = None
        if run is not None and run.data.tags.get(TAG.KIND) == "sweep":
            return run
        raise SweepError(f"no sweep {sweep!r} in experiment {self.experiment!r} at {self.tracking_uri}")

    def prior_records(self, sweeps: Sequence[str]) -> list[TrialRecord]:
        """The trial records of earlier sweeps (by sweep id, name or parent run id) a search is warm-started from
        (`search.warm_start`); `SweepError` naming a sweep that is not in this experiment."""
        out: list[TrialRecord] = []
        for sweep in sweeps:
            parent = self.find_parent(sweep)
            out += self.records(parent.data.tags[TAG.SWEEP_ID], histories=False)
        return out

    def spec_dict(self, parent_run_id: str) -> dict[str, Any]:
        """The spec stored with the parent run, as plain data (not re-validated: reading needs no torch)."""
        import tempfile

        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one small file: no progress bar
        with tempfile.TemporaryDirectory(prefix="scalesweep-spec-") as tmp:
            path = self.client.download_artifacts(parent_run_id, "spec.json", tmp)
            return dict(json.loads(Path(path).read_text(encoding="utf-8")))

    def finish_parent(self, run_id: str, state: str, selection: SweepSelection | None, metrics: Mapping[str, float],
                      selection_doc: Mapping[str, Any] | None) -> None:
        from mlflow.entities import Metric

        tags = {TAG.STATUS: state}
        if selection is not None:
            for name, value in selection.params.items():
                tags[f"{TAG.BEST}{name}"] = str(value)
            tags[f"{TAG.BEST}point_key"] = selection.point.point_key
            tags[f"{TAG.BEST}objective"] = f"{selection.point.objective:.6g}"
            if selection.runner_up is not None:
                tags[f"{TAG.BEST}runner_up"] = selection.runner_up.point_key
                tags[f"{TAG.BEST}gap_rel"] = f"{selection.gap_rel:.4g}"
            tags[f"{TAG.BEST}rule"] = selection.rule[:5000]
            if selection.chosen_p_best is not None:
                tags[f"{TAG.BEST}p_best"] = f"{selection.chosen_p_best:.4g}"
            if selection.uncertainty is not None:
                tags[f"{TAG.BEST}seeds"] = str(selection.uncertainty.n)
        self.set_tags(run_id, tags)
        now = int(time.time() * 1000)
        batch = [Metric(k, float(v), now, 0) for k, v in metrics.items() if v is not None]
        if batch:
            self.client.log_batch(run_id, metrics=batch)
        if selection_doc is not None:
            self.client.log_dict(run_id, dict(selection_doc), "selection.json")
        mlflow_status = TERMINAL_STATUS.get(state)
        if mlflow_status is not None:
            self.client.set_terminated(run_id, status=mlflow_status)

    # -- child runs ---------------------------------------------------------------------------------------------

    def create_child(self, parent_run_id: str, sweep_id: str, req: TrialRequest) -> str:
        """A SCHEDULED run for one attempt, created by the driver before the trial starts (so a resumed sweep
        finds it by its trial key, whatever happened to the worker)."""
        from mlflow.entities import Param

        tags = {
            **req.tags,
            PARENT_TAG: parent_run_id,
            TAG.KIND: "trial",
            TAG.SWEEP_ID: sweep_id,
            TAG.TRIAL_KEY: req.trial_key,
            TAG.POINT_KEY: req.point_key,
            TAG.ROLE: req.role,
            TAG.ARM: req.arm,
            TAG.SEED: str(req.seed),
            TAG.ATTEMPT: str(req.attempt),
            TAG.PARAMS: json.dumps(req.params, sort_keys=True),
            TAG.STATUS: PENDING,
        }
        run = self.client.create_run(self.experiment_id, tags=tags, run_name=req.run_name)
        run_id = run.info.run_id
        if req.params:  # the searched names as params too, so `params.K = '3'` finds them
            self.client.log_batch(run_id, params=[Param(k, str(v)) for k, v in req.params.items()])
        self.client.update_run(run_id, status="SCHEDULED")
        return run_id

    def reopen(self, run_id: str) -> None:
        """An interrupted run about to be resumed into."""
        self.client.update_run(run_id, status="SCHEDULED")
        self.set_tags(run_id, {TAG.STATUS: PENDING})

    def close(self, run_id: str, state: str, *, diverged: bool = False, error: str | None = None,
              steps_done: int | None = None, metrics: Mapping[str, float] | None = None) -> None:
        """Make the run say how the trial ended, whatever the worker managed to write (a lost worker writes
        nothing; a stopped one writes KILLED after the driver decided PRUNED)."""
        run = self.client.get_run(run_id)
        tags: dict[str, str] = {}
        if steps_done is not None:
            tags[TAG.STEPS_DONE] = str(steps_done)
        if state not in (SUCCEEDED, FAILED, PRUNED):
            state = CANCELLED  # interrupted, resumable
        status = TERMINAL_STATUS[state]
        tag = {FAILED: DIVERGED if diverged else FAILED, CANCELLED: KILLED}.get(state, state)
        if state == FAILED and error and TAG.ERROR not in run.data.tags:
            tags[TAG.ERROR] = error[:500]
        if run.data.tags.get(TAG.STATUS) != tag:
            tags[TAG.STATUS] = tag
        if tags:
            self.set_tags(run_id, tags)
        if metrics:
            from mlflow.entities import Metric

            now = int(time.time() * 1000)
            self.client.log_batch(run_id, metrics=[Metric(k, float(v), now, steps_done or 0)
                                                   for k, v in metrics.items()])
        if run.info.status != status:
            self.client.set_terminated(run_id, status=status)

    def mark_stop_reason(self, run_id: str, reason: str) -> None:
        self.set_tags(run_id, {TAG.STOP_REASON: reason})

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self.client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

    def close_stale(self, sweep_id: str) -> list[str]:
        """Runs of this sweep still RUNNING or SCHEDULED (their driver is gone) closed as KILLED; their ids."""
        runs = read_runs(self.client, [self.experiment_id], trials_tagged(TAG.SWEEP_ID, sweep_id), latest=False)
        stale = [run.run_id for run in runs if run.mlflow_status in ("RUNNING", "SCHEDULED")]
        for run_id in stale:
            self.close(run_id, CANCELLED)
        return stale

    def records(self, sweep_id: str, *, histories: bool = True) -> list[TrialRecord]:
        """Every attempt of every trial of the sweep, from its runs."""
        runs = read_runs(self.client, [self.experiment_id], trials_tagged(TAG.SWEEP_ID, sweep_id), latest=False,
                         histories=(METRIC.FD,) if histories else ())
        return [trial_record(run) for run in runs]


def trial_record(run: StoredRun) -> TrialRecord:
    """The sweeper's view of one attempt's run."""
    tags, metrics = run.tags, run.metrics
    fd = run.history(METRIC.FD)
    steps = tags.get(TAG.STEPS_DONE)
    return TrialRecord(
        trial_key=run.trial_key or run.run_name,
        point_key=tags.get(TAG.POINT_KEY, ""),
        role="baseline" if tags.get(TAG.ROLE) == "baseline" else "search",
        arm=tags.get(TAG.ARM, ""),
        seed=int(tags.get(TAG.SEED, "0")),
        attempt=int(tags.get(TAG.ATTEMPT, "0")),
        status=run.state,  # type: ignore[arg-type]
        params=json.loads(tags.get(TAG.PARAMS, "{}")),
        diverged=run.diverged,
        run_id=run.run_id,
        objective=metrics.get(METRIC.OBJECTIVE) if run.state == SUCCEEDED else None,
        fd=fd,
        steps_done=int(steps) if steps else (max(fd) if fd else 0),
        effective_time_s=metrics.get(METRIC.TOTAL_EFFECTIVE_TIME_S),
        wall_time_s=metrics.get(METRIC.TRIAL_WALL_S),
        error=tags.get(TAG.ERROR),
        metric_name=tags.get(TRIAL_TAG.FD_METRIC_NAME),
        optimizer_step_time_s=metrics.get(METRIC.OPTIMIZER_STEP_TIME_S),
        ns5_calls=metrics.get(METRIC.NS5_CALLS),
        rank_restarts=parse_int(tags.get(TRIAL_TAG.RANK_RESTARTS)) or 0,
    )
