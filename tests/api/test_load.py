"""The service never wedges under read load (docs/load.md).

A static check that no `async def` route or dependency in `api/` touches a synchronous session (one that did
blocked the event loop on a pool checkout, and the connections it waited for could only come back through the
loop). Then, for real: a tiny sweep and a transfer run once through the service; a fresh service (cold caches) on
the same records, its database pool shrunk below the number of requests in flight, gets bursts of concurrent
requests, each on a new connection, over every read route of sweeps and transfers. Every answer must be 200, 404,
409 (or predict's 422) or a 503 with Retry-After; `/v1/health` answers throughout; and right after the burst every
route answers as it does on a quiet service. The same on PostgreSQL where the suite can start one. Functional, not
timed: the client timeout (60 s) only turns a wedged service into a failure instead of a hung suite.
"""

from __future__ import annotations

import ast
import http.client
import inspect
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

import api
from api.service import Settings, create_app
from api.service.db import Base, SweepRecord, TransferRecord, make_engine, make_sessionmaker, migrate
from api.service.deps import _session
from sweeper.jobfiles import ANALYSIS_FILE, read_labelled, stored_transfer_report, transfer_version, write_labelled

from .conftest import REAL_SWEEP, TOKEN, LiveServer, ServiceStudy, postgres_database

API = Path(api.__file__).resolve().parent
# The shared study (five drivers, each starting Ray: tests/api/conftest.py) takes minutes on a busy 2-core machine;
# the suite's 600 s default per test would count it against the first burst when this module asks first.
pytestmark = pytest.mark.timeout(2700)

# --- static: no synchronous session on the event loop ---------------------------------------------------------

_SESSION_NAMES = {"session", "sessions", "sessionmaker", "SessionDep", "Session", "engine"}


