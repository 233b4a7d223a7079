"""The FastAPI application: wiring only (settings, database, error format, routers)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from ._db import make_engine, make_sessionmaker, migrate
from ._problems import install_problem_handlers
from ._settings import Settings, get_settings
from .routers import health

__all__ = ["create_app"]

API_PREFIX = "/v1"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; `settings` default to the environment (`SCALESWEEP_*`)."""
    settings = settings or get_settings()
    settings.workdir.mkdir(parents=True, exist_ok=True)
    engine = make_engine(settings.db_url)
    migrate(engine)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = FastAPI(
        title="scalesweep",
        version="0.1.0",
        summary="Sweeps and scaling studies for Periodic Row-wise Muon on diffusion transformers.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    install_problem_handlers(app)
    app.include_router(health.router, prefix=API_PREFIX)
    return app
