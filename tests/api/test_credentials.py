"""Secrets never in an answer or a log (docs/security.md, "Credentials in URIs"): every URI the service holds
carries a user and a password here (the records database on a real PostgreSQL, the MLflow store, the MLflow UI,
the Ray dashboard); with MLflow and Ray down, `/v1/ready`, the start-up error, a driver that cannot start (its
record's error and the log line), MLflow links and the CLI's start-up message show none of them."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.service import Settings, create_app
from api.service.db import SweepRecord

from .conftest import AUTH, TOKEN, free_port, postgres_database

PASSWORDS = {"database": "pw-db-Zq81", "mlflow": "pw-mlflow-Xk27", "ui": "pw-ui-Lm55", "ray": "pw-ray-Hs90"}


class _Store(BaseHTTPRequestHandler):
    """An MLflow tracking server that answers an empty experiment list: enough for the service's start-up probe
    (the test then stops it: MLflow is down)."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"experiments": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def quick_mlflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")


def _clean(text: str) -> None:
    leaked = [name for name, pw in PASSWORDS.items() if pw in text]
    assert leaked == [], f"passwords of {leaked} in: {text[:2000]}"
    assert TOKEN not in text


@pytest.fixture
def settings_all_uris(tmp_path: Path, postgres_server: str,
                      quick_mlflow: None) -> Iterator[tuple[Settings, ThreadingHTTPServer]]:
    port = free_port()
    store = ThreadingHTTPServer(("127.0.0.1", port), _Store)
    thread = threading.Thread(target=store.serve_forever, daemon=True)
    thread.start()
    db = postgres_database(postgres_server, "creds").replace("postgres@", f"postgres:{PASSWORDS['database']}@")
    settings = Settings(  # type: ignore[arg-type]
        workdir=tmp_path / "work", api_token=TOKEN, auth_reads=True, database_url=db,
        mlflow_tracking_uri=f"http://alice:{PASSWORDS['mlflow']}@127.0.0.1:{port}",
        mlflow_ui_url=f"http://alice:{PASSWORDS['ui']}@127.0.0.1:{free_port()}",
        drivers="ray-job", ray_dashboard_url=f"http://bob:{PASSWORDS['ray']}@127.0.0.1:{free_port()}")
    try:
        yield settings, store
    finally:
        store.shutdown()
        store.server_close()


def test_no_answer_or_log_shows_a_uri_password(settings_all_uris: tuple[Settings, ThreadingHTTPServer],
                                                caplog: pytest.LogCaptureFixture) -> None:
    settings, store = settings_all_uris
    app = create_app(settings)  # MLflow answered the start-up probe
    store.shutdown()  # now MLflow is down, and Ray never was up
    store.server_close()
    api = TestClient(app, raise_server_exceptions=False)
    with caplog.at_level(logging.DEBUG):
        ready = api.get("/v1/ready")  # open even with auth_reads: a probe
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["database"] == "ok"
        assert ready.json()["checks"]["mlflow"].startswith("unavailable")
        assert "127.0.0.1" in ready.json()["checks"]["mlflow"] or "Error" in ready.json()["checks"]["mlflow"]
        _clean(ready.text)

        # A driver that cannot start (the Ray Jobs API is down): its record's error and the log line.
        sweep = api.post("/v1/sweeps", json={"name": "c", "horizon": 20, "search": {"space": {"K": [2]}}},
                         headers=AUTH)
        assert sweep.status_code == 201, sweep.text
        app.state.jobs.tick()
        failed = api.get(f"/v1/sweeps/{sweep.json()['id']}", headers=AUTH).json()
        assert failed["state"] == "FAILED" and "Ray Jobs at http://127.0.0.1" in failed["error"], failed
        _clean(json.dumps(failed))

        # MLflow links built from a UI URL with credentials.
        with app.state.sessionmaker() as session:
            record = session.get(SweepRecord, sweep.json()["id"])
            record.mlflow_experiment_id, record.mlflow_parent_run_id = "1", "abc"
            session.commit()
        links = api.get(f"/v1/sweeps/{sweep.json()['id']}", headers=AUTH).json()["links"]
        assert links["mlflow_experiment"].startswith("http://127.0.0.1:"), links
        # The runs view (MLflow 3 opens a bare experiment link as its GenAI overview), and the parent run in it.
        assert links["mlflow_experiment"].endswith("/#/experiments/1/runs"), links
        assert links["mlflow_parent_run"] == links["mlflow_experiment"] + "/abc", links
        _clean(json.dumps(links))
    _clean("\n".join(r.getMessage() for r in caplog.records))


def test_the_start_up_error_shows_no_password(tmp_path: Path, quick_mlflow: None,
                                              caplog: pytest.LogCaptureFixture) -> None:
    uri = f"http://alice:{PASSWORDS['mlflow']}@127.0.0.1:{free_port()}"  # nothing listens: MLflow is down
    settings = Settings(workdir=tmp_path / "work", api_token=TOKEN, mlflow_tracking_uri=uri)  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG), pytest.raises(RuntimeError) as info:
        create_app(settings)
    assert "127.0.0.1" in str(info.value)
    _clean(str(info.value))
    _clean("\n".join(r.getMessage() for r in caplog.records))


def test_serve_says_why_it_cannot_start_without_the_password(tmp_path: Path) -> None:
    uri = f"http://alice:{PASSWORDS['mlflow']}@127.0.0.1:{free_port()}"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "SCALESWEEP_API_TOKEN": TOKEN,
           "SCALESWEEP_WORKDIR": str(tmp_path / "work"), "SCALESWEEP_MLFLOW_TRACKING_URI": uri,
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}
    done = subprocess.run([sys.executable, "-m", "scalesweep_cli", "serve", "--port", str(free_port())], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode != 0
    assert "could not start the service" in done.stderr + done.stdout
    _clean(done.stderr + done.stdout)
