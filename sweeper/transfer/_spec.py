"""A transfer's spec: which finished sweep's chosen pair to carry, unchanged, to which larger rungs, beside which
baseline arms, at what horizon, with which lr and weight-decay rules, target, timing and verification. Validated
by pydantic; `TransferSpec.fingerprint` is what a resumed transfer must match.

The sections the analysis reads back (target, horizon, timing, plateau, verification) and the lr rules are
`scaling`'s pure types: a transfer is planned and run here and analysed there from the same definitions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from scaling import TransferError
from scaling.export import LrRule, WdRule
from scaling.rounds import RoundsSpec
from scaling.rungs import HorizonSpec, PlateauSpec, TargetSpec, TimingSpec
from trials.optim import ARMS

from ..specs import ExecutionSpec, SweepTracking, read_spec
from ..specs.checks import MAX_HORIZON, MAX_SEEDS, Seeds, TrialSection
from ._verification import VerifySpec

__all__ = ["ARMS", "TransferSpec", "default_transfer_workdir", "load_transfer_spec"]

_ARMS = ARMS
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

ArmName = Literal["periodic", "muon", "adamw", "rownorm"]
LrRuleName = LrRule


class TransferSpec(BaseModel):
    """One transfer: the chosen pair of a finished sweep, fixed, at larger rungs beside the baseline arms."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(..., pattern=_NAME_PATTERN, description="Transfer name (run names, work folder).")
    sweep: str = Field(..., min_length=1, description="The finished sweep's work folder (holds sweep.json).")
    rungs: list[str] | None = Field(
        None,
        description="Rungs to run (trials.models.list_rungs()); None = the sweep's rung and every larger rung of "
        "its family. The sweep's rung is run again at the transfer horizon: a fit must not mix horizons.",
    )
    arms: list[ArmName] = Field(
        default_factory=lambda: ["periodic", "muon", "adamw"],  # type: ignore[arg-type]
        description="Optimizer arms at every rung: the sweep's searched arm (it carries the chosen pair) and the "
        "baselines. Default: the paper's three.",
    )
    horizon_factor: float = Field(
        2.0, gt=0, le=100, description="Horizon as a multiple of the sweep's (2.0: the paper's 30k -> 60k steps)."
    )
    steps: int | None = Field(None, ge=1, le=MAX_HORIZON, description="Horizon in steps; overrides horizon_factor.")
    seeds: Seeds | None = Field(
        None, min_length=1, max_length=MAX_SEEDS, description="Seeds of every run; None = the sweep's."
    )
    lr_rules: dict[ArmName, LrRuleName] = Field(
        default_factory=dict,
        description="Rule carrying each arm's lr from the sweep's rung (unchanged | width | sqrt_width); "
        "unlisted arms: the Muon family unchanged (already shape-adjusted), or width under adjust_lr_fn "
        "match_rms_adamw (its update RMS is AdamW's); AdamW width (muP).",
    )
    weight_decay_rule: WdRule = Field(
        "keep_lr_wd",
        description="What an arm's decoupled weight decay does when its lr changes with width: keep_lr_wd (wd x "
        "lr_base / lr, so the per-step decay lr x wd is kept) or keep_wd (wd unchanged, lr x wd shrinks with lr).",
    )
    verify: VerifySpec | None = Field(
        None,
        description="A verification stage: a one-at-a-time bracket (K +-1, gamma x0.5/x2, lr x0.5/x2) around the "
        "transferred point at the largest rung (or verify.rung) on the transfer's seeds, answered held / moved / "
        "inconclusive. None = no verification.",
    )
    execution: ExecutionSpec | None = Field(
        None, description="Concurrency and resources (sweeper.ExecutionSpec); None = the sweep's."
    )
    tracking: SweepTracking | None = Field(
        None, description="MLflow URI and experiment; None = the sweep's store and experiment."
    )
    # The same rules as a sweep's section, at submission: a transfer runs as a sweep, which would refuse an owned
    # field or a bad value only at planning, after the transfer was accepted.
    trial: TrialSection = Field(
        default_factory=dict,
        description="TrialConfig overrides on top of the sweep's `trial` section (nested keys merge), e.g. "
        "{eval: {fd_samples: 2048}}.",
    )
    target: TargetSpec = Field(
        default_factory=lambda: TargetSpec(),
        description="The quality target, declared before any run and applied alike to every arm and seed "
        "(recorded on the parent run and in exports): final_mean (default: 1.1 x AdamW's mean final quality "
        "at each rung) or fixed values per rung.",
    )
    horizon: HorizonSpec = Field(
        default_factory=lambda: HorizonSpec(),
        description="Steps per rung: fixed (the paper: every rung at the transfer horizon) or per_param "
        "(images_per_param x parameters / batch, capped).",
    )
    timing: TimingSpec = Field(
        default_factory=lambda: TimingSpec(),
        description="Short timing runs per arm and rung (per-step time in isolation, before the runs start).",
    )
    plateau: PlateauSpec = Field(
        default_factory=lambda: PlateauSpec(), description="The plateau check that flags undertrained rungs."
    )
    rounds: RoundsSpec | None = Field(
        None,
        description="Seeds added in rounds (rounds.add new seeds each) until the searched arm's saving against "
        "rounds.against at rounds.rung is shown (its test at alpha over the looks the budget allows) or the "
        "budget (rounds.max_seeds) is spent. None = one round on the transfer's seeds.",
    )

    @field_validator("rungs")
    @classmethod
    def _known_rungs(cls, rungs: list[str] | None) -> list[str] | None:
        if rungs is None:
            return None
        from trials.models import check_rung

        if not rungs or len(set(rungs)) != len(rungs):
            raise ValueError(f"rungs must be a non-empty list of distinct rungs, got {rungs}")
        return [check_rung(r) for r in rungs]

    @field_validator("arms")
    @classmethod
    def _distinct_arms(cls, arms: list[str]) -> list[str]:
        if not arms or len(set(arms)) != len(arms):
            raise ValueError(f"arms must be a non-empty list of distinct arms from {list(_ARMS)}, got {arms}")
        return arms

    @model_validator(mode="after")
    def _rules_for_arms(self) -> TransferSpec:
        extra = sorted(set(self.lr_rules) - set(self.arms))
        if extra:
            raise ValueError(f"lr_rules names arms {extra} that are not in arms {self.arms}")
        if self.target.rule == "final_mean" and self.target.arm not in self.arms:
            raise ValueError(f"target.arm {self.target.arm!r} must be one of arms {self.arms}")
        if self.rounds is not None:
            if self.rounds.against not in self.arms:
                raise ValueError(f"rounds.against {self.rounds.against!r} must be one of arms {self.arms}")
            if self.rounds.rung is not None and self.rungs is not None and self.rounds.rung not in self.rungs:
                raise ValueError(f"rounds.rung {self.rounds.rung!r} must be one of rungs {self.rungs}")
            if self.seeds is not None and len(self.seeds) > self.rounds.max_seeds:
                raise ValueError(f"rounds.max_seeds ({self.rounds.max_seeds}) is below the {len(self.seeds)} "
                                 "seeds the first round runs")
        if self.rungs is not None and self.target.rule == "fixed":
            missing = [r for r in self.rungs if r not in self.target.values]
            if missing:
                raise ValueError(f"target.values has no value for rungs {missing}")
        return self

    def fingerprint(self) -> str:
        """What a resumed transfer must match: everything but `execution`, which may change on resume."""
        payload = self.model_dump(mode="json", exclude={"execution"})
        if payload.get("weight_decay_rule") == "keep_lr_wd":  # added later: older transfers resume
            payload.pop("weight_decay_rule")
        for later in ("verify", "rounds"):  # added later: older transfers resume
            if payload.get(later, 0) is None:
                payload.pop(later)
        # Sections added later are left out while at their defaults, so transfers started before them resume.
        for key, default in (("target", TargetSpec()), ("horizon", HorizonSpec()), ("timing", TimingSpec()),
                             ("plateau", PlateauSpec())):
            if payload.get(key) == default.model_dump(mode="json"):
                payload.pop(key)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def load_transfer_spec(source: str | Path | Mapping[str, Any]) -> TransferSpec:
    """A `TransferSpec` from a YAML or JSON file, or a mapping. Raises FileNotFoundError, TransferError for
    unreadable text, and pydantic's ValidationError (a ValueError) naming the field and the allowed values."""
    return read_spec(source, TransferSpec, "transfer", TransferError)


def default_transfer_workdir(name: str) -> Path:
    """Where a transfer keeps its state unless told otherwise (`out/` is git-ignored)."""
    return Path("out") / "transfers" / name
