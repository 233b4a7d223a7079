"""The sweep driver: one process per sweep runs Ray Tune over the planner's trials and records them in MLflow.

Keep Ray out of long-lived servers: `ray.init` takes over SIGTERM, and two `Tuner.fit()` in one process can run
each other's trainables. The service launches `scalesweep sweep run spec.yaml --workdir DIR` as a subprocess in
its own process group (session), and talks to it through the work folder:

    DIR/sweep.json    the sweep's identity: sweep id, parent run id, tracking URI, experiment, spec fingerprint
    DIR/status.json   live state, rewritten as trials start and end (read by `sweep_status`)
    DIR/driver.lock   held (flock), as is DIR itself, by the running driver: a second driver for the sweep is refused
    DIR/cancel        ask the driver to stop (also: SIGTERM or SIGINT to the driver); trials end as CANCELLED
    DIR/checkpoints/  per-attempt trial checkpoints (builtin backend), so interrupted trials resume mid-way
    DIR/ray/          Ray Tune's own experiment folder (diagnostics only: the ledger is MLflow)

Resume is a fresh Tune run over what MLflow says is left (see `sweeper.search`): stale RUNNING runs of the sweep are
closed as KILLED first, succeeded ones are never re-run, interrupted ones are relaunched.

The lock, the resume check, the FAILED record of a broken driver, the table and the figures are the job runner's
(`_runner`); the Tune stage (Ray, Tune, signals) is `sweeper.search.run_tune`; this module is the sweep's own stages
(`SweepJob`: ledger, Tune, confirmation, result), the driver's hooks (`_Driver`), and the sweep's status and cancel.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from trials import JobFailedError
from trials.record import LINEAGE, METRIC, TAG

from ..analysis import SweepResult, build_result, confirmation_spec, controls_of, top_points
from ..errors import SweepError, SweepFailedError
from ..jobfiles import (
    SPEC_FILE,
    STATE_FILE,
    STATUS_FILE,
    cancel_requested,
    clear_cancel,
    driver_running,
    read_state,
    read_status,
    request_cancel,
    write_json,
)
from ..ledger import SweepLedger, resolve_tracking_uri
from ..search import FINISHED, Planner, TrialRequest, checkpoint_path, load_trainers, run_tune, with_trainer
from ..selection import SweepSelection
from ..specs import CommandBackend, EarlyStoppingSpec, SweepSpec, load_spec
from ._emergency import CancelDeadline
from ._figures import log_sweep_figures
from ._heartbeat import Heartbeat
from ._runner import JobRun, run_locked_job

__all__ = ["cancel_sweep", "default_workdir", "run_sweep", "sweep_status"]



def default_workdir(name: str) -> Path:
    """Where a sweep keeps its state unless told otherwise (`out/` is git-ignored)."""
    return Path("out") / "sweeps" / name


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass
class _Live:
    request: TrialRequest
    run_id: str
    started: float
    last: dict[str, Any] = field(default_factory=dict)
    running_objective: dict[int, float] = field(default_factory=dict)


class _Driver:
    """One sweep run: what the Tune adapters call (`sweeper.search` `TuneHooks`: trials asked for, reported, pruned and
    ended, each recorded in the ledger and told to the planner), the cancel, and the status the heartbeat writes.
    After Tune ends, `close_leftovers` and `reconcile` make MLflow say how every trial ended."""

    def __init__(self, spec: SweepSpec, workdir: Path, ledger: SweepLedger, sweep_id: str, parent_run_id: str,
                 planner: Planner, stream: IO[str] | None) -> None:
        self.spec, self.workdir, self.ledger = spec, workdir, ledger
        self.sweep_id, self.parent_run_id, self.planner = sweep_id, parent_run_id, planner
        self.n_evals = len(spec.resolved_eval_steps)
        self.live: dict[str, _Live] = {}  # Tune trial id -> the attempt it runs
        self.pruned: set[str] = set()
        self.closed: dict[str, tuple[str, bool]] = {}  # run id -> (state, diverged), for the final reconcile
        self.trial_wall: list[float] = []
        self.cancel = threading.Event()
        self.started = time.time()
        self.errors: dict[str, str] = {}
        self.heartbeat = Heartbeat(workdir, stream, self.status, self.summary_line)
        self.deadline = CancelDeadline(self._announce_emergency, self._close_in_emergency)
        self._cancel_announced = False
        # The rule's choice once the sweep has ended (`_finish`); until then the status shows the lowest mean so far,
        # labelled provisional, because the rule needs every point's seeds and the bootstrap.
        self.chosen: dict[str, Any] | None = None

    # -- Tune searcher hooks --------------------------------------------------------------------------------

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self.cancel_requested():
            return FINISHED
        req = self.planner.next()
        if not isinstance(req, TrialRequest):
            return req  # None (wait) or FINISHED
        if req.run_id:  # an interrupted attempt, resumed into its own run
            self.ledger.reopen(req.run_id)
            run_id = req.run_id
        else:
            run_id = self.ledger.create_child(self.parent_run_id, self.sweep_id, req)
        self.live[trial_id] = _Live(req, run_id, time.time())
        self._event(f"start   {req.run_name}" + (" (resumed)" if req.run_id else ""))
        return {"job": self._job(req, run_id)}

    def _job(self, req: TrialRequest, run_id: str) -> dict[str, Any]:
        spec = self.spec
        trial = spec.trial_config(req.optimizer, req.seed, req.rung, horizon=req.horizon, eval_steps=req.eval_steps,
                                  order_seed=req.order_seed)
        trial["tracking"] = {
            "tracking_uri": self.ledger.tracking_uri,
            "experiment": self.ledger.experiment,
            "run_id": run_id,
        }
        backend = spec.backend.model_dump(mode="json")
        if backend["name"] == "builtin" and backend.get("checkpoints"):
            trial["checkpoint_dir"] = str(checkpoint_path(self.workdir, req.trial_key, req.attempt))
        # A free-form command from the CLI keeps the caller's folder (Tune runs workers in per-trial folders; paths
        # in commands are the caller's); a registered trainer runs in its own scratch folder, never the job's.
        if backend["name"] == "command" and backend.get("cwd") is None and backend.get("trainer") is None:
            backend["cwd"] = str(Path.cwd())
        return {
            "sweep_id": self.sweep_id,
            "trial_key": req.trial_key,
            "role": req.role,
            "run_id": run_id,
            "trial": trial,
            "backend": backend,
            "eval_steps": req.eval_steps or spec.resolved_eval_steps,
            "objective": spec.selection.trial_objective(),
            "threads": spec.execution.threads,
            "limits": spec.execution.model_dump(include={"rendezvous_timeout_s", "stall_timeout_s"}),
        }

    def on_result(self, trial_id: str, result: dict[str, Any]) -> None:
        live = self.live.get(trial_id)
        if live is None:
            return
        live.last = dict(result)
        index = result.get("eval_index")
        if isinstance(index, int) and math.isfinite(float(result.get("objective_so_far", math.inf))):
            live.running_objective[index] = float(result["objective_so_far"])

    def on_prune(self, trial_id: str, eval_index: int) -> None:
        """ASHA decided to stop this trial: say so on its run before Tune stops it (the worker reads it)."""
        live = self.live.get(trial_id)
        if live is None:
            return
        self.pruned.add(trial_id)
        self.ledger.mark_stop_reason(live.run_id, "pruned")

    def on_complete(self, trial_id: str, result: dict[str, Any] | None, error: bool) -> None:
        live = self.live.pop(trial_id, None)
        if live is None:
            return
        result = dict(result or live.last or {})
        diverged = False
        objective = None
        if error:
            state = "FAILED"
        elif trial_id in self.pruned:
            state = "PRUNED"
        elif result.get("trial_status") == "SUCCEEDED" and result.get("eval_index") == self.n_evals:
            state, objective = "SUCCEEDED", result.get("objective")
        elif result.get("trial_status") == "DIVERGED":
            state, diverged = "FAILED", True
        elif self.cancel_requested():
            state = "CANCELLED"
        else:
            state = "FAILED"
            self.errors.setdefault(live.run_id, "the trial ended without reporting its outcome")
        if "eval_index" in result and state == "SUCCEEDED":
            live.running_objective[self.n_evals] = float(result.get("objective_so_far", math.nan))
        wall = result.get("trial_wall_s") or result.get("trial_elapsed_s")
        if wall:
            self.trial_wall.append(float(wall))
        steps = result.get("step")
        metrics = {METRIC.TRIAL_WALL_S: float(wall)} if wall else {}
        if objective is not None:
            # The sweep's objective (the mean FD over the declared eval steps, or the steps to the selection's
            # target: `sweeper.search`), logged after the backend's own summary at the same step, so the run's
            # latest `objective` is the one the planner saw.
            metrics[METRIC.OBJECTIVE] = float(objective)
        self.ledger.close(
            live.run_id,
            state,
            diverged=diverged,
            error=self.errors.get(live.run_id),
            steps_done=int(steps) if isinstance(steps, int | float) else None,
            metrics=metrics or None,
        )
        self.closed[live.run_id] = (state, diverged)
        retry = self.planner.complete(
            live.request,
            state,
            objective=float(objective) if objective is not None else None,
            diverged=diverged,
            running_objective=live.running_objective,
        )
        what = {"SUCCEEDED": "done   ", "PRUNED": "pruned ", "CANCELLED": "stopped", "FAILED": "failed "}[state]
        detail = f"objective {objective:.4g}" if objective is not None else ""
        if state == "PRUNED":
            detail = f"at step {steps}"
        elif state == "FAILED":
            detail = "diverged" if diverged else "error"
            detail += f"; retry as attempt {retry.attempt + 1}" if retry else "; no retries left"
        self.heartbeat.dirty = True
        self._event(f"{what} {live.request.run_name}  {detail}".rstrip())

    def on_error(self, run_id: str, message: str) -> None:
        """Tune's error text for a failed trial (arrives after on_complete)."""
        self.errors[run_id] = message
        with contextlib.suppress(Exception):
            run = self.ledger.client.get_run(run_id)
            if TAG.ERROR not in run.data.tags:
                self.ledger.set_tags(run_id, {TAG.ERROR: message[:500]})

    def run_id_of(self, trial_id: str) -> str | None:
        live = self.live.get(trial_id)
        return live.run_id if live else None

    # -- cancel, status, display ------------------------------------------------------------------------------

    def request_cancel(self) -> None:
        """Stop gracefully; if that has not finished within the grace period, close the sweep's runs and exit
        anyway (`_emergency`). Called from the signal handler and from the signal-watching thread alike."""
        self.cancel.set()
        self.deadline.arm()

    def disarm(self) -> None:
        self.deadline.disarm()

    def _announce_emergency(self, grace: float) -> None:
        self.heartbeat.final = True  # the main thread may still be running: it must not overwrite the final status
        self.heartbeat.print(f"cancel did not finish within {grace:g} s: closing the sweep's runs and exiting")

    def _close_in_emergency(self) -> None:
        with contextlib.suppress(Exception):
            for live in list(self.live.values()):
                self.ledger.close(live.run_id, "CANCELLED")
            self.ledger.close_stale(self.sweep_id)
            self.ledger.finish_parent(self.parent_run_id, "CANCELLED", None, {}, None)
        with contextlib.suppress(Exception):
            write_json(self.workdir / STATUS_FILE, {**self.status("CANCELLED", "cancel grace period exceeded"),
                                                    "finished_at": _now()})

    def cancel_requested(self) -> bool:
        if not self.cancel.is_set() and cancel_requested(self.workdir):
            self.request_cancel()
        if self.cancel.is_set() and not self._cancel_announced:  # set here, or by a signal handler
            self._cancel_announced = True
            self._event("cancel requested: stopping running trials")
        return self.cancel.is_set()

    def close_leftovers(self) -> None:
        """Trials Tune stopped without telling the searcher (a cancel): CANCELLED, resumable."""
        for trial_id in list(self.live):
            live = self.live.pop(trial_id)
            with contextlib.suppress(Exception):
                self.ledger.close(live.run_id, "CANCELLED")
            self.closed[live.run_id] = ("CANCELLED", False)
            self.planner.complete(live.request, "CANCELLED")
            self._event(f"stopped {live.request.run_name}")

    @property
    def stream(self) -> IO[str] | None:
        return self.heartbeat.stream

    @property
    def early_stopping(self) -> EarlyStoppingSpec:
        return self.spec.early_stopping

    def _event(self, text: str) -> None:
        self.heartbeat.event(text)

    def summary_line(self) -> str:
        counts = self.planner.counts()
        best = self.planner.best()
        total = self.planner.budget
        scored = sum(1 for p in self.planner.points.values() if p.outcome == "SUCCEEDED")
        text = (f"sweep {self.spec.name}: {scored}/{total} points scored | trials {counts['SUCCEEDED']} done, "
                f"{len(self.live)} running, {counts['FAILED']} failed, {counts['PRUNED']} pruned, "
                f"{counts['QUEUED']} queued")
        if self.chosen is not None:
            text += f" | chosen {self.chosen['point_key']} objective {self.chosen['objective']:.4g}"
        elif best is not None:
            text += f" | best so far (provisional) {best[0]} objective {best[1]:.4g}"
        return text

    def best_record(self) -> dict[str, Any] | None:
        """The status's `best`: the rule's choice once the sweep ended, else the lowest mean so far (provisional)."""
        if self.chosen is not None:
            return self.chosen
        best = self.planner.best()
        if best is None:
            return None
        return {"point_key": best[0], "objective": best[1], "provisional": True,
                "rule": "lowest mean objective among the points scored so far; the final choice applies the "
                        "selection rule (one pooled standard error, larger K) and may differ"}

    def status(self, state: str, error: str | None = None) -> dict[str, Any]:
        return {
            "sweep_id": self.sweep_id,
            "name": self.spec.name,
            "state": state,
            "pid": os.getpid(),
            "pgid": os.getpgrp(),
            "host": socket.gethostname(),
            "parent_run_id": self.parent_run_id,
            "experiment_id": self.ledger.experiment_id,  # known since ensure_store: readers need no MLflow call
            "tracking_uri": self.ledger.tracking_uri,
            "experiment": self.ledger.experiment,
            "started_at": dt.datetime.fromtimestamp(self.started, dt.UTC).isoformat(timespec="seconds"),
            "updated_at": _now(),
            "points": {"budget": self.planner.budget, "known": len(self.planner.points),
                       "scored": sum(1 for p in self.planner.points.values() if p.outcome == "SUCCEEDED")},
            "counts": {**self.planner.counts(), "RUNNING": len(self.live)},
            "best": self.best_record(),
            "running": [
                {"trial_key": lv.request.trial_key, "attempt": lv.request.attempt, "run_id": lv.run_id,
                 "step": lv.last.get("step"), "objective_so_far": lv.last.get("objective_so_far")}
                for lv in self.live.values()
            ],
            "events": self.heartbeat.events[-20:],
            "error": error,
            "summary": self.summary_line(),
        }

    def tick(self, force: bool = False, state: str = "RUNNING") -> None:
        self.heartbeat.tick(force, state)

    def reconcile(self) -> None:
        """Re-apply how each trial ended: a stopped worker may have written KILLED after the driver wrote PRUNED."""
        for run_id, (state, diverged) in self.closed.items():
            with contextlib.suppress(Exception):
                self.ledger.close(run_id, state, diverged=diverged)


