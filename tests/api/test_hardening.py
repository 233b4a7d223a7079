"""The service's HTTP edges: fresh analyses, runs not started, bounded bodies with auth first, atomic state
changes, a blank token, redacted access logs, 405/HEAD, malformed JSON and content types, offline docs."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.service import Settings, create_app
from api.service.db import SweepRecord, TransferRecord
from scaling.records import TransferRun
from sweeper import TransferResult

from .conftest import AUTH, TOKEN, LiveServer, free_port

ROOT = Path(__file__).resolve().parents[2]
SWEEP = {"name": "tiny", "rung": "cpu-xs", "horizon": 20, "search": {"method": "grid", "space": {"K": [2, 3]}}}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    yield TestClient(create_app(settings), raise_server_exceptions=False)  # no lifespan: nothing is launched


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    server = LiveServer(settings)
    yield server
    server.stop()


# --- the analysis of a transfer is always the current one; runs not started are no 500 -------------------------------


def _transfer_folder(api: TestClient, tmp_path: Path) -> tuple[str, Path]:
    folder = tmp_path / "transfer"
    folder.mkdir()
    (folder / "transfer.json").write_text("{}")
    (folder / "status.json").write_text("{}")
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        record = TransferRecord(id="tr-0123456789ab", sweep_id="sw-0123456789ab", state="RUNNING",
                                spec={"name": "t"}, owner="token", storage_path=str(folder))
        session.add(record)
        session.commit()
    return record.id, folder


def _result(state: str, folder: Path, runs: list[TransferRun]) -> TransferResult:
    plan = {"searched_arm": "periodic", "chosen": {"K": 3, "gamma": 0.25}, "horizon": 12, "eval_steps": [8, 12],
            "seeds": [0], "rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "adamw"],
            "runs": [{"rung": "cpu-xs", "parameters": 1000}, {"rung": "cpu-s", "parameters": 4000}]}
    return TransferResult(transfer_id="t-internal", name="t", state=state, workdir=str(folder), tracking_uri="",
                          experiment="t", parent_run_id=None, source={}, plan=plan, runs=runs,
                          counts={"RUNNING": 1} if state == "RUNNING" else {"SUCCEEDED": 1})


def _run(rung: str, state: str) -> TransferRun:
    return TransferRun(rung=rung, parameters=1000 if rung else None, arm="periodic", seed=0, lr=None, lr_rule=None,
                       lr_base=None, K=3, gamma=0.25, run_id=f"run-{rung or 'new'}", state=state,
                       trial_key="k", attempt=0, checkpoints=((4, 1.0, 50.0), (8, 2.0, 40.0)) if rung else ())


def test_fits_follow_the_transfer_as_it_changes(api: TestClient, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The MLflow read is replaced by TransferResults built here (the state the driver's files stand for); the
    cache in front of it and the routes are the real ones."""
    transfer_id, folder = _transfer_folder(api, tmp_path)
    now = {"state": "RUNNING"}
    monkeypatch.setattr("api.service.routers.transfers.load_transfer_result",
                        lambda f: _result(now["state"], folder, [_run("cpu-xs", now["state"])]))
    assert api.get(f"/v1/transfers/{transfer_id}/fits").json()["state"] == "RUNNING"

    now["state"] = "SUCCEEDED"  # the driver finished: its files change
    time.sleep(0.01)
    (folder / "status.json").write_text(json.dumps({"state": "SUCCEEDED"}))
    (folder / "outcome.json").write_text("{}")
    for attempt in range(3):  # the first answer after the change and every one after it
        doc = api.get(f"/v1/transfers/{transfer_id}/fits").json()
        assert (attempt, doc["state"], doc["counts"]) == (attempt, "SUCCEEDED", {"SUCCEEDED": 1})
        time.sleep(0.2)
    html = api.get(f"/v1/transfers/{transfer_id}/report")
    assert html.status_code == 409  # no MLflow parent run in this hand-made result: said, not a stale page


