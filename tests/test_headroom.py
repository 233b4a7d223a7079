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
    assert headroom.rung_steps(rungs, 1000, 0.0) == dict.fromkeys(rungs, 1000)  # the study's rule
    steps = headroom.rung_steps(rungs, 600, 0.5)
    assert list(steps.values()) == sorted(steps.values()) and steps["cpu-xs1"] == 600 and steps["cpu-l"] == 4130
    # the reference is the ladder's smallest rung whichever rungs one process runs
    assert headroom.rung_steps(["cpu-l"], 600, 0.5) == {"cpu-l": 4130}
    assert all(s % 10 == 0 for s in steps.values())
    assert headroom.rung_steps(rungs, 300, 0.0) == dict.fromkeys(rungs, 300)
    for smoke in (False, True):
        cfg = TrialConfig.model_validate(headroom.trial_config("cpu-l", 2, 8240, 1, smoke))
        assert (cfg.data.name, cfg.data.image_size, cfg.resolved_patch, cfg.eval.extractor) == (
            "scenes", 32, 4, "scenes-cnn")
        assert cfg.resolved_eval_steps == [4120, 6180, 8240]  # 1/2, 3/4 and the end


def test_the_table_is_the_mean_and_interval_over_seeds_at_the_last_eval_step(headroom: Any, tmp_path: Path) -> None:
    def record(rung: str, seed: int, val: float, fd: float, share: float) -> None:
        result = {"val_loss": {"10": 9.0, "20": val}, "fd": {"10": 999.0, "20": fd}, "fd_infinity": {},
                  "alignment": {"20": {"alignment": share, "alignment.colour": 1.0}}}
        (tmp_path / f"{rung}-seed{seed}.json").write_text(json.dumps(
            {"rung": rung, "seed": seed, "block_parameters": headroom.block_parameters(rung),
             "config": {"steps": 20}, "result": result}))

    record("cpu-xs", 0, 0.10, 50.0, 0.2)
    record("cpu-xs", 1, 0.12, 54.0, 0.4)
    record("cpu-xs1", 0, 0.30, 90.0, 0.0)
    _, _, rows = headroom.headroom_tables(tmp_path, n_boot=10)["rungs"]
    assert list(rows) == [("cpu-xs1",), ("cpu-xs",)]  # smallest first
    xs = rows[("cpu-xs",)]
    assert xs["seeds"][0] == (2,) and xs["val loss"][0][0] == pytest.approx(0.11)
    fd, lo, hi = xs["FD (scenes-cnn, 1024)"][0]  # the last eval step's, with a t interval (1 df: 12.706 x se 2)
    assert fd == 52.0 and (lo, hi) == pytest.approx((52.0 - 12.7062 * 2, 52.0 + 12.7062 * 2), abs=1e-3)
    assert xs["alignment (all correct)"][0][0] == pytest.approx(0.3) and "FD-infinity" not in xs
    assert rows[("cpu-xs1",)]["FD (scenes-cnn, 1024)"] == ((90.0,), "90.0 (one run)")


def _ladder(headroom: Any, folder: Path, values: Any, seeds: int = 3) -> None:
    """Records for the five default rungs: values(n, seed) -> (val loss, FD, alignment) at the last eval step."""
    for rung in headroom.DEFAULT_RUNGS.split(","):
        n = headroom.block_parameters(rung)
        for seed in range(seeds):
            val, fd, share = values(n, seed)
            result = {"val_loss": {"5": 9.0, "10": val}, "fd": {"10": fd}, "fd_infinity": {"10": fd - 1},
                      "alignment": {"10": {"alignment": share, "alignment.count": min(1.0, share + 0.1)}}}
            (folder / f"{rung}-seed{seed}.json").write_text(json.dumps(
                {"rung": rung, "seed": seed, "block_parameters": n, "config": {"steps": 10}, "result": result}))


def test_a_ladder_on_a_known_power_law_is_better_at_every_rung_and_its_held_out_rung_is_predicted(
        headroom: Any, tmp_path: Path) -> None:
    noise = (0.99, 1.0, 1.01)  # per seed, multiplicative: a spread far below the gaps between rungs
    _ladder(headroom, tmp_path, lambda n, s: ((0.05 + 30 * n ** -0.5) * noise[s], (20 + 4e4 * n ** -0.6) * noise[s],
                                              1 - (0.1 + 50 * n ** -0.4) * noise[s]))
    tables = headroom.headroom_tables(tmp_path, n_boot=100)
    steps = tables["steps"][2]
    assert len(steps) == 4 and all(row["better beyond the spread"][1] == "val loss, FD, alignment"
                                   for row in steps.values())
    assert steps[("cpu-xs", "cpu-xs1")]["val loss Δ"][0][0] < 0 and steps[("cpu-xs", "cpu-xs1")]["n"][0] == (3,)
    fits = tables["fits"][2]
    assert set(fits) == {("val loss",), ("FD",), ("FD-infinity",), ("1 − alignment",)}
    val = fits[("val loss",)]
    alpha, lo, hi = val["alpha [95 %]"][0]
    assert lo <= 0.5 <= hi and lo > 0 and abs(alpha - 0.5) < 0.1  # the exponent put in, identifiable
    assert val["held out"][1] == "cpu-l" and val["prediction"][1] == "pass"
    assert "| rung | Muon group |" in headroom.markdown(tables["rungs"])[0]


def test_a_flat_top_rung_fails_the_step_and_misses_its_prediction(headroom: Any, tmp_path: Path) -> None:
    """A ladder whose largest rung is no better than the one below: the table says so, and the fit on the
    four smaller rungs misses it (reported as a miss, not hidden)."""
    top = headroom.block_parameters("cpu-l")
    below = headroom.block_parameters("cpu-m")
    noise = (0.99, 1.0, 1.01)

    def values(n: int, s: int) -> tuple[float, float, float]:
        m = below if n == top else n
        return (0.05 + 30 * m ** -0.5) * noise[s], (20 + 4e4 * m ** -0.6) * noise[s], 0.5

    _ladder(headroom, tmp_path, values)
    tables = headroom.headroom_tables(tmp_path, n_boot=100)
    assert tables["steps"][2][("cpu-l", "cpu-m")]["better beyond the spread"][1] == "none"
    assert tables["fits"][2][("val loss",)]["prediction"][1] == "MISS"
