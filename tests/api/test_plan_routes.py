"""`POST /v1/plans/sweeps` and `POST /v1/plans/transfers`: the planner's estimate over REST from the cached
calibration, nothing stored and nothing trained; bad specs and budgets are 422 problem+json; a finished job's view
shows its estimate beside the actual."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.service import Settings, create_app
from api.service.db import SweepRecord, TransferRecord
from sweeper.demand import StepCost

from .conftest import AUTH

SPEC = {"name": "tiny", "rung": "cpu-xs", "horizon": 20, "seeds": [0, 1],
        "search": {"method": "grid", "space": {"K": [2, 3]}}, "baselines": ["adamw"],
        "trial": {"text_encoder": "learned", "eval": {"extractor": "pixels", "fd_samples": 64, "sample_steps": 2}}}


@pytest.fixture
def api(settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[TestClient]:
    """The service without its lifespan (nothing launched), with a stand-in for the calibration's training steps
    (tests/sweeper/test_plan_real.py times the real ones): the tests calibrate as `scalesweep sweep plan` on the
    service's host would, the service itself never does."""
    import sweeper.demand._calibration as calibration
    import sweeper.demand._estimate as estimate

    monkeypatch.setenv("SCALESWEEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "_measure", lambda cfg, key, shape: StepCost(
        rung=cfg.rung, key=key, step_s=0.05, eval_s=0.5, track_s=0.5, setup_s=0.2, source="measured now",
        measured_at="2026-12-07T00:00:00+00:00", shape=shape))
    monkeypatch.setattr(estimate, "worker_start", lambda measure=True: (3.0, "cache"))
    yield TestClient(create_app(settings), raise_server_exceptions=False)


def _jobs(api: TestClient) -> tuple[int, int]:
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        return (session.scalar(select(func.count()).select_from(SweepRecord)) or 0,
                session.scalar(select(func.count()).select_from(TransferRecord)) or 0)


def _problem(r: Any, *needles: str) -> None:
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text
    assert all(n in r.text for n in needles), r.text


def test_a_sweep_plan_answers_the_estimate_and_stores_nothing(api: TestClient) -> None:
    from sweeper.demand import calibration_dir, sweep_estimate
    from sweeper.specs import load_spec

    r = api.post("/v1/plans/sweeps", json=SPEC, headers=AUTH)
    assert r.status_code == 200, r.text
    doc = r.json()  # nothing cached: the plan without machine-hours, saying why; nothing trained
    assert doc["kind"] == "sweep" and doc["trials"] == 6 and doc["machine_hours"] is None
    assert "no cached calibration for rung cpu-xs" in doc["no_estimate"] and not calibration_dir().exists()
    assert [(s["stage"], s["arm"], s["trials"]) for s in doc["stages"]] == [("search", "periodic", 4),
                                                                            ("baseline", "adamw", 2)]
    assert doc["memory"]["cpu-xs"]["how"] == "modelled" and doc["detectable_saving"] == ["unknown until a pilot"]
    planned = sweep_estimate(load_spec(SPEC))  # as `scalesweep sweep plan` on the service's host calibrates
    again = api.post("/v1/plans/sweeps", json=SPEC, headers=AUTH).json()
    assert {c["source"] for c in again["calibration"].values()} == {"cache"} and again["no_estimate"] is None
    assert again["estimated_wall_s"] == pytest.approx(planned.wall_s) and again["machine_hours"] > 0
    assert _jobs(api) == (0, 0) and api.get("/v1/sweeps").json()["count"] == 0


def test_bad_specs_and_budgets_are_422_problems_and_store_nothing(api: TestClient) -> None:
    from sweeper.demand import sweep_estimate
    from sweeper.specs import load_spec

    sweep_estimate(load_spec(SPEC))  # calibrated, so that a budget can be judged
    _problem(api.post("/v1/plans/sweeps", json={**SPEC, "rung": "huge"}, headers=AUTH), "rung", "cpu-xs")
    _problem(api.post("/v1/plans/sweeps", json={**SPEC, "colour": 1}, headers=AUTH), "colour")
    _problem(api.post("/v1/plans/sweeps?budget_hours=-1", json=SPEC, headers=AUTH), "budget_hours")
    _problem(api.post("/v1/plans/sweeps?budget_hours=0.0001", json=SPEC, headers=AUTH),
             "rung cpu-xs", "over budget_hours 0.0001", "nothing started")
    assert api.post("/v1/plans/sweeps", json=SPEC).status_code == 401  # a plan measures: a token holder's act
    assert _jobs(api) == (0, 0)


def test_a_transfer_plan_reads_the_sweep_record_and_stores_nothing(api: TestClient) -> None:
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        session.add(SweepRecord(id="sw-plan", name="tiny", state="SUCCEEDED", spec=SPEC, owner="x"))
        session.commit()
    body = {"sweep_id": "sw-plan", "rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "adamw"], "seeds": [0, 1],
            "timing": {"steps": 0}}
    from sweeper.specs import load_spec
    from sweeper.transfer import TransferSpec, transfer_estimate

    fields = {k: v for k, v in body.items() if k != "sweep_id"}
    transfer_estimate(TransferSpec.model_validate({**fields, "name": "t", "sweep": "sw-plan"}), load_spec(SPEC))
    r = api.post("/v1/plans/transfers", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["kind"] == "transfer" and {(s["stage"], s["rung"]) for s in doc["stages"]} == {
        ("run", "cpu-xs"), ("run", "cpu-s")}
    assert doc["trials"] == 2 * 2 * 2 and doc["machine_hours"] > 0
    _problem(api.post("/v1/plans/transfers", json={**body, "sweep_id": "sw-none"}, headers=AUTH), "sweep_id")
    _problem(api.post("/v1/plans/transfers?budget_hours=0.00001", json=body, headers=AUTH), "over budget_hours")
    _problem(api.post("/v1/plans/transfers", json={**body, "rungs": ["cpu-9000"]}, headers=AUTH), "rungs")
    _problem(api.post("/v1/plans/transfers?prior=tr-nope", json=body, headers=AUTH), "prior", "tr-nope")
    assert _jobs(api) == (1, 0)  # the sweep put there by the test, and no transfer


def test_a_finished_jobs_view_shows_its_estimate_beside_the_actual(api: TestClient, tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "estimate.json").write_text(json.dumps({
        "estimated_wall_s": 50.0, "machine_hours": 50 / 3600, "no_estimate": None, "driver_runs_s": [60.0],
        "actual_wall_s": 60.0, "actual_machine_hours": 60 / 3600, "trials": 3, "calibration": ["cache"]}))
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        session.add(SweepRecord(id="sw-done", name="tiny", state="SUCCEEDED", spec=SPEC, owner="x",
                                storage_path=str(folder)))
        session.add(SweepRecord(id="sw-new", name="tiny", state="PENDING", spec=SPEC, owner="x"))
        session.commit()
    est = api.get("/v1/sweeps/sw-done").json()["estimate"]
    assert est["machine_hours"] == pytest.approx(50 / 3600) and est["actual_wall_s"] == 60.0
    assert api.get("/v1/sweeps/sw-new").json()["estimate"] is None
