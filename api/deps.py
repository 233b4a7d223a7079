"""Dependencies shared by the routers, as `Annotated` aliases."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from sqlalchemy.orm import Session

from ._settings import Settings

__all__ = ["Owner", "ReadAccess", "SessionDep", "SettingsDep"]


# The dependencies are `async def` although they do no I/O: FastAPI runs a sync dependency in its thread pool,
# one hop per dependency per request, and on a busy 2-core machine those hops cost more than the route itself
# (benchmarks/api_load.py). A session opens no connection until the route (run in the pool) uses it.


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _session(request: Request) -> AsyncIterator[Session]:
    with request.app.state.sessionmaker() as session:
        yield session


SettingsDep = Annotated[Settings, Depends(_settings)]
SessionDep = Annotated[Session, Depends(_session)]

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
