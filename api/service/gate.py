"""A bounded gate for the expensive reads (issue 53, M5 and H1): Optuna's importance with its seed bootstrap, the
HTML reports with their figures.

Each such read costs seconds to minutes of CPU (`GET …/importance?n_boot=1000`: 24.6 s on a 2-core machine). Run
on the route threads without a bound, 34 of them at once took every route thread, and `GET /v1/sweeps/{id}`
waited 69.9 s behind them. Here at most `Settings.analysis_workers` of them compute at once; one more is refused
at once with 503 and Retry-After, never queued, so the route threads (and with them every cheap read) stay free.
What was computed is kept per version of the job's files (`ResultCache`): a repeated read of a computed result
takes no slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ANALYSIS_RETRY_AFTER_S", "AnalysisBusy", "AnalysisGate"]

ANALYSIS_RETRY_AFTER_S = 10  # an importance or a report takes seconds to a minute: ask again after a while


class AnalysisBusy(Exception):
    """Every analysis slot is taken."""


class AnalysisGate:
    """`with gate.slot(what):` computes in one of `slots` places, or raises `AnalysisBusy` at once."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)
        self.refused = 0  # how many reads found no slot (the tests read it)

    @contextmanager
    def slot(self) -> Iterator[None]:
        if not self._free.acquire(blocking=False):
            self.refused += 1
            raise AnalysisBusy
        try:
            yield
        finally:
            self._free.release()
