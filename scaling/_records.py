"""A transfer's trial runs read back from MLflow as plain records: the only MLflow reading in `scaling`.

Names are the sweeper's and the trials' (README, "MLflow names"): params `rung`, `seed`, `optimizer.name`,
`optimizer.lr`, `optimizer.refresh_every`, `optimizer.gamma`, `steps`; metrics at step `fd` and
`effective_time_s`, and the dense tracking curve `fd_track` with `track_effective_time_s`; tags
`scalesweep.trial_key`, `scalesweep.attempt`, `scalesweep.status`, `model.parameters`, `fd.metric_name`,
`fd.samples`, and the transfer's own `scalesweep.lr_rule`, `scalesweep.lr_base` (see `_transfer`). Of a retried
trial only its last attempt counts. Everything goes through an explicit `MlflowClient`, never an active run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from trials.optim import ARMS_WITH_GAMMA

__all__ = ["TransferRun", "read_runs"]

_PAGE = 1000
# MLflow's run status, when a run never set scalesweep.status (killed before the trial started).
_MLFLOW_STATE = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "KILLED": "CANCELLED", "RUNNING": "RUNNING",
                 "SCHEDULED": "PENDING"}
# The sweeper's scalesweep.status values -> a run's state here (KILLED: interrupted, resumable).
_TAG_STATE = {"SUCCEEDED": "SUCCEEDED", "DIVERGED": "DIVERGED", "FAILED": "FAILED", "PRUNED": "PRUNED",
              "KILLED": "CANCELLED", "PENDING": "PENDING", "RUNNING": "RUNNING"}


@dataclass(frozen=True)
class TransferRun:
    """One trial of a transfer (its last attempt). `checkpoints` are (step, effective_time_s, fd) at the eval
    steps it reached, FD NaN where it diverged. `lr` is the learning rate the run used, `lr_rule` the rule that
    carried it from `lr_base` at the sweep's rung; K and gamma only for the arms they shape."""

    rung: str
    parameters: int | None
    arm: str
    seed: int
    lr: float | None
    lr_rule: str | None
    lr_base: float | None
    K: int | None
    gamma: float | None
    run_id: str
    state: str  # SUCCEEDED | DIVERGED | FAILED | PRUNED | CANCELLED | RUNNING | PENDING
    trial_key: str
    attempt: int
    checkpoints: tuple[tuple[int, float, float], ...]
    metric_name: str | None = None
    fd_samples: int | None = None
    git_sha: str | None = None
    # The dense tracking curve (step, effective_time_s, fd_track), empty for runs without one, and the run's horizon.
    track: tuple[tuple[int, float, float], ...] = ()
    horizon: int | None = None
    track_samples: int | None = None
    # FD - FD-infinity at the deciding checkpoints (step, bias): the small-sample bias, where the trial estimated it.
    fd_bias: tuple[tuple[int, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rung": self.rung, "parameters": self.parameters, "arm": self.arm, "seed": self.seed, "lr": self.lr,
            "lr_rule": self.lr_rule, "lr_base": self.lr_base, "K": self.K, "gamma": self.gamma,
            "run_id": self.run_id, "state": self.state, "trial_key": self.trial_key, "attempt": self.attempt,
            "checkpoints": [[s, t, None if math.isnan(f) else f] for s, t, f in self.checkpoints],
        }


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None  # e.g. "None": an lr left to the arm's default
    return value if math.isfinite(value) else None


def _int(text: str | None) -> int | None:
    value = _num(text)
    return int(value) if value is not None and value == int(value) else None


def _record(client: Any, run: Any) -> TransferRun:
    params: dict[str, str] = run.data.params
    tags: dict[str, str] = run.data.tags
    run_id = run.info.run_id
    arm = params.get("optimizer.name") or tags.get("scalesweep.arm", "")
    # A resumed trial may log a step twice: the later value (by timestamp) counts.
    fd = {m.step: m.value for m in sorted(client.get_metric_history(run_id, "fd"), key=lambda m: m.timestamp)}
    times = {m.step: m.value
             for m in sorted(client.get_metric_history(run_id, "effective_time_s"), key=lambda m: m.timestamp)}
    checkpoints = tuple((int(s), float(times[s]), float(fd[s])) for s in sorted(fd) if s in times)
    track_fd = {m.step: m.value
                for m in sorted(client.get_metric_history(run_id, "fd_track"), key=lambda m: m.timestamp)}
    track_times = {m.step: m.value for m in sorted(client.get_metric_history(run_id, "track_effective_time_s"),
                                                   key=lambda m: m.timestamp)} if track_fd else {}
    track = tuple((int(s), float(track_times[s]), float(track_fd[s])) for s in sorted(track_fd) if s in track_times)
    bias = {m.step: m.value for m in sorted(client.get_metric_history(run_id, "fd_bias"), key=lambda m: m.timestamp)}
    state = _TAG_STATE.get(tags.get("scalesweep.status", ""), _MLFLOW_STATE.get(run.info.status, "PENDING"))
    return TransferRun(
        rung=params.get("rung", ""),
        parameters=_int(tags.get("model.parameters")),
        arm=arm,
        seed=_int(params.get("seed", tags.get("scalesweep.seed"))) or 0,
        lr=_num(params.get("optimizer.lr")) or _num(tags.get("scalesweep.lr")),
        lr_rule=tags.get("scalesweep.lr_rule"),
        lr_base=_num(tags.get("scalesweep.lr_base")),
        # Every trial logs its whole config, so a baseline carries K and gamma params it never used.
        K=_int(params.get("optimizer.refresh_every")) if arm == "periodic" else None,
        gamma=_num(params.get("optimizer.gamma")) if arm in ARMS_WITH_GAMMA else None,
        run_id=run_id,
        state=state,
        trial_key=tags.get("scalesweep.trial_key", run.info.run_name or run_id),
        attempt=_int(tags.get("scalesweep.attempt")) or 0,
        checkpoints=checkpoints,
        metric_name=tags.get("fd.metric_name"),
        fd_samples=_int(tags.get("fd.samples") or params.get("eval.fd_samples")),
        git_sha=tags.get("scalesweep.git_sha"),
        track=track,
        horizon=_int(params.get("steps")),
        track_samples=_int(tags.get("fd.track_samples")) or None,
        fd_bias=tuple((int(s), float(bias[s])) for s in sorted(bias)),
    )


def read_runs(tracking_uri: str, experiment: str, tag: str, value: str) -> list[TransferRun]:
    """The trial runs whose tag `tag` equals `value` (e.g. a transfer's id), last attempt per trial, ordered by
    trial key."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    quoted = value.replace("'", "\\'")
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [exp.experiment_id],
            filter_string=f"tags.`scalesweep.kind` = 'trial' and tags.`{tag}` = '{quoted}'",
            max_results=_PAGE,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            break
    latest: dict[str, Any] = {}
    for run in runs:
        key = run.data.tags.get("scalesweep.trial_key", run.info.run_id)
        rank = (_int(run.data.tags.get("scalesweep.attempt")) or 0, run.info.start_time or 0)
        if key not in latest or rank > latest[key][0]:
            latest[key] = (rank, run)
    return [_record(client, run) for _, (_, run) in sorted(latest.items())]
