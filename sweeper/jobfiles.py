"""The on-disk job protocol: the files through which a sweep or transfer driver and everyone else (the CLI, the
service, a transfer waiting on its sweep) talk, and the only module that spells their names.

A driver runs in a process of its own and keeps its state in a work folder:

    sweep.json      the sweep's identity: sweep id, parent run id, tracking URI, experiment, spec fingerprint
    spec.json       the sweep spec it runs, as JSON (a transfer plans from a finished sweep's copy)
    status.json     live state, rewritten as trials start and end (read by `read_status`)
    driver.lock     held (flock) by the running driver, as is the folder itself: a second driver for the same
                    folder is refused (`driver_lock`)
    cancel          ask the driver to stop (`request_cancel`); it checks for the file between Tune steps
    transfer.json   a transfer's identity and plan, beside its sweep's files
    outcome.json    a transfer's final state once its driver ended
    analysis.json   a finished transfer's analysis (`TransferResult.analysis()`), stored by its driver when it
                    ended, with the version of the job files it was computed from (`transfer_version`)
    report.html     a finished transfer's report page, stored by its driver when it ended
    report.json     the version of the job files (`transfer_version`) that page was built from
    estimate.json   the plan's estimate (`sweeper.demand`), written by the driver as it starts from the cached
                    calibration, and the actual wall time of each driver run, added as it ends

JSON files are written whole to a temporary name and renamed into place, so a reader in another process or thread
never sees half a file; a reader that finds no file, or one it cannot parse, gets None.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Hashable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "ANALYSIS_FILE",
    "CANCEL_FILE",
    "ESTIMATE_FILE",
    "LOCK_FILE",
    "OUTCOME_FILE",
    "REPORT_FILE",
    "REPORT_LABEL_FILE",
    "SPEC_FILE",
    "STATE_FILE",
    "STATUS_FILE",
    "TRANSFER_FILE",
    "cancel_requested",
    "clear_cancel",
    "driver_lock",
    "driver_running",
    "is_sweep_folder",
    "is_transfer_folder",
    "read_json",
    "read_labelled",
    "read_outcome",
    "read_state",
    "read_status",
    "read_transfer",
    "request_cancel",
    "store_transfer_report",
    "stored_transfer_report",
    "transfer_version",
    "write_json",
    "write_labelled",
]

STATE_FILE = "sweep.json"
SPEC_FILE = "spec.json"
STATUS_FILE = "status.json"
LOCK_FILE = "driver.lock"
CANCEL_FILE = "cancel"
TRANSFER_FILE = "transfer.json"
OUTCOME_FILE = "outcome.json"
ANALYSIS_FILE = "analysis.json"
REPORT_FILE = "report.html"
REPORT_LABEL_FILE = "report.json"
ESTIMATE_FILE = "estimate.json"


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` to `path` atomically. The temporary name carries the process and the thread, so two threads
    of one driver (the heartbeat and the emergency stop) never write into each other's half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)  # readers never see half a file


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return dict(data) if isinstance(data, dict) else None


def transfer_version(folder: str | Path) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """What changes whenever a transfer's runs do: (mtime_ns, size) of its driver's status file and of its outcome
    file (None for an absent file). Anything computed from the runs at one version is current while this returns
    the same (the service's caches, the stored report page)."""
    def stat(name: str) -> tuple[int, int] | None:
        try:
            st = (Path(folder) / name).stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    return stat(STATUS_FILE), stat(OUTCOME_FILE)


def _label(version: Any) -> Any:
    return json.loads(json.dumps(version))  # tuples as JSON lists, to compare with what was stored


def write_labelled(path: Path, data: Mapping[str, Any], version: Any) -> None:
    """Write `data` computed from a job's runs at `version` (`transfer_version`), labelled with it."""
    write_json(path, {"version": _label(version), "data": dict(data)})


def read_labelled(path: Path, version: Any) -> dict[str, Any] | None:
    """What `write_labelled` stored in `path`, when it was computed at `version`; else None (absent, unreadable,
    or the job's runs changed since)."""
    doc = read_json(path)
    if doc is None or doc.get("version") != _label(version) or not isinstance(doc.get("data"), dict):
        return None
    return dict(doc["data"])


def is_sweep_folder(folder: str | Path) -> bool:
    """Whether a sweep driver has written its identity into `folder` (it has taken its lock by then)."""
    return (Path(folder) / STATE_FILE).is_file()


def is_transfer_folder(folder: str | Path) -> bool:
    """Whether `folder` holds a transfer (planned, running or ended)."""
    return (Path(folder) / TRANSFER_FILE).is_file()


def read_state(workdir: str | Path) -> dict[str, Any] | None:
    """The sweep's identity (`sweep.json`), or None before its driver wrote it."""
    path = Path(workdir) / STATE_FILE
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text(encoding="utf-8")))  # a corrupt identity is an error, not "no sweep"


