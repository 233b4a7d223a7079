"""The FastAPI application: wiring only (settings, database, error format, routers)."""

from __future__ import annotations

import copy
import importlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI

from api.schemas import Problem

from ._docs import install_docs
from ._http import HtmlHeaders, RequestGuard, redact_access_log
from ._jobs import JobRunner
from ._leader import LeaderError, WorkdirLock
from ._problems import PROBLEM_JSON, install_problem_handlers
from .cache import ResultCache
from .db import make_engine, make_sessionmaker, migrate
from .gate import AnalysisGate
from .routers import exports, fits, health, sweeps, transfers
from .security import install_log_redaction
from .settings import Settings, get_settings

__all__ = ["create_app"]

API_PREFIX = "/v1"

log = logging.getLogger("scalesweep.api")


def _create_tracking_store(uri: str) -> None:
    """Create MLflow's store once, here, before any driver runs: several processes creating a new SQLite store at
    once corrupt its schema (docs/design.md)."""
    from mlflow import MlflowClient

    if uri.startswith("sqlite:///"):
        from pathlib import Path

        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)


# What the read routes import on their first use: torch and the model ladder (an export counts a rung's
# parameters), MLflow's client, the analysis and the figures. Imported at start-up, before the service answers:
# a first import takes seconds and holds Python's import lock, so done under load it stalled every reader that
# needed any of them (cold exports took longer than a client's 10 s patience in benchmarks/api_load.py).
_READ_PATH_MODULES = ("torch", "trials.models", "mlflow", "scaling", "sweeper.transfer", "sweeper.analysis",
                      "dashboards")


def _import_read_paths() -> None:
    for name in _READ_PATH_MODULES:
        importlib.import_module(name)
    # dashboards' face loads its names on first use: touch the report builder so matplotlib and the report code
    # load here, at start-up, not on the first report request.
    importlib.import_module("dashboards").build_report  # noqa: B018


# What each error status means, shown in the OpenAPI schema beside every route.
_ERROR_RESPONSES = {code: {"model": Problem, "description": desc} for code, desc in (
    (400, "malformed request (e.g. a body that is not UTF-8 JSON)"),
    (401, "missing or invalid bearer token"), (404, "no such resource"),
    (413, "the body is larger than SCALESWEEP_MAX_BODY_BYTES"),
    (415, "a body that is not JSON (Content-Type: application/json)"),
    (422, "invalid input: each field and what is allowed"),
    (429, "too many jobs queued (in all, or of this owner); retry after Retry-After seconds"),
    (500, "internal error"),
    (503, "busy: no database connection free within the pool timeout, or every analysis slot taken "
          "(importance, reports); retry after Retry-After seconds"))}


def _wire(app: FastAPI, settings: Settings) -> None:
    """The problem handlers, the self-hosted docs, the middleware and the routers."""
    install_problem_handlers(app)
    install_docs(app)
    # HEAD as GET; for writes: the token before the body is read, JSON only (415), bounded size (413).
    app.add_middleware(RequestGuard, settings=settings, fastapi_app=app)
    app.add_middleware(HtmlHeaders)  # outermost but for the Host check: every answer, refusals included
    if settings.host_list != ["*"]:  # a browser on the same machine must not reach us under a rebound DNS name
        from .security import TrustedHosts

        app.add_middleware(TrustedHosts, hosts=settings.host_list)
    app.include_router(health.router, prefix=API_PREFIX)
    app.include_router(sweeps.router, prefix=API_PREFIX)
    for router in (transfers.router, fits.router, exports.router):
        app.include_router(router, prefix=API_PREFIX)
    for router in (sweeps.plans, transfers.plans):  # /v1/plans/...: a job priced before it exists
        app.include_router(router, prefix=API_PREFIX)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; `settings` default to the environment (`SCALESWEEP_*`)."""
    settings = settings or get_settings()
    settings.workdir.mkdir(parents=True, exist_ok=True)
    install_log_redaction(settings.shown_secrets)
    # The work folder's leader lock, held while the stores are migrated and, from start-up to shutdown, while the
    # job queue runs (`_leader`): a second service on this folder refuses here or at its start-up.
    leader = WorkdirLock(settings.workdir)
    leader.acquire()
    try:
        engine = make_engine(settings.db_url, pool_size=settings.pool_size,
                             pool_timeout_s=settings.db_pool_timeout_s)
        migrate(engine)
        _create_tracking_store(settings.tracking_uri)
    except Exception as exc:  # the store's error may quote its URI, password included: said without it
        raise RuntimeError(settings.redact(f"{type(exc).__name__}: {exc}")) from None
    finally:
        leader.release()  # an app that never starts (a test's TestClient without lifespan) holds nothing

    sessions = make_sessionmaker(engine)
    jobs = JobRunner(settings, sessions)
    results: ResultCache[Any] = ResultCache()

    def shutdown() -> None:
        jobs.stop()  # drivers keep running; the next service process adopts them
        results.close()
        engine.dispose()
        leader.release()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The routes' thread pool (anyio's default limiter, per event loop) and the database pool are sized
        # together from settings.api_threads: see api.service.deps and docs/load.md. Database work stays off the loop.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.api_threads
        redact_access_log()  # here: uvicorn has configured its loggers by now
        try:
            leader.acquire()
        except LeaderError as exc:
            log.error("%s", exc)  # one line in the log; uvicorn then reports the failed start-up
            raise
        await anyio.to_thread.run_sync(jobs.start)  # reconciles what a previous service process left RUNNING
        await anyio.to_thread.run_sync(_import_read_paths)
        yield
        await anyio.to_thread.run_sync(shutdown)

    app = FastAPI(
        responses=copy.deepcopy(_ERROR_RESPONSES),  # type: ignore[arg-type]  # one per app: FastAPI may add to it
        title="scalesweep",
        version="0.1.0",
        summary="Sweeps and scaling studies for Periodic Row-wise Muon on diffusion transformers.",
        lifespan=lifespan,
        docs_url=None,  # served by install_docs, with assets from the service itself (offline clusters)
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = sessions
    app.state.jobs = jobs
    app.state.results = results
    app.state.analysis = AnalysisGate(settings.analysis_workers)
    _wire(app, settings)
    _document_problems(app)
    return app


def _document_problems(app: FastAPI) -> None:
    """Say in the OpenAPI schema what the service really sends: errors as application/problem+json."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            for path in schema.get("paths", {}).values():
                for operation in path.values():
                    for code, response in operation.get("responses", {}).items():
                        content = response.get("content", {})
                        if code[0] in "45" and content:  # whatever the route's own media type (HTML, YAML)
                            response["content"] = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