def async_session_uses(source: str, filename: str = "<source>") -> list[str]:
    """`file:line name` for every `async def` whose signature or body names a session, a sessionmaker or the
    engine (a synchronous call there would run on the event loop)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.AsyncFunctionDef):
            continue
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
        names |= {a.arg for a in (*node.args.args, *node.args.kwonlyargs)}
        if names & _SESSION_NAMES:
            found.append(f"{filename}:{node.lineno} {node.name} ({', '.join(sorted(names & _SESSION_NAMES))})")
    return found


def test_the_static_check_catches_the_pattern_that_wedged_the_service() -> None:
    wedged = '''
async def _session(request):
    with request.app.state.sessionmaker() as session:
        yield session

async def get_trials(sweep_id: str, request: Request, session: SessionDep) -> TrialsPublic:
    return await _result_async(request, _get(session, sweep_id))
'''
    assert [f.split()[1] for f in async_session_uses(wedged)] == ["_session", "get_trials"]
    fine = "async def health() -> dict[str, str]:\n    return {'status': 'ok'}\n\ndef get(session): session.get(1)\n"
    assert async_session_uses(fine) == []


def test_no_async_route_or_dependency_touches_a_session(settings: Settings) -> None:
    found = [hit for path in sorted(API.rglob("*.py")) if "migrations" not in path.parts
             for hit in async_session_uses(path.read_text(), str(path.relative_to(API.parent)))]
    assert found == [], "async def with a synchronous session (make it `def`: docs/load.md):\n" + "\n".join(found)

    # And in the app as FastAPI wires it: the session dependency is synchronous, and no coroutine route or
    # dependency depends on it.
    assert not inspect.iscoroutinefunction(_session) and not inspect.isasyncgenfunction(_session)

    def uses_session(dependant: Any) -> bool:
        return any(d.call is _session or uses_session(d) for d in dependant.dependencies)

    def coroutine_users(dependant: Any, where: str) -> list[str]:
        out = []
        for d in dependant.dependencies:
            call = d.call
            if (inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)) and uses_session(d):
                out.append(f"{where}: dependency {call.__name__}")
            out += coroutine_users(d, where)
        return out

    def api_routes(routes: list[Any]) -> Iterator[APIRoute]:  # included routers nest their routes
        for route in routes:
            if isinstance(route, APIRoute):
                yield route
            elif getattr(route, "original_router", None) is not None:
                yield from api_routes(route.original_router.routes)

    bad: list[str] = []
    routes = list(api_routes(create_app(settings).routes))
    for route in routes:
        where = f"{sorted(route.methods)} {route.path}"
        if inspect.iscoroutinefunction(route.endpoint) and uses_session(route.dependant):
            bad.append(f"{where}: async route with a session")
        if uses_session(route.dependant) and not getattr(route.endpoint, "closes_sessions", False):
            bad.append(f"{where}: its router lacks route_class=SessionRoute (the session outlives the thread)")
        bad += coroutine_users(route.dependant, where)
    assert bad == []
    assert sum(uses_session(r.dependant) for r in routes) >= 15  # the check looked at the routes that matter
    health = next(r for r in routes if r.path.endswith("/health"))
    assert inspect.iscoroutinefunction(health.endpoint) and not uses_session(health.dependant)


# --- for real: a study, then cold services hammered -----------------------------------------------------------


@dataclass
class Study:
    workdir: Path  # a copy of the shared service's records (its SQLite database), nothing else
    tracking_uri: str  # the shared service's MLflow store
    sweep_id: str
    transfer_id: str
    folder: Path  # the transfer's work folder, in the shared service's workdir


@pytest.fixture(scope="module")
def study(service_study: ServiceStudy, tmp_path_factory: pytest.TempPathFactory) -> Study:
    """A tiny real sweep and a one-rung transfer of it, run through the shared service (tests/api/conftest.py).
    The cold services below read a copy of its records: the shared service keeps running for other modules, and
    two job queues on one database would be a test of something else. The records name the job folders by
    absolute path, so the copies read the same folders."""
    workdir = tmp_path_factory.mktemp("load") / "work"
    workdir.mkdir()
    shared = service_study.settings
    source, copy = sqlite3.connect(shared.db_url.removeprefix("sqlite:///")), sqlite3.connect(workdir / "scalesweep.db")
    try:
        source.backup(copy)  # consistent even while the shared service writes
    finally:
        source.close()
        copy.close()
    folder = next(p.parent for p in shared.workdir.rglob("transfer.json") if p.parent.name == service_study.one_rung)
    return Study(workdir, shared.tracking_uri, service_study.sweep, service_study.one_rung, folder)


def read_routes(study: Study) -> dict[str, str]:
    s, t = f"/v1/sweeps/{study.sweep_id}", f"/v1/transfers/{study.transfer_id}"
    return {
        "sweeps": "/v1/sweeps", "sweep": s, "trials": f"{s}/trials", "best": f"{s}/best",
        "sweep export": f"{s}/export?rung=cpu-s", "transfers": "/v1/transfers", "transfer": t, "runs": f"{t}/runs",
        "fits": f"{t}/fits", "predict": f"{t}/predict?size=cpu-s&arm=periodic", "report": f"{t}/report",
        "transfer export": f"{t}/export", "no sweep": "/v1/sweeps/sw-000000000000/trials",
        "no transfer": "/v1/transfers/tr-000000000000/fits",
    }


def get(port: int, path: str, timeout: float = 60.0) -> tuple[int, dict[str, str], bytes]:
    """One GET on a new connection (closed after the answer), as a polling script without keep-alive does."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def hammer(port: int, routes: dict[str, str], clients: int, rounds: int) -> tuple[list[tuple[str, Any]], list[Any]]:
    """`clients` threads released together, each GETting every route `rounds` times on new connections, while one
    more thread polls `/v1/health`. Returns (route, status-or-exception) for each request and the health answers."""
    answers: list[tuple[str, Any]] = []
    health: list[Any] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    finished = threading.Event()

    def client(offset: int) -> None:
        names = list(routes)
        names = names[offset % len(names):] + names[:offset % len(names)]  # every route under load at once
        start.wait()
        for _ in range(rounds):
            for name in names:
                try:
                    status, headers, body = get(port, routes[name])
                    outcome: Any = (status, headers, body)
                except Exception as exc:  # a timeout or a dropped connection: recorded, asserted on below
                    outcome = exc
                with lock:
                    answers.append((name, outcome))

    def poll_health() -> None:
        start.wait()
        while not finished.is_set():
            try:
                health.append(get(port, "/v1/health", timeout=30)[0])
            except Exception as exc:
                health.append(exc)
            time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    poller = threading.Thread(target=poll_health)
    for thread in (*threads, poller):
        thread.start()
    for thread in threads:
        thread.join()
    finished.set()
    poller.join()
    return answers, health


