"""`api.client.ScalesweepClient` and `scalesweep remote` over real HTTP: a uvicorn server in a thread, without the
app's lifespan (so no driver is ever started; sweeps stay PENDING unless cancelled)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml

import scalesweep_cli
from api.client import ApiError, ScalesweepClient
from api.service import Settings, create_app

from .conftest import TOKEN, free_port

SPEC = {"name": "tiny", "rung": "cpu-xs", "horizon": 20, "search": {"method": "grid", "space": {"K": [2, 3]}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server for the module: creating an app's MLflow store costs seconds (docs/design.md)."""
    settings = Settings(workdir=tmp_path_factory.mktemp("client") / "work", api_token=TOKEN)
    port = free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def client(server: str) -> Iterator[ScalesweepClient]:
    with ScalesweepClient(server, token=TOKEN, user="bob") as c:
        yield c


def test_client_round_trip_on_sweeps(client: ScalesweepClient, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    sweep = client.submit_sweep(spec_file, idempotency_key="k-1")
    assert sweep.state == "PENDING" and sweep.owner == "bob" and sweep.spec["search"]["space"]["K"] == [2, 3]
    assert client.submit_sweep(SPEC, idempotency_key="k-1").id == sweep.id  # the key returns the first sweep
    other = client.submit_sweep({**SPEC, "name": "other"})
    assert [s.id for s in client.list_sweeps().data][:2] == [other.id, sweep.id]  # newest first
    page = client.list_sweeps(limit=1)
    assert page.count == 1 and client.list_sweeps(limit=1, cursor=page.next_cursor).data[0].id == sweep.id
    assert client.get_sweep(sweep.id).name == "tiny"
    assert client.sweep_trials(sweep.id).count == 0
    assert client.cancel_sweep(sweep.id).state == "CANCELLED"
    assert sweep.id in [s.id for s in client.list_sweeps(state="CANCELLED").data]
    assert other.id not in [s.id for s in client.list_sweeps(state="CANCELLED").data]
    snapshots = list(client.follow(sweep.id, interval=0.01))
    assert [s.state for s in snapshots] == ["CANCELLED"]  # already terminal: one snapshot, then the iterator ends
    assert client.wait(sweep.id).state == "CANCELLED"
    assert client.resume_sweep(sweep.id).state == "PENDING"


def test_errors_are_one_exception_with_the_problem_fields(client: ScalesweepClient, server: str) -> None:
    with pytest.raises(ApiError) as missing:
        client.get_sweep("sw-nope")
    assert (missing.value.status, missing.value.title) == (404, "Not Found")
    assert "sw-nope" in missing.value.detail
    with pytest.raises(ApiError) as invalid:
        client.submit_sweep({**SPEC, "colour": "red"})
    assert invalid.value.status == 422 and [e["field"] for e in invalid.value.errors] == ["colour"]
    sweep = client.submit_sweep(SPEC)
    with pytest.raises(ApiError) as conflict:
        client.sweep_best(sweep.id)
    assert conflict.value.status == 409 and "no point scored" in conflict.value.detail
    with ScalesweepClient(server) as anonymous, pytest.raises(ApiError) as unauthorized:
        anonymous.submit_sweep(SPEC)
    assert unauthorized.value.status == 401 and "bearer" in unauthorized.value.detail
    with pytest.raises(ApiError) as slow:  # still PENDING when the timeout passes
        list(client.follow(sweep.id, interval=0.01, timeout=0.05))
    assert slow.value.status is None and "still PENDING" in slow.value.detail
    with ScalesweepClient(f"http://127.0.0.1:{free_port()}", timeout=2) as nowhere, pytest.raises(ApiError) as down:
        nowhere.health()
    assert down.value.status is None and down.value.title == "Service Unreachable"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = scalesweep_cli.main(["remote", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_remote_cli_submits_follows_and_cancels(server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", TOKEN)
    monkeypatch.setenv("SCALESWEEP_SERVER", server)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    code, out, _ = _cli(capsys, "submit", str(spec_file))
    assert code == 0 and out.startswith("submitted sw-")
    sweep_id = out.split()[1]
    before = {s.id for s in ScalesweepClient(server).list_sweeps(state="PENDING", limit=200).data}
    code, out, _ = _cli(capsys, "status", sweep_id)
    assert (code, out.strip()) == (0, f"{sweep_id} PENDING: trials 0 done, 0 running, 0 failed of 0")

    # The follower's first read of its sweep, which it prints as PENDING; the other user cancels after it (under
    # load the cancel could otherwise land first, and the follower would never see the sweep PENDING).
    first_read = threading.Event()
    read = ScalesweepClient.get_sweep

    def reading(self: ScalesweepClient, sweep: str) -> Any:
        found = read(self, sweep)
        if sweep not in before:
            first_read.set()
        return found

    monkeypatch.setattr(ScalesweepClient, "get_sweep", reading)

    def cancel_the_next_sweep() -> None:  # what another user does while this one follows
        with ScalesweepClient(server, token=TOKEN) as other:
            for _ in range(200):
                pending = [s for s in other.list_sweeps(state="PENDING").data if s.id not in before]
                if pending:
                    first_read.wait(timeout=120)  # then cancel anyway: the assertions below say what was seen
                    other.cancel_sweep(pending[0].id)
                    return
                time.sleep(0.05)

    canceller = threading.Thread(target=cancel_the_next_sweep)
    canceller.start()
    code, out, _ = _cli(capsys, "submit", str(spec_file), "--follow", "--interval", "0.1")
    canceller.join()
    lines = out.strip().splitlines()
    assert code == 130  # followed to the end, and it did not succeed
    assert lines[0].startswith("submitted sw-") and "PENDING" in lines[1] and lines[-1].endswith(
        "CANCELLED: trials 0 done, 0 running, 0 failed of 0")
    code, out, _ = _cli(capsys, "cancel", sweep_id)
    assert (code, out.strip()) == (0, f"{sweep_id}: CANCELLED")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["status", "sw-nope"], "404 Not Found: no sweep 'sw-nope'"),
        (["cancel", "tr-nope"], "404 Not Found"),
        (["export", "--sweep", "sw-x"], "--sweep needs --rung"),
        (["export"], "give a TRANSFER_ID or --sweep SWEEP_ID"),
        (["submit", "no-such-file.yaml"], "no such file: no-such-file.yaml"),
        (["transfer", "sw-nope", "--rungs", "cpu-s", "--timing-steps", "10001"],
         "--timing-steps: Input should be less than or equal to 10000 (given 10001)"),
        (["transfer", "sw-nope", "--rungs", "cpu-s", "--timing-warmup", "0"],
         "--timing-warmup: Input should be greater than or equal to 1 (given 0)"),
    ],
)
def test_remote_cli_errors_are_one_line(server: str, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", TOKEN)
    code, out, err = _cli(capsys, "--server", server, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_remote_cli_without_service_or_token_is_one_line(server: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALESWEEP_API_TOKEN", raising=False)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(SPEC))
    code, _, err = _cli(capsys, "--server", server, "submit", str(spec_file))
    assert code == 2 and err.strip() == ("scalesweep remote submit: error: 401 Unauthorized: missing bearer token: "
                                         "send 'Authorization: Bearer <SCALESWEEP_API_TOKEN>'")
    monkeypatch.setenv("SCALESWEEP_SERVER", f"http://127.0.0.1:{free_port()}")
    code, _, err = _cli(capsys, "status", "sw-x")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "Service Unreachable: cannot connect to" in err and "Connection refused" in err
