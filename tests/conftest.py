"""Shared test settings: offline, one torch thread, and one feature-network cache per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import torch


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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow (skipped by default)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not torch.cuda.is_available():
        no_gpu = pytest.mark.skip(reason="gpu: needs a CUDA device (torch.cuda.is_available() is False here)")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(no_gpu)
    if config.getoption("--run-slow") or os.environ.get("SCALESWEEP_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: pass --run-slow or set SCALESWEEP_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
