"""api.service.cache.ResultCache through its public methods: one load per version, stale-while-revalidate, concurrent
first reads sharing one load, errors reaching every waiting reader, least-recently-used eviction.

Loads are gated by events, and a reader counts as waiting only once its thread is seen blocked inside
`Future.result`, so the orderings below are forced rather than hoped for (no sleeps decide an outcome)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from api.service.cache import ResultCache

TIMEOUT_S = 30.0


class Loader:
    """A load function whose calls are counted and can be held at a gate or made to fail."""

    def __init__(self, value: Any, *, gate: threading.Event | None = None, error: Exception | None = None) -> None:
        self.value, self.gate, self.error = value, gate, error
        self.calls = 0
        self.entered = threading.Event()
        self._lock = threading.Lock()

    def __call__(self) -> Any:
        with self._lock:
            self.calls += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(TIMEOUT_S), "test gate never opened"
        if self.error is not None:
            raise self.error
        return self.value


@pytest.fixture
def cache() -> Iterator[ResultCache[Any]]:
    c: ResultCache[Any] = ResultCache(max_entries=4)
    yield c
    c.close()


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _blocked_in_future_result(thread: threading.Thread) -> bool:
    """Whether `thread` is waiting inside concurrent.futures' Future.result (a reader waiting for another's load)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code.co_name == "result" and "concurrent/futures" in frame.f_code.co_filename.replace("\\", "/"):
            return True
        frame = frame.f_back
    return False


def _start_waiting(readers: list[Any], what: str) -> None:
    """Start each reader and wait until it is blocked on `what` another reader started."""
    for r in readers:
        r.start()
    for r in readers:
        _until(lambda r=r: _blocked_in_future_result(r), f"a reader to wait for {what}")


