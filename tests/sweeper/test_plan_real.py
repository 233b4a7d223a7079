"""The planner against real runs: `scalesweep sweep plan` measures a tiny sweep's calibration (real training steps,
then the cache), then the sweep runs as a user runs it (`scalesweep sweep run` in a process of its own: its own Ray,
MLflow, figures) and its actual wall time must lie within +-30 % of the estimate; likewise a tiny transfer of it
(one rung, two arms, an isolated timing stage). Each job takes about a minute on the shared 2-core machine, most of
it the fixed costs the estimate must also count (Ray's start, the workers' imports, the finish stage)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scalesweep_cli import main

from .conftest import REPO, TINY_TRIAL, write_spec

pytestmark = pytest.mark.integration

TOLERANCE = 0.30


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("plan-real")


def _run(kind: str, spec: Path, workdir: Path) -> dict[str, Any]:
    """`scalesweep <kind> run SPEC --workdir DIR --quiet` in a process of its own; its estimate file."""
    proc = subprocess.run([sys.executable, "-m", "scalesweep_cli", kind, "run", str(spec), "--workdir", str(workdir),
                           "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "machine-hours: estimated" in proc.stdout, proc.stdout[-2000:]
    return json.loads((workdir / "estimate.json").read_text())


def _plan(capsys: pytest.CaptureFixture[str], kind: str, spec: Path) -> dict[str, Any]:
    assert main([kind, "plan", str(spec), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _ratio(doc: dict[str, Any], planned: dict[str, Any]) -> float:
    assert doc["estimated_wall_s"] == pytest.approx(planned["estimated_wall_s"])  # the driver's, from the cache
    ratio = float(doc["actual_wall_s"] / doc["estimated_wall_s"])
    print(f"{planned['kind']}: estimated {doc['estimated_wall_s']:.1f} s, actual {doc['actual_wall_s']:.1f} s, "
          f"ratio {ratio:.2f}", file=sys.__stderr__)  # the figures docs/benchmarks.md records
    return ratio


def _attempt(root: Path, store_uri: str, capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    """Plan (measuring the calibration now), run, and compare, for the sweep and then its transfer: the ratios."""
    from sweeper.demand import step_cost

    root.mkdir(parents=True, exist_ok=True)
    sweep = write_spec(root / "sweep.yaml", {
        "name": "plan-sweep", "rung": "cpu-xs", "horizon": 24,
        "search": {"space": {"K": [3], "gamma": [0.15, 0.25]}}, "baselines": ["adamw"],
        "backend": {"name": "builtin", "checkpoints": False}, "execution": {"concurrency": 2, "num_cpus": 2},
        "trial": json.loads(json.dumps(TINY_TRIAL)), "tracking": {"tracking_uri": store_uri, "experiment": "plan"}})
    planned = _plan(capsys, "sweep", sweep)
    assert planned["trials"] == 3 and planned["estimated_wall_s"] > 0
    # Measured now (an empty cache), then read back: the same key, no training.
    assert {c["source"] for c in planned["calibration"].values()} == {"measured now"}
    trial = {**TINY_TRIAL, "rung": "cpu-xs", "steps": 24, "optimizer": {"name": "periodic"}}
    cached = step_cost(trial, measure=False)
    assert cached is not None and cached.source == "cache" and cached.step_s > 0 and cached.eval_s > 0
    ratios = {"sweep": _ratio(_run("sweep", sweep, root / "sweep"), planned)}

    transfer = write_spec(root / "transfer.yaml", {
        "name": "plan-transfer", "sweep": str(root / "sweep"), "rungs": ["cpu-xs"], "arms": ["periodic", "adamw"],
        "steps": 24, "timing": {"method": "isolated", "steps": 4, "warmup": 1}})
    planned = _plan(capsys, "transfer", transfer)
    assert [(s["stage"], s["trials"]) for s in planned["stages"]] == [("timing", 2), ("run", 1), ("run", 1)]
    ratios["transfer"] = _ratio(_run("transfer", transfer, root / "transfer"), planned)
    return ratios


def test_a_tiny_sweep_and_its_transfer_take_what_the_plan_said(root: Path, store_uri: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # The estimate is measured on this machine's load at one moment and the run meets its load a minute later: in
    # the full suite the other lane's heavy tests start and stop in between. A second attempt, calibrated again,
    # runs only when the first misses; both attempts' ratios are in the message.
    from sweeper.demand import calibration_dir

    tried = []
    for attempt in range(2):
        shutil.rmtree(calibration_dir(), ignore_errors=True)
        ratios = _attempt(root / f"attempt-{attempt}", store_uri, capsys)
        tried.append(ratios)
        if all(1 - TOLERANCE <= r <= 1 + TOLERANCE for r in ratios.values()):
            break
    assert all(1 - TOLERANCE <= r <= 1 + TOLERANCE for r in tried[-1].values()), (
        f"actual / estimated wall time outside 1 +- {TOLERANCE} on every attempt: {tried}")
