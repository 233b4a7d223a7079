"""Read load on the real topology (tests/deploy/conftest.py): many clients polling the read routes of a service on
PostgreSQL while a few sweeps, submitted at once, train on the Ray cluster. Bounded: loopback, a fixed number of
clients, the load stopped after `LOAD_S` seconds whatever the sweeps do. Every answer must be the quiet service's
(200, or 409 from `/best` while a sweep has no scored point), no request may fail or time out, and afterwards every
sweep SUCCEEDED with each configuration finished once and its record stored once. The figures (answers, p50/p99/max
per route) are printed for docs/deployment.md, beside the SQLite figures of docs/load.md."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from mlflow import MlflowClient

from api.deploy_local import Deployment

from .conftest import SPEC, children, finished_once, sql, submit, wait_for

KEEP_ALIVE_CLIENTS = 16  # each keeps one connection and polls with no pause
NEW_CONNECTION_CLIENTS = 8  # each opens a new connection per request (a poller without a session)
SWEEPS = 3  # submitted at once; the service runs two at a time (SCALESWEEP_MAX_CONCURRENT_SWEEPS)
LOAD_S = 60.0  # the load stops after this, trained out or not
CLIENT_TIMEOUT_S = 30.0  # a request unanswered by then is a failure (a wedged service fails instead of hanging)

# One configuration each: the load overlaps training without making the sweeps long.
ONE_POINT: dict[str, Any] = {**SPEC, "search": {"method": "grid", "space": {"K": [3], "gamma": [0.15]}},
                             "baselines": []}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def test_many_readers_and_sweeps_submitted_at_once_on_postgresql_get_no_error_and_no_duplicate(
        deployment: Deployment, api: httpx.Client, tiny_sweep: str, capsys: pytest.CaptureFixture[str]) -> None:
    headers = {"Authorization": f"Bearer {deployment.api_token}"}
    names = [f"deploy-load-{i}" for i in range(SWEEPS)]
    with ThreadPoolExecutor(SWEEPS) as pool:  # at once: concurrent inserts into PostgreSQL
        sweeps = list(pool.map(lambda name: submit(api, name, ONE_POINT), names))
    routes = ["/v1/health", "/v1/sweeps", "/v1/transfers", f"/v1/sweeps/{tiny_sweep}/best",
              *(f"/v1/sweeps/{s}" for s in sweeps), *(f"/v1/sweeps/{s}/trials" for s in sweeps),
              *(f"/v1/sweeps/{s}/best" for s in sweeps)]
    latencies: dict[str, list[float]] = defaultdict(list)
    bad: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def route_name(path: str) -> str:  # the figures per route, the training sweeps together
        for sweep in sweeps:
            path = path.replace(sweep, "{id}")
        return path.replace(tiny_sweep, "{done}")

    def read(client: httpx.Client, path: str) -> None:
        started = time.perf_counter()
        try:
            response = client.get(path)
        except httpx.HTTPError as exc:
            with lock:
                bad.append((path, f"{type(exc).__name__}: {exc}"))
            return
        took = time.perf_counter() - started
        allowed = (200, 409) if path.endswith("/best") else (200,)
        with lock:
            latencies[route_name(path)].append(took)
            if response.status_code not in allowed:
                bad.append((path, f"{response.status_code} {response.text[:200]}"))

    def keep_alive(offset: int) -> None:
        with httpx.Client(base_url=deployment.api_url, headers=headers, timeout=CLIENT_TIMEOUT_S) as client:
            i = offset
            while not stop.is_set():
                read(client, routes[i % len(routes)])
                i += 1

    def new_connections(offset: int) -> None:
        i = offset
        while not stop.is_set():
            with httpx.Client(base_url=deployment.api_url, headers=headers, timeout=CLIENT_TIMEOUT_S) as client:
                read(client, routes[i % len(routes)])
            i += 1

    threads = [threading.Thread(target=keep_alive, args=(i,)) for i in range(KEEP_ALIVE_CLIENTS)]
    threads += [threading.Thread(target=new_connections, args=(i,)) for i in range(NEW_CONNECTION_CLIENTS)]
    started = time.time()
    for thread in threads:
        thread.start()
    trained: set[str] = set()  # sweeps seen RUNNING under the load: the load overlapped training
    try:
        while time.time() - started < LOAD_S:
            for row in sql(deployment, "SELECT id, state FROM sweeps WHERE id = ANY(%s)", sweeps):
                if row[1] == "RUNNING":
                    trained.add(row[0])
            time.sleep(1)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=CLIENT_TIMEOUT_S + 5)
    elapsed = time.time() - started
    answers = sum(len(v) for v in latencies.values())
    every = [t for v in latencies.values() for t in v]
    with capsys.disabled():
        print(f"\nload on PostgreSQL: {KEEP_ALIVE_CLIENTS} keep-alive + {NEW_CONNECTION_CLIENTS} new-connection "
              f"clients, {elapsed:.0f} s, {SWEEPS} sweeps submitted at once ({len(trained)} seen training): "
              f"{answers} answers ({answers / elapsed:.0f}/s), {len(bad)} bad; all routes p50 "
              f"{1000 * _percentile(every, 0.5):.0f} ms, p99 {1000 * _percentile(every, 0.99):.0f} ms, "
              f"max {1000 * max(every, default=0):.0f} ms")
        for name, values in sorted(latencies.items()):
            print(f"  {name:32s} n={len(values):5d}  p50 {1000 * _percentile(values, 0.5):7.1f} ms  "
                  f"p99 {1000 * _percentile(values, 0.99):7.1f} ms  max {1000 * max(values):7.1f} ms")
    assert not bad, f"{len(bad)} bad answers, the first: {bad[:5]}"
    assert answers > 10 * len(threads), answers  # the load ran
    assert trained, "no sweep trained while the load ran"

    # Afterwards: every sweep SUCCEEDED, each configuration once, each record stored once.
    client = MlflowClient(tracking_uri=deployment.mlflow_url)
    for sweep in sweeps:
        body = wait_for(api, f"/v1/sweeps/{sweep}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=600)
        assert body["state"] == "SUCCEEDED", body
        finished_once(children(client, body), ["K=3,gamma=0.15,seed=0"])
    stored = sql(deployment, "SELECT name, count(*) FROM sweeps WHERE name = ANY(%s) GROUP BY name", names)
    assert sorted(stored) == [(name, 1) for name in names], stored
