"""An app on a fresh workdir (SQLite records and MLflow store in tmp) for each test, and one live service with a
real study that the live-service, load and transfer tests share (`service_study`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml
from fastapi.testclient import TestClient

from api.client import ScalesweepClient
from api.service import Settings, create_app
from trials.core.proctree import free_port

from ..conftest import TINY_TRIAL

TOKEN = "test-token-123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HERE = Path(__file__).resolve().parent


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


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow SQLite store made once per session, by the service's own code (`create_app`'s): creating
    one runs MLflow's migrations (about 1 s warm, 3 s cold), an up-to-date copy opens in about 0.07 s."""
    from api.service.app import _create_tracking_store

    path = tmp_path_factory.mktemp("mlflow-empty") / "mlflow.db"
    _create_tracking_store(f"sqlite:///{path}")
    return path


def seeded_workdir(workdir: Path, empty_db: Path) -> Path:
    """`workdir` with a copy of the empty MLflow store where the service's default store goes
    (`workdir/mlflow.db`): each test keeps its own store, without paying for MLflow's migrations."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(empty_db, workdir / "mlflow.db")
    return workdir


@pytest.fixture
def settings(tmp_path: Path, empty_mlflow_db: Path) -> Settings:
    return Settings(workdir=seeded_workdir(tmp_path / "work", empty_mlflow_db), api_token=TOKEN)  # type: ignore[arg-type]


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


# --- one live service and one study, shared by test_live_service, test_load and test_transfers ----------------

# The registered trainer the security tests read: `envdump` dumps its environment and its ancestors' to a file and
# reports a made-up FD; `broken` exits 3 with a CUDA-OOM line. No training: each of its jobs costs a driver and Ray.
COMMAND_SPEC: dict[str, Any] = {
    "name": "live", "rung": "cpu-xs", "horizon": 4, "eval_steps": [2, 4], "baselines": [], "seeds": [0],
    "search": {"space": {"K": [3], "gamma": [0.15]}}, "retries": {"max_retries": 0},
    "execution": {"concurrency": 1, "num_cpus": 1},
    "backend": {"name": "command", "trainer": "envdump", "poll_s": 0.05},
    "trial": {"text_encoder": "learned"},  # not the default encoder: the study's size basis must follow it
}
SHORT_TIMING = {"steps": 4, "warmup": 1}  # the transfers' timing stage, shortened (default: 20 steps after 5)

# The real tiny sweep (built-in trainer: real Ray, MLflow and torch): one point and AdamW.
REAL_SWEEP: dict[str, Any] = {
    "name": "api-tiny", "rung": "cpu-xs", "horizon": 6, "search": {"space": {"K": [3], "gamma": [0.25]}},
    "baselines": ["adamw"], "backend": {"name": "builtin", "checkpoints": False},
    "execution": {"concurrency": 2, "num_cpus": 2}, "trial": TINY_TRIAL, "tracking": {"experiment": "api-tiny"},
}


@dataclass
class ServiceStudy:
    """What the shared service ran, by the service's ids. Each module asks its own questions of its own jobs."""

    server: LiveServer
    url: str
    settings: Settings
    dump: Path  # the `envdump` trainer's dump from the command sweep (not the command transfer's)
    good: str  # the command sweep that succeeds
    bad: str  # the command sweep whose trainer fails
    transfer: str  # the command sweep's transfer to cpu-xs and cpu-s
    bodies: dict[str, Any]  # the three command jobs' records when they ended
    sweep: str  # the real sweep (REAL_SWEEP)
    one_rung: str  # the real sweep's transfer to cpu-xs only (periodic and AdamW, seed 0)


