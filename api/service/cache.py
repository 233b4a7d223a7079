"""Read-through cache of what the service reads from MLflow (a sweep's or a transfer's result).

Reading a sweep's result from MLflow costs about 60 ms on an idle 2-core machine and far more while trials train
beside the service; `GET /trials` is polled by every follower. The driver rewrites its `status.json` whenever a
trial starts, reports or ends (and every few seconds as a heartbeat), so the file's mtime is a cheap version of
what MLflow holds: a result is read again only when it changed. A stale entry is served while one background
thread reads the new one (stale-while-revalidate), so a burst of readers never queues behind MLflow; only the
first read of a job waits, and concurrent first reads share one load. What is computed from a result (a
transfer's fits, predictions, report) asks for `fresh` values instead: it waits for the current version, so it is
never computed from, or stored under the version of, a result that has since changed.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["ResultCache", "file_version"]

log = logging.getLogger("scalesweep.api.cache")

T = TypeVar("T")


def file_version(path: Path) -> Hashable:
    """(mtime_ns, size) of a file, or None when it does not exist."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


class ResultCache(Generic[T]):
    """`get(key, version, load)`: `load()` once per (key, version); a newer version serves the old value while a
    background thread loads the new one. At most `max_entries` keys are kept (least recently used go first)."""

    def __init__(self, max_entries: int = 64) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[Hashable, T]] = OrderedDict()
        self._loading: dict[str, Future[T]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scalesweep-cache")
        self.loads = 0  # how many loads succeeded (the tests read it)

    def peek(self, key: str, version: Hashable, load: Callable[[], T]) -> tuple[bool, T | None]:
        """(True, value) without waiting when the key was ever loaded (a stale value starts a background load, as
        in `get`); (False, None) when only `get` can answer (it would wait for the first load)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return False, None
        return True, self.get(key, version, load)

    def current(self, key: str, version: Hashable) -> tuple[bool, T | None]:
        """(True, value) when the value of exactly `version` is stored; (False, None) otherwise. Never loads."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return False, None
            self._entries.move_to_end(key)
            return True, entry[1]

    def get(self, key: str, version: Hashable, load: Callable[[], T], *, fresh: bool = False) -> T:
        """The value for `version`. A stale entry is served while a background thread loads the new one, unless
        `fresh`: then the caller waits for a load of this version (shared with concurrent callers)."""
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and (entry[0] == version or not fresh):
                    self._entries.move_to_end(key)
                    if entry[0] != version and key not in self._loading:
                        self._loading[key] = self._pool.submit(self._load, key, version, load)
                    return entry[1]  # current, or stale while the new version loads
                future = self._loading.get(key)
                owner = future is None
                if future is None:  # no load in flight: load it here, later readers wait for this load
                    future = Future()
                    self._loading[key] = future
            if owner:
                try:
                    value = self._load(key, version, load)
                except BaseException as exc:
                    future.set_exception(exc)
                    raise
                future.set_result(value)
                return value
            value = future.result()
            if not fresh:
                return value
            with self._lock:  # the load we waited for may have been of an older version: then load ours
                entry = self._entries.get(key)
                if entry is not None and entry[0] == version:
                    return entry[1]

    def _load(self, key: str, version: Hashable, load: Callable[[], T]) -> T:
        try:
            value = load()
        except BaseException:
            with self._lock:
                self._loading.pop(key, None)
            log.warning("loading %s failed; the previous value (if any) stays", key, exc_info=True)
            raise
        with self._lock:  # stored and no longer loading in one step: no reader sees neither
            self.loads += 1
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            self._loading.pop(key, None)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
