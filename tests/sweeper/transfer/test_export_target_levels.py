"""The export's steps-to-target evidence is read at the exported rung's own target level, on synthetic records with
known crossings (`test_transfer_targets`: FD falls linearly from 300 at `slope x (N0 / N)^0.3` per step, so steps to
a level L at a rung are (300 - L) / that, exactly, and a size fit at one level has exponent -0.3). No Ray, no MLflow.
"""

from __future__ import annotations

import pytest

from .test_transfer_targets import ARMS, SIZES, SLOPE, _result, _run

RUNGS = ["cpu-xs", "cpu-s", "cpu-m"]
# Each rung its own target, tighter with size: fitted across the three, steps to target would mix size with how
# hard each target is; the analysis leads with one level (the headline) and lists the others.
TARGETS = {"cpu-xs": 250.0, "cpu-s": 230.0, "cpu-m": 210.0}


def _steps(arm: str, rung: str, level: float) -> float:
    return (300.0 - level) / (SLOPE[arm] * (SIZES["cpu-xs"] / SIZES[rung]) ** 0.3)


def _fitted(targets: dict[str, float]):
    runs = [_run(g, a, s) for g in RUNGS for a in ARMS for s in (0, 1)]
    return _result(runs, RUNGS, seeds=(0, 1), target={"rule": "fixed", "values": targets})


def test_the_export_reads_steps_to_target_at_the_rungs_own_level_not_the_headline() -> None:
    result = _fitted(TARGETS)
    assert result.targets_differ()
    # Every arm crosses 250 at every rung (AdamW at cpu-m in 18.4 of 24 steps): no run censored there, so the
    # headline is 250, the loosest level. At cpu-m's own 210 periodic needs 20.7 steps, not the headline's 11.5.
    assert result.level_fits().headline == 250.0
    assert result.predict("periodic", "cpu-m", "steps_to_target")[0] == pytest.approx(
        _steps("periodic", "cpu-m", 250.0), rel=1e-3)
    assert _steps("periodic", "cpu-m", 210.0) == pytest.approx(20.73, abs=0.01)
    assert _steps("periodic", "cpu-m", 250.0) == pytest.approx(11.52, abs=0.01)
    for rung in RUNGS:
        evidence = result.export(rung).arms["periodic"].evidence
        fit = evidence["steps_to_target_fit"]
        assert evidence["target"] == fit["target_level"] == TARGETS[rung]
        assert fit["target_level_of"] == f"{rung}'s own target"
        # The curve fitted across rungs at this one level, read at this rung, lands on the steps measured here.
        assert fit["point"] == pytest.approx(_steps("periodic", rung, TARGETS[rung]), rel=1e-3)
        assert evidence["steps_to_target_mean"] == pytest.approx(_steps("periodic", rung, TARGETS[rung]))
        assert fit["lo"] <= fit["point"] <= fit["hi"]
        assert evidence["time_to_target_fit"]["error"].startswith("the rungs' targets differ")
    # AdamW never reaches 210 at cpu-s (25.8 steps) or cpu-m (33.1) within 24: both cells censored, refused, one rung
    # left, no fit at that level; the export says so at cpu-m's level rather than answer with the headline's.
    adamw = result.export("cpu-m").arms["adamw"].evidence["steps_to_target_fit"]
    assert adamw["target_level"] == 210.0 and "point" not in adamw and adamw["refused"]


def test_a_rung_the_transfer_did_not_run_is_read_at_the_headline_level_said_so() -> None:
    result = _fitted(TARGETS)
    fit = result.export("cpu-l").arms["periodic"].evidence["steps_to_target_fit"]
    assert fit["target_level"] == 250.0
    assert fit["target_level_of"].startswith("the headline level (among the declared levels with a fit")
    assert fit["target_level_of"].endswith("cpu-l declared no target in this transfer")


def test_one_target_for_every_rung_is_the_level_of_every_rung() -> None:
    result = _fitted(dict.fromkeys(RUNGS, 230.0))
    assert not result.targets_differ()
    fit = result.export("cpu-m").arms["muon"].evidence["steps_to_target_fit"]
    assert fit["target_level"] == 230.0 and fit["target_level_of"] == "every rung's target"
    assert fit["point"] == pytest.approx(_steps("muon", "cpu-m", 230.0), rel=1e-3)  # 12.9 steps
