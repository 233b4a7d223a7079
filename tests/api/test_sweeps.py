"""`/v1/sweeps` through TestClient: validation, auth, idempotency, pagination, states (no driver started here:
the job queue only runs inside the app's lifespan, which these tests do not enter)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.service import Settings, create_app

from .conftest import AUTH

SPEC = {"name": "tiny", "rung": "cpu-xs", "horizon": 20, "search": {"method": "grid", "space": {"K": [2, 3]}}}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    yield TestClient(create_app(settings), raise_server_exceptions=False)  # no lifespan: nothing is launched


def test_submit_returns_201_with_location_and_the_record(api: TestClient) -> None:
    r = api.post("/v1/sweeps", json=SPEC, headers={**AUTH, "X-Scalesweep-User": "alice"})
    assert r.status_code == 201, r.text
    body = r.json()
    assert r.headers["location"] == f"/v1/sweeps/{body['id']}"
    assert body["state"] == "PENDING" and body["owner"] == "alice" and body["name"] == "tiny"
    assert body["spec"]["search"]["space"]["K"] == [2, 3]
    got = api.get(r.headers["location"])
    assert got.status_code == 200 and got.json()["id"] == body["id"]


def test_invalid_specs_are_422_problem_json_naming_the_field(api: TestClient) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, "rung": "huge"}, headers=AUTH)
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json"
    assert "rung" in r.json()["detail"] and "cpu-xs" in r.json()["detail"]
    r = api.post("/v1/sweeps", json={**SPEC, "colour": "red"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "colour"
    r = api.post("/v1/sweeps", content=b"not json", headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["detail"].startswith("malformed JSON body")  # syntax, not a field
    assert api.get("/v1/sweeps").json()["count"] == 0  # nothing was stored


def test_mutations_need_the_bearer_token(api: TestClient) -> None:
    r = api.post("/v1/sweeps", json=SPEC)
    assert r.status_code == 401 and r.headers["content-type"] == "application/problem+json"
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = api.post("/v1/sweeps", json=SPEC, headers={"Authorization": "Bearer wrong-token"})
    assert r.status_code == 401 and "invalid bearer token" in r.json()["detail"]
    assert api.get("/v1/sweeps").status_code == 200  # reads are open unless auth_reads


def test_idempotency_key_returns_the_first_sweep(api: TestClient) -> None:
    headers = {**AUTH, "Idempotency-Key": "abc-1"}
    first = api.post("/v1/sweeps", json=SPEC, headers=headers)
    again = api.post("/v1/sweeps", json=SPEC, headers=headers)
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    clash = api.post("/v1/sweeps", json={**SPEC, "horizon": 30}, headers=headers)
    assert clash.status_code == 409
    assert api.get("/v1/sweeps").json()["count"] == 1
    for _ in range(2):  # an empty key is no key (found by schemathesis: it once broke the unique index)
        assert api.post("/v1/sweeps", json=SPEC, headers={**AUTH, "Idempotency-Key": ""}).status_code == 201
    assert api.get("/v1/sweeps").json()["count"] == 3


def test_list_paginates_with_a_cursor_and_filters_by_state(api: TestClient) -> None:
    ids = [api.post("/v1/sweeps", json={**SPEC, "name": f"s{i}"}, headers=AUTH).json()["id"] for i in range(5)]
    seen, cursor = [], None
    while True:
        page = api.get("/v1/sweeps", params={"limit": 2, **({"cursor": cursor} if cursor else {})}).json()
        seen += [s["id"] for s in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[::-1]  # newest first, each once
    api.post(f"/v1/sweeps/{ids[0]}/cancel", headers=AUTH)
    cancelled = api.get("/v1/sweeps", params={"state": "CANCELLED"}).json()
    assert [s["id"] for s in cancelled["data"]] == [ids[0]]
    bad = api.get("/v1/sweeps", params={"state": "DONE"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "state"
    assert api.get("/v1/sweeps", params={"cursor": "???"}).status_code == 422


def test_state_transitions_and_illegal_ones_are_409(api: TestClient) -> None:
    sweep = api.post("/v1/sweeps", json=SPEC, headers=AUTH).json()["id"]
    assert api.post(f"/v1/sweeps/{sweep}/resume", headers=AUTH).status_code == 409  # PENDING: nothing to resume
    r = api.post(f"/v1/sweeps/{sweep}/cancel", headers=AUTH)
    assert r.status_code == 202 and r.json()["state"] == "CANCELLED"
    again = api.post(f"/v1/sweeps/{sweep}/cancel", headers=AUTH)
    assert again.status_code == 409 and again.headers["content-type"] == "application/problem+json"
    r = api.post(f"/v1/sweeps/{sweep}/resume", headers=AUTH)
    assert r.status_code == 202 and r.json()["state"] == "PENDING"
    assert api.get(f"/v1/sweeps/{sweep}/best").status_code == 409  # nothing scored
    assert api.get(f"/v1/sweeps/{sweep}/trials").json() == {"data": [], "count": 0}
    assert api.get("/v1/sweeps/sw-nope").status_code == 404


@pytest.mark.parametrize(("selection", "extra", "field", "said"), [
    ({"objective": "steps_to_target"}, {}, "selection", "selection.target: objective 'steps_to_target' needs a target"),
    ({"objective": "steps_to_target", "target": -1}, {}, "selection.target", "greater than 0"),
    # The spec-wide checks: the field is named in the message (as every other check across sections is).
    ({"objective": "steps_to_target", "target": 40, "curve": "fd"}, {}, "body",
     "eval_steps has 3 steps; selection.curve 'fd' needs at least 6"),
    ({"objective": "steps_to_target", "target": 40}, {"trial": {"eval": {"track_points": 2}}}, "body",
     "trial.eval.track_points is 2; selection.curve 'fd_track' needs at least 6"),
])
def test_a_steps_to_target_selection_that_cannot_be_scored_is_422(api: TestClient, selection: dict[str, object],
                                                                   extra: dict[str, object], field: str,
                                                                   said: str) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, "selection": selection, **extra}, headers=AUTH)
    assert r.status_code == 422 and r.headers["content-type"] == "application/problem+json", r.text
    error = r.json()["errors"][0]
    assert error["field"] == field and said in error["message"], error
    ok = api.post("/v1/sweeps", json={**SPEC, "eval_steps": [5, 8, 11, 14, 17, 20],
                                      "selection": {"objective": "steps_to_target", "target": 40, "curve": "fd"}},
                  headers=AUTH)
    assert ok.status_code == 201, ok.text
    assert ok.json()["spec"]["selection"]["objective"] == "steps_to_target"
