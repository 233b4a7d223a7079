"""Issue 53's service rows, each reproduced through the service as a hostile token holder would try it: specs that
validate but fit in no worker's memory (H2), queued work and names without bounds (L2), HTML without its headers
(L3), two services on one work folder (M6), a queued resume lost in a restart (H3), analyses that hold up cheap
reads (M5) and a report rendered on an open read (H1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.service import Settings
from sweeper import trial_memory_bytes

from .conftest import AUTH, TOKEN
from .test_rest_limits import _api


@pytest.fixture
def api(tmp_path: Path, empty_mlflow_db: Path) -> TestClient:
    return _api(tmp_path, empty_mlflow_db)  # no lifespan: nothing is launched, submissions stay PENDING

SPEC: dict[str, Any] = {"name": "bounds", "rung": "cpu-xs", "horizon": 20, "search": {"space": {"K": [2, 3]}}}


def _fields(r: Any) -> list[str]:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    return [e["field"] for e in r.json()["errors"]]


# --- H2: a trial no worker can hold is refused at submission ------------------------------------------------------


def test_the_memory_estimate_counts_parameters_batch_and_pixels() -> None:
    small = trial_memory_bytes({"rung": "cpu-xs"})
    # the default CPU trial: the 0.5 GiB trainer overhead, 6.5 MB of weights and state, 42 MB of activations
    assert 0.5e9 < small < 1e9
    # paper-15b: 15.24e9 parameters x 20 bytes (weights, gradients, AdamW's moments, EMA) alone is 305 GB
    assert trial_memory_bytes({"rung": "paper-15b", "steps": 1}) > 15.24e9 * 20
    # cpu-xs at 4096 px, batch 65,536: 4.2e6 tokens a picture; petabytes of activations
    assert trial_memory_bytes({"rung": "cpu-xs", "batch_size": 65536, "data": {"image_size": 4096}}) > 1e15
    # linear in the batch once the activations dominate
    a, b = (trial_memory_bytes({"rung": "cpu-s", "batch_size": n, "data": {"image_size": 64}}) for n in (256, 512))
    assert 1.8 < (b - 0.6e9) / (a - 0.6e9) < 2.2


def test_a_paper_rung_is_not_offered_over_rest_by_default(api: TestClient) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, "rung": "paper-15b", "horizon": 1}, headers=AUTH)
    assert _fields(r) == ["rung"]
    assert "SCALESWEEP_REST_RUNGS" in r.json()["detail"] and "cpu-xs" in r.json()["detail"]
    r = api.post("/v1/sweeps", json={**SPEC, "baselines": [{"arm": "adamw", "rung": "paper-4b"}]}, headers=AUTH)
    assert _fields(r) == ["baselines[0].rung"]
    assert api.get("/v1/sweeps").json()["count"] == 0


def test_a_trial_over_the_workers_memory_is_refused_naming_fields_and_estimate(
        tmp_path: Path, empty_mlflow_db: Path) -> None:
    # the operator offers every rung: the memory check alone refuses paper-15b at horizon 1
    rungs = "cpu-xs,cpu-s,cpu-m,cpu-l,paper-1.3b,paper-4b,paper-9b,paper-15b"
    api = _api(tmp_path, empty_mlflow_db, rest_rungs=rungs, max_trial_memory_gb=64)
    r = api.post("/v1/sweeps", json={**SPEC, "rung": "paper-15b", "horizon": 1}, headers=AUTH)
    assert _fields(r) == ["rung", "trial.batch_size", "trial.data.image_size"]
    detail = r.json()["detail"]
    assert "15,242,724,160 parameters" in detail and "SCALESWEEP_MAX_TRIAL_MEMORY_GB" in detail
    assert "64.0 GB" in detail
    r = api.post("/v1/sweeps", json={**SPEC, "trial": {"batch_size": 65536, "data": {"image_size": 4096}}},
                 headers=AUTH)
    assert _fields(r)[0] == "rung" and "GB of activations" in r.json()["detail"]
    r = api.post("/v1/sweeps", json={**SPEC, "rung": "paper-15b", "trial": {"batch_size": 65536}}, headers=AUTH)
    assert r.status_code == 422
    assert api.get("/v1/sweeps").json()["count"] == 0
    # the default CPU trial fits
    assert api.post("/v1/sweeps", json=SPEC, headers=AUTH).status_code == 201


def test_a_trial_wider_than_the_workers_is_refused_naming_workers_per_trial(api: TestClient) -> None:
    """Issue 52: a trial on more workers than the cluster has would wait for its placement group forever."""
    import os

    cpus = os.cpu_count() or 1
    r = api.post("/v1/sweeps", json={**SPEC, "execution": {"workers_per_trial": 2 * cpus, "cpus_per_trial": 1},
                                     "trial": {"batch_size": 4 * cpus}}, headers=AUTH)
    assert _fields(r) == ["execution.workers_per_trial"]
    assert f"needs {2 * cpus} CPUs" in r.json()["detail"] and f"the cluster has {cpus} CPUs" in r.json()["detail"]
    assert api.get("/v1/sweeps").json()["count"] == 0


def test_the_default_limit_is_half_this_hosts_memory(settings: Settings) -> None:
    import os

    assert settings.max_trial_memory_bytes == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    with pytest.raises(ValueError, match="unknown rungs"):
        Settings(workdir=settings.workdir, api_token=TOKEN, rest_rungs="cpu-xs,gpt-5")  # type: ignore[arg-type]


def test_an_extend_is_checked_like_a_submission(api: TestClient) -> None:
    from api.service.db import SweepRecord

    sweep = api.post("/v1/sweeps", json=SPEC, headers=AUTH).json()["id"]
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        session.get(SweepRecord, sweep).state = "SUCCEEDED"
        session.commit()
    r = api.post(f"/v1/sweeps/{sweep}/extend", json={**SPEC, "trial": {"batch_size": 65536,
                                                                       "data": {"image_size": 4096}}}, headers=AUTH)
    assert _fields(r)[0] == "rung"


def test_a_transfer_to_a_rung_not_offered_is_refused(api: TestClient, tmp_path: Path) -> None:
    from api.service.db import SweepRecord

    sweep = api.post("/v1/sweeps", json=SPEC, headers=AUTH).json()["id"]
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        record = session.get(SweepRecord, sweep)
        record.state, record.storage_path = "SUCCEEDED", str(tmp_path / "sweep")
        session.commit()
    r = api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": ["cpu-xs", "paper-15b"]}, headers=AUTH)
    assert _fields(r) == ["rungs[1]"]
    r = api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": ["cpu-xs"],
                                        "trial": {"batch_size": 65536, "data": {"image_size": 4096}}}, headers=AUTH)
    assert _fields(r)[0] == "rungs[0]"
    assert api.get("/v1/transfers").json()["count"] == 0


# --- L2: queued work and names are bounded at submission -----------------------------------------------------------


def test_queued_jobs_are_capped_per_owner_and_in_all_with_retry_after(tmp_path: Path, empty_mlflow_db: Path) -> None:
    api = _api(tmp_path, empty_mlflow_db, max_queued_per_owner=3, max_queued_jobs=5)
    codes = [api.post("/v1/sweeps", json={**SPEC, "name": f"q{i}"}, headers=AUTH).status_code for i in range(4)]
    assert codes == [201, 201, 201, 429]
    r = api.post("/v1/sweeps", json={**SPEC, "name": "q9"}, headers=AUTH)
    assert r.status_code == 429 and r.headers["content-type"] == "application/problem+json"
    assert int(r.headers["Retry-After"]) > 0 and "SCALESWEEP_MAX_QUEUED_PER_OWNER" in r.json()["detail"]
    other = {**AUTH, "X-Scalesweep-User": "bob"}
    codes = [api.post("/v1/sweeps", json={**SPEC, "name": f"b{i}"}, headers=other).status_code for i in range(3)]
    assert codes == [201, 201, 429]  # 5 queued in all
    assert "SCALESWEEP_MAX_QUEUED_JOBS" in api.post("/v1/sweeps", json=SPEC, headers=other).json()["detail"]
    # a repeated Idempotency-Key still answers with its job; a cancel frees a place
    first = api.get("/v1/sweeps").json()["data"][-1]["id"]
    assert api.post(f"/v1/sweeps/{first}/cancel", headers=AUTH).status_code == 202
    assert api.post("/v1/sweeps", json={**SPEC, "name": "again"}, headers=AUTH).status_code == 201
    # a resume queues again: counted the same way
    assert api.post(f"/v1/sweeps/{first}/resume", headers=AUTH).status_code == 429
    assert api.get("/v1/sweeps", params={"state": "PENDING"}).json()["count"] == 5


def test_concurrent_submissions_never_pass_the_queue_cap(tmp_path: Path, empty_mlflow_db: Path) -> None:
    """24 submissions of one owner at once, 3 queued at most: the count and the insert are one step (each counted
    before its insert, concurrent ones could all pass a cap of 3)."""
    from concurrent.futures import ThreadPoolExecutor

    api = _api(tmp_path, empty_mlflow_db, max_queued_per_owner=3)
    with ThreadPoolExecutor(24) as pool:  # no lifespan: nothing is launched, every job stays PENDING
        codes = list(pool.map(lambda i: api.post("/v1/sweeps", json={**SPEC, "name": f"c{i}"},
                                                 headers=AUTH).status_code, range(24)))
        assert sorted(codes) == [201] * 3 + [429] * 21, codes
        assert api.get("/v1/sweeps", params={"state": "PENDING"}).json()["count"] == 3


NAMES = [
    ({"tracking": {"experiment": "e" * 501}}, "tracking.experiment", "at most 250"),
    ({"tracking": {"experiment": "a\x00b"}}, "tracking.experiment", "control characters"),
    ({"tracking": {"experiment": "a\nb"}}, "tracking.experiment", "control characters"),
    ({"tags": {"k" * 300: "v"}}, "tags", "at most 250"),
    ({"tags": {"lineage": "v" * 100_000}}, "tags", "at most 1000"),
    ({"tags": {f"t{i}": "v" for i in range(40)}}, "tags", "at most 32"),
    ({"tags": {"bad\nkey": "v"}}, "tags", "control characters"),
]


@pytest.mark.parametrize(("extra", "field", "why"), NAMES)
def test_oversized_or_unprintable_names_and_tags_are_refused(api: TestClient, extra: dict[str, Any], field: str,
                                                            why: str) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, **extra}, headers=AUTH)  # NUL and newline sent as JSON escapes
    assert _fields(r) == [field] and why in r.json()["detail"]
    assert api.get("/v1/sweeps").json()["count"] == 0


# --- L3: every HTML answer carries its security headers -----------------------------------------------------------

HTML_HEADERS = ("content-security-policy", "x-content-type-options", "x-frame-options")


def _html_headers(r: Any) -> None:
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.status_code
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    policy = r.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "base-uri 'none'" in policy


def test_the_docs_pages_carry_the_html_headers_and_json_is_never_sniffed(api: TestClient) -> None:
    for page in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        _html_headers(api.get(page))
    r = api.get("/v1/sweeps")
    assert r.headers["x-content-type-options"] == "nosniff" and "content-security-policy" not in r.headers


@pytest.mark.integration
def test_the_served_reports_carry_the_html_headers(service_study: Any) -> None:
    import httpx

    with httpx.Client(base_url=service_study.url, timeout=120) as http:
        report = http.get(f"/v1/sweeps/{service_study.sweep}/report")
        _html_headers(report)
        assert "script-src 'none'" in report.headers["content-security-policy"]  # a report runs nothing
        _html_headers(http.get(f"/v1/transfers/{service_study.one_rung}/report"))


# --- M6: one service per work folder ---------------------------------------------------------------------------------


def test_a_second_service_on_one_work_folder_refuses_naming_the_holder(settings: Settings) -> None:
    import os
    import socket

    from api.service import LeaderError, create_app

    holder = f"pid {os.getpid()} on host {socket.gethostname()}"
    with TestClient(create_app(settings)) as first:  # started: its job queue runs, the folder is its own
        assert first.get("/v1/health").status_code == 200
        with pytest.raises(LeaderError, match=holder) as refused:
            create_app(settings)  # before it would migrate the stores
        assert "\n" not in str(refused.value) and "SCALESWEEP_WORKDIR" in str(refused.value)
    a, b = create_app(settings), create_app(settings)  # created while none runs: both may be ...
    with TestClient(a):
        with pytest.raises(LeaderError, match=holder), TestClient(b):
            pass  # ... but only one starts
    with TestClient(b) as again:  # the first stopped: the lock went with it
        assert again.get("/v1/health").status_code == 200


# --- H3: a queued resume outlives a restart, and an old status file is no launch's outcome ---------------------------

# What the queue launches in the H3 test: the argument list it was given, written down, then the refusal of a real
# driver started without --resume on a folder that holds its sweep (exit 1, the status file left as it was).
STAND_IN = ("import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n'); "
            "sys.exit(0 if '--resume' in sys.argv else 1)")


def test_a_resume_queued_before_a_restart_is_launched_with_resume_after_it(settings: Settings,
                                                                           tmp_path: Path) -> None:
    import json
    import os
    import sys
    import time

    from api.service import create_app
    from api.service.db import SweepRecord

    before = create_app(settings)  # a service without its queue started: what it queues stays PENDING
    api = TestClient(before, raise_server_exceptions=False)
    ids = [api.post("/v1/sweeps", json={**SPEC, "name": f"r{i}"}, headers=AUTH).json()["id"] for i in range(2)]
    with before.state.sessionmaker() as session:
        for sweep_id in ids:  # two finished sweeps, their drivers' last status SUCCEEDED an hour ago
            record = session.get(SweepRecord, sweep_id)
            folder = settings.workdir.resolve() / "sweeps" / sweep_id
            folder.mkdir(parents=True, exist_ok=True)  # the driver's spec is already there
            (folder / "sweep.json").write_text(json.dumps({"sweep_id": sweep_id, "tracking_uri": "sqlite://",
                                                           "experiment": "e", "parent_run_id": "p"}))
            (folder / "status.json").write_text(json.dumps({"state": "SUCCEEDED", "sweep_id": sweep_id}))
            os.utime(folder / "status.json", (time.time() - 3600,) * 2)
            record.state, record.storage_path = "CANCELLED", str(folder)
        session.commit()
    assert api.post(f"/v1/sweeps/{ids[0]}/resume", headers=AUTH).json()["state"] == "PENDING"
    with before.state.sessionmaker() as session:  # the other one queued without resume (a plain new launch)
        session.get(SweepRecord, ids[1]).state = "PENDING"
        session.commit()
    del api, before  # the service stops; a new one starts on the same folder

    calls = tmp_path / "calls.jsonl"
    after = create_app(settings)
    after.state.jobs.command = lambda record, resume: [sys.executable, "-c", STAND_IN, str(calls), record.id,
                                                       *(["--resume"] if resume else [])]
    with TestClient(after) as api:
        deadline = time.monotonic() + 60
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            states = {i: api.get(f"/v1/sweeps/{i}").json()["state"] for i in ids}
            if all(s not in ("PENDING", "RUNNING") for s in states.values()):
                break
            time.sleep(0.2)
        launched = [json.loads(line) for line in calls.read_text().splitlines()]
        assert sorted(launched) == sorted([[ids[0], "--resume"], [ids[1]]])
        # the resumed one's driver exited 0 without a new status: unknown, not the old SUCCEEDED ...
        assert states == {ids[0]: "SUCCEEDED", ids[1]: "FAILED"}, states
        # ... the one that refused (exit 1) is FAILED, its error the driver's, not the old status file's state
        assert api.get(f"/v1/sweeps/{ids[1]}").json()["error"] == "the driver exited with 1"


# --- M5 and H1: expensive reads in a few slots, cheap reads never behind them ----------------------------------------


def test_n_boot_is_one_of_three_levels_and_a_full_gate_refuses_at_once() -> None:
    from api.service.gate import AnalysisBusy, AnalysisGate
    from api.service.routers.sweeps import _n_boot_level

    assert [_n_boot_level(n) for n in (0, 1, 30, 100, 101, 133, 1000)] == [0, 100, 100, 100, 1000, 1000, 1000]
    gate = AnalysisGate(2)
    with gate.slot(), gate.slot():
        with pytest.raises(AnalysisBusy), gate.slot():
            pass
    with gate.slot():  # given back
        assert gate.refused == 1


@pytest.mark.integration
def test_a_full_analysis_pool_answers_503_and_cheap_reads_do_not_wait(service_study: Any) -> None:
    from contextlib import ExitStack

    import httpx

    gate = service_study.server.app.state.analysis
    sweep = f"/v1/sweeps/{service_study.sweep}"
    with httpx.Client(base_url=service_study.url, timeout=60) as http, ExitStack() as held:
        for _ in range(gate.slots):  # every slot computing (held here, as a burst of analyses would)
            held.enter_context(gate.slot())
        for heavy in (f"{sweep}/importance?n_boot=990&evaluator=ped-anova",  # never asked before: not kept
                      f"{sweep}/compare/{service_study.sweep}/report"):  # drawn per request
            r = http.get(heavy)
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", heavy
            assert int(r.headers["Retry-After"]) > 0
        # the cheap reads answer while the pool is still full: they never waited for a slot
        assert [http.get(p).status_code for p in (sweep, f"{sweep}/trials", "/v1/sweeps")] == [200, 200, 200]
        assert gate.refused >= 2
    with httpx.Client(base_url=service_study.url, timeout=300) as http:  # slots free: the report is drawn
        assert http.get(f"{sweep}/compare/{service_study.sweep}/report").status_code == 200


def _sleeps(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "late"


def _grows(megabytes: int) -> str:
    return str(len(bytearray(megabytes * 2**20)))


def test_a_page_is_drawn_in_a_worker_with_a_time_and_a_memory_limit() -> None:
    import time

    from api.service.render import RenderFailed, render_bounded

    assert render_bounded(_grows, 8, timeout_s=60, memory_bytes=512 * 2**20) == str(8 * 2**20)
    with pytest.raises(RenderFailed, match="more than its 537 MB"):
        render_bounded(_grows, 1024, timeout_s=60, memory_bytes=512 * 2**20)  # 1 GiB asked, 512 MiB allowed
    started = time.monotonic()
    with pytest.raises(RenderFailed, match="longer than its 2 s"):
        render_bounded(_sleeps, 600, timeout_s=2, memory_bytes=512 * 2**20)
    assert time.monotonic() - started < 60  # killed at its limit, not drawn on for 600 s


# A page that never ends: it writes its worker's pid where the test says (the environment reaches a spawned
# worker), then sleeps. Module-level, as `render_bounded` pickles it; the arguments are the sweep page's.
PAGE_PID_FILE = "SCALESWEEP_TEST_PAGE_PID_FILE"


def _endless_page(*_args: Any) -> str:
    import os
    import time

    Path(os.environ[PAGE_PID_FILE]).write_text(str(os.getpid()))
    time.sleep(600)
    return "never"


def _running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not: it has ended, its parent has yet to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _worker_pid(pid_file: Path, timeout_s: float = 60) -> int:
    import time

    deadline = time.monotonic() + timeout_s
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the page worker never started"
        time.sleep(0.05)
    return int(pid_file.read_text())


def _gone_within(pid: int, timeout_s: float) -> float:
    """Seconds until `pid` ended; fails past `timeout_s`."""
    import time

    started = time.monotonic()
    while _running(pid):
        assert time.monotonic() - started < timeout_s, f"the page worker {pid} still runs after {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - started


def _slots_free_within(gate: Any, timeout_s: float) -> None:
    """Both analysis slots can be taken at once within `timeout_s`; fails past it."""
    import time

    from api.service.gate import AnalysisBusy

    started = time.monotonic()
    while True:
        try:
            with gate.slot(), gate.slot():
                return
        except AnalysisBusy:
            assert time.monotonic() - started < timeout_s, f"an analysis slot is still held after {timeout_s} s"
            time.sleep(0.05)


@pytest.mark.integration
def test_a_report_whose_client_left_stops_drawing(settings: Settings, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A real uvicorn serving the app; the sweep report's page never ends. The client closes its connection while
    the worker draws: the worker is gone within a few seconds (it was drawn on to its 300 s limit before)."""
    import socket
    from types import SimpleNamespace

    from api.service.render import POLL_S
    from api.service.routers import sweeps

    from .conftest import LiveServer

    pid_file = tmp_path / "page.pid"
    monkeypatch.setenv(PAGE_PID_FILE, str(pid_file))
    # the sweep and its result as the route reads them (a scored sweep needs a whole study: test_live_service's)
    record = SimpleNamespace(id="s-left", storage_path=str(tmp_path), state="SUCCEEDED")
    result = SimpleNamespace(tracking_uri="sqlite://", parent_run_id="p", name="left")
    monkeypatch.setattr(sweeps, "_scored", lambda *_: (record, result))
    monkeypatch.setattr(sweeps, "sweep_page", _endless_page)
    server = LiveServer(settings)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(b"GET /v1/sweeps/s-left/report HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            pid = _worker_pid(pid_file)
            assert _running(pid)
        # the client has left: the route sees it at its next poll and kills the worker
        waited = _gone_within(pid, timeout_s=10)
        assert waited < 4 * POLL_S + 2, waited
        # the analysis slot came back with it: every slot is free again, once the route that saw its client leave
        # has returned (it releases the slot as it ends, just after the worker it killed; within one more poll)
        _slots_free_within(server.app.state.analysis, timeout_s=4 * POLL_S)
    finally:
        server.stop()


@pytest.mark.integration
def test_a_page_worker_ends_with_its_killed_parent(tmp_path: Path) -> None:
    """A process drawing a page through `render_bounded` is SIGKILLed (as a service can be): its worker, which
    nobody would kill or wait for, ends with it (the kernel's parent-death signal)."""
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    pid_file = tmp_path / "page.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", "from api.service.render import render_bounded; "
         "from tests.api.test_bounds import _endless_page; "
         "render_bounded(_endless_page, timeout_s=600, memory_bytes=512 * 2**20)"],
        cwd=root, env={**os.environ, PAGE_PID_FILE: str(pid_file), "PYTHONPATH": str(root)})
    try:
        worker = _worker_pid(pid_file)
        assert _running(worker)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        assert _gone_within(worker, timeout_s=5) < 5
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_a_transfer_rung_on_its_own_workers_is_accepted_and_refused_when_wider_than_the_cluster(
        api: TestClient, tmp_path: Path) -> None:
    """Issue 52: the per-rung form over REST; the widest rung's trial must fit the workers, and the refusal names
    that rung's own count."""
    import os

    from api.service.db import SweepRecord

    cpus = os.cpu_count() or 1
    sweep = api.post("/v1/sweeps", json=SPEC, headers=AUTH).json()["id"]
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        record = session.get(SweepRecord, sweep)
        record.state, record.storage_path = "SUCCEEDED", str(tmp_path / "sweep")
        session.commit()
    r = api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": {"cpu-xs": {}, "cpu-s": {"workers": 2 * cpus}},
                                        "execution": {"cpus_per_trial": 1}}, headers=AUTH)
    assert _fields(r) == ["rungs.cpu-s.workers"]
    assert f"rungs.cpu-s.workers {2 * cpus} needs {2 * cpus} CPUs" in r.json()["detail"]
    # the widest trial on the transfer's own count: that field is named, not the rung's
    r = api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": {"cpu-xs": {"workers": 1}, "cpu-s": {}},
                                        "execution": {"cpus_per_trial": 1, "workers_per_trial": 2 * cpus}},
                 headers=AUTH)
    assert _fields(r) == ["execution.workers_per_trial"]
    # A misspelt key, a fractional, a zero and an oversized count, and more rungs than one mapping may hold: each a
    # 422 naming its field as written (pydantic's union form, "mapping", left out of the location).
    for rungs, field in (({"cpu-xs": {}, "cpu-s": {"worker": 2}}, "rungs.cpu-s.worker"),
                         ({"cpu-xs": {"workers": 2.5}}, "rungs.cpu-xs.workers"),
                         ({"cpu-xs": {"workers": 0}}, "rungs.cpu-xs.workers"),
                         ({"cpu-xs": {"workers": 4096}}, "rungs.cpu-xs.workers"),
                         ({f"rung-{i}": {} for i in range(300)}, "rungs")):
        assert _fields(api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": rungs}, headers=AUTH)) == [field]
    assert api.get("/v1/transfers").json()["count"] == 0  # nothing stored by a refusal
    r = api.post("/v1/transfers", json={"sweep_id": sweep, "rungs": {"cpu-xs": None, "cpu-s": {"workers": 1}}},
                 headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["rungs"] == {"cpu-xs": None, "cpu-s": {"workers": 1}}