def _with_trainer(spec: SweepSpec) -> SweepSpec:
    """`spec` with a registered trainer's command filled in from $SCALESWEEP_TRAINERS (`with_trainer`); a spec the
    service wrote has it filled in already, and is returned as it is (the registry is read only when needed)."""
    named = isinstance(spec.backend, CommandBackend) and spec.backend.command is None
    return with_trainer(spec, load_trainers()) if named else spec


@dataclass
class SweepJob:
    """A sweep as the job runner runs it (`_runner.Job`): its record in the ledger, the Tune stage, the
    confirmation, the result. The lock, the resume check, the table and the figures are the runner's."""

    spec: SweepSpec
    kind = "sweep"
    refused = SweepError
    may_change = "`execution` and `retries`"
    # What `failed` needs to record a broken driver: set once the ledger and the Tune stage exist.
    _record: tuple[_Driver, SweepLedger, str, dict[str, float]] | None = field(default=None, repr=False)

    def stored(self, workdir: Path) -> tuple[str, str | None] | None:
        state = read_state(workdir)
        return None if state is None else (str(state["sweep_id"]), state.get("fingerprint"))

    def run(self, run: JobRun) -> SweepResult:
        spec, workdir = self.spec, run.workdir
        state = read_state(workdir)
        uri = resolve_tracking_uri(state["tracking_uri"] if state else spec.tracking.tracking_uri)
        t0 = time.perf_counter()
        ledger = SweepLedger(uri, spec.tracking.experiment)
        ledger.ensure_store()  # once, before any trial touches the store
        store_s = time.perf_counter() - t0
        if state is None:
            state = _new_sweep(spec, workdir, ledger, uri)
        sweep_id, parent_run_id = state["sweep_id"], state["parent_run_id"]
        clear_cancel(workdir)  # a cancel belongs to the run it stopped
        ledger.start_parent(parent_run_id)
        stale = ledger.close_stale(sweep_id)
        planner = Planner(spec, ledger.records(sweep_id), prior=ledger.prior_records(spec.search.warm_start))
        driver = _Driver(spec, workdir, ledger, sweep_id, parent_run_id, planner, run.stream)
        if stale:
            driver._event(f"closed {len(stale)} interrupted run(s) of the previous driver as KILLED")
        if spec.search.warm_start:
            driver._event(f"warm start: the sampler was told {planner.warm_started} finished point(s) of "
                          f"{', '.join(spec.search.warm_start)}")
        driver.tick(force=True)
        timings: dict[str, float] = {"store_init_s": store_s}
        self._record = (driver, ledger, parent_run_id, timings)
        final_state = "RUNNING"
        try:
            if planner.has_work():
                timings.update(run_tune(spec, driver, workdir))
            if driver.cancel.is_set():
                final_state = "CANCELLED"
        except BaseException as exc:
            # A cancel that also took Ray down (SIGTERM to the whole process group) is still a cancel.
            cancelled = isinstance(exc, KeyboardInterrupt) or driver.cancel.is_set()
            for live in list(driver.live.values()):
                with contextlib.suppress(Exception):
                    ledger.close(live.run_id, "CANCELLED")
            driver.live.clear()
            if not cancelled:
                raise SweepFailedError(f"sweep {spec.name} failed: {exc!r}") from exc
            final_state = "CANCELLED"
        # The confirmation runs before the choice is final; cancelled, it leaves the sweep CANCELLED and resumable.
        if final_state == "RUNNING" and spec.confirm.top > 0 and not _confirm(spec, driver, ledger, parent_run_id,
                                                                              workdir):
            final_state = "CANCELLED"
        result = _finish(driver, ledger, parent_run_id, final_state, timings, run.started, None)
        driver.disarm()
        result.workdir = str(workdir)
        return result

    def failed(self, run: JobRun, exc: JobFailedError) -> None:
        """The sweep's parent run and status say FAILED, with the error that broke the driver."""
        if self._record is None:
            return
        driver, ledger, parent_run_id, timings = self._record
        with contextlib.suppress(Exception):
            _finish(driver, ledger, parent_run_id, "FAILED", timings, run.started, repr(exc.__cause__ or exc))
        driver.disarm()

    def finished(self, run: JobRun, result: SweepResult) -> None:
        log_sweep_figures(result, run.stream)


