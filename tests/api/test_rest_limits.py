"""What a token holder cannot do with a spec (docs/security.md, issue 38): name a path on the server outside the
locations the operator registered, submit more work than `SCALESWEEP_MAX_WORK`, send a number outside its range,
or slip past the sweep's trial rules through a transfer. Each refusal is a 422 problem+json naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.service import Settings, create_app
from api.service.db import SweepRecord
from sweeper import load_spec

from .conftest import AUTH, TOKEN, seeded_workdir

SPEC: dict[str, Any] = {"name": "lim", "rung": "cpu-xs", "horizon": 20, "search": {"space": {"K": [2, 3]}}}


def _api(tmp_path: Path, empty_db: Path, **settings: Any) -> TestClient:
    workdir = seeded_workdir(tmp_path / "work", empty_db)
    s = Settings(workdir=workdir, api_token=TOKEN, **settings)  # type: ignore[arg-type]
    return TestClient(create_app(s), raise_server_exceptions=False)  # no lifespan: nothing is launched


@pytest.fixture
def api(tmp_path: Path, empty_mlflow_db: Path) -> Iterator[TestClient]:
    yield _api(tmp_path, empty_mlflow_db)


def _refused(r: Any, field: str) -> str:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["field"] == field, r.json()
    return str(r.json()["detail"])


def _finished_sweep(api: TestClient, tmp_path: Path, spec: dict[str, Any] | None = None) -> str:
    """A sweep record marked SUCCEEDED by hand (enough to create transfer records)."""
    r = api.post("/v1/sweeps", json=spec or SPEC, headers=AUTH)
    assert r.status_code == 201, r.text
    with api.app.state.sessionmaker() as session:  # type: ignore[attr-defined]
        record = session.get(SweepRecord, r.json()["id"])
        record.state, record.storage_path = "SUCCEEDED", str(tmp_path / "sweep")
        session.commit()
    return str(r.json()["id"])


# --- no server path from a REST spec --------------------------------------------------------------------------------

PATHS = [
    ({"eval": {"extractor_options": {"cache_dir": "{tmp}/made-by-caller"}}}, "trial.eval.extractor_options.cache_dir"),
    ({"eval": {"extractor_options": {"cache_dir": "relative-cache"}}}, "trial.eval.extractor_options.cache_dir"),
    ({"data": {"name": "folder", "options": {"root": "/etc"}}}, "trial.data.options.root"),
    ({"data": {"name": "folder", "options": {"root": "/srv", "captions_file": "../../etc/passwd"}}},
     "trial.data.options.root"),
    ({"data": {"options": {"captions_file": "../../etc/passwd"}}}, "trial.data.options.captions_file"),
    ({"eval": {"extractor": "dinov2", "extractor_options": {"path": "/root/.cache"}}},
     "trial.eval.extractor_options.path"),
    ({"eval": {"extractor_options": {"training": {"weights_file": "/etc/shadow"}}}},
     "trial.eval.extractor_options.training.weights_file"),
    ({"data": {"options": {"anything": "~/x"}}}, "trial.data.options.anything"),
    ({"data": {"options": {"sources": ["a", "/etc/hosts"]}}}, "trial.data.options.sources.[1]"),
    ({"data": {"options": {"mirror": "file:///etc/passwd"}}}, "trial.data.options.mirror"),
]


@pytest.mark.parametrize(("trial", "field"), PATHS)
def test_a_server_path_in_a_rest_sweep_is_refused_naming_the_field(api: TestClient, tmp_path: Path,
                                                                   trial: dict[str, Any], field: str) -> None:
    trial = json.loads(json.dumps(trial).replace("{tmp}", str(tmp_path)))
    detail = _refused(api.post("/v1/sweeps", json={**SPEC, "trial": trial}, headers=AUTH), field)
    assert "SCALESWEEP_DATA_PATHS" in detail and "none is registered" in detail
    assert api.get("/v1/sweeps").json()["count"] == 0
    assert not (tmp_path / "made-by-caller").exists()


def test_a_server_path_in_a_rest_transfer_is_refused(api: TestClient, tmp_path: Path) -> None:
    sweep_id = _finished_sweep(api, tmp_path)
    r = api.post("/v1/transfers", json={"sweep_id": sweep_id, "rungs": ["cpu-xs"],
                                        "trial": {"data": {"name": "folder", "options": {"root": "/etc"}}}},
                 headers=AUTH)
    _refused(r, "trial.data.options.root")


def test_registered_locations_are_accepted_and_nothing_outside_them(tmp_path: Path, empty_mlflow_db: Path) -> None:
    data = tmp_path / "data"
    (data / "set").mkdir(parents=True)
    (data / "escape").symlink_to("/etc")
    api = _api(tmp_path, empty_mlflow_db, data_paths=f"{data},/nonexistent/elsewhere")
    ok = {**SPEC, "trial": {"data": {"name": "folder", "options": {"root": str(data / "set"),
                                                                    "captions_file": "captions.jsonl"}},
                            "eval": {"extractor_options": {"cache_dir": str(data / "cache")}}}}
    r = api.post("/v1/sweeps", json=ok, headers=AUTH)
    assert r.status_code == 201, r.text
    for root in (f"{data}/../etc", str(data / "escape"), "/etc", str(data) + "-sibling"):
        bad = {**SPEC, "trial": {"data": {"name": "folder", "options": {"root": root}}}}
        detail = _refused(api.post("/v1/sweeps", json=bad, headers=AUTH), "trial.data.options.root")
        assert str(data) in detail  # the registered locations are named


def test_the_local_cli_keeps_free_paths() -> None:
    spec = load_spec({**SPEC, "trial": {"data": {"name": "folder", "options": {"root": "/srv/my-set"}},
                                        "eval": {"extractor_options": {"cache_dir": "/tmp/cache"}}}})
    assert spec.trial["data"]["options"]["root"] == "/srv/my-set"


def test_a_folder_dataset_error_does_not_quote_the_file(tmp_path: Path) -> None:
    # The error of a trial is readable by anyone: it names the line, never what the line holds.
    from trials.data import DataError, get_dataset

    (tmp_path / "captions.jsonl").write_text("root:x:0:0:secret-first-line\n")
    with pytest.raises(DataError) as info:
        get_dataset("folder", root=str(tmp_path))
    assert "secret" not in str(info.value) and "root:x" not in str(info.value)
    (tmp_path / "captions.jsonl").write_text('{"file": 1, "caption": "secret-caption"}\n')
    with pytest.raises(DataError) as info:
        get_dataset("folder", root=str(tmp_path))
    assert "secret" not in str(info.value)


# --- total work, and ranges ------------------------------------------------------------------------------------------

def test_a_submission_over_the_work_limit_is_refused_with_the_total_and_the_limit(api: TestClient) -> None:
    # 10,000 points x 100 seeds at a horizon of 10^7: each field within its own cap, the whole about 10^13 steps.
    huge = {**SPEC, "horizon": 10**7, "seeds": list(range(100)), "baselines": [],
            "search": {"method": "random", "budget": 10_000, "space": {"K": {"low": 1, "high": 100}}}}
    detail = _refused(api.post("/v1/sweeps", json=huge, headers=AUTH), "body")
    assert "100,000,000" in detail and "SCALESWEEP_MAX_WORK" in detail
    total = int(detail.split("total work is ")[1].split(" ")[0].replace(",", ""))
    assert total >= 10_000 * 100 * 10**7
    assert api.post("/v1/sweeps", json=SPEC, headers=AUTH).status_code == 201  # the default limit fits a study


def test_the_work_limit_is_the_operators_setting(tmp_path: Path, empty_mlflow_db: Path) -> None:
    api = _api(tmp_path, empty_mlflow_db, max_work=1000)
    detail = _refused(api.post("/v1/sweeps", json=SPEC, headers=AUTH), "body")
    assert "limit of 1,000" in detail
    roomy = _api(tmp_path / "b", empty_mlflow_db, max_work=10**9)
    sweep_id = _finished_sweep(roomy, tmp_path)
    huge = {"sweep_id": sweep_id, "rungs": ["cpu-xs"], "steps": 10**7, "seeds": list(range(100))}
    assert "limit of 1,000,000,000" in _refused(roomy.post("/v1/transfers", json=huge, headers=AUTH), "body")


@pytest.mark.parametrize(("change", "field"), [
    ({"trial": {"data": {"image_size": 10**6}}}, "trial"),
    ({"trial": {"eval": {"track_samples": 10**9}}}, "trial"),
    ({"trial": {"eval": {"track_sample_steps": 10**7}}}, "trial"),
    # Below a range, or a key no trial has: the field too, not the whole body (as a transfer names it).
    ({"trial": {"batch_size": 0}}, "trial"),
    ({"trial": {"data": {"image_size": 2}}}, "trial"),
    ({"trial": {"lr": 1}}, "trial"),
    ({"backend": {"name": "command", "trainer": "x", "poll_s": 1e-300}}, "backend.command.poll_s"),
    ({"backend": {"name": "command", "trainer": "x", "kill_grace_s": 1e9}}, "backend.command.kill_grace_s"),
    ({"search": {"space": {"K": {"low": 1, "high": 1e12}}, "method": "tpe", "budget": 4}}, "search.space.K"),
    ({"eval_steps": [10**12]}, "eval_steps[0]"),
])
def test_numbers_outside_their_range_are_refused(api: TestClient, change: dict[str, Any], field: str) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, **change}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"].startswith(field), r.json()


# --- a transfer's trial section is checked at submission like a sweep's ---------------------------------------------

@pytest.mark.parametrize(("trial", "field"), [
    ({"checkpoint_dir": "/etc"}, "trial"),
    ({"steps": 10**9}, "trial"),
    ({"eval": {"fd_samples": 10**12}}, "trial"),
    ({"eval": {"no_such_key": 1}}, "trial"),
    ({"no_such_key": 1}, "trial"),
    ({"data": {"image_size": 10**6}}, "trial"),
])
def test_a_transfer_trial_section_is_checked_at_submission(api: TestClient, tmp_path: Path,
                                                            trial: dict[str, Any], field: str) -> None:
    sweep_id = _finished_sweep(api, tmp_path)
    r = api.post("/v1/transfers", json={"sweep_id": sweep_id, "rungs": ["cpu-xs"], "trial": trial}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["field"].startswith(field), r.json()
    assert api.get("/v1/transfers").json()["count"] == 0
    ok = api.post("/v1/transfers", json={"sweep_id": sweep_id, "rungs": ["cpu-xs"],
                                         "trial": {"eval": {"fd_samples": 1024}}}, headers=AUTH)
    assert ok.status_code == 201, ok.text



# --- free-form mappings have a shape limit ---------------------------------------------------------------------------

def _nested(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    for _ in range(levels):
        node["a"] = {}
        node = node["a"]
    return out


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"trial": {"data": {"options": _nested(300)}}}, "trial", "nested more than 16 levels"),
    ({"search": {"space": {"K": [2]}, "optimizer": {"name": "periodic", "x": _nested(300)}}}, "search",
     "nested more than 16 levels"),
    ({"baselines": [{"arm": "adamw", "optimizer": {"x": _nested(300)}}]}, "baselines[0]", "nested more than"),
    ({"trial": {"eval": {"extractor_options": {str(i): i for i in range(300)}}}}, "trial", "at most 256"),
    ({"trial": {"data": {"options": {"blob": ["x" * 1000] * 100}}}}, "trial", "characters of text"),
])
def test_free_form_mappings_are_bounded_in_depth_keys_and_size(api: TestClient, change: dict[str, Any],
                                                                field: str, words: str) -> None:
    # Unchecked, 255+ levels failed at serialisation: a 500, and the keep-alive connection dropped.
    r = api.post("/v1/sweeps", json={**SPEC, **change}, headers=AUTH)
    assert r.status_code == 422, r.text[:500]
    assert r.json()["errors"][0]["field"].startswith(field) and words in r.text, r.text[:500]


def test_a_transfers_free_form_fields_are_bounded(api: TestClient, tmp_path: Path) -> None:
    sweep_id = _finished_sweep(api, tmp_path)
    for name in ("trial", "target", "execution", "lr_rules"):
        r = api.post("/v1/transfers", json={"sweep_id": sweep_id, "rungs": ["cpu-xs"], name: _nested(300)},
                     headers=AUTH)
        assert r.status_code == 422, r.text[:500]
        assert r.json()["errors"][0]["field"] == name and "nested more than 16 levels" in r.text


# --- the scenes set's options are checked at submission -------------------------------------------------------------

@pytest.mark.parametrize(("trial", "words"), [
    ({"data": {"name": "scenes", "image_size": 32, "options": {"kinds": ["hexagon"]}}, "patch": 4},
     ["options.kinds", "hexagon", "'circle'", "'7'"]),
    ({"data": {"name": "scenes", "image_size": 32, "options": {"max_objects": 17}}, "patch": 4},
     ["options.max_objects", "cannot fit on a 4x4 grid", "1 to 16"]),
    ({"data": {"name": "scenes", "image_size": 32}, "patch": 5}, ["patch", "allowed patches", "[1, 2, 4, 8, 16, 32]"]),
    ({"data": {"name": "scenes", "image_size": 30}}, ["options.grid", "allowed at this image_size: [2, 3, 5, 6]"]),
    ({"data": {"name": "scenes", "image_size": 32, "options": {"colours": ["mauve"]}}, "patch": 4},
     ["options.colours", "'mauve'", "allowed: ['red'"]),
    ({"data": {"name": "scenes", "image_size": 32, "options": {"textures": ["striped"]}}, "patch": 4},
     ["options.textures: not an option of scenes", "allowed: ['kinds'"]),
    ({"data": {"name": "scenes", "image_size": 32, "options": {"max_objects": 100}}, "patch": 4},
     ["options.max_objects: 100 objects cannot fit on a 4x4 grid", "1 to 16"]),
])
def test_a_scenes_set_that_cannot_be_drawn_is_refused(api: TestClient, trial: dict[str, Any],
                                                      words: list[str]) -> None:
    r = api.post("/v1/sweeps", json={**SPEC, "trial": trial}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert r.json()["errors"][0]["field"].startswith("trial"), r.json()
    assert all(w in r.json()["detail"] for w in words), r.json()["detail"]
    assert api.get("/v1/sweeps").json()["count"] == 0
    ok = {**SPEC, "trial": {"data": {"name": "scenes", "image_size": 32}, "patch": 4, "text_max_length": 48}}
    assert api.post("/v1/sweeps", json=ok, headers=AUTH).status_code == 201
