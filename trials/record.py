"""The run record: every name a run carries in MLflow, what its state is, how it is read back, and how a trial's
run is opened and closed. MLflow is the project's system of record, and this module is the one place that says
what a record is; the sweeper's ledger, the transfer job, the dashboards and both trial backends use its names.

- **Names.** `TAG` (the sweeper's bookkeeping, which a spec's extra tags may not set), `LINEAGE` (tags a transfer or
  a confirmation passes down through a spec's extra tags), `TRIAL_TAG` (what a trial says about itself),
  `PROVENANCE` (where a number came from), `METRIC` (metric names), `PARENT_TAG` (MLflow's own nesting tag),
  `EXPERIMENT_KIND_TAG` (an experiment's kind, for MLflow's UI).
- **States.** A run's state is one of `STATES`, decided by `run_state` from MLflow's run status and the
  `scalesweep.status` tag: MLflow's status says whether the run ended and how (it is what MLflow's UI shows),
  the tag adds what MLflow cannot say (a KILLED run that was PRUNED, a FAILED run that DIVERGED).
- **Reading.** `read_runs` pages through a search and returns `StoredRun`s, by default only the latest attempt
  of each trial (the sweeper retries a failed trial as a new run with the same trial key and a higher attempt).
  Each package builds its own view (the sweeper's `TrialRecord`, the dashboards' `RunRecord`) from these.
- **Writing.** `provenance_tags` says where a number came from, `flatten` turns a config into its param names.
  `trial_run` opens a trial's run through the tracking config it is given (`TrackingConfig.open_run`), yields a
  `RunRecorder`, tags the run FAILED (KILLED when interrupted) with the error if the body raises, and
  `RunRecorder.finish` writes the summary and closes it.

MLflow itself is imported only inside the calls that talk to it, and the MLflow writer (`trials._tracking`, which
imports this module for its names) is reached only through the objects a caller passes in.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from .core.trial_settings import TrialSettings

__all__ = [
    "CANCELLED",
    "DIVERGED",
    "EXPERIMENT_KIND_TAG",
    "FAILED",
    "KILLED",
    "LINEAGE",
    "METRIC",
    "PARENT_TAG",
    "PENDING",
    "PROVENANCE",
    "PRUNED",
    "RUNNING",
    "STATES",
    "SUCCEEDED",
    "TAG",
    "TERMINAL_STATUS",
    "TRIAL_TAG",
    "RunRecorder",
    "StoredRun",
    "flatten",
    "latest_attempts",
    "parse_float",
    "parse_int",
    "provenance_tags",
    "quote",
    "read_run",
    "read_runs",
    "run_state",
    "search_runs",
    "trial_run",
    "trials_tagged",
]

# MLflow's tag that nests a run under its parent (a sweep's or a transfer's run).
PARENT_TAG = "mlflow.parentRunId"
# MLflow 3's UI opens an experiment without this tag in its GenAI view (traces, "evaluation runs"); on a study's
# experiment it says the runs are model development.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"


class TAG:
    """The sweeper's bookkeeping tags: it sets them itself, so a spec's extra tags may not use these names.

    On a sweep's parent run: KIND=sweep, SWEEP_ID, SWEEP_NAME, FINGERPRINT, STATUS, WORKDIR, DRIVER_HOST,
    DRIVER_PID, ERROR, EXTENSIONS and the chosen point under BEST (`scalesweep.best.K`, ...). On each trial's run:
    KIND=trial, SWEEP_ID, TRIAL_KEY (the run name without the attempt), POINT_KEY, ROLE, ARM, SEED, ATTEMPT,
    PARAMS (JSON of the searched values), STATUS, STEPS_DONE, ERROR, STOP_REASON (`pruned` when the early stopper
    stopped it)."""

    KIND = "scalesweep.kind"
    SWEEP_ID = "scalesweep.sweep_id"
    SWEEP_NAME = "scalesweep.sweep_name"
    FINGERPRINT = "scalesweep.fingerprint"
    STATUS = "scalesweep.status"
    WORKDIR = "scalesweep.workdir"
    DRIVER_HOST = "scalesweep.driver_host"
    DRIVER_PID = "scalesweep.driver_pid"
    TRIAL_KEY = "scalesweep.trial_key"
    POINT_KEY = "scalesweep.point_key"
    ROLE = "scalesweep.role"
    ARM = "scalesweep.arm"
    SEED = "scalesweep.seed"
    ATTEMPT = "scalesweep.attempt"
    PARAMS = "scalesweep.params"
    STEPS_DONE = "scalesweep.steps_done"
    ERROR = "scalesweep.error"
    STOP_REASON = "scalesweep.stop_reason"
    BEST = "scalesweep.best."
    EXTENSIONS = "scalesweep.extensions"  # JSON list of {at, added} when a finished sweep was extended


class LINEAGE:
    """Tags that tie runs to the study they belong to, passed to the sweeper as a spec's extra tags.

    A transfer's parent and children carry TRANSFER_ID, TRANSFER_NAME, the source sweep (SOURCE_SWEEP_ID,
    SOURCE_SWEEP_NAME, SOURCE_PARENT_RUN_ID) and the carried pair (TRANSFER_CHOSEN), target and horizons; each
    child the rule that carried its learning rate (LR_RULE from LR_BASE at BASE_RUNG of width BASE_WIDTH, and
    WD_RULE); a verification bracket's runs VERIFY_POINT. A confirmation sweep carries CONFIRMS (the sweep it
    confirms) and CONFIRM_POINT per arm; the confirmed sweep's parent gets CONFIRMATION (JSON). A transfer's
    children carry TRANSFER_ARM, a pilot's runs PILOT_OF, and the parent and the judged runs PILOT."""

    TRANSFER_ID = "scalesweep.transfer_id"
    TRANSFER_NAME = "scalesweep.transfer_name"
    SOURCE_SWEEP_ID = "scalesweep.source_sweep_id"
    SOURCE_SWEEP_NAME = "scalesweep.source_sweep_name"
    SOURCE_PARENT_RUN_ID = "scalesweep.source_parent_run_id"
    TRANSFER_CHOSEN = "scalesweep.transfer.chosen"
    TRANSFER_TARGET = "scalesweep.transfer.target"
    TRANSFER_HORIZONS = "scalesweep.transfer.horizons"
    LR = "scalesweep.lr"
    LR_RULE = "scalesweep.lr_rule"
    LR_BASE = "scalesweep.lr_base"
    WD_RULE = "scalesweep.wd_rule"
    BASE_RUNG = "scalesweep.base_rung"
    BASE_WIDTH = "scalesweep.base_width"
    VERIFY_POINT = "scalesweep.verify_point"
    CONFIRMS = "scalesweep.confirms"
    CONFIRM_POINT = "scalesweep.confirm_point"
    CONFIRMATION = "scalesweep.confirmation"
    TRANSFER_ARM = "scalesweep.transfer.arm"  # on each transfer child: the arm it runs
    PILOT_OF = "scalesweep.transfer.pilot_of"  # on each pilot run: the transfer's id
    PILOT = "scalesweep.transfer.pilot"  # on the transfer's parent run and judged runs: the pilot's target (JSON)