def _new_sweep(spec: SweepSpec, workdir: Path, ledger: SweepLedger, uri: str) -> dict[str, Any]:
    """Start a sweep's record: its id, its parent run, and its state and spec files in `workdir`."""
    sweep_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
    parent_run_id = ledger.create_parent(spec, sweep_id, workdir)
    state = {"sweep_id": sweep_id, "name": spec.name, "parent_run_id": parent_run_id, "tracking_uri": uri,
             "experiment": spec.tracking.experiment, "fingerprint": spec.fingerprint(),
             "created_at": _now()}
    write_json(workdir / STATE_FILE, state)
    write_json(workdir / SPEC_FILE, spec.model_dump(mode="json"))
    return state


def run_sweep(
    spec: SweepSpec | str | Path | Mapping[str, Any],
    *,
    workdir: str | Path | None = None,
    resume: bool = False,
    show_progress: bool = False,
    stream: IO[str] | None = None,
    show_table: bool = True,
    log_figures: bool = True,
) -> SweepResult:
    """Run a sweep to its end (or until cancelled) and return its result, read back from MLflow.

    `workdir` holds the sweep's state (default `out/sweeps/<name>`). With `resume=True` a sweep already in
    `workdir` continues where it stopped (a new one starts when there is none); without it, an existing sweep in
    `workdir` is an error. `show_progress` prints one line per trial event and a summary to `stream` (stdout),
    and at the end the rank table unless `show_table` is False (a caller with its own table, e.g. a transfer).
    A SUCCEEDED sweep logs its figures on its parent run through the figure hook (`set_figure_hook`: the command line
    registers it; without one the sweep succeeds without figures) unless `log_figures` is False.
    Run it in a process of its own (the CLI does): Ray takes over signals and is not safe to share.
    """
    spec = _with_trainer(spec if isinstance(spec, SweepSpec) else load_spec(spec))
    return run_locked_job(SweepJob(spec), Path(workdir or default_workdir(spec.name)), resume=resume,
                   show_progress=show_progress, stream=stream, show_table=show_table, figures=log_figures)


