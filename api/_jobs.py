"""The job queue: sweeps run as driver subprocesses, never inside the web process.

Ray takes over SIGTERM once `ray.init()` runs in a process, and two Tuner.fit() calls in one process can run each
other's trainables (FIELD_NOTES): so each sweep is a `scalesweep sweep run` driver in its own process group (cancel
= kill the group). A background thread starts PENDING sweeps while fewer than `max_concurrent_sweeps` run, notices
drivers that exit, and at start-up reconciles RUNNING records whose driver is gone.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from ._db import SweepRecord
from ._settings import Settings

__all__ = ["TERMINAL", "JobRunner", "pid_alive"]

log = logging.getLogger("scalesweep.api.jobs")

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists and is not a zombie."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        return state != "Z"
    except OSError:
        return True


def _kill_group(pid: int, grace_s: float = 10.0) -> None:
    """SIGTERM the driver's process group (Ray workers included), then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.1)
        if not pid_alive(pid):
            return


class JobRunner:
    """Starts, watches, cancels and resumes sweep drivers; the database is the source of truth."""

    def __init__(self, settings: Settings, sessions: sessionmaker[Session],
                 command: Callable[[SweepRecord, bool], list[str]] | None = None) -> None:
        self.settings = settings
        self.sessions = sessions
        self.command = command or self.driver_command
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._resume: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.cancel_grace_s = 30.0

    # --- the driver --------------------------------------------------------------------------------------------

    def sweep_dir(self, sweep_id: str) -> Path:
        return self.settings.workdir.resolve() / "sweeps" / sweep_id

    def driver_command(self, record: SweepRecord, resume: bool) -> list[str]:
        folder = self.sweep_dir(record.id)
        cmd = [sys.executable, "-m", "scalesweep_cli", "sweep", "run", str(folder / "spec.yaml"),
               "--workdir", str(folder)]
        return [*cmd, "--resume"] if resume else cmd

    def driver_alive(self, record: SweepRecord) -> bool:
        """Whether the sweep's driver runs: the sweeper's own lock on its work folder when there is one (a pid
        alone can be reused by an unrelated process after a container restart), else the recorded pid."""
        folder = self.sweep_dir(record.id)
        if (folder / "sweep.json").is_file():
            from sweeper import SweepError, sweep_status

            try:
                return bool(sweep_status(folder)["driver_alive"])
            except (SweepError, OSError, ValueError, KeyError):
                pass
        return pid_alive(record.pid)

    def _launch(self, session: Session, record: SweepRecord) -> None:
        folder = self.sweep_dir(record.id)
        folder.mkdir(parents=True, exist_ok=True)
        spec = dict(record.spec)
        spec.setdefault("tracking", {})
        spec["tracking"] = {**spec["tracking"], "tracking_uri": self.settings.tracking_uri}
        (folder / "spec.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        resume = record.id in self._resume
        env = {**os.environ, "SCALESWEEP_SWEEP_ID": record.id}
        if self.settings.ray_address:
            env["RAY_ADDRESS"] = self.settings.ray_address
        log_file = (folder / "driver.log").open("ab")
        proc = subprocess.Popen(self.command(record, resume), stdout=log_file, stderr=subprocess.STDOUT,
                                env=env, cwd=folder, start_new_session=True)
        log_file.close()
        if self.settings.driver_nice:  # before the driver starts Ray (seconds away): its workers inherit it
            try:
                os.setpriority(os.PRIO_PROCESS, proc.pid, self.settings.driver_nice)
            except OSError as exc:
                log.warning("sweep %s: could not renice the driver: %s", record.id, exc)
        self._procs[record.id] = proc
        self._resume.discard(record.id)
        record.pid, record.state, record.storage_path, record.error = proc.pid, "RUNNING", str(folder), None
        session.commit()
        log.info("sweep %s: driver started (pid %s%s)", record.id, proc.pid, ", resuming" if resume else "")

    # --- the loop ----------------------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """At start-up: a RUNNING sweep whose driver is gone is resumed (or marked FAILED, by setting)."""
        with self.sessions() as session:
            for record in session.scalars(select(SweepRecord).where(SweepRecord.state == "RUNNING")):
                if self.driver_alive(record):
                    continue  # a driver from a previous service process still runs: adopt it
                if self.settings.reconcile == "resume":
                    record.state, record.pid = "PENDING", None
                    self._resume.add(record.id)
                    log.warning("sweep %s: driver gone after a restart; queued to resume", record.id)
                else:
                    record.state, record.error = "FAILED", "driver gone after a service restart"
            session.commit()

    def tick(self) -> None:
        """One pass: notice finished drivers, then start queued sweeps while there is room."""
        with self._lock, self.sessions() as session:
            running = list(session.scalars(select(SweepRecord).where(SweepRecord.state == "RUNNING")))
            for record in running:
                proc = self._procs.get(record.id)
                code = proc.poll() if proc is not None else (None if self.driver_alive(record) else -1)
                if code is None:
                    continue
                self._procs.pop(record.id, None)
                record.state = self._final_state(record, code)
                if record.state == "FAILED":
                    record.error = self._log_tail(record.id) or f"driver exited with {code}"
            session.commit()
            slots = self.settings.max_concurrent_sweeps - sum(1 for r in running if r.state == "RUNNING")
            if slots > 0:
                queued = session.scalars(
                    select(SweepRecord).where(SweepRecord.state == "PENDING").order_by(SweepRecord.created_at)
                ).all()
                for record in queued[:slots]:
                    self._launch(session, record)

    def _final_state(self, record: SweepRecord, code: int) -> str:
        """How a finished driver left its sweep: the sweeper's status file says (it also covers a driver adopted
        from an earlier service process, whose exit code is unknown); a driver that died mid-sweep is FAILED."""
        folder = self.sweep_dir(record.id)
        if (folder / "sweep.json").is_file():
            from sweeper import SweepError, sweep_status

            try:
                state = str(sweep_status(folder).get("state"))
                if state in TERMINAL:
                    return state
            except (SweepError, OSError, ValueError):
                pass
            return "FAILED"
        return "SUCCEEDED" if code == 0 else "FAILED"

    def _log_tail(self, sweep_id: str, lines: int = 5) -> str:
        path = self.sweep_dir(sweep_id) / "driver.log"
        if not path.is_file():
            return ""
        text = path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])[-2000:]

    def cancel(self, session: Session, record: SweepRecord) -> None:
        """Stop the driver: the sweeper's own cancel first (cancel file, SIGTERM, closes every MLflow run), then
        the process group if anything is left."""
        with self._lock:
            if record.state == "RUNNING":
                folder = self.sweep_dir(record.id)
                if (folder / "sweep.json").is_file():
                    from sweeper import SweepError, cancel_sweep

                    try:
                        cancel_sweep(folder, grace_s=self.cancel_grace_s)
                    except SweepError as exc:
                        log.warning("sweep %s: %s", record.id, exc)
                if record.pid and pid_alive(record.pid):
                    _kill_group(record.pid)
                proc = self._procs.pop(record.id, None)
                if proc is not None:
                    proc.wait(timeout=30)
            record.state = "CANCELLED"
            session.commit()

    def resume(self, session: Session, record: SweepRecord) -> None:
        with self._lock:
            self._resume.add(record.id)
            record.state, record.pid, record.error = "PENDING", None, None
            session.commit()

    def start(self) -> None:
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
        """Run the next pass now (a sweep was submitted or resumed)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop watching; running drivers keep going and are adopted by the next service process."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
