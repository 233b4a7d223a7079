"""RFC 9457 problem details: every error the service returns is `application/problem+json`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from trials.core import field_location, validation_messages, validation_text

from ._routes import route_methods
from .gate import ANALYSIS_RETRY_AFTER_S, AnalysisBusy

__all__ = ["PROBLEM_JSON", "install_problem_handlers", "problem"]

PROBLEM_JSON = "application/problem+json"
MALFORMED_JSON = "malformed JSON body"  # how every body that is not JSON is refused (400)
RETRY_AFTER_S = 1  # what a 503 for a busy database pool asks the client to wait, in seconds
DB_DOWN_RETRY_AFTER_S = 5  # ... and one for a database that cannot be reached (stopped, restarting, network)
log = logging.getLogger("scalesweep.api")

_TITLES = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
           409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
           429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable"}


def problem(status: int, detail: str, *, instance: str | None = None, headers: Mapping[str, str] | None = None,
            **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"type": "about:blank", "title": _TITLES.get(status, "Error"), "status": status,
                            "detail": detail}
    if instance:
        body["instance"] = instance
    body.update(extra)
    return JSONResponse(jsonable_encoder(body), status_code=status, media_type=PROBLEM_JSON, headers=headers)


def _field(loc: Sequence[Any]) -> str:
    """("body", "search", "K", 0) -> "search.K[0]"; the request part ("body", "query") is kept apart."""
    loc = field_location(loc)  # a union's form tag ("rungs.mapping.cpu-s") is not a key the client wrote
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header") else list(loc)
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or str(loc[0] if loc else "request")


def _allowed_methods(request: Request) -> list[str]:
    return route_methods(request.app, request.scope)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        syntax = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if syntax is not None:  # not JSON at all: the body's syntax, not a field, is wrong
            loc = syntax.get("loc") or ()
            where = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
            reason = (syntax.get("ctx") or {}).get("error") or syntax.get("msg", "")
            return problem(400, f"{MALFORMED_JSON}: {reason}{where}", instance=request.url.path)
        errors = [
            {"field": _field(e.get("loc", ())), "in": (e.get("loc") or ["body"])[0], "message": validation_text(e),
             "type": e.get("type", "")}
            for e in exc.errors()
        ]
        detail = validation_messages(list(exc.errors())[:5], field=_field)
        return problem(422, f"invalid request: {detail}", instance=request.url.path, errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:  # Starlette lists only the first matching route's methods: list them all
            headers["Allow"] = ", ".join(_allowed_methods(request))
        detail = str(exc.detail)
        if exc.status_code == 400 and detail == "There was an error parsing the body":  # FastAPI's, e.g. a body
            detail = f"{MALFORMED_JSON}: not UTF-8 JSON, or nested too deeply to parse"  # nested 100,000 deep
        return problem(exc.status_code, detail, instance=request.url.path, headers=headers or None)

    @app.exception_handler(PoolTimeout)
    async def _busy(request: Request, exc: PoolTimeout) -> JSONResponse:
        # Every database connection stayed in use for the whole checkout timeout: a short, retryable refusal
        # rather than a request that hangs or a 500 (docs/load.md).
        log.warning("no database connection for %s %s within the pool timeout", request.method, request.url.path)
        return problem(503, "the service is busy (no database connection free); retry shortly",
                       instance=request.url.path, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(AnalysisBusy)
    async def _analysis_busy(request: Request, exc: AnalysisBusy) -> JSONResponse:
        # Every analysis slot computes something: refused at once rather than queued on a route thread (`gate`).
        return problem(503, "every analysis slot is computing (importance, reports); retry shortly",
                       instance=request.url.path, headers={"Retry-After": str(ANALYSIS_RETRY_AFTER_S)})

    @app.exception_handler(DBAPIError)
    async def _database(request: Request, exc: DBAPIError) -> JSONResponse:
        # The database refused or dropped the connection (a server stopped or restarting): retryable, a 503 with
        # Retry-After; the pool's pre-ping reconnects once it is back. Other driver errors stay a 500.
        if not (isinstance(exc, OperationalError) or exc.connection_invalidated):
            return await _unexpected(request, exc)
        reason = (str(exc.orig or exc).splitlines() or [type(exc).__name__])[0][:200]
        log.warning("database unavailable for %s %s: %s", request.method, request.url.path,
                    request.app.state.settings.redact(reason))
        return problem(503, "the database is unavailable; retry shortly", instance=request.url.path,
                       headers={"Retry-After": str(DB_DOWN_RETRY_AFTER_S)})

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # never leak a traceback
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem(500, "internal error; the service log has the details", instance=request.url.path)
