"""Drivers as Ray Jobs: which path is chosen, what is submitted, and how status, cancel and a refusing cluster are
handled. No cluster runs here, so the job client is a recording stand-in with JobSubmissionClient's method names;
`RayJobs` against a real Ray head is tested with the deployment (tests/deploy/test_deploy.py, `make test-deploy`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from api.service import Settings
from api.service._jobs import JobRunner, RayJobs
from api.service.db import SweepRecord, TransferRecord, make_engine, make_sessionmaker, migrate

from .conftest import TOKEN


class FakeJobClient:
    """Records calls; answers with the statuses it is given."""

    def __init__(self, status: str = "RUNNING", fail: bool = False) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.stopped: list[str] = []
        self.status, self.fail = status, fail

    def submit_job(self, *, entrypoint: str, submission_id: str | None = None,
                   runtime_env: dict[str, Any] | None = None) -> str:
        if self.fail:
            raise ConnectionError("Failed to connect to Ray at address: http://ray-head:8265")
        self.submitted.append({"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env})
        return str(submission_id)

    def get_job_status(self, job_id: str) -> str:
        return self.status

    def stop_job(self, job_id: str) -> bool:
        self.stopped.append(job_id)
        self.status = "STOPPED"
        return True


def _runner(tmp_path: Path, client: FakeJobClient) -> tuple[JobRunner, Any]:
    settings = Settings(workdir=tmp_path, api_token=TOKEN, drivers="ray-job",  # type: ignore[arg-type]
                        ray_address="ray-head:6379")
    engine = make_engine(settings.db_url)
    migrate(engine)
    sessions = make_sessionmaker(engine)
    return JobRunner(settings, sessions, ray_jobs=RayJobs(settings.ray_jobs_address, lambda _: client)), sessions


def test_the_local_path_is_the_default_and_ray_jobs_need_an_address(tmp_path: Path) -> None:
    local = Settings(workdir=tmp_path, api_token=TOKEN, ray_address="ray-head:6379")  # type: ignore[arg-type]
    assert local.drivers == "local"
    assert JobRunner(local, make_sessionmaker(make_engine(local.db_url))).ray_jobs is None
    with pytest.raises(ValidationError, match="SCALESWEEP_RAY_DASHBOARD_URL"):
        Settings(workdir=tmp_path, api_token=TOKEN, drivers="ray-job")  # type: ignore[arg-type]
    derived = Settings(workdir=tmp_path, api_token=TOKEN, drivers="ray-job",  # type: ignore[arg-type]
                       ray_address="ray-head:6379")
    assert derived.ray_jobs_address == "http://ray-head:8265"
    explicit = Settings(workdir=tmp_path, api_token=TOKEN, drivers="ray-job",  # type: ignore[arg-type]
                        ray_dashboard_url="http://10.0.0.5:8265/")
    assert explicit.ray_jobs_address == "http://10.0.0.5:8265"
    assert JobRunner(explicit, make_sessionmaker(make_engine(explicit.db_url))).ray_jobs is not None


def test_jobs_are_submitted_watched_and_stopped_through_the_job_client(tmp_path: Path) -> None:
    client = FakeJobClient()
    runner, sessions = _runner(tmp_path, client)
    with sessions() as session:
        session.add(SweepRecord(id="sw-1", name="s", state="PENDING", spec={"name": "s"}, owner="me"))
        session.add(TransferRecord(id="tr-1", sweep_id="sw-1", state="PENDING", owner="me",
                                   spec={"name": "t", "sweep": str(tmp_path / "sweeps" / "sw-1"), "rungs": ["cpu-xs"]}))
        session.commit()
    runner.tick()  # one slot (max_concurrent_sweeps=1): the older job, the sweep, is submitted
    assert len(client.submitted) == 1
    job = client.submitted[0]
    assert job["entrypoint"].startswith("python -m scalesweep_cli sweep run ")
    assert job["entrypoint"].endswith(f"--workdir {tmp_path.resolve() / 'sweeps' / 'sw-1'}")
    # The job's id, the tag by which a cancel finds every process the job started (trials.core.proctree), and how
    # long Ray waits after its SIGTERM before a SIGKILL (the service's cancel grace, not Ray's 3 s).
    assert job["runtime_env"] == {"env_vars": {"SCALESWEEP_SWEEP_ID": "sw-1", "SCALESWEEP_JOB_TAG": "sw-1",
                                               "RAY_JOB_STOP_WAIT_TIME_S": "30"}}
    with sessions() as session:
        sweep = session.get(SweepRecord, "sw-1")
        assert (sweep.state, sweep.ray_job_id, sweep.pid) == ("RUNNING", job["submission_id"], None)
        assert session.get(TransferRecord, "tr-1").state == "PENDING"  # sweeps and transfers share the limit
        runner.cancel(session, sweep)
        assert client.stopped == [job["submission_id"]] and sweep.state == "CANCELLED"
        assert (tmp_path / "sweeps" / "sw-1" / "cancel").is_file()  # the driver's own stop signal first
    runner.tick()  # the slot is free: the transfer goes out as a transfer driver
    assert client.submitted[1]["entrypoint"].startswith("python -m scalesweep_cli transfer run ")
    client.status = "FAILED"  # the job ended without writing a status file: FAILED, with where to look
    runner.tick()
    with sessions() as session:
        transfer = session.get(TransferRecord, "tr-1")
        assert transfer.state == "FAILED" and "ray job logs" in (transfer.error or "")


def test_a_job_stopped_from_outside_the_service_fails_with_that_cause(tmp_path: Path) -> None:
    client = FakeJobClient()
    runner, sessions = _runner(tmp_path, client)
    with sessions() as session:
        session.add(SweepRecord(id="sw-3", name="s", state="PENDING", spec={"name": "s"}, owner="me"))
        session.commit()
    runner.tick()
    job = client.submitted[0]["submission_id"]
    client.status = "STOPPED"  # `ray job stop`, not the service's cancel: the record is still RUNNING
    runner.tick()
    with sessions() as session:
        record = session.get(SweepRecord, "sw-3")
        assert record.state == "FAILED", record.state
        assert record.error == (f"stopped from outside the service: its Ray job {job} was stopped (STOPPED: `ray "
                                "job stop` or the dashboard); its running trials ended CANCELLED. "
                                "POST /v1/sweeps/sw-3/resume continues it")
        assert runner.resume(session, record) and record.state == "PENDING"  # and it resumes


def test_a_stored_spec_that_no_longer_validates_fails_its_job_and_the_queue_goes_on(tmp_path: Path) -> None:
    """A job queued by an earlier version, stored without its driver's spec file, is validated at launch: a spec
    that is no longer valid fails that job with the field, and the next job still starts."""
    client = FakeJobClient()
    runner, sessions = _runner(tmp_path, client)
    with sessions() as session:
        session.add(TransferRecord(id="tr-9", sweep_id="sw-0", state="PENDING", spec={"name": "t"}, owner="me"))
        session.commit()
    runner.tick()
    with sessions() as session:
        record = session.get(TransferRecord, "tr-9")
        assert record.state == "FAILED" and client.submitted == []
        assert record.error.startswith("could not start the driver: its stored spec is not a valid TransferSpec "
                                       "today: ('sweep',): Field required"), record.error
        session.add(SweepRecord(id="sw-9", name="s", state="PENDING", spec={"name": "s"}, owner="me"))
        session.commit()
    runner.tick()
    assert [job["submission_id"].split("-")[:2] for job in client.submitted] == [["sw", "9"]]


def test_a_cluster_that_refuses_fails_the_job_with_its_reason(tmp_path: Path) -> None:
    runner, sessions = _runner(tmp_path, FakeJobClient(fail=True))
    with sessions() as session:
        session.add(SweepRecord(id="sw-2", name="s", state="PENDING", spec={"name": "s"}, owner="me"))
        session.commit()
    runner.tick()
    with sessions() as session:
        record = session.get(SweepRecord, "sw-2")
        assert record.state == "FAILED"
        assert record.error == ("could not start the driver: Ray Jobs at http://ray-head:8265: submit failed: "
                                "ConnectionError: Failed to connect to Ray at address: http://ray-head:8265")


def test_reconcile_adopts_running_jobs_and_resumes_ended_ones(tmp_path: Path) -> None:
    client = FakeJobClient(status="RUNNING")
    runner, sessions = _runner(tmp_path, client)
    with sessions() as session:
        for rid, job in (("sw-a", "job-a"), ("sw-b", "job-b")):
            session.add(SweepRecord(id=rid, name="s", state="RUNNING", spec={}, owner="me", ray_job_id=job))
        session.commit()
    runner.ray_jobs._client = None  # type: ignore[union-attr]
    statuses = {"job-a": "RUNNING", "job-b": "FAILED"}
    client.get_job_status = statuses.__getitem__  # type: ignore[method-assign]
    runner.reconcile()
    with sessions() as session:
        assert session.get(SweepRecord, "sw-a").state == "RUNNING"  # still running on the cluster: adopted
        assert session.get(SweepRecord, "sw-b").state == "PENDING"  # gone: queued to resume
        # the intent is stored with the record (issue 53, H3), not in the runner's memory
        assert [session.get(SweepRecord, r).resume for r in ("sw-a", "sw-b")] == [False, True]
