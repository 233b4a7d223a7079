"""Shared test settings: offline, one torch thread, and one feature-network cache per test session."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

# The tiny trial every test that trains for real starts from (tests import it, or take the `tiny_trial` fixture):
# seconds on one CPU thread; pixel features pooled to 4x4 (48-d) keep FD cheap and need no training. These are the
# fields a sweep spec's `trial` section may set; `tiny_trial()` adds the rung, steps and eval steps of a whole
# trial config.
TINY_TRIAL: dict[str, Any] = {
    "batch_size": 16,
    "warmup_steps": 4,
    "log_every": 4,
    "text_encoder": "learned",
    "eval": {
        "extractor": "pixels",
        "extractor_options": {"size": 4},
        "fd_samples": 96,
        "reference_samples": 256,
        "sample_steps": 4,
        "val_samples": 32,
        # 4 tracking evaluations, not the default 12: at 24 steps each costs about as much as the training
        # between them (a tiny trial 9.5 s with 12, 4.3 s with 3, measured). Tests that read the tracking curve
        # set their own.
        "track_points": 4,
        # The tracking sampler at the full evaluation's 4 Euler steps, not its default 8: a tracking point at an
        # eval step is then taken from that evaluation's features instead of sampling again, and the others cost
        # half (one tiny tracked trial: 7.1 s with 8 steps, measured below with 4).
        "track_sample_steps": 4,
    },
}


def tiny_trial(**overrides: Any) -> dict[str, Any]:
    """A fresh tiny `TrialConfig` mapping (cpu-xs, 24 steps, eval at 12 and 24); a mapping override is merged
    into the field's mapping (`eval={"fd_samples": 160}` keeps the other eval fields)."""
    cfg: dict[str, Any] = {"rung": "cpu-xs", "steps": 24, "eval_steps": [12, 24], **copy.deepcopy(TINY_TRIAL)}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


@pytest.fixture
def tiny_trial_config() -> Callable[..., dict[str, Any]]:
    """`tiny_trial` as a fixture: `tiny_trial_config(steps=6)` is a fresh tiny trial config."""
    return tiny_trial


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # 2 cores shared by everything: one torch thread per test process avoids oversubscription (20x slowdowns seen).
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Every test starts on one torch thread, whatever an earlier test (or a trial's `threads`) set."""
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def _feature_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The label CNN behind 'shapes-cnn' trains once per session, not once per test (and never in ~/.cache)."""
    if "SCALESWEEP_CACHE_DIR" not in os.environ:
        os.environ["SCALESWEEP_CACHE_DIR"] = str(tmp_path_factory.mktemp("scalesweep-cache"))


@pytest.fixture(scope="session")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow SQLite store for the session, created once up front (creating a store takes seconds, and
    concurrent first-time creation corrupts it); each test uses its own experiment."""
    from trials import ensure_store

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    ensure_store(uri, "setup")
    return uri


# Under CI (.ci/run sets SCALESWEEP_CI=1) every extra, tool and server a test needs is installed, so a skip means
# something went missing: it fails instead. The one skip CI keeps: a test marked `gpu` (CI has no GPU; docs/testing.md
# says where it runs).
CI_KEPT_SKIPS = ("gpu",)


def _skip_kept_under_ci(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in CI_KEPT_SKIPS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("SCALESWEEP_CI") != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if not _skip_kept_under_ci(item):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI (SCALESWEEP_CI=1), where nothing may be missing: {reason}"


# `make test-fast` runs what is not marked `integration` (docs/testing.md). A test is integration when it starts
# processes or trains: a test taking one of these fixtures is marked by that alone (the shared live service and its
# study, a live service, a module's Ray runtime, a real sweep-and-transfer study, torch.distributed ranks, a Ray
# cluster, PostgreSQL, a live service with a finished sweep of command trainers) ...
INTEGRATION_FIXTURES = frozenset({"service_study", "live", "study", "ray_local", "case", "ranks", "cluster",
                                  "postgres_server", "views"})
# ... and so is every test of these modules, or these tests, which start drivers, trials, interpreters, ranks or
# a browser from within the test, or fuzz the whole API (docs/testing.md has what each costs).
INTEGRATION_TESTS = (
    "tests/api/test_cancel_tree.py",
    "tests/api/test_credentials.py",
    "tests/api/test_end_to_end.py",
    "tests/api/test_service_environ.py",
    "tests/api/test_schema_fuzz.py",
    "tests/sweeper/test_sweep_process.py",
    "tests/sweeper/test_cli.py",
    "tests/trials/test_proctree.py",
    "tests/trials/test_run.py",
    "tests/trials/test_sharded.py::test_the_readme_fsdp2_example_runs_under_torchrun",
    "tests/dashboards/test_report.py",
    "tests/test_docs.py::test_python_block_runs",
    "tests/test_lanes.py",
)


def _integration(item: pytest.Item) -> bool:
    path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
    test = f"{path}::{item.name.split('[')[0]}"
    return (path in INTEGRATION_TESTS or test in INTEGRATION_TESTS
            or bool(INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())))
            or item.get_closest_marker("integration") is not None)


# tests/deploy starts the whole deployment (PostgreSQL, an MLflow server, a Ray cluster, the service): it runs by
# `make test-deploy` (docs/deployment.md), not in the main suite. It is collected only when named on the command line.
DEPLOY_TESTS = ROOT / "tests" / "deploy"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path != DEPLOY_TESTS:
        return None
    named = [Path(str(arg).split("::")[0]).resolve() for arg in config.args]
    return not any(p == DEPLOY_TESTS or DEPLOY_TESTS in p.parents for p in named) or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _integration(item):
            item.add_marker(pytest.mark.integration)
    if not torch.cuda.is_available():
        no_gpu = pytest.mark.skip(reason="gpu: needs a CUDA device (torch.cuda.is_available() is False here)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(no_gpu)
