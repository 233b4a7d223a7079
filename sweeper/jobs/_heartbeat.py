"""A sweep driver's voice: its progress lines on a console, its last events, and the status file it rewrites
(on every event, and every few seconds while nothing happens) for `sweep_status`, the CLI and the service."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..jobfiles import STATUS_FILE, write_json

__all__ = ["Heartbeat"]

STATUS_EVERY_S = 5.0  # status.json heartbeat while nothing changes
DISPLAY_EVERY_S = 30.0  # a progress line at least this often on a quiet sweep
KEEP_EVENTS = 50


class Heartbeat:
    """Events, progress lines and the status file of one driver. `status(state)` builds the status document and
    `summary()` the one-line progress, both from the driver's state at the time of the call."""

    def __init__(self, workdir: Path, stream: IO[str] | None, status: Callable[..., dict[str, Any]],
                 summary: Callable[[], str]) -> None:
        self.workdir, self.stream = workdir, stream
        self._status, self._summary = status, summary
        self.events: list[str] = []
        self.dirty = False  # something ended since the last progress line
        self.final = False  # the final status is written (or being written by the emergency stop): no more writes
        self._last_status = 0.0
        self._last_display = time.time()

    def print(self, text: str) -> None:
        if self.stream is None:
            return
        try:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)
        except (OSError, ValueError):  # the reader went away (closed pipe): the sweep goes on without a display
            self.stream = None

    def event(self, text: str) -> None:
        """Something happened: kept among the last events, printed, and the status file rewritten."""
        self.events = [*self.events[-(KEEP_EVENTS - 1):], f"{time.strftime('%H:%M:%S')} {text}"]
        self.print(text)
        self.tick(force=True)

    def tick(self, force: bool = False, state: str = "RUNNING") -> None:
        now = time.time()
        if self.stream is not None and (self.dirty or now - self._last_display > DISPLAY_EVERY_S):
            self.print(self._summary())
            self.dirty, self._last_display = False, now
        if (force or now - self._last_status > STATUS_EVERY_S) and not self.final:
            write_json(self.workdir / STATUS_FILE, self._status(state))
            self._last_status = now

    def write_final(self, state: str, error: str | None, finished_at: str) -> None:
        """The status the driver ends with (unless the emergency stop already wrote its own)."""
        if not self.final:
            self.final = True
            write_json(self.workdir / STATUS_FILE, {**self._status(state, error), "finished_at": finished_at})
