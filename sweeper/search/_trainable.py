"""The Ray Tune trainable: one trial attempt inside a Ray worker, through a trial backend looked up by name.

It reports to Tune with `ray.tune.report` at each eval step but the last (from the backend's `progress` callback),
then once more after the backend has closed its MLflow run, with the trial's outcome. Holding the last eval back
means a stop decision can never land between the final eval and the run's summary (ASHA says STOP at max_t).
A stop asked by Tune arrives as SystemExit from `tune.report`; the backend then closes its run as KILLED, and if
the driver had marked the run as pruned (tag `scalesweep.stop_reason`), the trainable re-labels it PRUNED.
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trials import TrialError
from trials.record import PRUNED, TAG, TRIAL_TAG

__all__ = ["BACKENDS", "declared_objective", "list_backends", "make_trainable", "objective_so_far", "run_trial_attempt",
           "trial_objective"]

ProgressFn = Callable[[dict[str, Any]], None]


def _builtin(trial: dict[str, Any], backend: dict[str, Any], progress: ProgressFn) -> Any:
    from trials import run_trial

    if int(trial.get("workers", 1)) > 1:  # FSDP2 on the trial's placement group; this process is rank 0
        from ._workers import TrialLimits, run_on_workers

        return run_on_workers(trial, lambda cfg: run_trial(cfg, progress=progress),
                              limits=TrialLimits.of(backend.get("limits")))
    return run_trial(trial, progress=progress)


def _command(trial: dict[str, Any], backend: dict[str, Any], progress: ProgressFn) -> Any:
    from trials import run_command_trial

    from ._workers import launch_placeholders

    command = {k: v for k, v in backend.items() if k not in ("name", "trainer", "limits")}
    return run_command_trial(trial, launch_placeholders(command, trial), progress=progress)


# name -> runner(trial config mapping, backend spec mapping, progress) -> trials.TrialResult
BACKENDS: dict[str, Callable[[dict[str, Any], dict[str, Any], ProgressFn], Any]] = {
    "builtin": _builtin,
    "command": _command,
}


def list_backends() -> list[str]:
    """Trial backend names a spec may use."""
    return sorted(BACKENDS)


def run_trial_attempt(job: dict[str, Any]) -> None:
    """Run one trial attempt described by `job` (built by the driver) and report it to Ray Tune."""
    import torch
    from ray import tune

    start = time.perf_counter()
    torch.set_num_threads(int(job["threads"]))  # match the CPUs Ray reserved for this trial
    eval_steps: list[int] = list(job["eval_steps"])
    n_evals = len(eval_steps)
    fds: dict[int, float] = {}  # declared eval step -> FD: a step reported twice counts once
    stopped = False

    def progress(record: dict[str, Any]) -> None:
        nonlocal stopped
        step = int(record["step"])
        if step not in eval_steps or "fd" not in record:
            return
        fd = float(record["fd"])
        if math.isfinite(fd):
            fds[step] = fd
        index = eval_steps.index(step) + 1
        if index == n_evals or not fds:
            return  # the last eval is reported after the run is closed (see the module docstring)
        metrics = {
            "eval_index": index,
            "objective_so_far": objective_so_far(job.get("objective"), fds, record, step),
            "step": step,
            "fd": fd,
            "trial_status": "RUNNING",
            "trial_elapsed_s": time.perf_counter() - start,
        }
        for key in ("val_loss", "effective_time_s"):
            if isinstance(record.get(key), int | float):
                metrics[key] = float(record[key])
        try:
            tune.report(metrics)
        except SystemExit:
            stopped = True
            raise

    _tag_worker(job)
    checkpoint_dir = job["trial"].get("checkpoint_dir")
    try:
        # the execution's limits on waiting (a multi-worker trial's rendezvous and stall timeouts) ride with the
        # backend's settings; a job built before them has none and takes the defaults
        backend = {**job["backend"], "limits": job.get("limits") or {}}
        result = BACKENDS[job["backend"]["name"]](job["trial"], backend, progress)
    except SystemExit:
        if stopped and _relabel_if_pruned(job):
            _drop_checkpoints(checkpoint_dir)
        raise  # otherwise interrupted: the checkpoint is what a resume continues from
    except BaseException:
        _drop_checkpoints(checkpoint_dir)  # this attempt is never resumed: a retry is a new attempt
        raise
    _drop_checkpoints(checkpoint_dir)
    objective = trial_objective(result, eval_steps, job.get("objective")) if result.status == "SUCCEEDED" else None
    final = {
        "eval_index": n_evals,
        "objective_so_far": objective if objective is not None else math.inf,
        "step": result.steps_done,
        "trial_status": result.status,
        "trial_elapsed_s": time.perf_counter() - start,
        "trial_wall_s": time.perf_counter() - start,
        "effective_time_s": result.total_effective_time_s,
        "run_wall_s": result.wall_time_s,
    }
    if objective is not None:
        final["objective"] = objective
    for step in eval_steps:  # the declared steps only: a trainer reporting 20,000 steps adds nothing here
        if step in result.fd:
            final[f"fd_at_{step}"] = result.fd[step]
    tune.report(final)


def declared_objective(fd: Mapping[int, float], eval_steps: Sequence[int]) -> float:
    """A finished trial's objective: the mean FD over the sweep's declared eval steps, each required and finite.
    FD reported at any other step does not count (a backend's own mean is over whatever steps it saw); a missing
    or non-finite one fails the trial, naming the steps, rather than scoring it on fewer steps than its peers."""
    missing = [s for s in eval_steps if not math.isfinite(fd.get(s, math.nan))]
    if missing:
        shown = ", ".join(map(str, missing[:12])) + (f", ... ({len(missing)} steps)" if len(missing) > 12 else "")
        raise TrialError(f"the trial reported no finite FD at declared eval step(s) {shown}: it cannot be scored")
    return _mean([fd[s] for s in eval_steps])


def trial_objective(result: Any, eval_steps: Sequence[int], objective: Mapping[str, Any] | None = None) -> float:
    """A finished trial's objective under the sweep's `selection` (`SelectionSpec.trial_objective()`; None = the
    mean FD, as jobs built before the option): `declared_objective`, or with `steps_to_target` the steps to the
    target on the chosen curve (`sweeper.selection.steps_to_target_score`; a censored trial scores horizon x final
    / target). The declared eval steps must have a finite FD either way, so a trial is scored on no fewer
    checkpoints than its peers under one objective than under the other."""
    from ..selection import steps_to_target_score

    mean_fd = declared_objective(result.fd, eval_steps)
    if not objective or objective.get("name", "mean_fd") == "mean_fd":
        return mean_fd
    if objective.get("curve") == "fd":
        curve, times = {s: result.fd[s] for s in eval_steps}, result.effective_time_s
    else:
        curve, times = dict(result.fd_track), result.track_effective_time_s
    try:
        score = steps_to_target_score(curve, float(objective["target"]), int(result.steps_done), times)
    except ValueError as exc:
        raise TrialError(f"steps to target on {objective.get('curve')}: {exc}") from None
    return score.score


def objective_so_far(objective: Mapping[str, Any] | None, fds: Mapping[int, float], record: Mapping[str, Any],
                     step: int) -> float:
    """A running trial's live objective at eval step `step`, on `trial_objective`'s scale: the mean of the finite
    FDs `fds` so far, or with `steps_to_target` the score on the curve seen so far (`fds`, or the tracking points
    the built-in backend's record carries in `fd_track_so_far`): `sweeper.selection.steps_to_target_so_far`."""
    if not objective or objective.get("name", "mean_fd") == "mean_fd":
        return _mean(list(fds.values()))
    from ..selection import steps_to_target_so_far

    curve = fds if objective.get("curve") == "fd" else record.get("fd_track_so_far") or {}
    try:
        return steps_to_target_so_far(curve, float(objective["target"]), step)
    except ValueError:
        return math.inf  # the latest tracking FD is not finite: no score now (the driver keeps no running value)


def _mean(values: Sequence[float]) -> float:
    """The mean of finite values, finite however large they are (`statistics.fmean` sums first and overflows)."""
    return math.fsum(v / len(values) for v in values)


def _tag_worker(job: dict[str, Any]) -> None:
    """Which Ray node and host ran this attempt (provenance; on a cluster it tells the nodes apart)."""
    tracking = job["trial"].get("tracking") or {}
    if not tracking.get("run_id"):
        return
    with contextlib.suppress(Exception):  # provenance must never fail a trial
        import socket

        import ray
        from mlflow import MlflowClient
        from mlflow.entities import RunTag

        node = ray.get_runtime_context().get_node_id()
        MlflowClient(tracking_uri=tracking["tracking_uri"]).log_batch(
            tracking["run_id"],
            tags=[RunTag(TRIAL_TAG.RAY_NODE, str(node)), RunTag(TRIAL_TAG.WORKER_HOST, socket.gethostname())],
        )


def _drop_checkpoints(checkpoint_dir: str | None) -> None:
    """Remove an attempt's checkpoints once it can no longer resume, with those of the trial's earlier attempts
    (an attempt whose process was killed never removed its own; a retry starts afresh, so none is read again:
    issue 64, N4), and the trial's folder when empty."""
    if not checkpoint_dir:
        return
    path = Path(checkpoint_dir)
    shutil.rmtree(path, ignore_errors=True)
    number = _attempt_number(path)
    if number is not None:
        for earlier in path.parent.glob("attempt-*"):
            if (n := _attempt_number(earlier)) is not None and n < number:
                shutil.rmtree(earlier, ignore_errors=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _attempt_number(folder: Path) -> int | None:
    """`attempt-3` -> 3 (`checkpoint_path`'s names); None for any other folder."""
    match = re.fullmatch(r"attempt-(\d+)", folder.name)
    return int(match.group(1)) if match else None


def _relabel_if_pruned(job: dict[str, Any]) -> bool:
    """After the backend closed its run as KILLED: PRUNED instead, when the driver decided so."""
    tracking = job["trial"].get("tracking") or {}
    run_id = tracking.get("run_id")
    if not run_id:
        return False
    try:
        from mlflow import MlflowClient
        from mlflow.entities import RunTag

        client = MlflowClient(tracking_uri=tracking["tracking_uri"])
        if client.get_run(run_id).data.tags.get(TAG.STOP_REASON) != "pruned":
            return False
        client.log_batch(run_id, tags=[RunTag(TAG.STATUS, PRUNED)])
        return True
    except Exception:  # the driver re-applies the label after the sweep: never fail a stopping trial over it
        return False


def make_trainable(sweep_id: str) -> Callable[[dict[str, Any]], None]:
    """A trainable with a name unique to the sweep: Tune's registry is keyed by name, and two sweeps sharing a
    cluster (or a process) must never run each other's trials."""

    def trainable(config: dict[str, Any]) -> None:
        run_trial_attempt(config["job"])

    safe = re.sub(r"[^A-Za-z0-9_]", "_", sweep_id)
    trainable.__name__ = trainable.__qualname__ = f"scalesweep_{safe}"
    return trainable


def checkpoint_path(workdir: Path, trial_key: str, attempt: int) -> Path:
    """One folder per trial attempt: an interrupted attempt resumes from it; a retry starts afresh."""
    safe = re.sub(r"[^A-Za-z0-9_.=,-]", "_", trial_key)
    return workdir / "checkpoints" / safe / f"attempt-{attempt}"