def _confirm(spec: SweepSpec, driver: _Driver, ledger: SweepLedger, parent_run_id: str, workdir: Path) -> bool:
    """Run the top points again on fresh seeds (once: a resumed sweep that has its confirmation keeps it) and
    record it on the parent run, where reading the result back makes the confirmed choice final. False when the
    confirmation was cancelled: nothing is recorded, so a resumed sweep continues it (in `workdir/confirm`)."""
    parent = ledger.client.get_run(parent_run_id)
    if LINEAGE.CONFIRMATION in parent.data.tags:
        return True
    spec_dict = {**spec.model_dump(mode="json"), "resolved_eval_steps": spec.resolved_eval_steps}
    provisional = build_result(ledger, parent, spec_dict, state="RUNNING")
    if provisional.selection is None:
        return True
    driver._event(f"confirming the top {spec.confirm.top} point(s) on fresh seeds {spec.confirm_seeds}")
    try:
        doc = run_confirmation(spec, provisional.selection, driver.sweep_id, workdir, driver.stream)
    except SweepError as exc:  # the sweep's own result stands; the record says the confirmation failed
        doc = {"error": str(exc)[:1000], "seeds": spec.confirm_seeds, "objectives": {}}
    if doc.get("state") == "CANCELLED":
        return False
    ledger.set_tags(parent_run_id, {LINEAGE.CONFIRMATION: json.dumps(doc)})
    return True