class TRIAL_TAG:
    """What a trial's run says about itself: which backend ran it and where, and what its FD numbers are."""

    BACKEND = "scalesweep.backend"
    RAY_NODE = "scalesweep.ray_node"
    WORKER_HOST = "scalesweep.worker_host"
    RANK_RESTARTS = "scalesweep.rank_restarts"  # how many restarts a group of ranks took to finish the trial
    FD_EXTRACTOR = "fd.extractor"
    FD_METRIC_NAME = "fd.metric_name"
    FD_SAMPLES = "fd.samples"
    FD_REFERENCE_SAMPLES = "fd.reference_samples"
    FD_WEIGHTS = "fd.weights"
    FD_TRACK_SAMPLES = "fd.track_samples"
    FD_TRACK_SAMPLE_STEPS = "fd.track_sample_steps"
    NS_DTYPE = "optimizer.ns_dtype"
    ROWNORM_KERNEL = "optimizer.rownorm_kernel"  # the row-norm kernels that ran: native, streamed, unfused or none
    PARAMETERS = "model.parameters"
    MUON_PARAMETERS = "model.muon_parameters"
    RANK_RESTARTS = "scalesweep.rank_restarts"  # restarts of a multi-worker trial's ranks after a lost rank


class PROVENANCE:
    """Where a number came from: code version, package versions, hardware (set on every trial and sweep run)."""

    GIT_SHA = "scalesweep.git_sha"
    PYTHON = "scalesweep.python"
    TORCH = "scalesweep.torch"
    HOST = "scalesweep.host"
    CPU = "scalesweep.cpu"
    CPU_COUNT = "scalesweep.cpu_count"
    TORCH_THREADS = "scalesweep.torch_threads"
    GPU = "scalesweep.gpu"
    VERSION = "scalesweep.version"
    MLFLOW = "scalesweep.mlflow"


