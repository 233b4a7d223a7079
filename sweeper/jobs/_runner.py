"""The one job runner under the sweep and the transfer: what every driver run does, whatever its job.

A job kind (`_driver.SweepJob`, the transfer's `TransferJob`) is a `Job`: the identity it stored in its work folder,
its own stages, how it records a failure, and what it does once it SUCCEEDED. The runner owns the rest:

    the driver lock     held for the whole run, planning included, so a second driver for the folder is refused
    the resume check    a job already in the folder runs again only with `resume`, and only with the same spec
    error to state      a driver that broke down mid-run (`JobFailedError`) is recorded FAILED, then raised
    progress            `show_progress` prints to `stream` (stdout); the result's table at the end
    the finish stage    a SUCCEEDED job's `finished` stage (figures, stored report) unless `figures` is off

A job that runs another inside it (a transfer runs one multi-rung sweep) calls `run_stages` for it: the lock is
already held, and the inner job's table and figures are the outer one's to show.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Protocol, TypeVar

from trials import JobFailedError

from ..jobfiles import driver_lock
from ._undo import ExtensionUndo

__all__ = ["Job", "JobRun", "check_resumable", "driver_command", "run_locked_job", "run_stages"]

# The command line that runs a job's driver in a process of its own, by the job's kind (`scalesweep <verb> run`).
_DRIVER_VERBS = {"sweep": ("sweep", "run"), "transfer": ("transfer", "run")}


def driver_command(kind: str, spec: Path, workdir: Path, *, resume: bool = False,
                   python: str = sys.executable) -> list[str]:
    """The argv of a job's driver: `python -m scalesweep_cli sweep run SPEC --workdir DIR [--resume]` (or `transfer
    run`). `python` is the interpreter on the machine that runs it (`python` on a Ray cluster's node)."""
    if kind not in _DRIVER_VERBS:
        raise ValueError(f"unknown job kind {kind!r}; allowed: {sorted(_DRIVER_VERBS)}")
    cmd = [python, "-m", "scalesweep_cli", *_DRIVER_VERBS[kind], str(spec), "--workdir", str(workdir)]
    return [*cmd, "--resume"] if resume else cmd


class Finished(Protocol):
    state: str

    def table(self) -> str: ...


class Fingerprinted(Protocol):
    def fingerprint(self) -> str: ...


R = TypeVar("R", bound=Finished)


@dataclass(frozen=True)
class JobRun:
    """One driver run of a job, as its stages see it."""

    workdir: Path  # resolved
    stream: IO[str] | None  # progress lines go here; None: quiet
    show_table: bool = True  # print the result's table at the end (with progress on)
    figures: bool = True  # run the job's finish stage (figures, stored report) once it SUCCEEDED
    started: float = field(default_factory=time.perf_counter)

    def inner(self) -> JobRun:
        """The run of a job inside this one: same folder and stream; no table, no figures of its own."""
        return replace(self, show_table=False, figures=False, started=time.perf_counter())


class Job(Protocol[R]):
    """One kind of job: what the runner asks of it (R: the result it returns)."""

    @property
    def kind(self) -> str:
        """"sweep", "transfer": the word the runner's messages use."""

    @property
    def refused(self) -> type[Exception]:
        """Raised when the folder is locked, or holds another run of the job."""

    @property
    def may_change(self) -> str:
        """What a resume may change, in words (e.g. "`execution` and `retries`")."""

    @property
    def spec(self) -> Fingerprinted:
        """The job's spec: a resume must match the fingerprint stored."""

    def stored(self, workdir: Path) -> tuple[str, str | None] | None:
        """(job id, fingerprint) of the job already in `workdir`, None when there is none."""

    def run(self, run: JobRun) -> R:
        """The job's own stages, to its result."""

    def failed(self, run: JobRun, exc: JobFailedError) -> None:
        """Record that the driver broke down mid-run (the runner raises `exc` after this)."""

    def finished(self, run: JobRun, result: R) -> None:
        """What a SUCCEEDED run does last: its figures and stored report (best effort, never fails the run)."""


def check_resumable(job: Job[R], workdir: Path, stored: tuple[str, str | None], resume: bool) -> None:
    """Refuse to start over a job already in `workdir`, and to resume it with a changed spec."""
    job_id, fingerprint = stored
    if not resume:
        raise job.refused(f"{workdir} already holds {job.kind} {job_id}; pass resume=True (--resume) to continue "
                          "it, or choose another work folder")
    if fingerprint != job.spec.fingerprint():
        raise job.refused(f"the spec changed since {job.kind} {job_id} started in {workdir} (fingerprint "
                          f"{fingerprint} -> {job.spec.fingerprint()}); only {job.may_change} may change on resume")


def run_locked_job(job: Job[R], workdir: Path, *, resume: bool, show_progress: bool, stream: IO[str] | None = None,
            show_table: bool = True, figures: bool = True) -> R:
    """Run `job` in `workdir` under its driver lock, to its result (see the module's docstring)."""
    run = JobRun(workdir=workdir.resolve(), stream=(stream or sys.stdout) if show_progress else None,
                 show_table=show_table, figures=figures)
    with driver_lock(run.workdir, job.refused):
        return run_stages(job, run, resume=resume)


def run_stages(job: Job[R], run: JobRun, *, resume: bool) -> R:
    """Everything `run_locked_job` does but take the lock: for a job run inside another that holds it."""
    stored = job.stored(run.workdir)
    if stored is not None:
        check_resumable(job, run.workdir, stored, resume)
    # a queued extension runs now: from here a cancel keeps what it ran (and says so), until this run ends
    undo = ExtensionUndo(run.workdir)
    extension = undo.started()
    try:
        result = job.run(run)
    except JobFailedError as exc:
        job.failed(run, exc)
        raise
    finally:
        if extension:
            undo.drop()
    if run.stream is not None and run.show_table:
        try:
            print(result.table(), file=run.stream, flush=True)
        except (OSError, ValueError):  # a closed or broken stream: the result is stored already
            pass
    if run.figures and result.state == "SUCCEEDED":
        job.finished(run, result)
    return result
