"""`/v1/transfers`, fits, predictions, exports and the report.

First through TestClient without the lifespan (no driver starts: validation, states, 409s); then for real: a
uvicorn server in a thread with its job queue (the session's shared service, tests/api/conftest.py) has run a tiny
sweep, and a tiny transfer of it runs as a driver process (real Ray, MLflow and torch), driven by `api.client` and
`scalesweep remote`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

import scalesweep_cli
from api.client import ApiError, ScalesweepClient
from api.service import Settings, create_app
from api.service.db import SweepRecord

from .conftest import AUTH, TOKEN, ServiceStudy

SWEEP = {"name": "tiny", "rung": "cpu-xs", "horizon": 20, "search": {"method": "grid", "space": {"K": [2, 3]}}}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    yield TestClient(create_app(settings), raise_server_exceptions=False)  # no lifespan: nothing is launched


def _finished_sweep(api: TestClient, tmp_path: Path) -> str:
    """A sweep record marked SUCCEEDED by hand (its folder is empty: enough to create transfer records)."""
    sweep_id = str(api.post("/v1/sweeps", json=SWEEP, headers=AUTH).json()["id"])
    sessions = api.app.state.sessionmaker  # type: ignore[attr-defined]
    with sessions() as session:
        record = session.get(SweepRecord, sweep_id)
        record.state, record.storage_path = "SUCCEEDED", str(tmp_path / "sweep")
        session.commit()
    return sweep_id


def test_transfers_validate_refuse_and_change_state(api: TestClient, tmp_path: Path) -> None:
    body = {"rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "adamw"], "seeds": [0]}
    r = api.post("/v1/transfers", json={**body, "sweep_id": "sw-nope"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "sweep_id"
    pending = api.post("/v1/sweeps", json=SWEEP, headers=AUTH).json()["id"]
    r = api.post("/v1/transfers", json={**body, "sweep_id": pending}, headers=AUTH)
    assert r.status_code == 409 and "only a SUCCEEDED sweep" in r.json()["detail"]
    assert api.get(f"/v1/sweeps/{pending}/export", params={"rung": "cpu-s"}).status_code == 409

    sweep = _finished_sweep(api, tmp_path)
    r = api.post("/v1/transfers", json={**body, "sweep_id": sweep, "rungs": ["cpu-huge"]}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"].startswith("rungs")  # the TransferSpec's check
    r = api.post("/v1/transfers", json={**body, "sweep_id": sweep, "horizon_factor": 0}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "horizon_factor"
    # A pilot on a judged seed, or too short to plateau: refused at submission, naming the field.
    for pilot, field, words in (({"seeds": [0, 9]}, "target", "disjoint from the transfer's judged seeds [0]"),
                                ({"horizon_factor": 1}, "target.pilot.horizon_factor", "1.5")):
        r = api.post("/v1/transfers", json={**body, "sweep_id": sweep, "target": {"rule": "pilot", "pilot": pilot}},
                     headers=AUTH)
        assert r.status_code == 422 and r.json()["errors"][0]["field"] == field and words in r.text, r.text
    assert api.post("/v1/transfers", json={**body, "sweep_id": sweep}).status_code == 401

    headers = {**AUTH, "Idempotency-Key": "t-1"}
    created = api.post("/v1/transfers", json={**body, "sweep_id": sweep}, headers=headers)
    assert created.status_code == 201, created.text
    transfer = created.json()
    assert created.headers["location"] == f"/v1/transfers/{transfer['id']}"
    assert transfer["state"] == "PENDING" and transfer["sweep_id"] == sweep and transfer["name"] == "tiny-transfer"
    assert transfer["spec"]["rungs"] == ["cpu-xs", "cpu-s"] and transfer["spec"]["horizon_factor"] == 2.0
    again = api.post("/v1/transfers", json={**body, "sweep_id": sweep}, headers=headers)
    assert again.status_code == 200 and again.json()["id"] == transfer["id"]
    assert api.post("/v1/transfers", json={**body, "sweep_id": sweep, "seeds": [1]}, headers=headers).status_code == 409

    tid = transfer["id"]
    assert [t["id"] for t in api.get("/v1/transfers", params={"sweep_id": sweep}).json()["data"]] == [tid]
    assert api.get("/v1/transfers", params={"sweep_id": pending}).json()["count"] == 0
    assert api.get(f"/v1/transfers/{tid}/runs").json() == {"data": [], "count": 0}
    for path in ("fits", "export", "report"):  # nothing has run yet
        assert api.get(f"/v1/transfers/{tid}/{path}").status_code == 409
    r = api.get(f"/v1/transfers/{tid}/predict", params={"size": "cpu-m", "arm": "periodic"})
    assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json"
    assert api.post(f"/v1/transfers/{tid}/resume", headers=AUTH).status_code == 409
    # More seeds: only for a finished transfer, with a token, within the body's bounds, naming the field.
    extend = f"/v1/transfers/{tid}/extend"
    assert api.post(extend, json={"seeds": [0, 1]}).status_code == 401
    r = api.post(extend, json={"seeds": list(range(101))}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "seeds"
    r = api.post(extend, json={"seeds": [0, 1], "rungs": ["cpu-m"]}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "rungs"  # only seeds and execution
    r = api.post(extend, json={"seeds": [0, -1]}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "seeds[1]"  # the element, by the spec's type
    r = api.post(extend, json={"seeds": [0, 1]}, headers=AUTH)
    assert r.status_code == 409 and "is PENDING: only a SUCCEEDED, FAILED or CANCELLED transfer is extended" in r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert api.post("/v1/transfers/tr-nope/extend", json={"seeds": [0, 1]}, headers=AUTH).status_code == 404
    assert api.post(f"/v1/transfers/{tid}/cancel", headers=AUTH).json()["state"] == "CANCELLED"
    assert api.post(f"/v1/transfers/{tid}/cancel", headers=AUTH).status_code == 409
    assert api.get("/v1/transfers", params={"state": "CANCELLED"}).json()["count"] == 1
    assert api.get("/v1/transfers/tr-nope").status_code == 404


# --- for real ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def live(service_study: ServiceStudy) -> str:
    """The shared service with its job queue, in a thread (drivers are subprocesses, as in production), on which
    the real tiny sweep (REAL_SWEEP) has run: tests/api/conftest.py."""
    return service_study.url


# The shared study runs first when this module is the first to ask for it (minutes on a busy 2-core machine).
@pytest.mark.timeout(1800)
def test_a_real_transfer_over_http(live: str, service_study: ServiceStudy, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", TOKEN)
    monkeypatch.setenv("SCALESWEEP_SERVER", live)
    with ScalesweepClient(live, token=TOKEN) as client:
        sweep = client.wait(service_study.sweep, interval=0.5, timeout=300)  # submitted by the shared study
        assert sweep.state == "SUCCEEDED", sweep.error
        chosen = client.sweep_best(sweep.id)["best"]
        assert chosen == {"K": 3, "gamma": 0.25}

        # the CLI: a transfer to two rungs, followed to the end
        # two seeds, so that the fits have a bootstrap over seeds and their predictions an interval to check
        # timing 4 steps after 1, not 20 after 5: the stage runs its short trials one at a time before the runs
        code = scalesweep_cli.main(["remote", "transfer", sweep.id, "--rungs", "cpu-xs", "cpu-s", "--arms",
                                    "periodic", "adamw", "--seeds", "0", "1", "--timing-steps", "4",
                                    "--timing-warmup", "1", "--follow", "--interval", "0.5"])
        out = capsys.readouterr().out
        assert code == 0, out
        transfer_id = out.split()[1]
        assert f"{transfer_id} SUCCEEDED: runs 8 done, 0 running, 0 failed of 8" in out

        timing = client.get_transfer(transfer_id).spec["timing"]
        assert (timing["steps"], timing["warmup"]) == (4, 1)  # the flags reached the spec
        runs = client.transfer_runs(transfer_id).data
        assert sorted((r["rung"], r["arm"], r["seed"]) for r in runs) == [
            (rung, arm, seed) for rung in ("cpu-s", "cpu-xs") for arm in ("adamw", "periodic") for seed in (0, 1)]
        assert all(r["state"] == "SUCCEEDED" and [c[0] for c in r["checkpoints"]][-1] == 12 for r in runs)
        assert {r["K"] for r in runs if r["arm"] == "periodic"} == {3}  # the chosen pair, unchanged

        assert scalesweep_cli.main(["remote", "fits", transfer_id, "--json"]) == 0
        fits = json.loads(capsys.readouterr().out)
        assert fits["chosen"] == chosen and fits["counts"] == {"SUCCEEDED": 8}
        assert set(fits["savings"]) == {"cpu-xs", "cpu-s"} and set(fits["fits"]) >= {"time_to_best", "best_fd"}
        assert scalesweep_cli.main(["remote", "fits", transfer_id]) == 0
        table = capsys.readouterr().out  # the fits as tables: the savings table has a row per rung
        assert "time-to-best saving of the chosen pair against each arm (paired over seeds):" in table
        assert all(any(line.split()[:2] == [rung, "adamw"] for line in table.splitlines())
                   for rung in ("cpu-xs", "cpu-s")), table

        assert "error" not in fits["fits"]["time_to_best"], fits["fits"]["time_to_best"]
        largest = fits["rungs"]["cpu-s"]
        with pytest.raises(ApiError) as refused:  # far beyond the fitted sizes: refused for that reason
            client.predict(transfer_id, 1e12, "periodic")
        assert refused.value.status == 422
        assert refused.value.detail.startswith("refused: extrapolation refused for arm 'periodic': size 1e+12 is ")
        assert f"the largest fitted size {largest:.4g}" in refused.value.detail
        near = client.predict(transfer_id, "cpu-s", "periodic")  # inside the fitted range: a point and an interval
        assert near.size == largest and near.point > 0
        assert near.lo is not None and near.hi is not None, near
        assert near.lo <= near.point <= near.hi and near.lo < near.hi

        export = yaml.safe_load(client.export(transfer_id, rung="cpu-s"))
        assert json.loads(client.export(transfer_id, rung="cpu-s", format="json")) == export
        out_file = tmp_path / "sweep-export.json"
        assert scalesweep_cli.main(["remote", "export", "--sweep", sweep.id, "--rung", "cpu-m", "--format", "json",
                                    "--out", str(out_file)]) == 0
        from_sweep = json.loads(out_file.read_text())
        assert json.dumps(chosen["K"]) in json.dumps(from_sweep) and from_sweep != export

        html = client.report(transfer_id)
        assert html.startswith("<!DOCTYPE html>") and transfer_id in html and "<img" in html

        # More seeds for the finished transfer: refusals first (a 422 naming the field; nothing changed), then seed
        # 2 added, run by the queue's driver, only its 4 runs new, the extension one more look for the claims.
        for seeds, says in (([0, 2], "seeds: an extension keeps the transfer's seeds [0, 1]; [1] are missing"),
                            ([0, 1], "seeds: [0, 1] adds no seed"),
                            ([0, 1, 0], "seeds must be distinct")):
            with pytest.raises(ApiError) as bad:
                client.extend_transfer(transfer_id, seeds)
            assert bad.value.status == 422 and says in bad.value.detail, bad.value.detail
        assert client.get_transfer(transfer_id).spec["seeds"] == [0, 1]
        code = scalesweep_cli.main(["remote", "extend-transfer", transfer_id, "--seeds", "0", "1", "2", "--follow",
                                    "--interval", "0.5"])
        out = capsys.readouterr().out
        assert code == 0 and f"extending {transfer_id}: seeds [2]" in out, out
        done = client.get_transfer(transfer_id)
        assert done.state == "SUCCEEDED" and done.spec["seeds"] == [0, 1, 2], done.error
        deadline = time.monotonic() + 120  # the service serves the cached runs while it reads the new ones once
        while len(runs := client.transfer_runs(transfer_id).data) < 12 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert sorted((r["rung"], r["arm"], r["seed"]) for r in runs) == [
            (rung, arm, seed) for rung in ("cpu-s", "cpu-xs") for arm in ("adamw", "periodic") for seed in (0, 1, 2)]
        fits = client.transfer_fits(transfer_id)
        assert fits["counts"] == {"SUCCEEDED": 12} and fits["claims"]["budget"]["looks"] == 2
        assert [e["added"] for e in fits["extensions"]] == [[2]]