def run_confirmation(spec: SweepSpec, selection: SweepSelection, sweep_id: str, workdir: Path,
                     stream: IO[str] | None = None) -> dict[str, Any]:
    """Run the confirmation sweep (`sweeper.analysis.confirmation_spec`: resumable, in `workdir/confirm`) and return
    the document for the parent run's confirmation tag. Here, beside `run_sweep`, because it is a sweep of its own."""
    points = top_points(selection, spec.confirm.top)
    controls = controls_of(spec, selection)
    sub = confirmation_spec(spec, points, sweep_id, controls)
    result = run_sweep(sub, workdir=workdir / "confirm", resume=True, show_progress=stream is not None,
                       stream=stream, show_table=False, log_figures=False)
    by_label = {points[0].point_key: result.points[0] if result.points else None}
    for i, p in enumerate(points[1:], start=2):
        by_label[p.point_key] = next((b for b in result.baselines if b.point_key == f"top{i}"), None)
    seeds = sub.seeds
    objectives = {key: [s.seed_objectives.get(q) for q in seeds] if s is not None else [None] * len(seeds)
                  for key, s in by_label.items()}
    control_runs = {name: next((b for b in result.baselines if b.point_key == f"control-{cfg['name']}"), None)
                    for name, cfg in controls}
    return {"sweep_id": result.sweep_id, "parent_run_id": result.parent_run_id, "state": result.state,
            "seeds": seeds, "objectives": objectives,
            "controls": {name: [s.seed_objectives.get(q) for q in seeds] if s is not None else [None] * len(seeds)
                         for name, s in control_runs.items()}}


