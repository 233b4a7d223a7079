"""benchmarks/headroom.py: its compute rule, its trial (valid, at the scenes set's size) and its table's derivation."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from trials import TrialConfig

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def headroom() -> Any:
    spec = importlib.util.spec_from_file_location("benchmarks_headroom", ROOT / "benchmarks" / "headroom.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_steps_grow_with_size_and_every_trial_validates(headroom: Any) -> None:
    rungs = headroom.DEFAULT_RUNGS.split(",")
    steps = headroom.rung_steps(rungs, 600, 0.5)
    assert list(steps.values()) == sorted(steps.values()) and steps["cpu-3xs"] == 600 and steps["cpu-l"] == 8250
    assert all(s % 10 == 0 for s in steps.values())
    assert headroom.rung_steps(rungs, 300, 0.0) == dict.fromkeys(rungs, 300)
    for smoke in (False, True):
        cfg = TrialConfig.model_validate(headroom.trial_config("cpu-l", 2, 8240, 1, smoke))
        assert (cfg.data.name, cfg.data.image_size, cfg.resolved_patch, cfg.eval.extractor) == (
            "scenes", 32, 4, "scenes-cnn")


def test_the_table_is_the_mean_and_spread_over_seeds_at_the_last_eval_step(headroom: Any, tmp_path: Path) -> None:
    def record(rung: str, seed: int, val: float, fd: float, share: float) -> None:
        result = {"val_loss": {"10": 9.0, "20": val}, "fd": {"10": 999.0, "20": fd}, "fd_infinity": {},
                  "alignment": {"20": {"alignment": share, "alignment.colour": 1.0}}}
        (tmp_path / f"{rung}-seed{seed}.json").write_text(json.dumps(
            {"rung": rung, "seed": seed, "block_parameters": headroom.block_parameters(rung),
             "config": {"steps": 20}, "result": result}))

    record("cpu-xs", 0, 0.10, 50.0, 0.2)
    record("cpu-xs", 1, 0.12, 54.0, 0.4)
    record("cpu-3xs", 0, 0.30, 90.0, 0.0)
    rows = headroom.derive_table(tmp_path)
    assert [r["rung"] for r in rows] == ["cpu-3xs", "cpu-xs"]  # smallest first
    xs = rows[1]
    assert xs["seeds"] == 2 and xs["val_loss"][0] == pytest.approx(0.11) and xs["fd_scenes_cnn"][0] == 52.0
    assert xs["fd_scenes_cnn"][1] == pytest.approx(2 * 2**0.5) and xs["alignment"][0] == pytest.approx(0.3)
    assert rows[0]["fd_scenes_cnn"] == (90.0, 0.0, 1) and xs["fd_infinity"] is None