def check_burst(port: int, study: Study, *, clients: int, rounds: int, busy_allowed: bool) -> dict[str, int]:
    """Hammer a cold service, then check every answer against what the quiet service says right after."""
    routes = read_routes(study)
    answers, health = hammer(port, routes, clients, rounds)
    assert len(answers) == clients * rounds * len(routes)
    failures = [f"{name}: {type(o).__name__}: {o}" for name, o in answers if isinstance(o, Exception)]
    assert failures == [], f"{len(failures)} requests timed out or broke, e.g. {failures[:3]}"
    assert health and all(h == 200 for h in health), f"/v1/health during the burst: {sorted(set(map(str, health)))}"

    quiet = {name: get(port, path)[0] for name, path in routes.items()}  # the service answers normally after
    # The study ran one rung: one size, so the time-to-best fit is refused (422) and says why.
    expected = {name: 200 for name in routes} | {"no sweep": 404, "no transfer": 404, "predict": 422}
    assert quiet == expected
    refused = json.loads(get(port, routes["predict"])[2])
    assert refused["detail"] == "refused: no time_to_best fit: no arm has succeeded runs at two rungs or more to fit " \
                                "time_to_best on", refused

    counts: dict[str, int] = {}
    for name, (status, headers, body) in answers:
        counts[str(status)] = counts.get(str(status), 0) + 1
        if status == 503:
            assert busy_allowed, f"{name}: 503 although the pool has a connection per route thread"
            assert headers["content-type"] == "application/problem+json" and headers["retry-after"] == "1", headers
            assert b"no database connection free" in body
        else:
            assert status == quiet[name], f"{name}: {status} under load, {quiet[name]} quiet: {body[:300]!r}"
    return counts


def _cold_settings(study: Study, **overrides: Any) -> Settings:
    return Settings(workdir=study.workdir, api_token=TOKEN, poll_interval_s=0.3,  # type: ignore[arg-type]
                    mlflow_tracking_uri=study.tracking_uri, **overrides)


def test_a_request_that_finds_no_free_connection_gets_503_with_retry_after(tmp_path: Path) -> None:
    # The refusal itself, forced: the pool's only connection is held, so the next read must be told to come back
    # (503 problem+json, Retry-After) after the pool timeout, not hang or fail with a 500; health needs no database.
    settings = Settings(workdir=tmp_path / "work", api_token=TOKEN, db_pool_size=1,  # type: ignore[arg-type]
                        db_pool_timeout_s=0.2)
    app = create_app(settings)
    client = TestClient(app)  # no lifespan: no job queue, so the held connection is the only one in use
    with app.state.engine.connect():
        started = time.monotonic()
        busy = client.get("/v1/sweeps")
        waited = time.monotonic() - started
        assert busy.status_code == 503, busy.text
        assert busy.headers["content-type"].startswith("application/problem+json")
        assert busy.headers["retry-after"] == "1" and busy.json()["status"] == 503
        assert 0.2 <= waited < 10  # it waited for the pool timeout, then answered
        assert client.get("/v1/health").status_code == 200
    assert client.get("/v1/sweeps").status_code == 200  # the connection given back: the same read answers


def _burst(study: Study, settings: Settings, **burst: Any) -> dict[str, int]:
    """Status counts of `check_burst` against a fresh (cold) service with `settings`."""
    server = LiveServer(settings, lifespan="on")
    try:
        return check_burst(server.port, study, **burst)
    finally:
        server.stop()


def test_a_cold_service_with_one_connection_answers_every_read_under_a_burst(study: Study) -> None:
    # One connection for 16 route threads and the job queue: most requests wait for it, and those that wait past
    # the pool timeout must get a 503 with Retry-After, never a hang or a 500.
    counts = _burst(study, _cold_settings(study, api_threads=16, db_pool_size=1), clients=40, rounds=2,
                    busy_allowed=True)
    assert counts.get("200", 0) > 0, counts


def test_a_pool_sized_to_the_route_threads_never_refuses(study: Study) -> None:
    # Two route threads (so the pool default is 4) against 40 clients: requests queue for a thread, none waits for
    # a connection, so nothing is refused and nothing hangs.
    settings = _cold_settings(study, api_threads=2)
    assert settings.pool_size == 4
    counts = _burst(study, settings, clients=40, rounds=1, busy_allowed=False)
    assert "503" not in counts, counts


