"""Schemathesis over the OpenAPI schema: no input makes the service answer 5xx or break its own schema. Hypothesis
over the refusals of docs/security.md: a server path, a mapping too deep or too large, a number out of range, a
transfer trial section with bad keys, work over SCALESWEEP_MAX_WORK: each a 422 naming the field, nothing lost."""

from __future__ import annotations

import functools
import json
import math
import os
import random
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from api.service import Settings, create_app
from api.service.db import SweepRecord
from api.service.routers.sweeps import SPEC_EXAMPLE
from sweeper import load_spec
from sweeper.demand import sweep_work
from trials import TrialConfig

from .conftest import AUTH, TOKEN

_workdir = Path(tempfile.mkdtemp(prefix="scalesweep-schemathesis-"))
_app = create_app(Settings(workdir=_workdir, api_token=TOKEN))  # type: ignore[arg-type]
# Schemathesis's ASGI transport enters the app's lifespan, which starts the job queue: keep it off, so that no sweep
# submitted here launches a driver (test_the_fuzzed_service_launches_nothing).
_app.state.jobs.start = lambda: None
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)
_client = TestClient(_app, raise_server_exceptions=False)


@pytest.fixture(scope="module", autouse=True)
def _one_portal() -> Iterator[None]:
    """The test client's requests share one event loop for the module: outside `with`, each request starts a
    loop thread of its own, and the hostile-body test sends thousands (28.5 s to 25 s for each sweep operation,
    measured one file run apart)."""
    with _client:
        yield


def test_the_fuzzed_service_launches_nothing() -> None:
    # Schemathesis's ASGI transport runs the app's lifespan, and with it the job queue: a valid sweep submitted by
    # the runs here would start a real driver (Ray, trials), which outlives the test run. The queue stays off.
    r = _client.post("/v1/sweeps", json={**SPEC_EXAMPLE, "name": "launches-nothing"}, headers=AUTH)
    assert r.status_code == 201, r.text
    _app.state.jobs.wake()
    thread = _app.state.jobs._thread
    assert thread is None or not thread.is_alive()
    assert _client.get(f"/v1/sweeps/{r.json()['id']}").json()["state"] == "PENDING"


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
    # The right body under the wrong content type: 415, never parsed as JSON anyway.
    body = json.dumps(case.body if case.body is not None else {}, default=str)
    for media in ("text/plain", "application/x-www-form-urlencoded"):
        r = _client.post(url, content=body, headers={**AUTH, "Content-Type": media})
        assert r.status_code == 415, (media, r.status_code, r.text[:300])


# Every operation that takes a body, its path parameters filled in (the limit applies before any route runs).
_POST_PATHS = sorted(re.sub(r"\{[^}]+\}", "x-1", path) for path, ops in _app.openapi()["paths"].items()
                     if "post" in ops)


@pytest.mark.parametrize("url", _POST_PATHS)
def test_a_body_over_the_limit_is_413_before_it_is_parsed(url: str) -> None:
    # The limit is the service's own setting. One oversized body per operation: it does not depend on any case,
    # and sending a megabyte with each of the hostile test's ~1,900 cases cost about 6 s per sweep operation.
    big = b'{"name": "' + b"x" * (_LIMIT + 1) + b'"}'
    r = _client.post(url, content=big, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 413, (r.status_code, r.text[:300])
    assert r.headers["content-type"] == "application/problem+json"


# --- a stateful run over sweeps and transfers ---------------------------------------------------------------------

# Links inferred from the responses' schemas and Location headers chain the calls: submit a sweep, read it, its
# trials and best point, cancel and resume it, list; submit a transfer from it, read and cancel it. No driver
# starts (the job queue is kept off, above), so every sweep stays PENDING until cancelled.


_CALLS: list[tuple[str, str, int]] = []  # (method, path, status) of every stateful call


class _Stateful(schema.as_state_machine()):  # type: ignore[misc]
    def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
        return {"headers": AUTH}

    def before_call(self, case: schemathesis.Case, **kwargs: Any) -> None:
        # A random body almost never passes a spec's cross-field rules, and the stateless tests above fuzz it
        # already: every other sweep submitted here is a valid one, so the calls after it reach a real sweep.
        if case.method == "POST" and case.path == "/v1/sweeps" and len(json.dumps(case.body, default=str)) % 2:
            case.body = {**SPEC_EXAMPLE, "name": f"fuzz-{len(_CALLS)}"}
            # and without a generated Idempotency-Key, which an earlier call may have used with another body (a 409
            # that would leave the run with no sweep to follow)
            case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "idempotency-key"}

    def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
        _CALLS.append((case.method, case.formatted_path, response.status_code))
        assert response.status_code < 500, (case.method, case.path, response.text[:300])
        case.validate_response(response, excluded_checks=[positive_data_acceptance])


