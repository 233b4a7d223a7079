"""A database that cannot be reached is a 503 with Retry-After (problem+json) on every route that needs it, never a
500; `/v1/ready` names the database; `/v1/health` does not touch it. (On a real PostgreSQL stopped mid-service:
tests/deploy/test_deploy.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from api.service import Settings, create_app
from api.service.db import make_sessionmaker

from .conftest import AUTH


def test_an_unreachable_database_is_503_with_retry_after_not_500(settings: Settings, tmp_path: Path) -> None:
    app = create_app(settings)
    # An engine whose every connection fails with the driver's OperationalError, as a stopped server's does.
    (tmp_path / "a-file").write_text("")
    app.state.sessionmaker = make_sessionmaker(create_engine(f"sqlite:///{tmp_path}/a-file/records.db"))
    with TestClient(app, raise_server_exceptions=False) as client:
        for method, path in (("GET", "/v1/sweeps"), ("GET", "/v1/sweeps/sw-1"), ("GET", "/v1/transfers"),
                             ("POST", "/v1/sweeps/sw-1/cancel")):
            response = client.request(method, path, headers=AUTH)
            assert response.status_code == 503, (method, path, response.status_code, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert int(response.headers["retry-after"]) >= 1
            assert "database" in response.json()["detail"]
        ready = client.get("/v1/ready")
        assert ready.status_code == 503 and ready.json()["checks"]["database"].startswith("unavailable")
        assert client.get("/v1/health").status_code == 200


def test_the_mlflow_probe_answers_within_seconds_while_an_mlflow_server_hangs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # An MLflow server whose own database is down answers 500s, and MLflow's client retries them for minutes:
    # /v1/ready's probe of a server gives up after MLFLOW_PROBE_S and says so.
    import time

    from api.service.routers import health

    monkeypatch.setattr(health, "_search_experiments", lambda uri: time.sleep(5) or "ok")
    monkeypatch.setattr(health, "MLFLOW_PROBE_S", 0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no answer within 0\.5 s"):
        health._check_mlflow("http://127.0.0.1:9/")
    assert time.monotonic() - started < 3
