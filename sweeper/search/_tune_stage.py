"""The sweep's Tune stage: start (or attach to) Ray, run Ray Tune over the planner's trials with the driver's hooks
(`_hooks.DriverHooks`), and turn SIGTERM and SIGINT into the driver's graceful cancel while it runs.

Keep Ray out of long-lived servers: `ray.init` takes over SIGTERM, and two `Tuner.fit()` in one process can run
each other's trainables; the driver runs in a process of its own (`sweeper.jobs`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..settings import DriverSettings
from ..specs import SweepSpec
from ._hooks import DriverHooks
from ._trainable import make_trainable
from ._workers import resources_by_config

__all__ = ["remove_left_sessions", "run_tune"]


def run_tune(spec: SweepSpec, driver: DriverHooks, workdir: Path) -> dict[str, float]:
    """Run Tune over the planner's trials until the sweep has no more (or is cancelled); returns timings."""
    for var, value in {
        "TUNE_DISABLE_SIGINT_HANDLER": "1",  # our handler cancels gracefully and records it
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # MLflow is the record: no CSV/JSON/TensorBoard copies
        "RAY_AIR_NEW_OUTPUT": "0",  # with verbose=0 the legacy reporter prints nothing; the driver reports
    }.items():
        os.environ.setdefault(var, value)
    started_ray, ray_init_s, session = _init_ray(spec)
    if session is not None:  # named in the job's folder until removed: a driver killed before then leaves it
        _note_session(workdir, session)
    try:
        with _signals_cancel(driver):  # after ray.init, which installs its own SIGTERM handler
            return _tune(spec, driver, workdir, started_ray, ray_init_s)
    finally:
        if session is not None:
            import ray

            if ray.is_initialized():  # `_tune` failed before its own shutdown: Ray's processes still use the folder
                ray.shutdown()
            _remove_session(session, workdir)


def _tune(spec: SweepSpec, driver: DriverHooks, workdir: Path, started_ray: bool,
          ray_init_s: float) -> dict[str, float]:
    from ray import tune

    for name in ("ray.tune.execution.tune_controller", "ray.tune.tune", "ray.tune.analysis.experiment_analysis"):
        # Failed trials are reported by the driver and recorded on their runs; Tune's tracebacks are noise here,
        # and its result analysis looks for the CSV/JSON files switched off above.
        logging.getLogger(name).setLevel(logging.CRITICAL)
    from ._tune import tune_parts

    _wait_for_capacity(spec, grows=not started_ray)
    searcher, scheduler, stopper, monitor = tune_parts(driver)
    # one worker: one bundle; N workers: a placement group of N bundles, packed (`_workers`), read per trial from
    # its config: the rungs of one sweep (a transfer's) may run on different worker counts
    resources = resources_by_config(spec.execution, one_node=spec.backend.name == "command")
    trainable = tune.with_resources(make_trainable(driver.sweep_id), resources)
    concurrency = _concurrency(spec)
    tuner = tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(
            search_alg=searcher,
            scheduler=scheduler,
            num_samples=-1,  # the planner says when the sweep is done
            max_concurrent_trials=concurrency,
            reuse_actors=True,  # about 1 s per trial instead of about 4 s (docs/design.md)
            trial_dirname_creator=_trial_dirname,
            trial_name_creator=_trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=f"{driver.sweep_id}-{time.strftime('%Y%m%d-%H%M%S')}",
            storage_path=str(workdir / "ray"),
            stop=stopper,
            callbacks=[monitor],
            failure_config=tune.FailureConfig(max_failures=0),  # the planner retries, each attempt its own run
            verbose=0,
        ),
    )
    t0 = time.perf_counter()
    try:
        tuner.fit()
    finally:
        fit_s = time.perf_counter() - t0
        if started_ray:
            import ray

            ray.shutdown()  # also ends the workers, so nothing writes to MLflow after the reconcile below
        else:
            time.sleep(2.0)  # let stopped trials on a shared cluster finish closing their runs
        driver.close_leftovers()
        driver.reconcile()
    return {"ray_init_s": ray_init_s, "fit_wall_s": fit_s, "concurrency": float(concurrency)}