def test_stateful_run_over_sweeps_and_transfers() -> None:
    # Twice at most: in the full suite on 2 loaded cores (2026-12-07) one walk created no sweep although the same
    # walk alone created one every time; the statuses its POSTs got are kept in the message for the next look.
    tried: list[list[int]] = []
    for _ in range(2):
        _CALLS.clear()
        # Derandomized, but a part of the walk draws from the global `random` state, which the tests before this
        # one leave wherever they leave it: seeded here, the walk is the same in the full suite as alone.
        random.seed(20261203)
        _Stateful.run(settings=settings(
            max_examples=int(os.environ.get("SCALESWEEP_FUZZ_STATEFUL_EXAMPLES", "10")), stateful_step_count=6,
            deadline=None, suppress_health_check=list(HealthCheck),
            derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1"))
        posts = [status for method, path, status in _CALLS if method == "POST" and path == "/v1/sweeps"]
        tried.append(posts)
        created = 201 in posts
        # a call on a created sweep's id that the service found (a 409 for a PENDING sweep's front is an answer
        # about that sweep; a 404 would be an id it does not know): which routes the derandomized walk takes moves
        # with the schema
        followed = [(m, p, c) for m, p, c in _CALLS if p.startswith("/v1/sweeps/sw-") and c != 404]
        if created and followed:
            break
    assert created and followed, (tried, _CALLS)  # the run chained real ids, not only random ones


# --- the second round's refusals, as properties (docs/security.md, issue 38) -----------------------------------------

# Each hostile submission below is a valid sweep or transfer with one hostile change: a server path in the trial
# section, a free-form mapping too deep or too large, a number outside its range (every bounded field of the trial,
# read from its schema, and the sweep's and transfer's own), or a transfer trial section with a key the sweep sets
# or an unknown one. Each is a 422 problem+json whose first error names the field (the section, with the exact
# dotted path in the detail), and whatever was stored before (sweeps, transfers, their specs and states) is still
# there, unchanged, whatever Idempotency-Key the refused call carried.

_SPEC: dict[str, Any] = {"name": "refuse", "rung": "cpu-xs", "horizon": 20, "search": {"space": {"K": [2, 3]}}}
_OUTSIDE = _workdir / "outside" / "made-by-caller"  # must never be created
_REFUSAL_EXAMPLES = int(os.environ.get("SCALESWEEP_FUZZ_REFUSAL_EXAMPLES", "30"))
_KEY = "stored-sweep-key"
_STORED: dict[str, str] = {}


def _stored() -> str:
    """A PENDING sweep (with an Idempotency-Key), a SUCCEEDED one and a transfer of it, stored once; returns the
    SUCCEEDED sweep's id (a transfer needs one)."""
    if "done" not in _STORED:
        r = _client.post("/v1/sweeps", json=_SPEC, headers={**AUTH, "Idempotency-Key": _KEY})
        assert r.status_code == 201, r.text
        r = _client.post("/v1/sweeps", json={**_SPEC, "name": "refuse-done"}, headers=AUTH)
        assert r.status_code == 201, r.text
        with _app.state.sessionmaker() as session:
            record = session.get(SweepRecord, r.json()["id"])
            record.state, record.storage_path = "SUCCEEDED", str(_workdir / "refuse-done")
            session.commit()
        _STORED["done"] = r.json()["id"]
        r = _client.post("/v1/transfers", json={"sweep_id": _STORED["done"], "rungs": ["cpu-xs"]}, headers=AUTH)
        assert r.status_code == 201, r.text
    return _STORED["done"]


@functools.cache
def _stored_before(test: str) -> dict[str, list[Any]]:
    """What is stored when `test` starts: every refusal of its examples must leave it as it is."""
    return _everything_stored()


def _everything_stored() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for kind in ("sweeps", "transfers"):
        out[kind], cursor = [], None
        while True:
            page = _client.get(f"/v1/{kind}", params={"limit": 200, **({"cursor": cursor} if cursor else {})},
                               headers=AUTH).json()
            out[kind] += page["data"]
            if not (cursor := page["next_cursor"]):
                break
    return out


def _trial_bounds() -> list[tuple[str, str, float, float, bool]]:
    """(dotted field, JSON type, low, high, low excluded) of every bounded number of a trial (the optimizer's are
    the sweep's to set; the eval steps are a list, refused by the tests above and in test_rest_limits)."""
    schema = TrialConfig.model_json_schema()
    defs, out = schema.get("$defs", {}), []

    def walk(node: dict[str, Any], where: str) -> None:
        if "$ref" in node:
            walk(defs[node["$ref"].rsplit("/", 1)[-1]], where)
            return
        if node.get("type") in ("integer", "number") and "maximum" in node:
            low_out = "exclusiveMinimum" in node
            out.append((where, node["type"], node.get("minimum", node.get("exclusiveMinimum")), node["maximum"],
                        low_out))
        for sub in node.get("anyOf", []):
            walk(sub, where)
        for name, sub in node.get("properties", {}).items():
            if name != "optimizer":
                walk(sub, f"{where}.{name}" if where else name)

    walk(schema, "")
    return out


_TRIAL_BOUNDS = _trial_bounds()


def _outside(kind: str, low: float, high: float, low_out: bool) -> st.SearchStrategy[Any]:
    if kind == "integer":
        return st.integers(int(high) + 1, 10**18) | st.integers(-(10**18), int(low) - (0 if low_out else 1))
    return (st.floats(min_value=high, exclude_min=True, allow_nan=False, allow_infinity=False)
            | st.floats(max_value=low, exclude_max=not low_out, allow_nan=False, allow_infinity=False))


def _nest(path: list[str], leaf: Any) -> Any:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


_IDENT = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
_PATH_KEYS = st.sampled_from(["root", "path", "cache_dir", "weights", "weights_file", "captions_file", "model_dir",
                              "data_root", "ckpt_path", "home"])
_SERVER_PATHS = st.sampled_from(["/etc", "/etc/passwd", "/proc/self/environ", "~/.ssh/id_rsa", "../../etc/passwd",
                                 "./x", "sub/dir", "file:///etc/passwd", "s3://bucket/key", "C:\\x", "\\\\host\\s",
                                 str(_OUTSIDE), f"{_OUTSIDE}/../.."]) | st.lists(
    _IDENT, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


@st.composite
def _server_path(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A path anywhere in a dataset's or an extractor's options: under a key that names a path, or any key."""
    section = draw(st.sampled_from([["data", "options"], ["eval", "extractor_options"]]))
    keys = [*section, *draw(st.lists(_IDENT, max_size=3)), draw(_PATH_KEYS | _IDENT)]
    value = draw(_SERVER_PATHS)
    if draw(st.booleans()):  # in a list
        index = draw(st.integers(0, 3))
        return _nest(keys, [*(["plain"] * index), value]), "trial." + ".".join(keys) + f".[{index}]", "SCALESWEEP_DATA"
    return _nest(keys, value), "trial." + ".".join(keys), "SCALESWEEP_DATA_PATHS"


@st.composite
def _too_big(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A free-form mapping 17 to 300 levels deep, with more than 256 entries, or more than 65,536 characters."""
    section = draw(st.sampled_from([["data", "options"], ["eval", "extractor_options"]]))
    shape = draw(st.sampled_from(["deep", "wide", "long"]))
    if shape == "deep":
        leaf: Any = draw(st.integers(0, 9) | _IDENT)
        for _ in range(draw(st.integers(17, 300))):
            leaf = {draw(_IDENT): leaf}
        return _nest(section, leaf), "trial", "nested more than 16 levels"
    if shape == "wide":
        return _nest(section, {f"k{i}": i for i in range(draw(st.integers(257, 2000)))}), "trial", "at most 256"
    chunk = draw(st.integers(300, 20_000))  # at most 256 strings: the text limit, not the entries limit, refuses it
    return (_nest(section, {"blob": ["x" * chunk] * (65_536 // chunk + 1)}), "trial", "characters of text")


@st.composite
def _out_of_range(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    field, kind, low, high, low_out = draw(st.sampled_from(_TRIAL_BOUNDS))
    return _nest(field.split("."), draw(_outside(kind, low, high, low_out))), "trial", f"trial.{field}"


@st.composite
def _bad_trial_key(draw: st.DrawFn) -> tuple[dict[str, Any], str, str]:
    """A key the sweep sets itself, or one no trial has, at the top or in a sub-section."""
    owned = st.sampled_from(["checkpoint_dir", "steps", "eval_steps", "seed", "optimizer", "rung", "threads",
                             "tracking"])
    known = set(TrialConfig.model_fields)
    unknown = _IDENT.filter(lambda k: k not in known).map(lambda k: f"zz{k}")
    where = draw(st.sampled_from([[], ["eval"], ["data"]]))
    key = draw(unknown) if where else draw(owned | unknown)
    value = draw(st.sampled_from(["/etc", 10**9, 1e12, {"a": 1}, [1, 2], True]))
    return _nest([*where, key], value), "trial", "trial." + ".".join([*where, key])


def _sweep_field(field: str, kind: str, low: float, high: float) -> st.SearchStrategy[tuple[dict[str, Any], str, str]]:
    """A top-level or backend number of a sweep outside its range: (change, field named, words in the detail)."""
    values = _outside(kind, low, high, False)
    if field in ("poll_s", "kill_grace_s"):
        return values.map(lambda v: ({"backend": {"name": "command", "trainer": "x", field: v}},
                                     f"backend.command.{field}", f"backend.command.{field}"))
    if field == "seeds":
        return values.map(lambda v: ({"seeds": [0, v]}, "seeds[1]", "seeds[1]"))
    return values.map(lambda v: ({field: v}, field, field))


_SWEEP_NUMBERS = st.one_of(_sweep_field("poll_s", "number", 0.05, 3600), _sweep_field("kill_grace_s", "number", 0, 600),
                           _sweep_field("horizon", "integer", 1, 10**7), _sweep_field("seeds", "integer", 0, 2**31 - 1))
_TRANSFER_NUMBERS = st.one_of(
    _outside("integer", 1, 10**7, False).map(lambda v: ({"steps": v}, "steps", "steps")),
    _outside("number", 0, 100, True).map(lambda v: ({"horizon_factor": v}, "horizon_factor", "horizon_factor")),
    _outside("integer", 0, 2**31 - 1, False).map(lambda v: ({"seeds": [v]}, "seeds[0]", "seeds[0]")))
_TRIAL_CHANGES = st.one_of(_server_path(), _too_big(), _out_of_range())


def _assert_refused(r: Any, field: str, words: str, before: dict[str, list[Any]], body: Any) -> None:
    shown = json.dumps(body)[:300]
    assert r.status_code == 422, (r.status_code, shown, r.text[:300])
    assert r.headers["content-type"] == "application/problem+json", r.headers
    problem = r.json()
    named = problem["errors"][0]["field"]
    assert named == field or (field == "trial" and named.startswith("trial")), (field, problem, shown)
    assert words in problem["detail"], (words, problem["detail"][:300], shown)
    assert _everything_stored() == before  # nothing stored is lost or changed
    assert not _OUTSIDE.exists()


@given(change=st.one_of(_TRIAL_CHANGES.map(lambda c: ("trial", c)), _SWEEP_NUMBERS.map(lambda c: ("top", c))),
       key=st.sampled_from([None, _KEY]))
@example(change=("top", ({"backend": {"name": "command", "trainer": "x", "poll_s": 1e-300}},
                         "backend.command.poll_s", "backend.command.poll_s")), key=None)
@example(change=("trial", ({"data": {"image_size": 10**6}}, "trial", "trial.data.image_size")), key=_KEY)
@example(change=("trial", ({"eval": {"track_samples": 10**9}}, "trial", "trial.eval.track_samples")), key=None)
@example(change=("trial", ({"data": {"name": "folder", "options": {"root": "/etc"}}}, "trial.data.options.root",
                           "SCALESWEEP_DATA_PATHS")), key=None)
@example(change=("trial", ({"eval": {"extractor_options": {"cache_dir": str(_OUTSIDE)}}},
                           "trial.eval.extractor_options.cache_dir", "SCALESWEEP_DATA_PATHS")), key=_KEY)
@settings(max_examples=_REFUSAL_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_a_hostile_sweep_is_refused_naming_the_field_and_nothing_stored_is_lost(
        change: tuple[str, tuple[dict[str, Any], str, str]], key: str | None) -> None:
    _stored()
    where, (part, field, words) = change
    body = {**_SPEC, "trial": part} if where == "trial" else {**_SPEC, **part}
    before = _stored_before("sweep")
    r = _client.post("/v1/sweeps", json=body, headers={**AUTH, **({"Idempotency-Key": key} if key else {})})
    _assert_refused(r, field, words, before, body)


@given(change=st.one_of(_TRIAL_CHANGES.map(lambda c: ("trial", c)), _bad_trial_key().map(lambda c: ("trial", c)),
                        _TRANSFER_NUMBERS.map(lambda c: ("top", c))))
@example(change=("trial", ({"checkpoint_dir": "/etc"}, "trial", "trial.checkpoint_dir")))
@example(change=("trial", ({"steps": 10**9}, "trial", "trial.steps")))
@example(change=("trial", ({"eval": {"fd_samples": 10**12}}, "trial", "trial.eval.fd_samples")))
@example(change=("trial", ({"zzunknown": 1}, "trial", "trial.zzunknown")))
@settings(max_examples=_REFUSAL_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_a_hostile_transfer_is_refused_naming_the_field_and_nothing_stored_is_lost(
        change: tuple[str, tuple[dict[str, Any], str, str]]) -> None:
    sweep_id = _stored()
    where, (part, field, words) = change
    body = {"sweep_id": sweep_id, "rungs": ["cpu-xs"], **({"trial": part} if where == "trial" else part)}
    before = _stored_before("transfer")
    _assert_refused(_client.post("/v1/transfers", json=body, headers=AUTH), field, words, before, body)


@given(horizon=st.integers(10_000, 10**7), seeds=st.integers(1, 100), budget=st.integers(1, 10_000))
@example(horizon=10**7, seeds=100, budget=10_000)
@settings(max_examples=_REFUSAL_EXAMPLES // 3, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_work_over_the_limit_is_refused_with_the_total_and_the_limit(horizon: int, seeds: int, budget: int) -> None:
    # Each field within its own cap; the whole, counted as the service counts it, over SCALESWEEP_MAX_WORK.
    _stored()
    body = {**_SPEC, "horizon": horizon, "seeds": list(range(seeds)), "baselines": [],
            "search": {"method": "random", "budget": budget, "space": {"K": {"low": 1, "high": 100}}}}
    total, limit = sweep_work(load_spec(body)), _app.state.settings.max_work
    if total <= limit:  # within the limit: not this test's business (accepting it would store a sweep)
        return
    before = _stored_before("work")
    r = _client.post("/v1/sweeps", json=body, headers=AUTH)
    _assert_refused(r, "body", f"total work is {total:,} ", before, body)
    assert f"limit of {limit:,} (SCALESWEEP_MAX_WORK)" in r.json()["detail"]
