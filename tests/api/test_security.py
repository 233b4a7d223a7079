"""A token is not a shell: REST sweeps run only registered trainers, no process the service starts can read its
secrets, reads redact trainer environments, bounded and finite input, trusted hosts (docs/security.md)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from api.service import Settings, create_app
from api.service.db import SweepRecord

from .conftest import AUTH, TOKEN, seeded_workdir

HERE = Path(__file__).resolve().parent
SPEC: dict[str, Any] = {"name": "sec", "rung": "cpu-xs", "horizon": 20, "search": {"space": {"K": [2, 3]}}}


def _registry(path: Path, dump: Path) -> Path:
    base = [sys.executable, str(HERE / "env_trainer.py"), "--progress", "{progress_file}", "--eval-steps",
            "{eval_steps}", "--dump", str(dump)]
    path.write_text(yaml.safe_dump({"trainers": {
        "envdump": {"command": base, "env": {"ENV_TRAINER_STOP_AT": str(os.getpid())}},
        "broken": {"command": [*base, "--fail"], "description": "exits 3 with a CUDA-like stderr"},
    }}))
    return path


@pytest.fixture
def api(tmp_path: Path, empty_mlflow_db: Path) -> Iterator[TestClient]:
    # a copy of the session's empty MLflow store: MLflow's migrations per test cost 1-2 s of each of 30 tests here
    settings = Settings(workdir=seeded_workdir(tmp_path / "work", empty_mlflow_db), api_token=TOKEN,  # type: ignore[arg-type]
                        trainers=_registry(tmp_path / "trainers.yaml", tmp_path / "dump.json"))
    yield TestClient(create_app(settings), raise_server_exceptions=False)  # no lifespan: nothing is launched


def _refused(r: Any, field: str) -> str:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["field"] == field, r.json()
    return str(r.json()["detail"])


def test_a_free_form_command_over_rest_is_refused_naming_the_field(api: TestClient) -> None:
    # A free-form command from a bearer token would run `id; env` on the host: only registered trainers may run.
    shell = {**SPEC, "backend": {"name": "command", "command": ["sh", "-c", "id; env"]}}
    detail = _refused(api.post("/v1/sweeps", json=shell, headers=AUTH), "backend.command")
    assert "SCALESWEEP_TRAINERS" in detail and "backend.trainer" in detail and "scalesweep sweep run" in detail
    with_env = {**SPEC, "backend": {"name": "command", "trainer": "envdump", "env": {"LD_PRELOAD": "/tmp/x.so"}}}
    _refused(api.post("/v1/sweeps", json=with_env, headers=AUTH), "backend.env")
    with_cwd = {**SPEC, "backend": {"name": "command", "trainer": "envdump", "cwd": "/"}}
    _refused(api.post("/v1/sweeps", json=with_cwd, headers=AUTH), "backend.cwd")
    unknown = {**SPEC, "backend": {"name": "command", "trainer": "nope"}}
    detail = _refused(api.post("/v1/sweeps", json=unknown, headers=AUTH), "backend.trainer")
    assert "['broken', 'envdump']" in detail
    cluster = {**SPEC, "execution": {"ray_address": "attacker.example:6379"}}
    _refused(api.post("/v1/sweeps", json=cluster, headers=AUTH), "execution.ray_address")
    assert api.get("/v1/sweeps").json()["count"] == 0  # nothing was stored
    ok = {**SPEC, "backend": {"name": "command", "trainer": "envdump"}}
    created = api.post("/v1/sweeps", json=ok, headers=AUTH)
    assert created.status_code == 201, created.text
    assert created.json()["spec"]["backend"]["trainer"] == "envdump"
    assert created.json()["spec"]["backend"]["command"] is None  # the record holds the name, not the command
    # The driver's spec, written once at submission: the registry's command and the service's tracking store.
    jobs = api.app.state.jobs  # type: ignore[attr-defined]
    driver = json.loads((jobs.settings.workdir.resolve() / "sweeps" / created.json()["id"] / "spec.yaml").read_text())
    assert driver["backend"]["trainer"] == "envdump" and driver["backend"]["command"][1].endswith("env_trainer.py")
    assert driver["tracking"]["tracking_uri"] == jobs.settings.tracking_uri


def test_without_a_registry_no_trainer_runs_over_rest(settings: Settings) -> None:
    api = TestClient(create_app(settings), raise_server_exceptions=False)
    r = api.post("/v1/sweeps", json={**SPEC, "backend": {"name": "command", "trainer": "envdump"}}, headers=AUTH)
    assert "none is registered (the operator sets SCALESWEEP_TRAINERS)" in _refused(r, "backend.trainer")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"search": {"space": {"gamma": [float("inf")]}}}, "search.space.gamma"),
        ({"search": {"space": {"K": [1e30]}}}, "search"),
        ({"horizon": 1e30}, "horizon"),
        ({"horizon": 10**12}, "horizon"),
        ({"trial": {"eval": {"fd_samples": 10**12}}}, "trial"),
        ({"trial": {"batch_size": float("nan")}}, "trial"),
        ({"execution": {"cpus_per_trial": 1e9}}, "execution.cpus_per_trial"),
        ({"execution": {"cpus_per_trial": float("inf")}}, "execution.cpus_per_trial"),
        ({"seeds": list(range(101))}, "seeds"),
        ({"seeds": [2**40]}, "seeds"),
        ({"search": {"space": {"K": [3]}, "optimizer": {"lr": float("inf")}}}, "search"),
        ({"baselines": [{"arm": "adamw", "optimizer": {"lr": 1e6}}]}, "baselines[0]"),
        ({"search": {"space": {"K": list(range(1, 120)), "gamma": [0.1 + i / 1000 for i in range(100)]}}},
         "search"),
        ({"baselines": [{"arm": "adamw", "horizon": 10**12}]}, "baselines[0].horizon"),
        ({"baselines": [{"arm": "adamw", "lr_factors": [1e6]}]}, "baselines[0]"),
        ({"confirm": {"top": 2, "seeds": [2**70]}}, "confirm.seeds"),
        ({"selection": {"bootstrap_seed": 2**70}}, "selection.bootstrap_seed"),
    ],
)
def test_numbers_are_finite_and_bounded_with_the_field_named(api: TestClient, change: dict[str, Any],
                                                             field: str) -> None:
    # Unchecked, Infinity and 1e30 would be accepted (201) and the API would show them as null.
    body = json.dumps({**SPEC, **change})  # Python writes Infinity/NaN, as a hostile client may
    r = api.post("/v1/sweeps", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"].startswith(field), r.json()


def test_transfer_numbers_are_bounded() -> None:
    from sweeper import TransferSpec

    for bad in ({"steps": 10**12}, {"horizon_factor": float("inf")}, {"seeds": [-1]},
                {"trial": {"eval": {"fd_samples": float("inf")}}}):
        with pytest.raises(ValueError, match=r"steps|horizon_factor|seeds|trial"):
            TransferSpec.model_validate({"name": "t", "sweep": "x", **bad})


def test_reads_redact_trainer_environments(api: TestClient) -> None:
    # Reads are open to every token holder, so a trainer's backend.env values (secrets, often) never appear in them;
    # a record stored before trainers were required may still hold a free-form command and its environment.
    spec = {**SPEC, "backend": {"name": "command", "command": ["train"], "env": {"WANDB_API_KEY": "s3cret-42"}}}
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        session.add(SweepRecord(id="sw-old", name="old", state="FAILED", spec=spec, owner="x"))
        session.commit()
    for path in ("/v1/sweeps", "/v1/sweeps/sw-old"):
        text = api.get(path).text
        assert "s3cret-42" not in text and "WANDB_API_KEY" in text and "<redacted>" in text
    # ...and resuming it does not run the free-form command: the driver never starts.
    assert api.post("/v1/sweeps/sw-old/resume", headers=AUTH).status_code == 202
    jobs = api.app.state.jobs  # type: ignore[attr-defined]
    jobs.tick()
    record = api.get("/v1/sweeps/sw-old").json()
    assert record["state"] == "FAILED" and "only registered trainers" in record["error"]


def test_mlflow_spec_json_is_redacted(tmp_path: Path) -> None:
    from sweeper import SweepSpec
    from sweeper.ledger import SweepLedger

    spec = SweepSpec.model_validate({**SPEC, "backend": {"name": "command", "command": ["train", "{K}"],
                                                         "env": {"HF_TOKEN": "hf_s3cret"}}})
    ledger = SweepLedger(f"sqlite:///{tmp_path / 'mlflow.db'}", "redact")
    ledger.ensure_store()
    run_id = ledger.create_parent(spec, "sec-1", tmp_path)
    stored = ledger.spec_dict(run_id)
    assert stored["backend"]["env"] == {"HF_TOKEN": "<redacted>"} and stored["backend"]["command"] == ["train", "{K}"]


def test_trusted_hosts(tmp_path: Path, empty_mlflow_db: Path) -> None:
    settings = Settings(workdir=seeded_workdir(tmp_path / "work", empty_mlflow_db), api_token=TOKEN,  # type: ignore[arg-type]
                        allowed_hosts="localhost, api.internal")
    api = TestClient(create_app(settings), raise_server_exceptions=False)
    refused = api.get("/v1/health")  # TestClient's Host is "testserver"
    assert refused.status_code == 400 and refused.headers["content-type"] == "application/problem+json"
    assert "'testserver' is not one this service answers" in refused.json()["detail"]
    assert api.get("/v1/health", headers={"Host": "evil.example"}).status_code == 400
    assert api.get("/v1/health", headers={"Host": "api.internal"}).status_code == 200
    assert api.get("/v1/health", headers={"Host": "localhost:8000"}).status_code == 200
    subdomains = TestClient(create_app(Settings(workdir=seeded_workdir(tmp_path / "w3", empty_mlflow_db),  # type: ignore[arg-type]
                                                api_token=TOKEN, allowed_hosts="*.example.org,[::1]")))
    assert subdomains.get("/v1/health", headers={"Host": "api.example.org"}).status_code == 200
    assert subdomains.get("/v1/health", headers={"Host": "[::1]:8000"}).status_code == 200
    assert subdomains.get("/v1/health", headers={"Host": "example.org.evil"}).status_code == 400
    open_api = TestClient(create_app(Settings(
        workdir=seeded_workdir(tmp_path / "w2", empty_mlflow_db), api_token=TOKEN)))  # type: ignore[arg-type]
    assert open_api.get("/v1/health").status_code == 200  # the default '*' answers any Host
