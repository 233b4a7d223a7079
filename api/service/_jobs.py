"""The job queue: sweeps and transfers run as driver processes, never inside the web process.

Ray takes over SIGTERM once `ray.init()` runs in a process, and two Tuner.fit() calls in one process can run each
other's trainables (docs/design.md): so each job is a driver of its own, `scalesweep sweep run` or `scalesweep
transfer run`, with a work folder it shares with the service. A background thread starts PENDING jobs (sweeps and
transfers together, oldest first) while fewer than `max_concurrent_sweeps` run, notices drivers that end, and at
start-up reconciles RUNNING records whose driver is gone.

Where a driver runs (`Settings.drivers`):

- `local` (default): a subprocess in its own session on this machine (cancel = the sweeper's cancel, then kill
  the process group);
- `ray-job`: a Ray Job on the cluster (`JobSubmissionClient` at the dashboard address); the job id is recorded,
  cancel = the cancel file, then `stop_job`, and liveness is the job's status. The work folder must be on storage
  that the cluster's head and the service share (the compose file's `work` volume).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from pydantic import ValidationError
from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session, sessionmaker

from sweeper import SweepSpec, cancel_sweep, cancel_transfer, sweep_status, transfer_status
from sweeper.jobfiles import (
    OUTCOME_FILE,
    STATUS_FILE,
    TRANSFER_FILE,
    is_sweep_folder,
    is_transfer_folder,
    request_cancel,
)
from sweeper.jobs import ExtensionUndo, driver_command
from sweeper.search import remove_left_sessions, with_trainer
from sweeper.settings import SOURCE_SWEEP_ID_ENV
from trials.core import ScalesweepError, without_credentials
from trials.core.proctree import JOB_TAG_ENV, end_tagged, process_alive, tag_values

from .db import SweepRecord, TransferRecord
from .security import check_launch, child_env, scrub_env
from .settings import Settings

if TYPE_CHECKING:
    from sweeper.transfer import TransferSpec

__all__ = ["KINDS", "TERMINAL", "JobKind", "JobRunner", "RayJobs", "driver_error"]

log = logging.getLogger("scalesweep.api.jobs")

# The files a driver (re)writes while it runs and when it ends: a sweep's status, a transfer's plan and outcome.
_STATUS_FILES = (STATUS_FILE, TRANSFER_FILE, OUTCOME_FILE)
# A status file written this long before the recorded launch still counts as the launch's: a Ray Job's driver
# writes on another host, whose clock may run behind the service's. A previous run's files are minutes older.
STATUS_CLOCK_SLACK_S = 5.0
# The driver's spec in a job's work folder, written by the service (`JobRunner.write_spec`), read by the driver.
DRIVER_SPEC = "spec.yaml"

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

Record = SweepRecord | TransferRecord


def _kill_group(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the driver's process group (Ray workers included), then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and process_alive(pid):
            time.sleep(0.1)
        if not process_alive(pid):
            return


# The end of driver.log searched for the driver's own last error line: a traceback's last line is within it.
LOG_TAIL_BYTES = 64 * 1024
# A Python exception line as a traceback ends (`sweeper.errors.SweepFailedError: ...`, `KeyboardInterrupt`).
_EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)(?::.*)?")


def driver_error(log_text: str, code: int | None) -> str:
    """A failed driver's error from the end of its log: its own last exception line, never a line of Ray's (its
    workers' echoes start with `(`, its loggers with a time stamp or `[`, its fatal-signal dump with `***`), else
    how it ended: the signal that killed it, its exit code, or that the code is unknown (`code` None: a driver
    adopted from an earlier service process)."""
    for line in reversed(log_text.splitlines()):
        if _EXCEPTION_LINE.fullmatch(line.strip()) and not line.startswith((" ", "\t")):
            return line.strip()
    if code is None:
        return "the driver ended without recording an error (its exit status is unknown: started by an earlier " \
               "service process)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        return f"the driver was killed by signal {-code} ({name}) before it recorded an error"
    return f"the driver exited with {code}"


# --- what differs between sweeps and transfers ---------------------------------------------------------------


def _status_reader(is_folder: Callable[[Path], bool],
                   read: Callable[[Path], dict[str, Any]]) -> Callable[[Path], dict[str, Any] | None]:
    """A kind's status reader: None while its driver has not written the folder, else `read(folder)`."""
    return lambda folder: read(folder) if is_folder(folder) else None


def _cancel_sweep(folder: Path, grace_s: float) -> None:
    cancel_sweep(folder, grace_s=grace_s)


def _cancel_transfer(folder: Path, grace_s: float) -> None:
    cancel_transfer(folder, grace_s=grace_s)


@dataclass(frozen=True)
class JobKind:
    """One kind of job: its table, its folder under the workdir, its driver command and its status file reader."""

    name: str
    record: type[SweepRecord] | type[TransferRecord]
    folder: str
    read_status: Callable[[Path], dict[str, Any] | None]
    local_cancel: Callable[[Path, float], None]


KINDS: dict[str, JobKind] = {
    "sweep": JobKind("sweep", SweepRecord, "sweeps", _status_reader(is_sweep_folder, sweep_status), _cancel_sweep),
    "transfer": JobKind("transfer", TransferRecord, "transfers", _status_reader(is_transfer_folder, transfer_status),
                        _cancel_transfer),
}


def _as_was(record: Record) -> dict[str, Any]:
    """What an extension changes on a job's record, as it was: restored when the queued extension is cancelled."""
    return {"state": record.state, "spec": record.spec, "error": record.error}


def kind_of(record: Record) -> JobKind:
    return KINDS["transfer"] if isinstance(record, TransferRecord) else KINDS["sweep"]


# --- Ray Jobs --------------------------------------------------------------------------------------------------


class JobClient(Protocol):
    """The part of `ray.job_submission.JobSubmissionClient` used here."""

    def submit_job(self, *, entrypoint: str, submission_id: str | None = ...,
                   runtime_env: dict[str, Any] | None = ...) -> str: ...
    def get_job_status(self, job_id: str) -> Any: ...
    def stop_job(self, job_id: str) -> bool: ...


class RayJobs:
    """Drivers as Ray Jobs: submit, status (PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED) and stop.

    The client connects lazily (importing Ray costs seconds) and again after an error, so a cluster that restarts
    does not need a service restart."""

    ALIVE = ("PENDING", "RUNNING")

    def __init__(self, address: str, client_factory: Callable[[str], JobClient] | None = None) -> None:
        self.address = address
        self._factory = client_factory or _job_submission_client
        self._client: JobClient | None = None

    def _get(self) -> JobClient:
        if self._client is None:
            self._client = self._factory(self.address)
        return self._client

    def _call(self, what: str, fn: Callable[[JobClient], Any]) -> Any:
        try:
            return fn(self._get())
        except Exception as exc:  # connection refused, 401 without RAY_AUTH_TOKEN, ...: said once, with the address
            self._client = None
            raise RuntimeError(without_credentials(
                f"Ray Jobs at {self.address}: {what} failed: {type(exc).__name__}: {exc}")) from exc

    def submit(self, argv: list[str], submission_id: str, env: dict[str, str]) -> str:
        entrypoint = shlex.join(argv)
        return str(self._call("submit", lambda c: c.submit_job(
            entrypoint=entrypoint, submission_id=submission_id, runtime_env={"env_vars": env})))

    def status(self, job_id: str) -> str:
        value = self._call("status", lambda c: c.get_job_status(job_id))
        return str(getattr(value, "value", value))

    def stop(self, job_id: str) -> bool:
        return bool(self._call("stop", lambda c: c.stop_job(job_id)))


def _job_submission_client(address: str) -> JobClient:
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:  # pragma: no cover - ray is a core dependency
        raise RuntimeError("SCALESWEEP_DRIVERS=ray-job needs ray[default]: pip install 'ray[default]'") from exc
    return JobSubmissionClient(address)


# --- the runner -------------------------------------------------------------------------------------------------


class JobRunner:
    """Starts, watches, cancels and resumes sweep and transfer drivers; the database is the source of truth."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session],
                 command: Callable[[Record, bool], list[str]] | None = None,
                 ray_jobs: RayJobs | None = None) -> None:
        self.settings = settings
        self.sessions = sessions
        self.command = command or self.driver_command
        self.ray_jobs = ray_jobs
        from sweeper.search import load_trainers

        self.trainers = load_trainers(settings.trainers) if settings.trainers else {}
        if self.ray_jobs is None and settings.drivers == "ray-job":
            self.ray_jobs = RayJobs(settings.ray_jobs_address)
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.cancel_grace_s = 30.0
        self.kill_grace_s = 10.0  # SIGTERM to SIGKILL for what a cancelled job left running

    # --- the driver --------------------------------------------------------------------------------------------

    def job_dir(self, record: Record) -> Path:
        return self.settings.workdir.resolve() / kind_of(record).folder / record.id

    def sweep_dir(self, sweep_id: str) -> Path:
        return self.settings.workdir.resolve() / KINDS["sweep"].folder / sweep_id

    def driver_command(self, record: Record, resume: bool) -> list[str]:
        folder = self.job_dir(record)
        python = "python" if self.ray_jobs is not None else sys.executable  # a cluster node has its own
        return driver_command(kind_of(record).name, folder / DRIVER_SPEC, folder, resume=resume, python=python)

    def live_status(self, record: Record) -> dict[str, Any]:
        """The driver's own status document ({} before it wrote one, or when it cannot be read)."""
        folder = Path(record.storage_path) if record.storage_path else self.job_dir(record)
        try:
            return kind_of(record).read_status(folder) or {}
        except (OSError, ValueError, KeyError, ScalesweepError) as exc:  # a corrupt or half-written job file
            log.debug("%s %s: status unreadable: %s", kind_of(record).name, record.id, exc)
            return {}

    def driver_alive(self, record: Record) -> bool:
        """Whether the job's driver runs. A Ray Job: its status on the cluster. Locally: the sweeper's own lock on
        the work folder once the driver holds it (a pid alone can be reused by an unrelated process after a
        container restart), else the recorded pid."""
        if record.ray_job_id and self.ray_jobs is not None:
            try:
                return self.ray_jobs.status(record.ray_job_id) in RayJobs.ALIVE
            except RuntimeError as exc:  # the cluster does not answer: assume the job lives rather than re-run it
                log.warning("%s", exc)
                return True
        if is_sweep_folder(self.job_dir(record)):  # the driver has taken its lock
            status = self.live_status(record)
            if "driver_alive" in status:
                return bool(status["driver_alive"])
        return process_alive(record.pid) if record.pid else False

    def _driver_spec(self, spec: SweepSpec) -> SweepSpec:
        """A sweep's spec as its driver runs it: the service's tracking store and its registry's trainer command
        (`sweeper.search.with_trainer`: never a command from the request). Copied rather than validated again:
        what is filled in comes from the service's own settings and registry."""
        tracking = spec.tracking.model_copy(update={"tracking_uri": self.settings.tracking_uri})
        return with_trainer(spec.model_copy(update={"tracking": tracking}), self.trainers)

    def write_spec(self, record: Record, spec: SweepSpec | TransferSpec) -> None:
        """Write the job's typed spec where its driver reads it (`DRIVER_SPEC` in its work folder): once, when the
        job is created or extended, from the spec the route validated (a transfer logs where its sweep did,
        unless it says otherwise)."""
        folder = self.job_dir(record)
        folder.mkdir(parents=True, exist_ok=True)
        driver_spec = self._driver_spec(spec) if isinstance(spec, SweepSpec) else spec
        # JSON in a `.yaml` file (YAML is a superset of JSON, and the reader tries JSON first): YAML 1.1 would read a
        # dumped 1e-08 back as a string.
        (folder / DRIVER_SPEC).write_text(driver_spec.model_dump_json(indent=1))

    def _spec_ready(self, record: Record) -> None:
        """Before a driver starts: refuse a backend the registry no longer covers (`check_launch`), and write the
        driver's spec of a job stored without one (queued by an earlier service version: validated here, once)."""
        check_launch(record.spec, self.trainers)
        if not (self.job_dir(record) / DRIVER_SPEC).is_file():
            from sweeper.transfer import TransferSpec as Transfer

            model = Transfer if isinstance(record, TransferRecord) else SweepSpec
            try:
                spec = model.model_validate(record.spec)
            except ValidationError as exc:  # the job fails with why; the queue goes on
                raise RuntimeError(f"its stored spec is not a valid {model.__name__} today: "
                                   f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from exc
            self.write_spec(record, spec)

    def _launch(self, session: Session, record: Record) -> None:
        kind = kind_of(record)
        folder = self.job_dir(record)
        folder.mkdir(parents=True, exist_ok=True)
        self._spec_ready(record)
        resume = bool(record.resume)  # stored: a resume or extension queued before a restart keeps its intent
        launched = dt.datetime.now(dt.UTC)
        # The job's tag: the driver, its local Ray, Ray's workers and every trainer inherit it, so a cancel (or a
        # restarted service) finds all of them, whatever session or parent they ended up with (trials.core.proctree).
        env = {f"SCALESWEEP_{kind.name.upper()}_ID": record.id, JOB_TAG_ENV: record.id}
        if isinstance(record, TransferRecord):  # the stored report names the transfer's sweep by the service's id
            env[SOURCE_SWEEP_ID_ENV] = record.sweep_id
        argv = self.command(record, resume)
        if self.ray_jobs is not None:
            # Ray's job supervisor SIGKILLs a stopped job's driver 3 s after its SIGTERM by default: before the
            # driver's own cancel (SCALESWEEP_CANCEL_GRACE_S, 8 s) has closed its runs, so a `stop_job` (a cancel
            # here, or `ray job stop`) left runs RUNNING or SCHEDULED and no final status. The supervisor reads this
            # from the job's environment.
            env["RAY_JOB_STOP_WAIT_TIME_S"] = str(int(self.cancel_grace_s))
            # One submission id per attempt: Ray refuses to reuse one, and a resume is a new attempt.
            job_id = self.ray_jobs.submit(argv, f"{record.id}-{int(time.time())}", scrub_env(env, self.settings))
            record.pid, record.ray_job_id = None, job_id
            where = f"Ray job {job_id}"
        else:
            if self.settings.ray_address:
                env["RAY_ADDRESS"] = self.settings.ray_address
            log_file = (folder / "driver.log").open("ab")
            # The driver, its Ray and every trial inherit this environment: none of the service's secrets.
            proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT,
                                    env=child_env(self.settings, env), cwd=folder, start_new_session=True)
            log_file.close()
            if self.settings.driver_nice:  # before the driver starts Ray (seconds away): its workers inherit it
                try:
                    os.setpriority(os.PRIO_PROCESS, proc.pid, self.settings.driver_nice)
                except OSError as exc:
                    log.warning("%s %s: could not renice the driver: %s", kind.name, record.id, exc)
            self._procs[record.id] = proc
            record.pid, record.ray_job_id = proc.pid, None
            where = f"pid {proc.pid}"
        record.resume, record.launched_at = False, launched
        record.state, record.storage_path, record.error = "RUNNING", str(folder), None
        session.commit()
        log.info("%s %s: driver started (%s%s)", kind.name, record.id, where, ", resuming" if resume else "")

    # --- the loop ----------------------------------------------------------------------------------------------

    def _records(self, session: Session, state: str) -> list[Record]:
        rows: list[Record] = []
        for kind in KINDS.values():
            rows += session.scalars(select(kind.record).where(kind.record.state == state))
        return sorted(rows, key=lambda r: r.created_at)

    def end_leftovers(self) -> list[str]:
        """End this machine's processes tagged with a job that is no longer running (cancelled or failed while
        the service was down, or a cancel the service did not live to finish). Returns those jobs' ids."""
        ended = []
        with self.sessions() as session:
            for tag in sorted(tag_values(JOB_TAG_ENV)):
                for kind in KINDS.values():
                    # A job of another service (another database) is not found here, and is left alone.
                    record = cast(Record | None, session.get(kind.record, tag))
                    if record is not None and record.state in TERMINAL:
                        end_tagged(JOB_TAG_ENV, tag, self.kill_grace_s)
                        ended.append(tag)
                        log.warning("%s %s: ended the processes it left (%s)", kind.name, tag, record.state)
        return ended

    def reconcile(self) -> None:
        """At start-up: a RUNNING job whose driver is gone is resumed (or marked FAILED, by setting); processes of
        jobs that ended meanwhile are ended (`end_leftovers`)."""
        self.end_leftovers()
        for kind in KINDS.values():  # the Ray sessions of jobs whose drivers died while no service ran
            for folder in sorted((self.settings.workdir.resolve() / kind.folder).glob("*/")):
                self._remove_sessions(folder)
        with self.sessions() as session:
            for record in self._records(session, "RUNNING"):
                if self.driver_alive(record):
                    continue  # a driver from a previous service process still runs: adopt it
                self.end_job_processes(record)  # before it is queued to resume: the new driver gets the same tag
                name = kind_of(record).name
                if self.settings.reconcile == "resume":
                    record.state, record.pid, record.resume = "PENDING", None, True
                    log.warning("%s %s: driver gone after a restart; queued to resume", name, record.id)
                else:
                    record.state, record.error = "FAILED", "driver gone after a service restart"
            session.commit()

    def _exit_code(self, record: Record) -> int | None:
        """None while the driver runs; else its exit code (-1 when unknown: adopted, or a Ray Job)."""
        proc = self._procs.get(record.id)
        if proc is not None:
            return proc.poll()
        return None if self.driver_alive(record) else -1

    def tick(self) -> None:
        """One pass: notice finished drivers, then start queued jobs while there is room."""
        with self._lock, self.sessions() as session:
            running = self._records(session, "RUNNING")
            for record in running:
                self._note_mlflow_ids(record)
                code = self._exit_code(record)
                if code is None:
                    continue
                ours = self._procs.pop(record.id, None) is not None  # else its exit status is unknown
                self.end_job_processes(record)
                record.state = self._final_state(record, code)
                stopped = self._stopped_outside(record, record.state)
                if stopped:  # the service's own cancel marks the record CANCELLED before it stops the driver
                    record.state, record.error = "FAILED", stopped
                elif record.state == "FAILED":
                    record.error = self._failure(record, code if ours else None)
            session.commit()
            slots = self.settings.max_concurrent_sweeps - sum(1 for r in running if r.state == "RUNNING")
            if slots > 0:
                for record in self._records(session, "PENDING")[:slots]:
                    try:
                        self._launch(session, record)
                    except (OSError, RuntimeError) as exc:  # e.g. the Ray cluster refused the job
                        session.rollback()
                        why = self.settings.redact(f"could not start the driver: {exc}")
                        record.state, record.error = "FAILED", why[:2000]
                        session.commit()
                        log.error("%s %s: %s", kind_of(record).name, record.id, why)

    def _note_mlflow_ids(self, record: Record) -> None:
        """Record the job's MLflow experiment and parent run ids once its driver wrote them to its status file, so
        they stay on the record after it ends. Read from the file only: this runs under the queue's lock on every
        pass, where a call to a slow tracking server would hold up cancels and resumes."""
        if record.mlflow_experiment_id and record.mlflow_parent_run_id:
            return
        status = self.live_status(record)
        parent, experiment_id = status.get("parent_run_id"), status.get("experiment_id")
        if parent and experiment_id:
            record.mlflow_parent_run_id, record.mlflow_experiment_id = str(parent), str(experiment_id)

    def launch_status(self, record: Record) -> dict[str, Any]:
        """`live_status` when the driver wrote its status files since the job's latest launch, else {}: a driver
        that refused to start (e.g. without `--resume` on a folder that holds its sweep) leaves the previous run's
        files, whose SUCCEEDED is not this launch's outcome (issue 53, H3)."""
        folder = Path(record.storage_path) if record.storage_path else self.job_dir(record)
        if record.launched_at is not None:
            written = [p.stat().st_mtime for p in (folder / name for name in _STATUS_FILES) if p.is_file()]
            launched = record.launched_at.replace(tzinfo=record.launched_at.tzinfo or dt.UTC).timestamp()
            if not written or max(written) < launched - STATUS_CLOCK_SLACK_S:
                return {}
        return self.live_status(record)

    def _final_state(self, record: Record, code: int) -> str:
        """How a finished driver left its job: its status file says when this launch wrote it (it also covers a
        driver adopted from an earlier service process, or a Ray Job, whose exit code is unknown); a driver that
        died mid-job is FAILED."""
        status = self.launch_status(record)
        if status:
            state = str(status.get("state"))
            return state if state in TERMINAL else "FAILED"
        if record.ray_job_id and self.ray_jobs is not None:
            try:
                job = self.ray_jobs.status(record.ray_job_id)
            except RuntimeError:
                return "FAILED"
            return {"SUCCEEDED": "SUCCEEDED", "STOPPED": "CANCELLED"}.get(job, "FAILED")
        return "SUCCEEDED" if code == 0 else "FAILED"

    def _stopped_outside(self, record: Record, state: str) -> str:
        """Why a RUNNING job whose driver ended as CANCELLED, or whose Ray Job is STOPPED, ended: its driver was
        stopped from outside the service (`ray job stop`, a SIGTERM), which the service did not ask for; "" when
        it was not. Said with what continues it (resume)."""
        how = ""
        if record.ray_job_id and self.ray_jobs is not None:
            try:
                if self.ray_jobs.status(record.ray_job_id) == "STOPPED":
                    how = f"its Ray job {record.ray_job_id} was stopped (STOPPED: `ray job stop` or the dashboard)"
            except RuntimeError:
                pass
        if not how and state == "CANCELLED":
            how = "its driver was cancelled by a signal or its cancel file (e.g. SIGTERM)"
        if not how:
            return ""
        return (f"stopped from outside the service: {how}; its running trials ended CANCELLED. "
                f"POST /v1/{kind_of(record).folder}/{record.id}/resume continues it")

    def end_job_processes(self, record: Record) -> None:
        """End what the job's ended driver left on this machine (its tag: a trainer's `setsid` child that a killed
        Ray worker left behind, a descendant that dropped the trial's tag), whatever the job's outcome. Called
        before the record leaves RUNNING, so no resume can start a driver whose processes carry the same tag."""
        if ended := end_tagged(JOB_TAG_ENV, record.id, self.kill_grace_s):
            log.warning("%s %s: its driver ended; ended %d process(es) it left", kind_of(record).name, record.id,
                        ended)
        self._remove_sessions(self.job_dir(record))

    def _remove_sessions(self, folder: Path) -> None:
        """The local Ray session folders the job's ended drivers left (a driver killed, or cancelled mid-trial)."""
        try:
            removed = remove_left_sessions(folder)
        except OSError as exc:  # clean-up only: never fail the queue's pass over it
            log.warning("%s: could not remove the Ray sessions it left: %s", folder.name, exc)
            return
        if removed:
            log.warning("%s: removed %d Ray session folder(s) its driver left", folder.name, len(removed))

    def _failure(self, record: Record, code: int | None) -> str:
        """Why a job FAILED: the cause its driver recorded (e.g. every trial's trainer exited 3, with its stderr),
        else its own last error line in its log, or how it ended (it died before it could say)."""
        error = self.launch_status(record).get("error")
        return self.settings.redact(str(error) if error else self._log_error(record, code))[:2000]

    def _log_error(self, record: Record, code: int | None) -> str:
        path = self.job_dir(record) / "driver.log"
        if not path.is_file():
            return f"Ray job {record.ray_job_id} failed (its log: ray job logs {record.ray_job_id})" \
                if record.ray_job_id else driver_error("", code)
        with path.open("rb") as handle:  # the end only: a driver's log can be large
            handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return driver_error(handle.read().decode(errors="replace"), code)

    def cancel(self, session: Session, record: Record) -> bool:
        """Mark a PENDING or RUNNING job CANCELLED (False when it already finished or another request cancelled it
        first: the state check and the write are one statement), then stop its driver. Locally: the sweeper's own
        cancel first (cancel file, SIGTERM, closes every MLflow run), then the process group if anything is left.
        A Ray Job: the cancel file, then `stop_job` (Ray sends the driver SIGTERM, which the sweeper handles the
        same way)."""
        kind = kind_of(record)
        with self._lock:  # the queue's pass cannot start or reap this job meanwhile
            session.refresh(record)
            previous = record.state
            folder = Path(record.storage_path) if record.storage_path else None
            if previous == "PENDING" and folder is not None and (kept := self._undo(folder)) is not None:
                # a queued extension, cancelled before it ran: the job as it was before it (issue 64, N5); its
                # driver's spec is written again from the record at its next launch
                (self.job_dir(record) / DRIVER_SPEC).unlink(missing_ok=True)
                return self._claim(session, record, "PENDING", state=kept["state"], spec=kept["spec"],
                                   error=kept.get("error"), resume=False)
            extension = previous == "RUNNING" and folder is not None and ExtensionUndo(folder).drop()
            error = ("its extension was cancelled while running: the runs it finished are kept; POST "
                     f"/v1/{kind.folder}/{record.id}/resume runs the rest") if extension else None
            if previous in TERMINAL or not self._claim(session, record, previous, state="CANCELLED",
                                                       **({"error": error} if error else {})):
                return False  # already finished, or another request cancelled it first
            if previous == "RUNNING":
                folder = self.job_dir(record)
                if record.ray_job_id and self.ray_jobs is not None:
                    request_cancel(folder)
                    try:
                        self.ray_jobs.stop(record.ray_job_id)
                    except RuntimeError as exc:
                        log.warning("%s", exc)
                else:
                    if is_sweep_folder(folder):
                        try:
                            kind.local_cancel(folder, self.cancel_grace_s)
                        except (OSError, ValueError, RuntimeError) as exc:
                            log.warning("%s %s: %s", kind.name, record.id, exc)
                    if record.pid and process_alive(record.pid):
                        _kill_group(record.pid)
                    proc = self._procs.pop(record.id, None)
                    if proc is not None:
                        proc.wait(timeout=30)
                    # Whatever the driver's cancel left (a trainer in a session of its own, its children): SIGTERM,
                    # the grace period, SIGKILL; then the Ray session folder it had no time to remove.
                    end_tagged(JOB_TAG_ENV, record.id, self.kill_grace_s)
                    self._remove_sessions(self.job_dir(record))
            return True

    def _undo(self, folder: Path) -> dict[str, Any] | None:
        """`ExtensionUndo.undo`, or None (a plain cancel) when what it kept cannot be put back: said in the log."""
        try:
            return ExtensionUndo(folder).undo()
        except Exception as exc:  # MLflow unreachable, a file gone: the job is cancelled as any queued job
            log.warning("%s: its queued extension could not be undone (%s); cancelled instead", folder.name, exc)
            return None

    def resume(self, session: Session, record: Record) -> bool:
        """Queue a FAILED or CANCELLED job again; False when it is in neither state (any more)."""
        with self._lock:
            return self._claim(session, record, "FAILED", "CANCELLED", state="PENDING", pid=None, error=None,
                               resume=True)

    def extend(self, session: Session, record: SweepRecord, spec: SweepSpec) -> list[str] | None:
        """Extend a finished sweep to `spec` (validated once, by the route) and queue it to run what is missing:
        the additions, or None when the sweep is not SUCCEEDED, FAILED or CANCELLED (any more). `SweepError` when
        the spec changes more than an extension may (nothing changed then). Under the queue's lock, so no driver
        starts in between."""
        from sweeper.jobs import apply_extension

        return self._queue_extension(session, record, spec,
                                     lambda folder: apply_extension(self._driver_spec(spec), folder))

    def extend_transfer(self, session: Session, record: TransferRecord, spec: TransferSpec) -> list[int] | None:
        """`extend` for a finished transfer: its seeds grown to `spec`'s (`sweeper.apply_transfer_extension`), queued
        to run the new seeds: the seeds added, or None when the transfer is not SUCCEEDED, FAILED or CANCELLED (any
        more). `TransferError` when the spec changes more than seeds and execution (nothing changed then)."""
        from sweeper.transfer import apply_transfer_extension

        return self._queue_extension(session, record, spec,
                                     lambda folder: apply_transfer_extension(spec, folder))

    def _queue_extension(self, session: Session, record: Record, spec: SweepSpec | TransferSpec,
                         apply: Callable[[str], list[Any]]) -> list[Any] | None:
        """`apply(folder)` to a finished job and queue it with `spec` (its driver's spec written), keeping what a
        cancel before it runs puts back (`sweeper.jobs.ExtensionUndo`, issue 64 N5): what was added, [] for
        nothing, None when the job is not finished (any more)."""
        with self._lock:
            session.refresh(record)
            if record.state not in ("SUCCEEDED", "FAILED", "CANCELLED") or not record.storage_path:
                return None
            undo = ExtensionUndo(record.storage_path)
            undo.save(_as_was(record))
            try:
                added = apply(record.storage_path)
            except BaseException:  # refused: nothing was changed, nothing to undo
                undo.drop()
                raise
            if not added:
                undo.drop()
                return added
            if not self._claim(session, record, "SUCCEEDED", "FAILED", "CANCELLED", state="PENDING", pid=None,
                               error=None, spec=spec.model_dump(mode="json"), resume=True):
                return None
            self.write_spec(record, spec)
            return added

    def _claim(self, session: Session, record: Record, *states: str, **values: Any) -> bool:
        """Apply `values` to the record only while its state is one of `states`: the check and the write are one
        UPDATE ... WHERE statement, so of many concurrent requests (threads or service processes) for the same
        transition exactly one changes the row; True for that one."""
        table = type(record)
        changed = cast(CursorResult[Any], session.execute(  # an UPDATE's result carries its row count
            update(table).where(table.id == record.id, table.state.in_(states)).values(**values)
            .execution_options(synchronize_session=False)
        )).rowcount
        session.commit()
        session.refresh(record)
        return bool(changed)

    def start(self) -> None:
        # what ends a job's processes (issue 64, item 7: a cgroup per job is not built; docs/security.md)
        log.info("job containment: process tags (%s) and process groups; no cgroup per job", JOB_TAG_ENV)
        self.reconcile()
        self._thread = threading.Thread(target=self._loop, name="scalesweep-jobs", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # the queue must outlive one bad pass; the error is in the log
                log.exception("job queue pass failed")
            self._wake.wait(self.settings.poll_interval_s)
            self._wake.clear()

    def wake(self) -> None:
        """Run the next pass now (a job was submitted or resumed)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop watching; running drivers keep going and are adopted by the next service process."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