# How long a job on a cluster it attached to waits for the cluster to grow (an autoscaler adds nodes in minutes)
# before it fails for a trial that does not fit; a Ray started by the driver never grows, so it fails at once.
PLACEMENT_WAIT_S = 600.0


def _wait_for_capacity(spec: SweepSpec, grows: bool, poll_s: float = 5.0) -> None:
    """Fail the job (its reason naming the field and the figures) rather than hold its slot with a trial Ray can
    never place: its widest trial's bundles (`workers` x `cpus_per_trial` CPUs and GPUs) against the live nodes,
    in all and, for a trial packed on one node (a command trainer's torchrun), the largest. On a cluster that may
    grow (`grows`: attached, not started here) it waits PLACEMENT_WAIT_S for one that fits (issue 64, N3)."""
    import ray

    execution = spec.execution
    workers = max(spec.workers_at(rung) for rung in spec.rungs_run())
    one_node = spec.backend.name == "command" and workers > 1
    deadline = time.monotonic() + (PLACEMENT_WAIT_S if grows else 0.0)
    while True:
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        problem = _unplaceable(nodes, workers, execution.cpus_per_trial, execution.gpus_per_trial, one_node)
        if problem is None:
            return
        if time.monotonic() >= deadline:
            waited = f"; waited {PLACEMENT_WAIT_S:g} s for the cluster to grow" if grows else ""
            raise RuntimeError(f"execution.workers_per_trial {workers}: {problem}{waited}")
        time.sleep(poll_s)


def _unplaceable(nodes: list[dict[str, float]], workers: int, cpus: float, gpus: float,
                 one_node: bool) -> str | None:
    """Why a trial of `workers` bundles of (`cpus`, `gpus`) cannot be placed on `nodes` (Ray's resources per live
    node), or None when it can be."""
    need = {"CPU": workers * cpus, "GPU": workers * gpus}
    total = {k: sum(n.get(k, 0.0) for n in nodes) for k in need}
    largest = {k: max((n.get(k, 0.0) for n in nodes), default=0.0) for k in need}
    for kind in ("CPU", "GPU"):
        bundle = need[kind] / workers
        if not need[kind]:
            continue
        if one_node and need[kind] > largest[kind]:
            return (f"one trial needs {need[kind]:g} {kind}s on one node; the largest node has {largest[kind]:g}")
        if need[kind] > total[kind] or bundle > largest[kind]:
            return (f"one trial needs {need[kind]:g} {kind}s ({bundle:g} per worker); the cluster has "
                    f"{total[kind]:g} in all, {largest[kind]:g} on its largest node")
    return None


def _trial_dirname(trial: Any) -> str:
    return str(trial.trial_id)


