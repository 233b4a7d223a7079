"""The last resort of a cancel: when a driver has not stopped within its grace period (Ray itself may have been
killed by a SIGTERM to the whole process group, leaving the main thread stuck in Ray's core), a timer thread kills
the processes the driver started, lets the driver close its MLflow runs, and ends the process with `os._exit`."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable

from trials.core.proctree import members

from ..settings import DriverSettings

__all__ = ["CancelDeadline", "kill_own_processes"]

EXIT_CODE = 130  # as a shell reports a process ended by SIGINT
_ARM_LOCK = threading.RLock()  # re-entrant: a signal handler may run while the main thread holds it


def kill_own_processes() -> None:
    """SIGKILL the local Ray this driver started: every other process of its session when the driver leads one
    (as the CLI and the service start it; Ray's workers sit in process groups of their own inside it), else of
    its process group when it leads that. Otherwise nothing: the session or group may be a user's shell."""
    me = os.getpid()
    if os.getsid(0) == me:
        own = members(session=me)
    elif os.getpgrp() == me:
        own = members(group=me)
    else:
        return
    for pid in own:
        if pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class CancelDeadline:
    """Armed by the first cancel request (from a signal handler or the signal-watching thread alike: only the first
    call starts the timer); after the grace period ($SCALESWEEP_CANCEL_GRACE_S, default 8 s) it calls
    `announce(grace)`, kills the driver's own processes, calls `close_runs()` and exits. Disarmed when the driver
    finished in time."""

    def __init__(self, announce: Callable[[float], None], close_runs: Callable[[], None]) -> None:
        self._announce, self._close_runs = announce, close_runs
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        with _ARM_LOCK:
            if self._timer is None:
                grace = DriverSettings.from_env().cancel_grace_s
                self._timer = threading.Timer(grace, self._expire, args=(grace,))
                self._timer.daemon = True
                self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self, grace: float) -> None:
        self._announce(grace)
        kill_own_processes()  # first, so that no trial still running writes to MLflow after the closes
        try:
            self._close_runs()
        finally:
            os._exit(EXIT_CODE)