def _failure_cause(result: SweepResult) -> str:
    """Why a sweep without a scored point FAILED, in its trials' own words (e.g. the trainer's exit code and the
    last lines of its stderr), not the driver's log."""
    message = "no point was scored on every seed"
    failed = [t for t in result.trials if t.status == "FAILED"]
    if failed:
        first = next((t for t in failed if t.error), failed[0])
        message += (f": {len(failed)} of {len(result.trials)} trial attempts FAILED; {first.trial_key} (attempt "
                     f"{first.attempt}): {first.error or 'no error recorded'}")
    return message


def _finish(driver: _Driver, ledger: SweepLedger, parent_run_id: str, state: str, timings: dict[str, float],
            wall_start: float, error: str | None) -> SweepResult:
    parent = ledger.client.get_run(parent_run_id)
    spec_dict = {**driver.spec.model_dump(mode="json"), "resolved_eval_steps": driver.spec.resolved_eval_steps}
    result = build_result(ledger, parent, spec_dict, state=state)
    if state == "RUNNING":
        state = "SUCCEEDED" if result.selection is not None else "FAILED"
        if state == "FAILED":
            error = error or _failure_cause(result)
        result.state = state
    timings["sweep_wall_s"] = time.perf_counter() - wall_start
    timings["trial_wall_s_sum"] = sum(driver.trial_wall)
    fit_s, conc = timings.get("fit_wall_s"), timings.get("concurrency")
    if fit_s and conc and driver.trial_wall:
        # Slot-seconds Ray held for trials but not spent inside them (scheduling, actor start, MLflow run set-up,
        # the tail where fewer trials than slots remain), relative to the trial time itself.
        timings["overhead_fraction"] = (fit_s * min(conc, len(driver.trial_wall)) - sum(driver.trial_wall)) / sum(
            driver.trial_wall)
    result.timings = {k: v for k, v in timings.items() if k != "concurrency"}
    metrics: dict[str, float] = dict(result.timings)
    metrics.update({f"trials_{k.lower()}": float(v) for k, v in result.counts.items() if k != "attempts"})
    metrics["points_scored"] = float(sum(1 for p in result.points if p.objective is not None))
    if result.selection is not None:
        sel = result.selection
        metrics["best_objective"] = float(sel.point.objective)  # type: ignore[arg-type]
        if sel.chosen_p_best is not None:
            metrics["best_p_best"] = sel.chosen_p_best
        if sel.confirmation is not None:
            before = sel.confirmation["points"].get(sel.confirmation["chosen_before"], {})
            if before.get("winners_curse") is not None:
                metrics["winners_curse"] = float(before["winners_curse"])
        driver.chosen = {"point_key": sel.point.point_key, "objective": sel.point.objective, "provisional": False,
                         "params": sel.params, "p_best": sel.p_best.get(sel.point.point_key), "rule": sel.rule}
        if sel.gap_abs is not None:
            metrics["runner_up_gap_abs"], metrics["runner_up_gap_rel"] = sel.gap_abs, float(sel.gap_rel or 0.0)
        if sel.pooled_seed_std is not None:
            metrics["pooled_seed_std"] = sel.pooled_seed_std
    if error:
        ledger.set_tags(parent_run_id, {TAG.ERROR: error[:500]})
    ledger.finish_parent(parent_run_id, state, result.selection, metrics, result.selection_document(views=True))
    driver.tick(force=True, state=state)
    driver.heartbeat.write_final(state, error, _now())
    return result


