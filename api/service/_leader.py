"""One service per work folder: a leader lock (issue 53, M6).

Two services started on one work folder each ran MLflow's migrations (one died in them), then each ran a job queue
over the same records: a resume sent to one started a driver that the other marked FAILED ("stopped from outside")
while it ran. The service holds an exclusive `flock` on `<workdir>/service.lock` for as long as its job queue
runs (and while it migrates its stores at creation), and writes its pid and host into the file, so a second service
refuses to start with one line naming the holder. The kernel drops the lock when the holder exits, however it
exits (SIGKILL included): a stale file never blocks a restart. `flock` is local to one machine's kernel (and to
NFS clients that forward it): two hosts on one shared folder need the lock on storage that honours it.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
from pathlib import Path

__all__ = ["LOCK_FILE", "LeaderError", "WorkdirLock"]

LOCK_FILE = "service.lock"


class LeaderError(RuntimeError):
    """Another service holds the work folder."""


class WorkdirLock:
    """`acquire()` the work folder's lock or raise `LeaderError` naming the holder; `release()` it."""

    def __init__(self, workdir: Path) -> None:
        self.path = workdir.resolve() / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "a process that has not written it"
            os.close(fd)
            raise LeaderError(f"the work folder {self.path.parent} is held by another scalesweep service "
                              f"({holder}); stop that one, or give this one another SCALESWEEP_WORKDIR") from None
        since = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, since {since}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