def test_the_same_on_postgresql(study: Study, postgres_server: str) -> None:
    url = postgres_database(postgres_server, "load")
    # The study's records copied into PostgreSQL (its MLflow store and work folders stay where they are).
    source, target = make_engine(Settings(workdir=study.workdir, api_token=TOKEN).db_url), make_engine(url)  # type: ignore[arg-type]
    migrate(target)
    with make_sessionmaker(source)() as read, make_sessionmaker(target)() as write:
        for table in (SweepRecord, TransferRecord):
            for row in read.query(table):
                write.merge(table(**{c.key: getattr(row, c.key) for c in Base.metadata.tables[table.__tablename__].c}))
        write.commit()
    source.dispose()
    target.dispose()
    settings = _cold_settings(study, database_url=url, api_threads=16, db_pool_size=2)
    counts = _burst(study, settings, clients=40, rounds=2, busy_allowed=True)
    assert counts.get("200", 0) > 0, counts


def test_finished_jobs_carry_the_services_ids_and_their_mlflow_fields(study: Study) -> None:
    server = LiveServer(_cold_settings(study), lifespan="on")
    try:
        def read(path: str) -> Any:
            status, _, body = get(server.port, path)
            assert status == 200, (path, body[:300])
            return json.loads(body)

        best = read(f"/v1/sweeps/{study.sweep_id}/best")
        assert best["sweep_id"] == study.sweep_id and best["tracking_id"].startswith(REAL_SWEEP["name"])
        fits = read(f"/v1/transfers/{study.transfer_id}/fits")
        assert fits["transfer_id"] == study.transfer_id and fits["tracking_id"] != study.transfer_id
        for path in (f"/v1/sweeps/{study.sweep_id}", f"/v1/transfers/{study.transfer_id}"):
            job = read(path)
            assert job["state"] == "SUCCEEDED" and job["mlflow_experiment_id"] and job["mlflow_parent_run_id"], job
        trials = read(f"/v1/sweeps/{study.sweep_id}/trials")["data"]
        assert trials and {t["metric_name"] for t in trials} == {"fd_pixels"}
    finally:
        server.stop()


def test_a_finished_transfers_report_and_analysis_are_what_its_job_stored(study: Study) -> None:
    # The transfer's job computed its analysis and built its report when it ended and stored both beside its
    # state, so a cold service answers /fits and /report without reading MLflow or fitting (cold builds that took
    # longer than a client's patience under load). Once the transfer's files change (a resume), neither is
    # current any more and both are computed from the runs again.
    folder = study.folder
    page = (folder / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<img" in page
    assert stored_transfer_report(folder) == page  # labelled with the job files as they are: current
    assert study.transfer_id in page and study.sweep_id in page  # named by the service's ids, as its own build
    server, analysis = LiveServer(_cold_settings(study)), None
    try:
        analysis = read_labelled(folder / ANALYSIS_FILE, transfer_version(folder))  # stored by the driver too
        assert analysis is not None and analysis["counts"] == {"SUCCEEDED": 2}, analysis
        write_labelled(folder / ANALYSIS_FILE, {**analysis, "stored": True}, transfer_version(folder))
        status, _, body = get(server.port, f"/v1/transfers/{study.transfer_id}/fits")
        assert status == 200 and json.loads(body)["stored"] is True  # served as stored, not computed again
        (folder / "report.html").write_text("<!DOCTYPE html><p>the stored page</p>")  # marks what is served
        status, _, body = get(server.port, f"/v1/transfers/{study.transfer_id}/report")
        assert (status, body) == (200, b"<!DOCTYPE html><p>the stored page</p>")
        os.utime(folder / "status.json", ns=(time.time_ns(), time.time_ns()))  # its runs' files changed
        status, _, body = get(server.port, f"/v1/transfers/{study.transfer_id}/report")
        assert status == 200 and b"the stored page" not in body and b"<img" in body
        assert study.transfer_id.encode() in body
        status, _, body = get(server.port, f"/v1/transfers/{study.transfer_id}/fits")
        assert status == 200 and "stored" not in json.loads(body)  # computed from the runs again
    finally:
        server.stop()
        (folder / "report.html").write_text(page)  # the page again, labelled current, for the other tests
        write_labelled(folder / "report.json", {}, transfer_version(folder))
        if analysis is not None:
            write_labelled(folder / ANALYSIS_FILE, analysis, transfer_version(folder))
