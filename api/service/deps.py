"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

import functools
import hmac
import inspect
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from ._jobs import JobRunner
from .cache import ResultCache
from .gate import AnalysisGate
from .settings import Settings

__all__ = ["AnalysisDep", "JobsDep", "Owner", "ReadAccess", "ResultsDep", "SessionDep", "SessionRoute", "SettingsDep",
           "release"]


# One concurrency model for the whole API (docs/load.md): everything that touches the database, a file or MLflow
# is synchronous and runs on the thread pool, never on the event loop. The session dependency is a plain generator,
# so FastAPI opens it and closes it (returning its connection to the pool) on worker threads, the closing one
# outside the thread limit; routes that use it are `def`. An `async def` route or dependency that held a session
# would block the loop on a pool checkout while the connections it waits for can only come back through the loop:
# under more requests than connections the whole service stopped for good. `tests/api/test_load.py` checks that no
# `async def` in the API touches a session. The pool holds a connection per route thread (Settings.pool_size),
# and a checkout that still waits past Settings.db_pool_timeout_s is a 503 with Retry-After (`api.service._problems`).
# The token, settings, job queue and cache dependencies stay `async def`: they read memory only, and a thread hop
# would cost more. What `create_app` put on `app.state` is read here and nowhere else among the routes.


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _jobs(request: Request) -> JobRunner:
    return request.app.state.jobs


async def _results(request: Request) -> ResultCache[Any]:
    return request.app.state.results


async def _analysis(request: Request) -> AnalysisGate:
    return request.app.state.analysis


def _session(request: Request) -> Iterator[Session]:
    with request.app.state.sessionmaker() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(_settings)]
SessionDep = Annotated[Session, Depends(_session)]
JobsDep = Annotated[JobRunner, Depends(_jobs)]  # the job queue: wake, cancel, resume, extend, its trainers
ResultsDep = Annotated[ResultCache[Any], Depends(_results)]  # computed reads, once per version of a job's files
AnalysisDep = Annotated[AnalysisGate, Depends(_analysis)]  # the few slots expensive reads compute in (503 when full)


class SessionRoute(APIRoute):
    """The route class of every router: a synchronous endpoint closes the sessions it was given as it returns, on
    its own worker thread. Without this a connection would stay checked out after the endpoint gave its thread
    back, until the dependency's teardown ran (after the response is built), so more requests than route threads
    could hold connections and a pool sized to the threads could run dry."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _closing_sessions(endpoint), **kwargs)


def _closing_sessions(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(endpoint):
        return endpoint  # holds no session: tests/api/test_load.py checks that

    @functools.wraps(endpoint)  # FastAPI reads the signature (and its annotations) through __wrapped__
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return endpoint(*args, **kwargs)
        finally:
            for value in kwargs.values():
                if isinstance(value, Session):
                    value.close()

    run.closes_sessions = True  # type: ignore[attr-defined]
    return run


def release(session: Session) -> None:
    """End the session's read transaction, so its connection goes back to the pool before slow work (an MLflow
    read, a fit); the records already loaded stay readable (the sessionmaker does not expire them on commit)."""
    session.commit()

_UNAUTHORIZED = {"WWW-Authenticate": 'Bearer realm="scalesweep"'}


def _check_token(request: Request, settings: Settings) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise HTTPException(401, "missing bearer token: send 'Authorization: Bearer <SCALESWEEP_API_TOKEN>'",
                            headers=_UNAUTHORIZED)
    if not hmac.compare_digest(token.encode(), settings.api_token.get_secret_value().encode()):
        raise HTTPException(401, "invalid bearer token", headers=_UNAUTHORIZED)
    # One shared token: the owner is who the caller says it is (X-Scalesweep-User), default "token".
    return request.headers.get("x-scalesweep-user", "token")[:200]


async def _owner(request: Request, settings: SettingsDep) -> str:
    return _check_token(request, settings)


async def _reader(request: Request, settings: SettingsDep) -> str | None:
    return _check_token(request, settings) if settings.auth_reads else None


Owner = Annotated[str, Depends(_owner)]
ReadAccess = Annotated[str | None, Depends(_reader)]