def test_alignment_fits_are_refused_by_name_for_runs_without_alignment(api: TestClient, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A shapes transfer's runs carry no alignment score: `metric=alignment` is a 422 naming the metrics they can
    fit, on /fits and /predict; with alignment on its runs the same request answers."""
    import dataclasses

    transfer_id, folder = _transfer_folder(api, tmp_path)
    runs = {"now": [_run("cpu-xs", "SUCCEEDED")]}
    monkeypatch.setattr("api.service.routers.transfers.load_transfer_result",
                        lambda f: _result("RUNNING", folder, runs["now"]))
    fits = api.get(f"/v1/transfers/{transfer_id}/fits", params={"metric": "alignment"})
    assert fits.status_code == 422 and fits.headers["content-type"] == "application/problem+json"
    assert "no run of this transfer carries an alignment score" in fits.json()["detail"]
    assert "allowed: ['best_fd', 'endpoint_fd', 'steps_to_target', 'time_to_best', 'time_to_target']" in \
        fits.json()["detail"]
    predict = api.get(f"/v1/transfers/{transfer_id}/predict",
                      params={"size": "cpu-s", "arm": "periodic", "metric": "alignment"})
    assert predict.status_code == 422 and "no run of this transfer carries an alignment score" in predict.text

    runs["now"] = [dataclasses.replace(_run("cpu-xs", "SUCCEEDED"), alignment=((4, 1.0, 0.2), (8, 2.0, 0.3)))]
    (folder / "status.json").write_text(json.dumps({"state": "RUNNING", "changed": 1}))  # a new version
    fits = api.get(f"/v1/transfers/{transfer_id}/fits", params={"metric": "alignment"})
    assert fits.status_code == 200, fits.text
    # one rung is one size: the alignment fit is refused for that reason, not for want of alignment
    assert "two rungs or more to fit alignment" in fits.json()["fits"]["alignment"]["error"]
    assert fits.json()["runs"][0]["endpoint_alignment"] == 0.3


def test_runs_without_a_rung_are_left_out_of_the_analysis(api: TestClient, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    transfer_id, folder = _transfer_folder(api, tmp_path)
    runs = [_run("cpu-xs", "SUCCEEDED"), _run("", "PENDING")]  # a run whose rung tag is not written yet
    monkeypatch.setattr("api.service.routers.transfers.load_transfer_result",
                        lambda f: _result("RUNNING", folder, runs))
    fits = api.get(f"/v1/transfers/{transfer_id}/fits")
    assert fits.status_code == 200, fits.text
    assert [r["rung"] for r in fits.json()["runs"]] == ["cpu-xs"]
    predict = api.get(f"/v1/transfers/{transfer_id}/predict", params={"size": "cpu-s", "arm": "periodic"})
    # One cpu-xs run is one size: the fit is refused (422), with the reason, never a 409 or a fit on the unrung run.
    assert predict.status_code == 422 and predict.headers["content-type"] == "application/problem+json"
    assert predict.json()["detail"] == ("refused: no time_to_best fit: no arm has succeeded runs at two rungs or "
                                        "more to fit time_to_best on")
    assert api.get(f"/v1/transfers/{transfer_id}/runs").json()["count"] == 2  # the runs list shows it as it is


# --- the token before the body, and a bounded body -------------------------------------------------------------------


def _raw(port: int, head: str, body: bytes = b"", timeout: float = 10) -> tuple[int, bytes]:
    """Send a request head (and optionally part of a body) and read the answer without sending the rest."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        header, _, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in header.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return int(header.split(b" ")[1]), rest


def test_the_token_is_checked_before_the_body_and_large_bodies_are_refused(live: LiveServer) -> None:
    big = 60 * 1024 * 1024  # announced, never sent: an answer proves the service did not wait to read it
    head = (f"POST /v1/sweeps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {big}\r\n"
            "{auth}\r\n")
    status, body = _raw(live.port, head.replace("{auth}", ""))
    assert status == 401 and json.loads(body)["status"] == 401
    status, body = _raw(live.port, head.replace("{auth}", "Authorization: Bearer wrong-token\r\n"))
    assert status == 401
    status, body = _raw(live.port, head.replace("{auth}", f"Authorization: Bearer {TOKEN}\r\n"))
    assert status == 413 and "at most 1048576" in json.loads(body)["detail"]

    # chunked: refused once the body passes the limit, the rest never read
    chunk = b"[" * 65536
    head = (f"POST /v1/sweeps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: Bearer {TOKEN}"
            "\r\nTransfer-Encoding: chunked\r\n\r\n")
    status, body = _raw(live.port, head, (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n") * 20)
    assert status == 413 and json.loads(body)["title"] == "Content Too Large"


def test_a_body_under_the_limit_still_works(api: TestClient, settings: Settings) -> None:
    assert settings.max_body_bytes == 1024 * 1024
    r = api.post("/v1/sweeps", json=SWEEP, headers=AUTH)
    assert r.status_code == 201, r.text


# --- one state change per transition, however many ask at once -------------------------------------------------------


def _concurrent_posts(port: int, path: str, n: int = 20) -> list[int]:
    import http.client

    start = threading.Barrier(n)
    codes: list[int] = []

    def post() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        conn.request("POST", path, headers=AUTH)
        codes.append(conn.getresponse().status)
        conn.close()

    threads = [threading.Thread(target=post) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(codes)


@pytest.mark.parametrize("table", ["sweeps", "transfers"])
def test_exactly_one_of_20_concurrent_resumes_and_cancels_wins(live: LiveServer, table: str) -> None:
    record_type: Any = SweepRecord if table == "sweeps" else TransferRecord
    extra = {"name": "t"} if table == "sweeps" else {"sweep_id": "sw-0123456789ab"}
    with live.app.state.sessionmaker() as session:
        for i, state in enumerate(("FAILED", "PENDING")):
            session.add(record_type(id=f"{table[:2]}-00000000000{i}", state=state, spec={"name": "t"}, owner="token",
                                    **extra))
        session.commit()
    failed, pending = f"{table[:2]}-000000000000", f"{table[:2]}-000000000001"
    assert _concurrent_posts(live.port, f"/v1/{table}/{failed}/resume") == [202] + [409] * 19
    assert _concurrent_posts(live.port, f"/v1/{table}/{pending}/cancel") == [202] + [409] * 19
    with live.app.state.sessionmaker() as session:
        assert session.get(record_type, failed).state == "PENDING"
        assert session.get(record_type, pending).state == "CANCELLED"


# --- a blank token refuses to start ----------------------------------------------------------------------------------


def test_a_blank_token_refuses_to_start(tmp_path: Path) -> None:
    for blank in ("        ", "\t\t\t\t\t\t\t\t\t", "  short  "):
        with pytest.raises(ValidationError, match="api_token"):
            Settings(workdir=tmp_path, api_token=blank)  # type: ignore[arg-type]
    env = {**os.environ, "SCALESWEEP_API_TOKEN": "          ", "SCALESWEEP_WORKDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "scalesweep_cli", "serve", "--port", str(free_port())], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "SCALESWEEP_API_TOKEN" in lines[0] and "blank" in lines[0], done.stderr


# --- no query string in the access log -------------------------------------------------------------------------------


def test_query_strings_are_redacted_from_the_access_log(settings: Settings) -> None:
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    server = LiveServer(settings, lifespan="on", access_log=True)
    handler = Collect()
    logging.getLogger("uvicorn.access").addHandler(handler)
    try:
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request("GET", "/v1/sweeps?token=s3cret-in-the-url&limit=5")
        assert conn.getresponse().status == 200
        conn.close()
        deadline = time.time() + 5
        while not messages and time.time() < deadline:
            time.sleep(0.05)
    finally:
        logging.getLogger("uvicorn.access").removeHandler(handler)
        server.stop()
    line = next(m for m in messages if "/v1/sweeps" in m)
    assert "s3cret" not in line and "/v1/sweeps?[redacted]" in line, messages


# --- 405 says what is allowed; HEAD wherever GET ---------------------------------------------------------------------


def test_405_lists_the_allowed_methods_and_head_is_served(api: TestClient) -> None:
    r = api.post("/v1/health")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD"
    assert r.headers["content-type"] == "application/problem+json"
    r = api.put("/v1/sweeps", headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"
    r = api.delete("/v1/sweeps/sw-0123456789ab/cancel", headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == "POST"

    for path in ("/v1/sweeps", "/v1/health", "/v1/transfers", "/openapi.json"):
        get, head = api.get(path), api.head(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"]
    assert api.head("/v1/sweeps/sw-nope").status_code == 404


# --- malformed JSON is one 400; a body that is not JSON is 415 -------------------------------------------------------


def test_malformed_json_is_400_and_other_content_types_are_415(api: TestClient) -> None:
    json_headers = {**AUTH, "Content-Type": "application/json"}
    for body in ('{"name": "x",', "{'name': 'x'}", "[" * 100_000 + "]" * 100_000, "\xff\xfe"):
        r = api.post("/v1/sweeps", content=body.encode("utf-8", "surrogateescape"), headers=json_headers)
        assert r.status_code == 400, (body[:20], r.status_code, r.text[:300])
        problem = r.json()
        assert r.headers["content-type"] == "application/problem+json" and problem["title"] == "Bad Request"
        assert problem["detail"].startswith("malformed JSON body"), problem
    r = api.post("/v1/sweeps", content=json.dumps(SWEEP), headers={**AUTH, "Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json()["title"] == "Unsupported Media Type" and "text/plain" in r.json()["detail"]
    utf8 = {**AUTH, "Content-Type": "application/json; charset=utf-8"}
    r = api.post("/v1/sweeps", content=json.dumps(SWEEP), headers=utf8)
    assert r.status_code == 201, r.text
    assert api.post("/v1/sweeps/sw-nope/cancel", headers=AUTH).status_code == 404  # no body, no content type needed


# --- the docs pages work offline -------------------------------------------------------------------------------------


def test_docs_and_redoc_assets_are_served_by_the_service(api: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = api.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert "cdn." not in html.text and "fonts.googleapis" not in html.text, page
        assets = [part.split('"')[0] for part in html.text.split('src="')[1:] + html.text.split('href="')[1:]]
        local = [a for a in assets if a.startswith("/")]
        assert local and not [a for a in assets if a.startswith("http")], (page, assets)
        for asset in local:
            r = api.get(asset)
            assert r.status_code == 200 and len(r.content) > 1000, asset
    assert "SwaggerUIBundle" in api.get("/docs/assets/swagger-ui-bundle.js").text
    assert "Redoc" in api.get("/docs/assets/redoc.standalone.js").text