def sweep_status(workdir: str | Path) -> dict[str, Any]:
    """The live status of the sweep in `workdir` (from its status file), with `driver_alive` and, when its
    driver died without finishing, state INTERRUPTED."""
    workdir = Path(workdir)
    state = read_state(workdir)
    if state is None:
        raise SweepError(f"{workdir} is not a sweep work folder (no {STATE_FILE})")
    status = read_status(workdir) or {"state": "PENDING", "sweep_id": state["sweep_id"]}
    alive = driver_running(workdir)
    status["driver_alive"] = alive
    if status.get("state") == "RUNNING" and not alive:
        status["state"] = "INTERRUPTED"  # the driver is gone mid-sweep: resume it with --resume
    status.setdefault("tracking_uri", state["tracking_uri"])
    status.setdefault("experiment", state["experiment"])
    status.setdefault("parent_run_id", state["parent_run_id"])
    return status


def cancel_sweep(workdir: str | Path, *, grace_s: float = 60.0) -> dict[str, Any]:
    """Stop the sweep in `workdir`: ask its driver (cancel file, then SIGTERM), wait up to `grace_s` seconds,
    then kill its process group. Whatever the driver could not close is closed here: no run is left RUNNING, and
    the sweep ends CANCELLED (resumable)."""
    workdir = Path(workdir).resolve()
    state = read_state(workdir)
    if state is None:
        raise SweepError(f"{workdir} is not a sweep work folder (no {STATE_FILE})")
    request_cancel(workdir)
    status = read_status(workdir) or {}
    pid = status.get("pid")
    if driver_running(workdir) and isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.time() + grace_s
        while driver_running(workdir) and time.time() < deadline:
            time.sleep(0.5)
        if driver_running(workdir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:  # a session leader: its group holds its local Ray too
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            time.sleep(1.0)
    status = read_status(workdir) or {}
    if status.get("state") not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        ledger = SweepLedger(state["tracking_uri"], state["experiment"])
        ledger.close_stale(state["sweep_id"])
        ledger.finish_parent(state["parent_run_id"], "CANCELLED", None, {}, None)
        status.update(state="CANCELLED", updated_at=_now(), sweep_id=state["sweep_id"])
        write_json(workdir / STATUS_FILE, status)
    return sweep_status(workdir)
