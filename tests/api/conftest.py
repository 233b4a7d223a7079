"""An app on a fresh workdir (SQLite records and MLflow store in tmp) for each test."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient

from api._settings import Settings
from api.deploy_local import free_port
from api.main import create_app

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class LiveServer:
    """A real uvicorn on loopback in a thread, as `scalesweep serve` runs it; `lifespan="off"` starts no job queue
    (nothing is launched), "on" runs the service's start-up and its job queue. `stop()` ends it."""

    def __init__(self, settings: Settings, *, lifespan: str = "off", access_log: bool = False) -> None:
        self.app = create_app(settings)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, lifespan=lifespan,
                                log_level="info" if access_log else "warning", access_log=access_log)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 60
        while not self.server.started and time.time() < deadline:
            time.sleep(0.05)
        assert self.server.started, "uvicorn did not start"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(workdir=tmp_path / "work", api_token=TOKEN)  # type: ignore[arg-type]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throw-away PostgreSQL on a loopback port (trust auth, fsync off; `api.deploy_local.Postgres`, which runs it
    as the `postgres` user under root); yields a SQLAlchemy URL prefix `postgresql+psycopg://postgres@127.0.0.1:PORT/`
    (append a database name; see `postgres_database`). Skipped where the server binaries or psycopg are absent (a
    failure under CI, which installs both: tests/conftest.py)."""
    from api.deploy_local import Postgres
    from api.deploy_local import postgres_server as started

    why = Postgres.missing()
    if why:
        pytest.skip(why)
    with started() as pg:
        yield pg.url("")


def postgres_database(server: str, name: str) -> str:
    """Create database `name` on the server from `postgres_server`; returns its SQLAlchemy URL."""
    import psycopg

    with psycopg.connect(server.replace("postgresql+psycopg", "postgresql") + "postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server + name