def wait_job(client: httpx.Client, path: str, timeout: float = 900) -> dict[str, Any]:
    deadline = time.time() + timeout
    body: dict[str, Any] = {}
    while time.time() < deadline:
        body = client.get(path).json()
        if body["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return body
        time.sleep(0.5)
    raise AssertionError(f"{path} still {body.get('state')}: {body}")


@pytest.fixture(scope="session")
def service_study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceStudy]:
    """A live service (uvicorn in a thread, its job queue on, drivers as processes) that runs, once per session,
    the command sweeps and transfer of test_live_service and the real sweep and one-rung transfer of test_load and
    test_transfers. Four studies through four services once took 4-6 minutes of the suite; this is one service.
    It keeps running for the tests (test_transfers starts its own transfer of the real sweep on it)."""
    tmp = tmp_path_factory.mktemp("service")
    dump = tmp / "dump.json"
    base = [sys.executable, str(HERE / "env_trainer.py"), "--progress", "{progress_file}", "--eval-steps",
            "{eval_steps}", "--dump", str(dump)]
    registry = tmp / "trainers.yaml"
    registry.write_text(yaml.safe_dump({"trainers": {
        "envdump": {"command": base, "env": {"ENV_TRAINER_STOP_AT": str(os.getpid())}},
        "broken": {"command": [*base, "--fail"]},
    }}))
    # Two jobs at once (the default is one): each driver spends seconds starting its Ray, which the other's
    # work fills. Nothing here depends on the order the queue starts them in.
    settings = Settings(workdir=tmp / "work", api_token=TOKEN, trainers=registry,  # type: ignore[arg-type]
                        poll_interval_s=0.3, max_concurrent_sweeps=2)
    with pytest.MonkeyPatch.context() as mp:
        # The service's environment as `scalesweep serve` has it, plus a copy of the token under another name,
        # while it starts the drivers the security test reads (set for the setup only, not for the session).
        mp.setenv("SCALESWEEP_API_TOKEN", TOKEN)
        mp.setenv("SCALESWEEP_DATABASE_URL", settings.db_url)
        mp.setenv("SOME_COPY_OF_THE_TOKEN", TOKEN)
        server = LiveServer(settings, lifespan="on")
        try:
            with httpx.Client(base_url=server.url, timeout=30) as http, \
                    ScalesweepClient(server.url, token=TOKEN) as client:
                # The queue starts jobs oldest first, two at a time: the real sweep and its transfer (the longest
                # chain) in one slot, the three command jobs in the other.
                real = client.submit_sweep(REAL_SWEEP).id
                good = http.post("/v1/sweeps", json=COMMAND_SPEC, headers=AUTH).json()["id"]
                bad = http.post("/v1/sweeps", json={**COMMAND_SPEC, "name": "broken", "backend": {
                    "name": "command", "trainer": "broken", "poll_s": 0.05}}, headers=AUTH).json()["id"]
                bodies = {"good": wait_job(http, f"/v1/sweeps/{good}")}
                assert bodies["good"]["state"] == "SUCCEEDED", bodies["good"]
                seen = json.loads(dump.read_text())  # the sweep's trainer, before the transfer's overwrite it
                # The transfers time 4 steps after 1 per arm and rung (the default 20 after 5: short trials one at
                # a time before the runs); what the tests read does not depend on how long the timing is.
                created = http.post("/v1/transfers", json={"sweep_id": good, "rungs": ["cpu-xs", "cpu-s"],
                                                           "arms": ["periodic", "adamw"], "timing": SHORT_TIMING},
                                    headers=AUTH)
                assert created.status_code == 201, created.text
                transfer = created.json()["id"]
                sweep = client.wait(real, interval=0.5, timeout=900)
                assert sweep.state == "SUCCEEDED", sweep.error
                # One rung: the fits then carry their reason for not fitting, predict is a 422 (test_load).
                one_rung = client.submit_transfer(real, ["cpu-xs"], arms=["periodic", "adamw"], seeds=[0],
                                                  timing=SHORT_TIMING).id
                bodies["bad"] = wait_job(http, f"/v1/sweeps/{bad}")
                bodies["transfer"] = wait_job(http, f"/v1/transfers/{transfer}")
                done = client.wait_transfer(one_rung, interval=0.5, timeout=900)
                assert done.state == "SUCCEEDED", done.error
            dump.write_text(json.dumps(seen))
        except BaseException:
            server.stop()
            raise
    try:
        yield ServiceStudy(server, server.url, settings, dump, good, bad, transfer, bodies, real, one_rung)
    finally:
        with httpx.Client(base_url=server.url, timeout=30) as http:  # nothing keeps running after the session
            for kind in ("sweeps", "transfers"):
                for job in http.get(f"/v1/{kind}").json()["data"]:
                    if job["state"] in ("PENDING", "RUNNING"):
                        http.post(f"/v1/{kind}/{job['id']}/cancel", headers=AUTH)
        server.stop()
