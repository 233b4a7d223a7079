"""What the service checks before a request reaches its routes (an ASGI middleware, `RequestGuard`).

- `HEAD` is served wherever `GET` is: the GET answer's status and headers, no body.
- A write (POST, PUT, PATCH, DELETE) to a route that exists: the bearer token is checked first (401), before a
  byte of the body is read, so an anonymous client cannot make the service parse a large body; every write
  route of this API needs the token. Then a body must be JSON (`application/json` or `+json`), else 415; then it
  must be at most `Settings.max_body_bytes`, else 413: at once from `Content-Length`, or while it streams in (a
  chunked body is counted and refused as soon as it passes the limit, never read whole).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException
from starlette.requests import Request

from ._problems import problem
from ._routes import WRITES, route_methods
from .settings import Settings

__all__ = ["HTML_POLICY", "HtmlHeaders", "RedactQuery", "RequestGuard", "redact_access_log"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class RequestGuard:
    """ASGI middleware: HEAD as GET, then for writes: token, content type, body size (module docstring)."""

    def __init__(self, app: Any, settings: Settings, fastapi_app: Any) -> None:
        self.app = app
        self.settings = settings
        self.fastapi_app = fastapi_app  # whose routes say which writes exist

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"]
        if method == "HEAD":
            await self.app({**scope, "method": "GET"}, receive, _without_body(send))
            return
        if method not in WRITES or method not in route_methods(self.fastapi_app, scope):
            await self.app(scope, receive, send)  # reads, and the router's own 404 or 405 (with Allow)
            return
        request = Request(scope)
        path = scope.get("path", "")
        from .deps import _check_token

        try:
            _check_token(request, self.settings)
        except HTTPException as exc:
            await problem(exc.status_code, str(exc.detail), instance=path, headers=exc.headers)(scope, receive, send)
            return
        length = request.headers.get("content-length")
        has_body = (length is not None and length.strip() not in ("", "0")) or \
            "chunked" in request.headers.get("transfer-encoding", "").lower()
        if has_body and not _is_json(request.headers.get("content-type", "")):
            await problem(415, f"the body must be JSON (Content-Type: application/json), not "
                          f"{request.headers.get('content-type') or 'no Content-Type'!r}",
                          instance=path)(scope, receive, send)
            return
        limit = self.settings.max_body_bytes
        if length is not None and length.strip().isdigit() and int(length) > limit:
            await problem(413, f"the body is {int(length)} bytes; at most {limit} are accepted (a sweep spec is a "
                          "few kB)", instance=path)(scope, receive, send)
            return
        await self.app(scope, _limited(receive, limit), send)


def _without_body(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return wrapped


def _limited(receive: Receive, limit: int) -> Receive:
    """`receive` that counts the body and refuses it with 413 as soon as it passes `limit` bytes."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise HTTPException(413, f"the body passed {limit} bytes; at most {limit} are accepted")
        return message

    return wrapped


# Every HTML answer (issue 53, L3). A report is one self-contained page: inline CSS, figures as data: URIs, nothing
# fetched, no script run (its one inline script, a load counter for a headless browser reading a report file, has no
# use served), never framed. The docs pages run Swagger UI and ReDoc from the service's own assets, started by an
# inline script, and fetch the OpenAPI schema from the service: 'self' and that inline script, nothing else.
HTML_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'none'; base-uri 'none'; "
               "form-action 'none'; frame-ancestors 'none'")
DOCS_POLICY = ("default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
               "script-src 'self' 'unsafe-inline'; connect-src 'self'; font-src 'self'; worker-src 'self' blob:; "
               "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_DOCS_PAGES = ("/docs", "/redoc", "/docs/oauth2-redirect")


class HtmlHeaders:
    """ASGI middleware: `Content-Security-Policy`, `X-Content-Type-Options: nosniff` and `X-Frame-Options: DENY`
    on every answer whose media type is text/html (nosniff on every answer: a JSON body is never sniffed as HTML)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = DOCS_POLICY if scope.get("path", "").rstrip("/") in _DOCS_PAGES else HTML_POLICY

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", [])
                           if k.lower() not in (b"x-content-type-options", b"x-frame-options",
                                                b"content-security-policy")]
                headers.append((b"x-content-type-options", b"nosniff"))
                media = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if media.split(b";", 1)[0].strip().lower() == b"text/html":
                    headers += [(b"content-security-policy", policy.encode()), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


class RedactQuery:
    """A logging filter for uvicorn's access log: the query string of each request line becomes `?[redacted]`
    (a token or other secret passed in a URL must not land in log files)."""

    def filter(self, record: Any) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?[redacted]", *args[3:])
        return True


def redact_access_log() -> None:
    """Install `RedactQuery` on uvicorn's access logger (once; after uvicorn configured its logging)."""
    import logging

    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in logger.filters):
        logger.addFilter(RedactQuery())