class METRIC:
    """Metric names. At each eval step: FD (and the same value under the extractor's own name, e.g. `fd_pixels`),
    VAL_LOSS, EFFECTIVE_TIME_S (cumulative training time), OPTIMIZER_TIME_S, STEP_TIME_S, OPTIMIZER_STEP_TIME_S,
    FD_INFINITY and FD_BIAS where estimated; LOSS every `log_every` steps; FD_TRACK with TRACK_EFFECTIVE_TIME_S
    at the dense tracking points; the run's summary (`SUMMARY`) at the last step; TRIAL_WALL_S, set by the sweep
    driver when it closes an attempt. With the `scenes-cnn` extractor also ALIGNMENT (the share of samples whose
    every attribute matches the caption) and `alignment(attribute)` per attribute, at each eval step."""

    FD = "fd"
    VAL_LOSS = "val_loss"
    LOSS = "loss"
    EFFECTIVE_TIME_S = "effective_time_s"
    OPTIMIZER_TIME_S = "optimizer_time_s"
    STEP_TIME_S = "step_time_s"
    OPTIMIZER_STEP_TIME_S = "optimizer_step_time_s"
    NS5_CALLS = "ns5_calls"  # Newton-Schulz orthogonalisations so far (cumulative, counted by the optimizer)
    ROWNORM_CALLS = "rownorm_calls"  # row-norm steps so far
    FD_INFINITY = "fd_infinity"
    FD_BIAS = "fd_bias"
    FD_TRACK = "fd_track"
    TRACK_EFFECTIVE_TIME_S = "track_effective_time_s"
    OBJECTIVE = "objective"
    BEST_FD = "best_fd"
    ENDPOINT_FD = "endpoint_fd"
    TIME_TO_BEST_S = "time_to_best_s"
    TOTAL_EFFECTIVE_TIME_S = "total_effective_time_s"
    TRIAL_WALL_S = "trial_wall_s"
    ALIGNMENT = "alignment"

    @staticmethod
    def alignment(attribute: str) -> str:
        """One attribute's alignment share, e.g. `alignment.colour` (attributes: trials.metrics.ALIGNMENT_ATTRIBUTES);
        "all" is ALIGNMENT itself."""
        return METRIC.ALIGNMENT if attribute == "all" else f"{METRIC.ALIGNMENT}.{attribute}"
    # Written by every trial backend when it finishes (from its `TrialResult`, where set).
    SUMMARY = (OBJECTIVE, BEST_FD, ENDPOINT_FD, TIME_TO_BEST_S, TOTAL_EFFECTIVE_TIME_S)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """`{"optimizer": {"lr": 0.02}}` -> `{"optimizer.lr": "0.02"}`; lists as JSON. MLflow params are strings, and
    these are a run's param names (the trial's and the sweep's alike)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, prefix=f"{name}."))
        elif isinstance(value, list | tuple):
            out[name] = json.dumps(list(value))
        else:
            out[name] = str(value)
    return out


# --- states ------------------------------------------------------------------------------------------------------

PENDING, RUNNING, SUCCEEDED, PRUNED, FAILED, CANCELLED = (
    "PENDING", "RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "CANCELLED")
# A run's state. CANCELLED: interrupted (a cancel, a lost driver or worker); the sweeper resumes it.
STATES = (PENDING, RUNNING, SUCCEEDED, PRUNED, FAILED, CANCELLED)
# Values of the status tag beyond the states: a FAILED run whose loss or samples went non-finite, and an
# interrupted one (its MLflow status is KILLED too; read back as CANCELLED).
DIVERGED = "DIVERGED"
KILLED = "KILLED"

# MLflow's run status -> the state, before the status tag refines it (see `run_state`).
_MLFLOW_STATE = {"FINISHED": SUCCEEDED, "FAILED": FAILED, "KILLED": CANCELLED, "RUNNING": RUNNING,
                 "SCHEDULED": PENDING}
# A state -> the MLflow status a run is terminated with (MLflow has no PRUNED or CANCELLED: both are KILLED).
TERMINAL_STATUS = {SUCCEEDED: "FINISHED", FAILED: "FAILED", PRUNED: "KILLED", CANCELLED: "KILLED"}


def run_state(mlflow_status: str, status_tag: str | None) -> tuple[str, bool]:
    """(state, diverged) of a run from its MLflow status and its `scalesweep.status` tag.

    MLflow's status decides, because it is the one field every writer (a trial, the driver closing a lost
    attempt, MLflow itself) keeps current: a running trial's tag still says PENDING. The tag only refines it: PRUNED
    (MLflow says KILLED) and DIVERGED (MLflow says FAILED). An unknown MLflow status reads as RUNNING."""
    if status_tag == PRUNED:
        return PRUNED, False
    state = _MLFLOW_STATE.get(mlflow_status, RUNNING)
    return state, state == FAILED and status_tag == DIVERGED


# --- reading -------------------------------------------------------------------------------------------------------


def parse_int(text: str | None) -> int | None:
    """A whole number from a tag or param ("3", "3.0"); None when absent or not one."""
    value = parse_float(text)
    return int(value) if value is not None and math.isfinite(value) and value == int(value) else None


def parse_float(text: str | None) -> float | None:
    """A number from a tag or param; None when absent or not a number (e.g. "None": a value left to a default)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def quote(value: str) -> str:
    """A value safe inside single quotes of an MLflow filter string."""
    return value.replace("'", "\\'")


