"""Sweeper test settings: tiny trials and a fake external trainer (the session's MLflow store, `store_uri`, is in
tests/conftest.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ..conftest import TINY_TRIAL  # the one tiny trial; scaling tests import it from here too

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAKE_TRAINER = HERE / "fake_trainer.py"


def fake_backend(markers: Path | None = None, **env: str) -> dict[str, Any]:
    """The command backend running tests/sweeper/fake_trainer.py (no training; behaviour set by FAKE_* env)."""
    command = [
        sys.executable, str(FAKE_TRAINER), "--optimizer", "{optimizer}", "--K", "{K}", "--gamma", "{gamma}",
        "--seed", "{seed}", "--steps", "{steps}", "--eval-steps", "{eval_steps}", "--progress", "{progress_file}",
    ]
    if markers is not None:
        env = {**env, "FAKE_MARKERS": str(markers)}
    return {"name": "command", "command": command, "env": env, "poll_s": 0.05}


def make_spec(name: str, store_uri: str, **fields: Any) -> dict[str, Any]:
    """A plain spec mapping: tiny trials, 2 local CPUs, this session's store, experiment = name."""
    spec: dict[str, Any] = {
        "name": name,
        "rung": "cpu-xs",
        "horizon": 24,
        "search": {"space": {"K": [2, 3], "gamma": [0.15, 0.25]}},
        "baselines": ["adamw"],
        "execution": {"concurrency": 2, "num_cpus": 2},
        "trial": json.loads(json.dumps(TINY_TRIAL)),
        "tracking": {"tracking_uri": store_uri, "experiment": name},
    }
    spec.update(fields)
    return spec


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump(spec))
    return path
