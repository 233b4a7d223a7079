"""An app on a fresh workdir (SQLite records and MLflow store in tmp) for each test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient

from api._settings import Settings
from api.main import create_app

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    """A loopback port nothing listens on now (for a real uvicorn in a test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def _pg_bin() -> Path:
    """Debian's PostgreSQL server binaries, the newest major version installed (`postgresql` package; 15 here)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throw-away PostgreSQL 15 on a loopback port (trust auth, fsync off); yields a SQLAlchemy URL prefix
    `postgresql+psycopg://postgres@127.0.0.1:PORT/` (append a database name; see `postgres_database`). Skipped
    where the server binaries or psycopg are absent (a failure under CI, which installs both: tests/conftest.py).
    PostgreSQL refuses to run as root: as root, its commands
    run as the `postgres` user on a folder that user owns."""
    import os
    import pwd
    import shutil
    import subprocess
    import tempfile

    if not (PG_BIN / "initdb").is_file() or not (PG_BIN / "pg_ctl").is_file():
        pytest.skip(f"PostgreSQL server binaries not found in {PG_BIN} (Debian: apt-get install postgresql)")
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'psycopg[binary]')")
    prefix: list[str] = []
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
        prefix = ["runuser", "-u", "postgres", "--"]
    folder = Path(tempfile.mkdtemp(prefix="scalesweep-pg-"))  # directly under /tmp: the user can reach it
    if prefix:
        shutil.chown(folder, user="postgres")
    data, port = folder / "data", free_port()
    subprocess.run([*prefix, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"],
                   check=True, capture_output=True)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "log"),
                    "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/"
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def postgres_database(server: str, name: str) -> str:
    """Create database `name` on the server from `postgres_server`; returns its SQLAlchemy URL."""
    import psycopg

    with psycopg.connect(server.replace("postgresql+psycopg", "postgresql") + "postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server + name
