"""Settings, migrations, health and readiness, and the problem+json error format."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import inspect

from api.service import Settings, create_app
from api.service.db import make_engine, migrate, migration_config

from .conftest import TOKEN


def test_settings_come_from_the_environment_and_refuse_bad_values(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", TOKEN)
    monkeypatch.setenv("SCALESWEEP_WORKDIR", str(tmp_path))
    monkeypatch.setenv("SCALESWEEP_MAX_CONCURRENT_SWEEPS", "2")
    s = Settings()  # type: ignore[call-arg]
    assert s.max_concurrent_sweeps == 2 and s.api_token.get_secret_value() == TOKEN
    assert s.db_url == f"sqlite:///{tmp_path.resolve() / 'scalesweep.db'}"
    assert s.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert TOKEN not in repr(s)  # the token is never printed
    monkeypatch.setenv("SCALESWEEP_RECONCILE", "ignore")
    with pytest.raises(ValidationError, match="'resume' or 'mark_failed'"):
        Settings()  # type: ignore[call-arg]
    monkeypatch.delenv("SCALESWEEP_RECONCILE")
    monkeypatch.delenv("SCALESWEEP_API_TOKEN")
    with pytest.raises(ValidationError, match="api_token"):
        Settings()  # type: ignore[call-arg]


def test_migrations_create_the_schema_and_are_idempotent(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate(engine)
    migrate(engine)
    tables = set(inspect(engine).get_table_names())
    assert {"sweeps", "transfers", "alembic_version"} <= tables


def test_migrations_step_down_one_revision_and_up_again_on_sqlite(tmp_path: Path) -> None:
    """The same step down and up that tests/deploy runs on PostgreSQL, here in the main suite."""
    from alembic import command

    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate(engine)
    with engine.begin() as connection:
        command.downgrade(migration_config(connection), "-1")
    migrate(engine)
    assert {"sweeps", "transfers"} <= set(inspect(engine).get_table_names())
    engine.dispose()


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/v1/health").json() == {"status": "ok"}
    ready = client.get("/v1/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["database"] == "ok" and ready.json()["checks"]["mlflow"] == "ok"


def test_errors_are_problem_json(client: TestClient) -> None:
    missing = client.get("/v1/nothing-here")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["status"] == 404 and missing.json()["title"] == "Not Found"
    wrong = client.delete("/v1/health")
    assert wrong.status_code == 405 and wrong.headers["content-type"] == "application/problem+json"


def test_ready_probes_the_ray_dashboard_it_is_given(tmp_path: Path) -> None:
    """With SCALESWEEP_RAY_DASHBOARD_URL, /ready asks that address (a real HTTP server on loopback standing in
    for the head's health endpoint), not port 8265 of the GCS host; a dead address makes the service not ready."""
    import http.server
    import socket
    import threading

    seen: list[str] = []

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200 if self.path == "/api/gcs_healthz" else 404)
            self.end_headers()
            self.wfile.write(b"success")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        settings = Settings(workdir=tmp_path / "a", api_token=TOKEN,  # type: ignore[arg-type]
                            ray_address="10.255.255.1:6379", ray_dashboard_url=url)
        with TestClient(create_app(settings)) as c:
            ready = c.get("/v1/ready")
        assert ready.status_code == 200 and ready.json()["checks"]["ray"] == "ok", ready.text
        assert seen == ["/api/gcs_healthz"]
    finally:
        server.shutdown()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    settings = Settings(workdir=tmp_path / "b", api_token=TOKEN, ray_dashboard_url=dead)  # type: ignore[arg-type]
    with TestClient(create_app(settings)) as c:
        ready = c.get("/v1/ready")
    assert ready.status_code == 503 and ready.json()["checks"]["ray"].startswith("unavailable")
