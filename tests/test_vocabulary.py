"""One vocabulary: the arm names are defined once, in `trials.optim`, and every package uses that definition."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import dashboards
import trials.optim
from scaling.export import DEFAULT_LR_RULE
from sweeper.specs import BaselineSpec
from sweeper.transfer._sections import TargetSpec

ROOT = Path(__file__).resolve().parents[1]


def test_the_arms_are_the_optimizer_registry() -> None:
    arms_and_controls = trials.optim.ARMS + trials.optim.CONTROL_ARMS
    assert not set(trials.optim.ARMS) & set(trials.optim.CONTROL_ARMS)
    assert set(arms_and_controls) == set(trials.optim.list_optimizers()) == set(trials.optim.DEFAULT_LR)
    assert set(trials.optim.MUON_FAMILY) == set(trials.optim.ARMS) - {"adamw"}
    assert set(trials.optim.ARMS_WITH_GAMMA) <= set(trials.optim.MUON_FAMILY)
    assert get_args(trials.optim.OptimizerConfig.model_fields["name"].annotation) == arms_and_controls


def test_every_package_names_the_same_arms() -> None:
    assert dashboards.ARMS is trials.optim.ARMS
    assert set(DEFAULT_LR_RULE) == set(trials.optim.ARMS)
    # A baseline may also be a control arm (a transfer runs its positive control as one).
    assert get_args(BaselineSpec.model_fields["arm"].annotation) == trials.optim.ARMS + trials.optim.CONTROL_ARMS
    assert get_args(TargetSpec.model_fields["arm"].annotation) == trials.optim.ARMS


def test_the_arm_names_load_no_torch() -> None:
    code = "import sys; from trials.optim import ARMS; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr[-2000:]