def read_status(workdir: str | Path) -> dict[str, Any] | None:
    """The driver's last status (`status.json`), or None before its first heartbeat."""
    return read_json(Path(workdir) / STATUS_FILE)


def read_transfer(workdir: str | Path) -> dict[str, Any] | None:
    """The transfer's identity and plan (`transfer.json`), or None when `workdir` holds no transfer."""
    return read_json(Path(workdir) / TRANSFER_FILE)


def read_outcome(workdir: str | Path) -> dict[str, Any] | None:
    """The transfer's final state (`outcome.json`), or None while its driver has not ended."""
    return read_json(Path(workdir) / OUTCOME_FILE)


def request_cancel(workdir: str | Path) -> None:
    """Ask the driver of `workdir` to stop; it notices between Tune steps, also when it runs on another host."""
    (Path(workdir) / CANCEL_FILE).touch()


def cancel_requested(workdir: str | Path) -> bool:
    return (Path(workdir) / CANCEL_FILE).exists()


def clear_cancel(workdir: str | Path) -> None:
    """A cancel belongs to the run it stopped: a resumed driver removes it first."""
    (Path(workdir) / CANCEL_FILE).unlink(missing_ok=True)


def _flock(fd: int) -> bool:
    """Take an exclusive flock on `fd` without waiting; False when another open file holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextlib.contextmanager
def driver_lock(workdir: Path, refused: type[Exception]) -> Iterator[None]:
    """Hold the work folder's driver lock for the block; `refused` (naming the running driver's pid) when another
    driver holds it.

    The lock is an flock on the folder itself (its directory, opened read-only) and one on `driver.lock` in it.
    The folder's is what holds: a file's lock goes with its name, and a trainer running in the job's folder once
    removed `driver.lock` while the driver held it, after which a second driver created a new file, locked it and
    ran the same sweep beside the first (issue 53, M7); removing a file in the folder leaves the folder's lock held.
    The file's is kept so that this driver and one of an earlier release (which locks only the file) exclude each
    other across an upgrade."""
    workdir.mkdir(parents=True, exist_ok=True)
    folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    handle = None
    try:
        held = _flock(folder)
        if held:
            handle = (workdir / LOCK_FILE).open("a+")
            held = _flock(handle.fileno())
        if not held:
            status = read_status(workdir) or {}
            raise refused(
                f"a driver is already running the sweep in {workdir} (pid {status.get('pid', '?')}); "
                "cancel it first or use another work folder"
            ) from None
        yield
    finally:
        if handle is not None:
            handle.close()  # closing releases the lock
        os.close(folder)


def driver_running(workdir: Path) -> bool:
    """Whether a driver holds the lock of `workdir` now (a pid alone may have been reused): its folder's lock, or
    the lock file's (a driver of an earlier release)."""
    try:
        folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:  # no folder, no driver
        return False
    try:
        if not _flock(folder):
            return True
    finally:
        os.close(folder)  # closing releases what was just taken
    path = workdir / LOCK_FILE
    if not path.exists():
        return False
    with path.open("a+") as handle:
        return not _flock(handle.fileno())


def store_transfer_report(folder: str | Path, page: str, version: Any) -> None:
    """Store a transfer's report page in its work folder (`report.html`), labelled with the version of the job
    files it was built from (`transfer_version`, read before the page was built: a label never newer than the
    page). Written atomically: a reader sees the old page or the new one, never half of one."""
    path = Path(folder)
    fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{REPORT_FILE}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(page)
    os.replace(tmp, path / REPORT_FILE)
    write_labelled(path / REPORT_LABEL_FILE, {}, version)  # after the page: a current label names a current page


def stored_transfer_report(folder: str | Path, version: Hashable | None = None) -> str | None:
    """The stored page of the transfer in `folder` when it was built at `version` (default: the job files as they
    are now), else None (never stored, or the transfer changed since)."""
    path = Path(folder)
    if read_labelled(path / REPORT_LABEL_FILE, transfer_version(path) if version is None else version) is None:
        return None
    try:
        return (path / REPORT_FILE).read_text(encoding="utf-8")
    except OSError:
        return None
