"""The optimizer arms' names: the one vocabulary every package uses (specs, transfers, records, figures).

Torch-free on purpose: the sweeper's spec, scaling and dashboards name arms without loading torch.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["ARMS", "ARMS_WITH_GAMMA", "CONTROL_ARMS", "MUON_FAMILY", "ArmName", "ControlArmName"]

ArmName = Literal["adamw", "muon", "periodic", "rownorm"]

# Every arm, in the order tables and figures list them (the baseline first, the ablation last).
ARMS: tuple[ArmName, ...] = get_args(ArmName)

# Arms whose block matrices take an orthogonalised (Muon-style) step; AdamW is the only one that does not.
MUON_FAMILY: tuple[ArmName, ...] = ("muon", "periodic", "rownorm")

# Arms with a row-norm step ratio `gamma` (periodic every K steps between refreshes, rownorm every step).
ARMS_WITH_GAMMA: tuple[ArmName, ...] = ("periodic", "rownorm")

# Control arms: optimizers with a known answer, for checking a study's instrument, never a candidate or a baseline
# (so not in ARMS). `muon_extra_ns` is vanilla Muon plus one discarded Newton-Schulz per matrix per step: updates
# identical to Muon's, each step dearer by a known amount (the positive control of the per-step half;
# `trials.optim._control`). `muon_stretched` is vanilla Muon with a null step (no batch, no update) after every
# `stretch` steps: Muon's trajectory relabelled, so its steps ratio to Muon is exactly (stretch + 1) / stretch (the
# positive control of the steps half).
ControlArmName = Literal["muon_extra_ns", "muon_stretched"]
CONTROL_ARMS: tuple[ControlArmName, ...] = get_args(ControlArmName)
