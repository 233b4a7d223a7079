"""The driver's SIGTERM handling when its main thread cannot run Python handlers.

A SIGTERM to a driver's whole process group (how the service stops a driver that outlived its cancel) also kills
the local Ray; the driver's main thread can then wait inside Ray's C++ core for a minute, and Python runs a signal
handler only when the main thread returns to the interpreter. The cancel must start at once anyway. Here the main
thread is held in a C-level sleep with SIGTERM blocked, as it is inside Ray, while the signal arrives."""

from __future__ import annotations

import os
import signal
import threading
import time

from sweeper.search._tune_stage import _signals_cancel


class _Driver:
    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.calls: list[float] = []

    def request_cancel(self) -> None:
        self.calls.append(time.monotonic())
        self.cancel.set()


def test_a_sigterm_starts_the_cancel_while_the_main_thread_is_held_in_c() -> None:
    driver = _Driver()
    before = signal.getsignal(signal.SIGTERM)
    with _signals_cancel(driver):  # type: ignore[arg-type]
        masked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        try:
            start = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(3.0)  # C-level; the Python handler cannot run before it returns
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, masked)
        assert driver.calls, "the SIGTERM never reached the driver"
        assert driver.calls[0] - start < 2.0, f"the cancel started {driver.calls[0] - start:.1f} s after the signal"
    assert signal.getsignal(signal.SIGTERM) == before  # handlers restored when the context ends