def trials_tagged(tag: str, value: str) -> str:
    """The filter string for the trial runs whose tag `tag` is `value` (a sweep's id, a transfer's id)."""
    return f"tags.`{TAG.KIND}` = 'trial' and tags.`{tag}` = '{quote(value)}'"


@dataclass(frozen=True)
class StoredRun:
    """One MLflow run as read back: its identity, state, and what it logged. `metrics` holds each metric's latest
    value; `histories` the step -> value series of the metrics the reader was asked for (the later of two values
    logged at one step, as a resumed trial re-logs its last steps)."""

    run_id: str
    run_name: str = ""
    experiment_id: str = ""
    mlflow_status: str = "RUNNING"
    start_time: int = 0
    state: str = RUNNING
    diverged: bool = False
    tags: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    histories: Mapping[str, Mapping[int, float]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """The state, with DIVERGED told apart from other failures (what a table or figure shows)."""
        return DIVERGED if self.diverged else self.state

    @property
    def trial_key(self) -> str | None:
        """The trial this run is an attempt of (None for a run the sweeper did not make)."""
        return self.tags.get(TAG.TRIAL_KEY)

    @property
    def attempt(self) -> int:
        return parse_int(self.tags.get(TAG.ATTEMPT)) or 0

    @property
    def arm(self) -> str:
        """The optimizer arm: the trial's own `optimizer.name` param, else the sweeper's tag."""
        return self.params.get("optimizer.name") or self.tags.get(TAG.ARM, "")

    def history(self, metric: str) -> dict[int, float]:
        return dict(self.histories.get(metric, {}))


def _history(client: Any, run_id: str, metric: str) -> dict[int, float]:
    points = sorted(client.get_metric_history(run_id, metric), key=lambda m: (m.step, m.timestamp))
    return {int(m.step): float(m.value) for m in points}


def _to_record(run: Any) -> StoredRun:
    info, data = run.info, run.data
    state, diverged = run_state(info.status, data.tags.get(TAG.STATUS))
    return StoredRun(
        run_id=info.run_id,
        run_name=info.run_name or "",
        experiment_id=str(info.experiment_id),
        mlflow_status=info.status,
        start_time=info.start_time or 0,
        state=state,
        diverged=diverged,
        tags=dict(data.tags),
        params=dict(data.params),
        metrics=dict(data.metrics),
    )


def _with_histories(client: Any, record: StoredRun, names: Iterable[str]) -> StoredRun:
    # Only metrics the run logged at all: a history call per absent name would be a wasted round trip.
    histories = {k: _history(client, record.run_id, k) for k in names if k in record.metrics}
    return replace(record, histories=histories) if histories else record


def latest_attempts(records: Iterable[StoredRun]) -> list[StoredRun]:
    """One record per trial, in the given order: the attempt with the highest `scalesweep.attempt` (then the latest
    start). Counting the earlier attempts would show a retried seed as a failed one. Runs without a trial key are
    each their own trial."""
    records = list(records)
    latest: dict[str, StoredRun] = {}
    for rec in records:
        key = rec.trial_key
        if key is not None and (key not in latest or (rec.attempt, rec.start_time) > (
                latest[key].attempt, latest[key].start_time)):
            latest[key] = rec
    kept = {rec.run_id for rec in latest.values()}
    return [rec for rec in records if rec.trial_key is None or rec.run_id in kept]


def search_runs(client: Any, experiment_ids: list[str], filter_string: str, *, order_by: list[str] | None = None,
                page_size: int = 1000) -> Iterator[Any]:
    """Every MLflow run (not deleted) matching the filter, page by page."""
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, max_results=page_size,
                                  order_by=order_by, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def read_runs(client: Any, experiment_ids: list[str], filter_string: str, *, histories: Iterable[str] = (),
              latest: bool = True, order_by: list[str] | None = None, page_size: int = 1000) -> list[StoredRun]:
    """The runs matching `filter_string` as records, with the step series of `histories`; of a retried trial
    only its latest attempt unless `latest` is False. `client` is an `mlflow.MlflowClient`."""
    records = [_to_record(run) for run in search_runs(client, experiment_ids, filter_string, order_by=order_by,
                                                      page_size=page_size)]
    if latest:
        records = latest_attempts(records)
    names = tuple(histories)
    return [_with_histories(client, rec, names) for rec in records]


def read_run(client: Any, run_id: str, *, histories: Iterable[str] = ()) -> StoredRun:
    """One run by id as a record."""
    return _with_histories(client, _to_record(client.get_run(run_id)), tuple(histories))


# --- writing -----------------------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _git_sha() -> str:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance_tags() -> dict[str, str]:
    """Where a number came from (the `PROVENANCE` tags): code version, package versions, hardware."""
    import torch

    tags = {
        PROVENANCE.GIT_SHA: _git_sha() if (sha := TrialSettings.from_env().git_sha) is None else sha,
        PROVENANCE.PYTHON: platform.python_version(),
        PROVENANCE.TORCH: torch.__version__,
        PROVENANCE.HOST: platform.node(),
        PROVENANCE.CPU: platform.processor() or platform.machine(),
        PROVENANCE.CPU_COUNT: str(os.cpu_count()),
        PROVENANCE.TORCH_THREADS: str(torch.get_num_threads()),
    }
    if torch.cuda.is_available():
        tags[PROVENANCE.GPU] = torch.cuda.get_device_name(0)
    try:
        from importlib.metadata import version

        tags[PROVENANCE.VERSION] = version("scalesweep")
        tags[PROVENANCE.MLFLOW] = version("mlflow")
    except Exception:  # not installed as a distribution (running from a source tree)
        pass
    return tags


class RunRecorder:
    """A trial's MLflow run while it runs, written through `RunLogger` (by run id, never an active run). Every call
    does nothing when the trial is not tracked, so a backend writes the same code either way."""

    # The logger is a `trials._tracking.RunLogger` (or None): typed loosely, as are the tracking config and the
    # trial result below, because those modules import this one for its names.
    def __init__(self, logger: Any | None) -> None:
        self.logger = logger
        self.run_id = logger.run_id if logger is not None else ""
        self.finished = False
        self._pending: list[tuple[int, dict[str, float]]] = []

    @property
    def tracked(self) -> bool:
        return self.logger is not None

    def log_params(self, params: Mapping[str, Any]) -> None:
        if self.logger is not None:
            self.logger.log_params(params)

    def set_tags(self, tags: Mapping[str, str]) -> None:
        if self.logger is not None:
            self.logger.set_tags(tags)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        if self.logger is not None:
            self.logger.log_metrics(metrics, step)

    def defer(self, step: int, metrics: Mapping[str, float]) -> None:
        """Hold metrics until the next `flush` (the train loss: one batch per evaluation, not one per log step)."""
        self._pending.append((step, dict(metrics)))

    def flush(self) -> None:
        for step, metrics in self._pending:
            self.log_metrics(metrics, step)
        self._pending.clear()

    def log_artifact(self, path: str, artifact_path: str | None = None) -> None:
        if self.logger is not None:
            self.logger.log_artifact(path, artifact_path)

    def finish(self, result: Any) -> None:
        """The run's summary (`METRIC.SUMMARY` at the last step, the status and FD tags, `trial_result.json`), then
        its end: FINISHED when the trial SUCCEEDED, FAILED when it diverged."""
        self.flush()
        if self.logger is not None:
            summary = {k: getattr(result, k) for k in METRIC.SUMMARY}
            self.logger.log_metrics({k: float(v) for k, v in summary.items() if v is not None}, result.steps_done)
            self.logger.set_tags({TAG.STATUS: result.status, TRIAL_TAG.FD_METRIC_NAME: result.metric_name,
                                  TRIAL_TAG.ROWNORM_KERNEL: getattr(result, "rownorm_kernel", "none")})
            self.logger.log_dict(result.to_dict(), "trial_result.json")
            self.logger.finish(TERMINAL_STATUS[SUCCEEDED if result.status == SUCCEEDED else FAILED])
        self.finished = True

    def fail(self, exc: BaseException) -> None:
        """The run's end after an error: KILLED when the process was interrupted or stopped (Tune stops a trial
        with SystemExit), else FAILED; the error in `scalesweep.error`. What was held back is written first."""
        self.flush()
        if self.logger is not None:
            interrupted = isinstance(exc, KeyboardInterrupt | SystemExit)
            self.logger.set_tags({TAG.STATUS: KILLED if interrupted else FAILED, TAG.ERROR: repr(exc)[:500]})
            self.logger.finish("KILLED" if interrupted else "FAILED")
        self.finished = True


@contextmanager
def trial_run(tracking: Any | None, *, params: Mapping[str, Any] | None = None,
              tags: Mapping[str, str] | None = None) -> Iterator[RunRecorder]:
    """Open a trial's run with `tracking.open_run()` (`tracking` is a `trials.TrackingConfig`: a new run, or the
    sweep's run named in its `run_id`; none when `tracking` is None),
    log `params` and `tags` with the provenance tags and `scalesweep.kind=trial`, and yield its recorder. The body
    ends with `recorder.finish(result)`; if it raises, the run is tagged and finished as failed (`fail`) and the
    error goes on; if it returns without finishing, the run is closed as FAILED."""
    recorder = RunRecorder(tracking.open_run() if tracking is not None else None)
    if recorder.tracked:
        recorder.log_params(params or {})
        recorder.set_tags({**provenance_tags(), TAG.KIND: "trial", **(tags or {})})
    try:
        yield recorder
    except BaseException as exc:
        if not recorder.finished:
            recorder.fail(exc)
        raise
    if not recorder.finished:
        recorder.fail(RuntimeError("the trial ended without a result"))