@contextlib.contextmanager
def _signals_cancel(driver: DriverHooks) -> Iterator[None]:
    """SIGTERM and SIGINT ask for a graceful cancel; a second SIGINT interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and driver.cancel.is_set():
            raise KeyboardInterrupt
        driver.request_cancel()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    # The handler above runs only when the main thread next returns to the interpreter. A SIGTERM to the whole
    # process group (the service stopping a driver) also kills the local Ray, and the main thread can then sit for
    # a minute inside Ray's C++ core waiting for its dead GCS, until Ray ends the process with status 1: no
    # cancel, no emergency stop, runs left RUNNING. Python's C-level handler writes each signal's number to the
    # wakeup fd at once, from whichever thread took it, so a thread reading that fd starts the cancel (and its
    # grace-period timer) without waiting for the main thread.
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:  # the write end closed: the context has ended
                return
            if signal.SIGTERM in data or signal.SIGINT in data:
                driver.request_cancel()

    watcher = threading.Thread(target=watch, name="scalesweep-signal-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_wakeup)
        os.close(write_fd)
        watcher.join(timeout=5)
        os.close(read_fd)
        for s, handler in old.items():
            signal.signal(s, handler)


def _init_ray(spec: SweepSpec) -> tuple[bool, float, Path | None]:
    """Start a local Ray (the embedded default) or attach to a cluster; returns (started here, seconds, the session
    folder of the local Ray started here: None when attached)."""
    import ray

    start = time.perf_counter()
    if ray.is_initialized():
        return False, 0.0, None
    address = spec.execution.ray_address or DriverSettings.from_env().ray_address
    common: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": True}
    if address and address != "local":
        ray.init(address=address, **common)  # a cluster's size is its own: never pass num_cpus here
        return True, time.perf_counter() - start, None
    # address="local" always starts a fresh instance: a stale ray_current_cluster file can make a plain
    # ray.init() hang, and a sweep must not run inside someone else's Ray by accident.
    context = ray.init(address="local", include_dashboard=False,
                       num_cpus=spec.execution.num_cpus or os.cpu_count(), **common)
    session = getattr(context, "address_info", {}).get("session_dir")  # a RayContext's, typed as its base class
    return True, time.perf_counter() - start, Path(session) if session else None


def _remove_session(session: Path, workdir: Path) -> None:
    """Remove the session folder of the local Ray this driver started and has shut down (issue 53, L1: one
    `<tmp>/ray/session_*` of sockets, logs and runtime environments was left per driver run). Only the folder Ray
    reported for this driver's own instance, never another: other drivers' Rays run beside it. Its workers' logs
    (where a trial's warnings go) are copied first into the job's `ray/worker-logs/<session>/`."""
    if not session.name.startswith("session_") or not session.is_dir():
        return  # not a session folder as Ray names them: not ours to remove
    kept = workdir / "ray" / "worker-logs" / session.name
    try:
        for log in sorted((session / "logs").glob("worker-*")):
            if log.is_file() and log.stat().st_size:
                kept.mkdir(parents=True, exist_ok=True)
                shutil.copy2(log, kept / log.name)
    except OSError as exc:  # a full disk must not fail a sweep that has ended: the logs are diagnostics
        logging.getLogger(__name__).warning("could not keep Ray's worker logs of %s: %s", session, exc)
    shutil.rmtree(session, ignore_errors=True)
    latest = session.parent / "session_latest"  # Ray's link to the newest session: removed only while it names ours
    with contextlib.suppress(OSError):
        if os.readlink(latest) == str(session):
            latest.unlink()
    with contextlib.suppress(OSError):
        (workdir / SESSION_NOTE).unlink()


SESSION_NOTE = Path("ray") / "session"  # in a job's folder: the local Ray session its driver started, until removed


def _note_session(workdir: Path, session: Path) -> None:
    with contextlib.suppress(OSError):  # the note serves the clean-up only: never fail a sweep over it
        (workdir / SESSION_NOTE).parent.mkdir(parents=True, exist_ok=True)
        (workdir / SESSION_NOTE).write_text(str(session))


def remove_left_sessions(folder: Path) -> list[Path]:
    """Remove the Ray session folders that drivers of the job in `folder` started and did not remove (a driver
    SIGKILLed, or cancelled mid-trial: issue 64, N8), once no driver runs there; their worker logs are kept in the
    job's folder as at a normal end. Returns the sessions removed. For the service, when a job ends however it
    ends, and at its start for jobs that died while it was down."""
    from ..jobfiles import driver_running

    if driver_running(folder):
        return []
    removed = []
    for note in folder.glob(f"**/{SESSION_NOTE}"):
        with contextlib.suppress(OSError):
            session = Path(note.read_text().strip())
            workdir = note.parent.parent
            if session.is_dir():
                _remove_session(session, workdir)
                removed.append(session)
            note.unlink(missing_ok=True)
    return removed


def _concurrency(spec: SweepSpec) -> int:
    import ray

    if spec.execution.concurrency is not None:
        return spec.execution.concurrency
    resources = ray.cluster_resources()
    # As many as the narrowest trial fits (a transfer's rungs may differ in workers); Tune holds a wider trial back
    # until its whole placement group is free.
    workers = min(spec.workers_at(rung) for rung in spec.rungs_run())
    fits = math.floor(resources.get("CPU", 1) / (spec.execution.cpus_per_trial * workers))  # every worker's CPUs
    if spec.execution.gpus_per_trial > 0:
        fits = min(fits, math.floor(resources.get("GPU", 0) / (spec.execution.gpus_per_trial * workers)))
    return max(1, fits)
