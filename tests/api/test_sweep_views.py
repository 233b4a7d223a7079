"""What a finished sweep shows beyond its choice, through a live service and the CLI: the importance of each
searched parameter, the quality-cost front, a comparison, and the sweep written to an Optuna storage.

One real sweep (the service's driver, Ray, MLflow) of the sweeper's formula trainer (`tests/sweeper/fake_trainer.py`:
no training, FD from a formula in which K moves the objective by 4 and gamma by 2 on this grid), so the numbers are
known: K matters more than gamma, and K=3, gamma=0.15 is best."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import optuna
import pytest
import yaml

import scalesweep_cli
from api.service import Settings
from api.service.db import SweepRecord
from sweeper.analysis import non_dominated

from .conftest import AUTH, TOKEN, LiveServer, wait_job

pytestmark = pytest.mark.timeout(900)

FAKE_TRAINER = Path(__file__).resolve().parents[1] / "sweeper" / "fake_trainer.py"
SPEC: dict[str, Any] = {
    "name": "views", "rung": "cpu-xs", "horizon": 6, "eval_steps": [4, 6], "seeds": [0, 1],
    "search": {"space": {"K": [2, 3, 4], "gamma": [0.15, 0.25]}}, "baselines": ["adamw"],
    "retries": {"max_retries": 0}, "execution": {"concurrency": 2, "num_cpus": 2},
    "backend": {"name": "command", "trainer": "formula", "poll_s": 0.05},
}


@dataclass
class Views:
    url: str
    settings: Settings
    sweep: str
    workdir: str


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Views]:
    tmp = tmp_path_factory.mktemp("views")
    registry = tmp / "trainers.yaml"
    registry.write_text(yaml.safe_dump({"trainers": {"formula": {"command": [
        sys.executable, str(FAKE_TRAINER), "--optimizer", "{optimizer}", "--K", "{K}", "--gamma", "{gamma}",
        "--seed", "{seed}", "--steps", "{steps}", "--eval-steps", "{eval_steps}", "--progress", "{progress_file}",
    ]}}}))
    settings = Settings(workdir=tmp / "work", api_token=TOKEN, trainers=registry,  # type: ignore[arg-type]
                        poll_interval_s=0.3)
    server = LiveServer(settings, lifespan="on")
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            sweep = _succeeded(client, SPEC)
        with server.app.state.sessionmaker() as session:
            workdir = str(session.get(SweepRecord, sweep).storage_path)
        yield Views(server.url, settings, sweep, workdir)
    finally:
        server.stop()


def _succeeded(client: httpx.Client, spec: dict[str, Any]) -> str:
    """Submit `spec` and wait until its sweep SUCCEEDED; its id."""
    created = client.post("/v1/sweeps", json=spec, headers=AUTH)
    assert created.status_code == 201, created.text
    sweep = created.json()["id"]
    body = wait_job(client, f"/v1/sweeps/{sweep}")
    assert body["state"] == "SUCCEEDED", body
    return str(sweep)


def _get(views: Views, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{views.url}/v1/sweeps/{views.sweep}{path}", params=params, timeout=120)


def test_importance_ranks_k_above_gamma_and_refuses_an_unknown_evaluator(views: Views) -> None:
    doc = _get(views, "/importance", n_boot=30).json()
    assert [p["param"] for p in doc["params"]] == ["K", "gamma"], doc
    k, gamma = doc["params"]
    assert k["importance"] > gamma["importance"] and k["p_first"] == 1.0
    # n_boot is raised to the first of 0, 100, 1000 at or above it: one computation per level (issue 53, M5)
    assert doc["n_points"] == 6 and doc["seeds"] == [0, 1] and doc["n_boot"] == 100 and doc["evaluator"] == "fanova"
    # The seeds shift every point alike (0.3 per seed): their own share of the variance is far below K's.
    assert doc["seed_share"] < k["variance_share"]
    for bad in ({"evaluator": "shap"}, {"n_boot": -1}, {"n_boot": 10**6}):
        answer = _get(views, "/importance", **bad)
        assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/problem+json")
        assert next(iter(bad)) in answer.text


def test_the_front_marks_exactly_the_non_dominated_points_and_the_choice(views: Views) -> None:
    doc = _get(views, "/front").json()
    points = doc["points"]
    assert len(points) == 6 and [b["point_key"] for b in doc["baselines"]] == ["adamw"]
    # The formula trainer counts no Newton-Schulz call: the front's cost is 1/K, as the optimizer would count it.
    assert {p["point_key"]: p["ns_calls_per_step"] for p in points}["K=4,gamma=0.15"] == pytest.approx(0.25)
    expected = non_dominated([(p["objective"], p["ns_calls_per_step"]) for p in points])
    assert [p["on_front_ns"] for p in points] == expected
    assert sorted(doc["front_ns_calls"]) == ["K=3,gamma=0.15", "K=4,gamma=0.15"]
    assert doc["chosen"] == doc["best"] == "K=3,gamma=0.15"
    assert [p["point_key"] for p in points if p["chosen"]] == ["K=3,gamma=0.15"]


def test_a_sweep_compared_with_itself_over_rest_shows_zero_differences(views: Views) -> None:
    doc = _get(views, f"/compare/{views.sweep}").json()
    assert len(doc["points"]) == 7 and doc["same_choice"] is True and doc["a"]["id"] == views.sweep
    assert all(p["difference"] == 0.0 and p["paired"]["mean"] == 0.0 and p["paired"]["n"] == 2
               for p in doc["points"])
    missing = _get(views, "/compare/sw-nosuchsweep")
    assert missing.status_code == 404 and "sw-nosuchsweep" in missing.text
    page = _get(views, f"/compare/{views.sweep}/report")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html"), page.text
    assert 'id="comparison"' in page.text and page.text.count("+0 [+0, +0], n=2") == 7
    assert _get(views, "/compare/sw-nosuchsweep/report").status_code == 404


def test_the_python_client_reads_the_same_views(views: Views) -> None:
    from api.client import ScalesweepClient
    from sweeper.analysis import QualityCostFront, SweepComparison, SweepImportance

    with ScalesweepClient(views.url, token=TOKEN) as client:
        importance = SweepImportance.from_dict(client.sweep_importance(views.sweep, n_boot=30))
        front = QualityCostFront.from_dict(client.sweep_front(views.sweep))
        same = SweepComparison.from_dict(client.compare_sweeps(views.sweep, views.sweep))
    assert [p.param for p in importance.params] == ["K", "gamma"] and "importance (fanova" in importance.lines()[0]
    assert [p.point_key for p in front.front("ns_calls")] == ["K=4,gamma=0.15", "K=3,gamma=0.15"]
    assert same.same_choice and all(p.difference == 0.0 for p in same.points)


def test_the_remote_cli_prints_the_views_and_the_export_states_its_warnings(
        views: Views, capsys: pytest.CaptureFixture[str]) -> None:
    server = ["--server", views.url]
    assert scalesweep_cli.main(["remote", "importance", views.sweep, "--n-boot", "20", *server]) == 0
    assert capsys.readouterr().out.startswith("importance (fanova, 6 points, seeds [0, 1]):")
    assert scalesweep_cli.main(["remote", "front", views.sweep, *server]) == 0
    assert "K=3,gamma=0.15" in capsys.readouterr().out
    assert scalesweep_cli.main(["remote", "compare", views.sweep, views.sweep, "--json", *server]) == 0
    assert json.loads(capsys.readouterr().out)["same_choice"] is True
    # The choice beats adamw: the export goes through and says it has nothing to warn of.
    export = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/export", params={"rung": "cpu-s", "format": "json"},
                       timeout=120)
    assert export.status_code == 200, export.text
    assert export.json()["provenance"]["warnings"] == []
    bad = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/export", params={"rung": "cpu-s", "allow_losing": "perhaps"},
                    timeout=60)
    assert bad.status_code == 422 and "allow_losing" in bad.text


def test_the_export_of_a_choice_that_loses_to_a_baseline_is_refused_unless_asked_for(views: Views) -> None:
    """A grid of one bad point (K=5, gamma=0.35: objective 44 + 0.3 seed in the formula) against vanilla Muon
    (18 + seed): worse with confidence on two seeds, so its choice carries the warning and its export needs the
    flag."""
    spec = {**SPEC, "name": "losing", "search": {"space": {"K": [5], "gamma": [0.35]}}, "baselines": ["muon"]}
    with httpx.Client(base_url=views.url, timeout=60) as client:
        losing = _succeeded(client, spec)
        best = client.get(f"/v1/sweeps/{losing}/best").json()
        assert best["selection"]["loses_to"] == ["muon"] and best["warnings"][0].startswith(
            "the chosen point is worse than muon with confidence")
        refused = client.get(f"/v1/sweeps/{losing}/export", params={"rung": "cpu-s"})
        assert refused.status_code == 409 and "allow_losing" in refused.text, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        allowed = client.get(f"/v1/sweeps/{losing}/export", params={"rung": "cpu-s", "format": "json",
                                                                   "allow_losing": "true"})
        assert allowed.status_code == 200, allowed.text
        assert allowed.json()["provenance"]["warnings"] == best["warnings"]


def test_the_sweep_opens_in_optuna_with_every_trial(views: Views) -> None:
    url = f"{views.url}/v1/sweeps/{views.sweep}/optuna"
    assert httpx.post(url, timeout=60).status_code == 401  # writing needs the token
    written = httpx.post(url, headers=AUTH, timeout=120)
    assert written.status_code == 200, written.text
    doc = written.json()
    assert doc["trials"] == 14 and doc["open_with"].startswith("optuna-dashboard sqlite:///")
    # Writers at once (a write replaces the study: delete, then create) all succeed, one after another.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: httpx.post(url, headers=AUTH, timeout=120), range(4)))
    assert [a.status_code for a in answers] == [200] * 4, [a.text for a in answers]
    study = optuna.load_study(study_name=doc["study_name"], storage=str(views.settings.optuna_storage))
    trials = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/trials", timeout=60).json()["data"]
    assert len(study.trials) == len(trials) == 14
    by_run = {t.user_attrs["mlflow_run_id"]: t for t in study.trials}
    for t in trials:
        mine = by_run[t["run_id"]]
        assert mine.value == pytest.approx(t["objective"]) and mine.params["seed"] == t["seed"]
        assert {k: v for k, v in mine.params.items() if k not in ("seed", "arm")} == t["params"]
        assert mine.intermediate_values == {int(s): pytest.approx(v) for s, v in t["fd"].items()}


def test_the_cli_shows_the_same_views_and_writes_the_study(views: Views, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert scalesweep_cli.main(["sweep", "importance", views.workdir, "--n-boot", "20", "--json"]) == 0
    assert [p["param"] for p in json.loads(capsys.readouterr().out)["params"]] == ["K", "gamma"]
    assert scalesweep_cli.main(["sweep", "front", views.workdir]) == 0
    assert "K=3,gamma=0.15" in capsys.readouterr().out
    assert scalesweep_cli.main(["sweep", "compare", views.workdir, views.workdir, "--json"]) == 0
    assert all(p["difference"] == 0.0 for p in json.loads(capsys.readouterr().out)["points"])
    storage = f"sqlite:///{tmp_path / 'mine.db'}"
    assert scalesweep_cli.main(["sweep", "optuna", views.workdir, "--storage", storage, "--study", "v"]) == 0
    assert "optuna-dashboard" in capsys.readouterr().out
    assert len(optuna.load_study(study_name="v", storage=storage).trials) == 14
    out = tmp_path / "report"
    assert scalesweep_cli.main(["sweep", "report", views.workdir, "--out", str(out)]) == 0
    written = {p.name for p in out.iterdir()}
    assert {"report.html", "heatmap.png", "importance.png", "front.png", "parallel.png"} <= written, written
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in out.glob("*.png"))
    assert all(f'id="{p.stem}"' in (out / "report.html").read_text() for p in out.glob("*.png"))
    assert scalesweep_cli.main(["sweep", "compare", views.workdir, views.workdir, "--out", str(tmp_path / "cmp")]) == 0
    assert "\n" in capsys.readouterr().out  # the table, as without --out
    assert sorted(p.name for p in (tmp_path / "cmp").iterdir()) == ["comparison.png", "report.html"]
    assert (tmp_path / "cmp" / "report.html").read_text().count("+0 [+0, +0], n=2") == 7
    assert scalesweep_cli.main(["sweep", "importance", str(tmp_path)]) == 2  # not a sweep's folder: one line
    err = capsys.readouterr().err.strip()
    assert "not a sweep work folder" in err and "\n" not in err


def test_the_driver_stored_the_views_and_their_figures_on_the_parent_run(views: Views, tmp_path: Path) -> None:
    from mlflow import MlflowClient

    from dashboards import build_report, sweep_report

    body = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}", timeout=60).json()
    uri, parent = str(views.settings.mlflow_tracking_uri), body["mlflow_parent_run_id"]
    client = MlflowClient(uri)
    stored = json.loads(Path(client.download_artifacts(parent, "selection.json", str(tmp_path))).read_text())
    assert [p["param"] for p in stored["importance"]["params"]] == ["K", "gamma"]
    assert sorted(stored["front"]["front_ns_calls"]) == ["K=3,gamma=0.15", "K=4,gamma=0.15"]
    figures = {f.path for f in client.list_artifacts(parent, "figures")}
    assert {"figures/importance.png", "figures/front.png", "figures/parallel.png"} <= figures, figures
    page = build_report(sweep_report(uri, parent))
    served = httpx.get(f"{views.url}{body['links']['report']}", timeout=120)
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/html")
    for section in ('id="importance"', 'id="front"', 'id="parallel"', "compare view"):
        assert section in page and section in served.text
    # The slices' means are the trials' own: K=3 over both gammas and seeds, from /trials.
    trials = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/trials", timeout=60).json()["data"]
    k3 = [t["objective"] for t in trials if t["params"].get("K") == 3]
    assert f"3: {sum(k3) / len(k3):.4g} (n=4)" in page


def test_a_search_warm_started_from_the_grid_is_told_its_points(views: Views) -> None:
    """What the driver does for `search.warm_start` (its ledger reads the named sweeps, its planner tells them to the
    sampler), on this sweep's real records; the sampler's use of them is tests/sweeper/test_warm_start.py."""
    from sweeper import SweepError, SweepSpec
    from sweeper.ledger import SweepLedger
    from sweeper.search import Planner

    tracking_id = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/best", timeout=60).json()["tracking_id"]
    spec = SweepSpec.model_validate({**SPEC, "name": "warm", "seeds": [0], "baselines": [], "search": {
        "method": "tpe", "budget": 2, "space": {"K": [2, 3, 4], "gamma": [0.15, 0.25]}, "warm_start": [tracking_id]}})
    ledger = SweepLedger(str(views.settings.mlflow_tracking_uri), spec.tracking.experiment)
    prior = ledger.prior_records(spec.search.warm_start)
    assert len(prior) == 14  # the grid's 12 trials and adamw's 2
    planner = Planner(spec, prior=prior)
    assert planner.warm_started == 6 and planner.counts()["SUCCEEDED"] == 0  # told, not this sweep's own
    with pytest.raises(SweepError, match="no sweep 'nosuch-1'"):
        ledger.prior_records(["nosuch-1"])


def _trials(views: Views, count: int) -> dict[str, Any]:
    """The sweep's trials by run id, once `count` of them are served (the service's result cache serves the
    previous version while it reads the new one: a reader sees it on a later request)."""
    deadline, data = time.time() + 120, []
    while time.time() < deadline:
        data = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/trials", timeout=60).json()["data"]
        if len(data) >= count:
            break
        time.sleep(0.5)
    return {t["run_id"]: t for t in data}


def test_extending_the_finished_sweep_runs_only_what_is_missing(views: Views, tmp_path: Path) -> None:
    """Last in this module: it grows the sweep the tests above read."""
    url = f"{views.url}/v1/sweeps/{views.sweep}/extend"
    before = {t["run_id"]: t for t in httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/trials", timeout=60).json()[
        "data"]}
    parent = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}", timeout=60).json()["mlflow_parent_run_id"]
    for change, named in (({"horizon": 8}, "horizon"), ({"seeds": [1, 2]}, "seeds"), ({}, "adds nothing")):
        refused = httpx.post(url, json={**SPEC, **change}, headers=AUTH, timeout=60)
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json") and named in refused.text
    assert httpx.post(url, json=SPEC, timeout=60).status_code == 401

    grown = {**SPEC, "seeds": [0, 1, 2], "search": {"space": {"K": [2, 3, 4, 5], "gamma": [0.15, 0.25]}}}
    accepted = httpx.post(url, json=grown, headers=AUTH, timeout=60)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["added"] == ["seeds [2]", "K values [5]"]
    again = httpx.post(url, json=grown, headers=AUTH, timeout=60)  # queued or running: not finished
    assert again.status_code == 409 and "only a SUCCEEDED, FAILED or CANCELLED sweep" in again.text, again.text
    with httpx.Client(base_url=views.url, timeout=60) as client:
        done = wait_job(client, f"/v1/sweeps/{views.sweep}")
    assert done["state"] == "SUCCEEDED" and done["mlflow_parent_run_id"] == parent, done
    after = _trials(views, 27)
    assert set(before) <= set(after)  # the old runs kept, none re-run
    new = [t for key, t in after.items() if key not in before]
    # 6 old points on the new seed, 2 new points on 3 seeds, adamw on the new seed: 6 + 6 + 1.
    assert len(new) == 13 and len(after) == 27
    old_seeds = {(t["params"].get("K"), t["seed"]) for t in new if t["role"] == "search" and t["seed"] != 2}
    assert old_seeds == {(5, 0), (5, 1)}
    best = httpx.get(f"{views.url}/v1/sweeps/{views.sweep}/best", timeout=60).json()  # the same version
    assert best["seeds"] == [0, 1, 2] and len(best["points"]) == 8 and best["best"] == {"K": 3, "gamma": 0.15}
    assert all(len(p["seed_objectives"]) == 3 for p in best["points"])

    # The CLI extends the same folder (a driver of its own, as `sweep run` is): a baseline more.
    spec_file = tmp_path / "more.yaml"
    registry = Path(str(views.settings.trainers))
    more = {**grown, "baselines": ["adamw", "muon"],
            "tracking": {"tracking_uri": str(views.settings.mlflow_tracking_uri)}}
    spec_file.write_text(yaml.safe_dump(more))
    ran = subprocess.run([sys.executable, "-m", "scalesweep_cli", "sweep", "extend", str(spec_file), "--workdir",
                          views.workdir, "--quiet"], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "SCALESWEEP_TRAINERS": str(registry)})
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "muon" in ran.stdout
    final = _trials(views, 30)
    assert len(final) == 30 and sorted(t["seed"] for t in final.values() if t["arm"] == "muon") == [0, 1, 2]
    wrong = subprocess.run([sys.executable, "-m", "scalesweep_cli", "sweep", "extend", str(spec_file), "--workdir",
                            str(tmp_path)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "SCALESWEEP_TRAINERS": str(registry)})
    assert wrong.returncode == 2 and "holds no sweep to extend" in wrong.stderr and "Traceback" not in wrong.stderr
