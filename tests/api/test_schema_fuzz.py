"""Schemathesis over the OpenAPI schema: no input makes the service answer 5xx or break its own schema."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from api._settings import Settings
from api.main import create_app
from api.routers.sweeps import SPEC_EXAMPLE

from .conftest import AUTH, TOKEN

_workdir = Path(tempfile.mkdtemp(prefix="scalesweep-schemathesis-"))
_app = create_app(Settings(workdir=_workdir, api_token=TOKEN))  # type: ignore[arg-type]
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)
_client = TestClient(_app, raise_server_exceptions=False)  # no lifespan: nothing is launched


@schema.parametrize()
@settings(max_examples=int(os.environ.get("SCALESWEEP_FUZZ_EXAMPLES", "15")), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    response = case.call(headers=AUTH)
    assert response.status_code < 500, response.text
    # Every check but "schema-valid data must be accepted": a sweep spec has cross-field rules (eval steps within
    # the horizon, a non-empty search space, ...) that JSON Schema cannot state, so the service refuses some
    # schema-valid bodies with a 422 that names the field, as it should.
    case.validate_response(response, excluded_checks=[positive_data_acceptance])


# --- hostile inputs on every operation that takes a body ---------------------------------------------------------

_LIMIT = _app.state.settings.max_body_bytes
_WRITES = schema.include(method="POST")


def _with_non_finite(body: Any, pick: int) -> Any:
    """`body` with one number (chosen by `pick`) replaced by a non-finite one; a mapping without numbers gets a
    non-finite field of its own (an unknown field is refused too, which is fine: it must not be accepted)."""
    paths: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, bool):
            return
        if isinstance(node, int | float):
            paths.append(path)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, [*path, k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, [*path, i])

    walk(body, [])
    bad = (math.inf, -math.inf, math.nan)[pick % 3]
    if not paths:
        return {**body, "horizon": bad} if isinstance(body, dict) else bad
    chosen = paths[pick % len(paths)]
    if not chosen:  # the body is a bare number
        return bad
    out = json.loads(json.dumps(body))
    *parents, last = chosen
    node = out
    for key in parents:
        node = node[key]
    node[last] = bad
    return out


@_WRITES.parametrize()
@settings(max_examples=int(os.environ.get("SCALESWEEP_FUZZ_HOSTILE_EXAMPLES", "8")), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_hostile_bodies_are_refused_with_the_right_status(case: schemathesis.Case) -> None:
    url = case.formatted_path
    if case.body is not None and not isinstance(case.body, bytes | str):
        # Non-finite numbers: Python's JSON writes Infinity/NaN, which a hostile client may send; never accepted.
        pick = len(json.dumps(case.body, default=str))
        text = json.dumps(_with_non_finite(case.body, pick))
        r = _client.post(url, content=text, headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code in (400, 404, 409, 422), (r.status_code, text[:300], r.text[:300])
        assert r.headers["content-type"] == "application/problem+json"
        # The second round's refusals (docs/security.md): a free-form mapping nested 300 levels deep, a server
        # path in the trial section, and a submission whose total work is over SCALESWEEP_MAX_WORK. Never
        # accepted, never a 5xx.
        if isinstance(case.body, dict):
            deep: dict[str, Any] = {}
            node = deep
            for _ in range(300):
                node["a"] = {}
                node = node["a"]
            huge = {"horizon": 10**7, "seeds": list(range(100)),
                    "search": {"method": "random", "budget": 10_000, "space": {"K": {"low": 1, "high": 100}}}}
            for hostile in ({**case.body, "trial": {"data": {"options": deep}}},
                            {**case.body, "trial": {"data": {"name": "folder", "options": {"root": "/etc"}}}},
                            {**case.body, "trial": {"eval": {"extractor_options": {"cache_dir": "/tmp/x"}}}},
                            {**case.body, **huge}):
                text = json.dumps(hostile)
                r = _client.post(url, content=text, headers={**AUTH, "Content-Type": "application/json"})
                assert r.status_code in (400, 404, 409, 422), (r.status_code, text[:300], r.text[:300])
                assert r.headers["content-type"] == "application/problem+json"
    # A body above the limit: 413 before it is parsed (the limit is the service's own setting).
    big = b'{"name": "' + b"x" * (_LIMIT + 1) + b'"}'
    r = _client.post(url, content=big, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413, (r.status_code, r.text[:300])
    # The right body under the wrong content type: 415, never parsed as JSON anyway.
    body = json.dumps(case.body if case.body is not None else {}, default=str)
    for media in ("text/plain", "application/x-www-form-urlencoded"):
        r = _client.post(url, content=body, headers={**AUTH, "Content-Type": media})
        assert r.status_code == 415, (media, r.status_code, r.text[:300])


# --- a stateful run over sweeps and transfers ---------------------------------------------------------------------

# Links inferred from the responses' schemas and Location headers chain the calls: submit a sweep, read it, its
# trials and best point, cancel and resume it, list; submit a transfer from it, read and cancel it. No driver
# starts (the app's lifespan is not entered), so every sweep stays PENDING until cancelled.


_CALLS: list[tuple[str, str, int]] = []  # (method, path, status) of every stateful call


class _Stateful(schema.as_state_machine()):  # type: ignore[misc]
    def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
        return {"headers": AUTH}

    def before_call(self, case: schemathesis.Case, **kwargs: Any) -> None:
        # A random body almost never passes a spec's cross-field rules, and the stateless tests above fuzz it
        # already: every other sweep submitted here is a valid one, so the calls after it reach a real sweep.
        if case.method == "POST" and case.path == "/v1/sweeps" and len(json.dumps(case.body, default=str)) % 2:
            case.body = {**SPEC_EXAMPLE, "name": f"fuzz-{len(_CALLS)}"}

    def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
        _CALLS.append((case.method, case.formatted_path, response.status_code))
        assert response.status_code < 500, (case.method, case.path, response.text[:300])
        case.validate_response(response, excluded_checks=[positive_data_acceptance])


def test_stateful_run_over_sweeps_and_transfers() -> None:
    _CALLS.clear()
    _Stateful.run(settings=settings(
        max_examples=int(os.environ.get("SCALESWEEP_FUZZ_STATEFUL_EXAMPLES", "10")), stateful_step_count=6,
        deadline=None, suppress_health_check=list(HealthCheck),
        derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1"))
    created = {path for method, path, status in _CALLS if method == "POST" and path == "/v1/sweeps" and status == 201}
    followed = [(m, p, c) for m, p, c in _CALLS if p.startswith("/v1/sweeps/sw-") and c < 400]
    assert created and followed, _CALLS  # the run chained real ids, not only random ones
