"""An app on a fresh workdir (SQLite records and MLflow store in tmp) for each test."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
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


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(workdir=tmp_path / "work", api_token=TOKEN)  # type: ignore[arg-type]


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c
