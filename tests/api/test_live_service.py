"""A live service (uvicorn on loopback, its job queue on) runs registered trainers through real drivers and Ray:
no process it starts sees its secrets, a FAILED sweep and its trials say why, and `scalesweep remote` reads it
all through the real CLI entry point (list, trials, best, resume, cancel, fits as a table)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import scalesweep_cli
from api.service import Settings

from .conftest import TOKEN, ServiceStudy

# The shared service's study (tests/api/conftest.py) runs three drivers for this module, each starting its own Ray,
# and two for the others: minutes on a shared 2-core machine, paid by whichever module asks first.
pytestmark = pytest.mark.timeout(1800)


@dataclass
class Live:
    url: str
    settings: Settings
    dump: Path
    good: str
    bad: str
    transfer: str
    bodies: dict[str, Any]


@pytest.fixture(scope="module")
def live(service_study: ServiceStudy) -> Live:
    """This module's jobs on the shared service: a command sweep that succeeds, one whose trainer fails, and a
    transfer of the first to two rungs."""
    s = service_study
    return Live(s.url, s.settings, s.dump, s.good, s.bad, s.transfer, s.bodies)


def test_no_process_the_service_starts_can_read_its_secrets(live: Live) -> None:
    # Issue 17 item 1: the token reached the trainer, the driver and Ray workers (/proc/<pid>/environ).
    seen = json.loads(live.dump.read_text())
    processes = [{"cmdline": "env_trainer.py", "environ": seen["environ"]}, *seen["ancestors"]]
    cmdlines = [str(p["cmdline"]) for p in processes]
    assert any("scalesweep_cli" in c for c in cmdlines), cmdlines  # the driver itself was checked
    assert len(processes) >= 3, cmdlines  # the trainer, its Ray worker, ..., the driver
    for proc in processes:
        env = proc["environ"]
        assert isinstance(env, dict)
        leaked = sorted(k for k, v in env.items() if TOKEN in v or v == live.settings.db_url
                        or k in ("SCALESWEEP_API_TOKEN", "SCALESWEEP_DATABASE_URL"))
        assert not leaked, f"{proc['cmdline']} holds {leaked}"
    assert seen["environ"]["ENV_TRAINER_STOP_AT"] == str(os.getpid())  # the registry's fixed env reached it


def test_a_failed_sweep_and_its_trials_say_why(live: Live) -> None:
    # `error` says why in words (not the driver log's last lines, which may be an ASCII rank table), per trial too.
    failed = live.bodies["bad"]
    assert failed["state"] == "FAILED"
    assert "exited with 3" in failed["error"] and "CUDA out of memory" in failed["error"], failed["error"]
    assert failed["error"].startswith("no point was scored on every seed: 1 of 1 trial attempts FAILED")
    trials = httpx.get(f"{live.url}/v1/sweeps/{live.bad}/trials", timeout=60).json()["data"]
    assert trials and all("exited with 3" in (t["error"] or "") for t in trials), trials
    good = httpx.get(f"{live.url}/v1/sweeps/{live.good}/trials", timeout=60).json()["data"]
    assert [t["error"] for t in good] == [None]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = scalesweep_cli.main(["remote", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_remote_list_trials_best_resume_with_server_after_the_verb(live: Live, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", TOKEN)
    monkeypatch.delenv("SCALESWEEP_SERVER", raising=False)
    code, out, _ = _cli(capsys, "list", "--server", live.url)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == ["id", "state", "name", "owner", "progress", "created"]
    assert any(line.startswith(live.good) and " SUCCEEDED " in line for line in lines), out
    assert any(line.startswith(live.bad) and " FAILED " in line for line in lines), out
    code, out, _ = _cli(capsys, "--server", live.url, "list", "--state", "FAILED", "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)["data"]] == [live.bad]
    code, out, _ = _cli(capsys, "list", "--transfers", "--server", live.url)
    assert code == 0 and live.transfer in out and live.good in out

    code, out, _ = _cli(capsys, "trials", live.bad, "--server", live.url)
    row = out.splitlines()[2]
    assert code == 0 and "K=3,gamma=0.15" in row and "FAILED" in row and "exited with 3" in row, out
    code, out, _ = _cli(capsys, "trials", live.good, "--json", "--server", live.url)
    assert code == 0 and json.loads(out)["data"][0]["fd"] == {"2": 28.0, "4": 26.0}

    code, out, _ = _cli(capsys, "best", live.good, "--server", live.url)
    assert code == 0 and out.splitlines()[0] == f"{live.good} SUCCEEDED: chosen K=3, gamma=0.15", out
    assert "K=3,gamma=0.15" in out.splitlines()[-1]  # the rank table's one point
    code, _, err = _cli(capsys, "best", live.bad, "--server", live.url)
    assert code == 2 and "409 Conflict" in err and len(err.strip().splitlines()) == 1

    code, out, _ = _cli(capsys, "resume", live.bad, "--server", live.url)
    assert (code, out.strip()) == (0, f"{live.bad}: PENDING (resumed)")
    code, out, _ = _cli(capsys, "cancel", live.bad, "--server", live.url)
    assert (code, out.strip()) == (0, f"{live.bad}: CANCELLED")
    code, _, err = _cli(capsys, "resume", live.good, "--server", live.url)
    assert code == 2 and "only FAILED or CANCELLED" in err


def test_remote_fits_prints_tables_and_json_on_request(live: Live, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert live.bodies["transfer"]["state"] == "SUCCEEDED", live.bodies["transfer"]["error"]
    code, out, _ = _cli(capsys, "fits", live.transfer, "--server", live.url, "--timeout", "300")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith(f"transfer {live.transfer}") and "K=3" in lines[0]
    header = next(i for i, line in enumerate(lines) if line.split() == ["rung", "parameters"])
    # The learned text encoder's size basis: cpu-xs 283,948 and cpu-s 951,052 trainable parameters.
    assert lines[header + 2].split()[:2] == ["cpu-xs", "283948"]
    assert lines[header + 3].split()[:2] == ["cpu-s", "951052"]
    assert not any(line.lstrip().startswith("{") for line in lines)  # tables, not a JSON dump
    code, out, _ = _cli(capsys, "fits", live.transfer, "--json", "--server", live.url, "--timeout", "300")
    doc = json.loads(out)
    assert code == 0 and set(doc["rungs"]) == {"cpu-xs", "cpu-s"} and "fits" in doc
    for metric, fit in doc["fits"].items():  # every metric is in the table: a fitted row or the reason it is not
        assert metric in "\n".join(lines)
        if "arms" in fit:
            assert any(line.startswith(metric) and "periodic" in line for line in lines)
    # Time to best is finite and positive for every succeeded run, so two rungs always give it a fit (flagged
    # non-identifiable: two points, two parameters): a transfer whose every fit is refused fails here.
    assert set(doc["fits"]["time_to_best"]["arms"]) == {"periodic", "adamw"}, doc["fits"]["time_to_best"]


def test_one_size_basis_for_the_sweep_export_and_the_transfer(live: Live) -> None:
    # Two ways of counting once gave cpu-s 1,012,492 parameters in the sweep export and 951,052 in the transfer.
    export = httpx.get(f"{live.url}/v1/sweeps/{live.good}/export", params={"rung": "cpu-s", "format": "json"},
                       timeout=300)  # the first export counts parameters on a loaded machine: seconds
    assert export.status_code == 200, export.text
    target = export.json()["target"]
    fits = httpx.get(f"{live.url}/v1/transfers/{live.transfer}/fits", timeout=300).json()
    assert target["parameters"] == fits["rungs"]["cpu-s"] == 951_052  # the learned encoder's count, both times
    assert target["size_basis"] == fits["size_basis"] and "learned text encoder" in fits["size_basis"]
    transfer_export = httpx.get(f"{live.url}/v1/transfers/{live.transfer}/export",
                                params={"rung": "cpu-m", "format": "json"}, timeout=300).json()["target"]
    assert transfer_export["size_basis"] == fits["size_basis"]
    from sweeper.transfer._plan import _rung_shape

    assert transfer_export["parameters"] == _rung_shape("cpu-m", {"text_encoder": "learned"})[1]