class Reader(threading.Thread):
    def __init__(self, cache: ResultCache[Any], key: str, version: Any, load: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.args_ = (cache, key, version, load)
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        cache, key, version, load = self.args_
        try:
            self.value = cache.get(key, version, load)
        except BaseException as exc:
            self.error = exc


def test_one_load_per_version(cache: ResultCache[Any]) -> None:
    first = Loader("v1")
    assert cache.get("sw-1", 1, first) == "v1"
    assert cache.get("sw-1", 1, first) == "v1"
    assert cache.peek("sw-1", 1, first) == (True, "v1")
    assert first.calls == 1 and cache.loads == 1


def test_a_new_version_serves_the_stale_value_while_one_background_load_runs(cache: ResultCache[Any]) -> None:
    cache.get("sw-1", 1, Loader("old"))
    gate = threading.Event()
    newer = Loader("new", gate=gate)
    # The load of version 2 is held at the gate: every reader meanwhile gets the old value at once.
    for _ in range(5):
        assert cache.get("sw-1", 2, newer) == "old"
    assert newer.entered.wait(TIMEOUT_S)  # the background load started
    assert cache.peek("sw-1", 2, newer) == (True, "old")
    gate.set()
    _until(lambda: cache.get("sw-1", 2, newer) == "new", "the background load to land")
    assert newer.calls == 1  # five stale reads and a peek started one load, not six
    assert cache.loads == 2
    assert cache.get("sw-1", 2, newer) == "new" and newer.calls == 1


def test_concurrent_first_reads_share_one_load(cache: ResultCache[Any]) -> None:
    gate = threading.Event()
    load = Loader({"trials": 3}, gate=gate)
    owner = Reader(cache, "sw-1", 1, load)
    owner.start()
    assert load.entered.wait(TIMEOUT_S)
    assert cache.peek("sw-1", 1, load) == (False, None)  # nothing to serve yet, and peek never waits
    waiters = [Reader(cache, "sw-1", 1, load) for _ in range(4)]
    _start_waiting(waiters, "the first load")
    gate.set()
    for r in (owner, *waiters):
        r.join(TIMEOUT_S)
        assert not r.is_alive() and r.error is None
        assert r.value == {"trials": 3}
    assert load.calls == 1 and cache.loads == 1


def test_a_failed_first_load_reaches_every_waiting_reader_and_the_next_read_retries(
        cache: ResultCache[Any]) -> None:
    gate = threading.Event()
    failing = Loader(None, gate=gate, error=RuntimeError("MLflow is down"))
    owner = Reader(cache, "sw-1", 1, failing)
    owner.start()
    assert failing.entered.wait(TIMEOUT_S)
    waiters = [Reader(cache, "sw-1", 1, failing) for _ in range(3)]
    _start_waiting(waiters, "the failing load")
    gate.set()
    for r in (owner, *waiters):
        r.join(TIMEOUT_S)
        assert not r.is_alive()
        assert isinstance(r.error, RuntimeError) and str(r.error) == "MLflow is down"
    assert failing.calls == 1 and cache.loads == 0  # one failed load, told to all four; nothing stored
    # Nothing half-stored: the next read loads again and succeeds.
    assert cache.get("sw-1", 1, Loader("recovered")) == "recovered" and cache.loads == 1


def test_a_failed_background_load_keeps_the_stale_value_and_is_retried(cache: ResultCache[Any]) -> None:
    cache.get("sw-1", 1, Loader("old"))
    failing = Loader(None, error=RuntimeError("MLflow is down"))
    assert cache.get("sw-1", 2, failing) == "old"
    _until(lambda: failing.calls == 1, "the failed background load")
    # The failure did not drop the entry: readers still get the last good value (asked at the stored version, so
    # this read starts no load of its own), and a later read tries again. (Peeking at version 2 with a loader
    # held at a gate would queue that loader on the cache's one background thread once the failed load is done,
    # and the retry below would wait behind it for the whole timeout.)
    assert cache.peek("sw-1", 1, Loader("unused")) == (True, "old")
    retry = Loader("new")
    _until(lambda: cache.get("sw-1", 2, retry) == "new", "a retried background load")
    assert retry.calls == 1 and cache.loads == 2


def test_least_recently_used_keys_are_evicted_beyond_max_entries() -> None:
    cache: ResultCache[Any] = ResultCache(max_entries=2)
    try:
        loads = {k: Loader(k) for k in ("a", "b", "c")}
        cache.get("a", 1, loads["a"])
        cache.get("b", 1, loads["b"])
        cache.get("a", 1, loads["a"])  # a is now the most recently used
        cache.get("c", 1, loads["c"])  # evicts b, not a
        assert cache.peek("b", 1, loads["b"]) == (False, None)  # gone (a miss does not load)
        assert cache.get("b", 1, loads["b"]) == "b"  # loaded again, evicting a (c was used more recently)
        assert cache.peek("a", 1, loads["a"]) == (False, None)
        assert cache.peek("c", 1, loads["c"]) == (True, "c")
        assert [loads[k].calls for k in "abc"] == [1, 2, 1] and cache.loads == 4
    finally:
        cache.close()


def test_a_fresh_read_waits_for_the_current_version_while_others_get_the_stale_one(cache: ResultCache[Any]) -> None:
    # What the fits, predictions and report ask for: never an analysis of a result that has since changed.
    cache.get("tr-1", 1, Loader("old"))
    gate = threading.Event()
    newer = Loader("new", gate=gate)
    results: list[Any] = []
    fresh = threading.Thread(target=lambda: results.append(cache.get("tr-1", 2, newer, fresh=True)), daemon=True)
    fresh.start()
    assert newer.entered.wait(TIMEOUT_S)
    assert cache.get("tr-1", 2, newer) == "old"  # a plain read is not held up by the fresh one
    assert fresh.is_alive() and results == []  # the fresh read waits for version 2
    gate.set()
    fresh.join(TIMEOUT_S)
    assert results == ["new"] and newer.calls == 1
