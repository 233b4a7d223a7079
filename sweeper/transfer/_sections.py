"""The sections of a transfer spec that say how its runs are judged and timed: the quality target (with the pilot
of rule `pilot`), the horizon per rung, the per-step timing and the plateau check; and `rung_horizon`, the steps
one rung runs under a horizon section. Validated by pydantic, each refusal naming its field. The per-rung report
reads them through `scaling.rungs`' small protocols (`TargetRule`, `PlateauRule`), so `scaling` stays pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from scaling.targets import DEFAULT_PLATEAU_MAX_DROP, DEFAULT_PLATEAU_WINDOW
from trials.optim import ArmName
from trials.steptime import BlockSteps, LocalBatch, MaxRounds, TargetHalfwidth, TimedRounds, TimingClock, WarmupRounds

from ..specs.checks import MAX_HORIZON, Rung

__all__ = ["HorizonSpec", "PilotSpec", "PlateauSpec", "TargetSpec", "TimingSpec", "rung_horizon"]


class PilotSpec(BaseModel):
    """The pilot of target rule `pilot`: the reference arm trained longer than the transfer, at one rung, on seeds of
    its own, before any judged run, so the target is read off a plateau and fixed before the runs it judges."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    rung: Rung | None = Field(
        None, description="Rung of the pilot, one of the transfer's rungs; None = the transfer's smallest rung."
    )
    horizon_factor: float = Field(
        3.0, ge=1.5, le=20,
        description="The pilot's steps as a multiple of the transfer's horizon at its rung, 1.5 to 20 (3: long "
        "enough past the judged horizon for the curve to flatten; below 1.5 the pilot barely outruns the runs it "
        "sets the line for).",
    )
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] = Field(
        default_factory=lambda: [100, 101], min_length=1, max_length=8,
        description="The pilot's seeds, 1 to 8 distinct, none among the transfer's judged seeds (the runs that are "
        "judged must not set their own line).",
    )
    points: int = Field(
        24, ge=6, le=64,
        description="Tracking evaluations over the pilot's curve, 6 to 64, evenly spaced from 0.1 of its horizon "
        "to the end (plus its eval steps): dense enough to see the plateau (the judged runs keep their own).",
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"target.pilot.seeds must be distinct, got {seeds}")
        return seeds


class TargetSpec(BaseModel):
    """The quality target, declared before the runs (recorded on the transfer's parent run and in exports)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    rule: Literal["final_mean", "fixed", "pilot"] = Field(
        "final_mean",
        description="final_mean: (1 + slack) x the mean over seeds of `arm`'s final quality at each rung; "
        "fixed: `values[rung]` (lower is better, on the tracking FD's scale when runs track, else FD's); "
        "pilot: one target for every rung, (1 + slack) x the plateau quality of `arm`'s pilot (see `pilot`), "
        "derived before any judged run starts; with per_rung, a pilot at each rung and each rung's own target.",
    )
    per_rung: bool = Field(
        False,
        description="pilot only: a pilot at every rung (the reference arm, pilot.horizon_factor x that rung's horizon, "
        "on the pilot's seeds, before any judged run), each rung's target (1 + slack) x its own plateau quality "
        "(False: one pilot at pilot.rung, one target for every rung).",
    )
    arm: ArmName = Field("adamw", description="Reference arm of final_mean and pilot (AdamW: the baseline the paper "
                         "beats).")
    slack: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="final_mean's and pilot's margin above the reference's quality: 0.1 so that the reference arm "
        "itself reaches the target on most seeds before its end, not only on the seeds below its own mean.",
    )
    values: dict[str, Annotated[float, Field(gt=0, le=1e9)]] = Field(
        default_factory=dict, description="fixed: rung -> target value (> 0, at most 1e9)."
    )
    pilot: PilotSpec | None = Field(
        None, description="pilot: where, how long and on which seeds the reference arm's pilot trains (defaults: "
        "the transfer's smallest rung, 3 x its horizon, seeds [100, 101], 24 tracking points)."
    )

    @model_serializer(mode="wrap")
    def _without_unused_pilot(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The other rules dump as they did before `pilot` existed: the same tag, plan and fingerprint (transfers
        # started before it still resume).
        data: dict[str, Any] = handler(self)
        if data.get("pilot") is None:
            data.pop("pilot", None)
        if not data.get("per_rung"):  # as before per-rung pilots existed
            data.pop("per_rung", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _pilot_defaults(cls, data: Any) -> Any:
        # `{rule: pilot}` alone takes the pilot's defaults, stated in the recorded spec.
        if isinstance(data, Mapping) and data.get("rule") == "pilot" and data.get("pilot") is None:
            return {**data, "pilot": {}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> TargetSpec:
        if self.rule == "fixed" and not self.values:
            raise ValueError("target.values must give a value per rung when target.rule is 'fixed'")
        if self.rule != "fixed" and self.values:
            raise ValueError("target.values is only for target.rule 'fixed'")
        if self.rule != "pilot" and self.pilot is not None:
            raise ValueError(f"target.pilot is only for target.rule 'pilot', not {self.rule!r}")
        if self.per_rung and self.rule != "pilot":
            raise ValueError(f"target.per_rung is only for target.rule 'pilot', not {self.rule!r}")
        if self.per_rung and self.pilot is not None and self.pilot.rung is not None:
            raise ValueError(f"target.pilot.rung ({self.pilot.rung!r}) is for one pilot; with target.per_rung every "
                             "rung runs its own: allowed: null")
        bad = {r: v for r, v in self.values.items() if not (math.isfinite(v) and v > 0)}
        if bad:
            raise ValueError(f"target.values must be finite and > 0, got {bad}")
        return self

    def describe(self) -> str:
        if self.rule == "fixed":
            return f"fixed per rung: {dict(sorted(self.values.items()))}"
        if self.rule == "pilot" and self.pilot is not None and self.per_rung:
            p = self.pilot
            return (f"a target per rung: (1 + {self.slack:g}) x {self.arm}'s plateau quality in a pilot at that rung, "
                    f"{p.horizon_factor:g} x the rung's horizon, seeds {p.seeds} (the mean over seeds of the mean "
                    "quality over the last third of the pilot's curve)")
        if self.rule == "pilot" and self.pilot is not None:
            p = self.pilot
            return (f"one target for every rung: (1 + {self.slack:g}) x {self.arm}'s plateau quality in a pilot at "
                    f"{p.rung or 'the smallest rung'}, {p.horizon_factor:g} x the horizon, seeds {p.seeds} (the mean "
                    f"over seeds of the mean quality over the last third of the pilot's curve)")
        return f"(1 + {self.slack:g}) x mean over seeds of {self.arm}'s final quality at the rung"


class HorizonSpec(BaseModel):
    """Steps per rung: the paper's one horizon for every rung, or a number of training images per parameter."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    mode: Literal["fixed", "per_param"] = Field(
        "fixed", description="fixed: every rung runs the transfer's horizon (the paper); per_param: see below."
    )
    images_per_param: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="per_param: training images (steps x batch) per model parameter; steps = images_per_param x "
        "parameters / batch_size, rounded, between min_steps and cap.",
    )
    cap: int | None = Field(None, ge=3, le=MAX_HORIZON,
                            description="per_param: most steps any rung gets (bounds the study's time).")
    min_steps: int = Field(30, ge=3, le=MAX_HORIZON, description="per_param: fewest steps any rung gets.")

    @model_validator(mode="after")
    def _consistent(self) -> HorizonSpec:
        if self.mode == "per_param" and (self.images_per_param is None or self.cap is None):
            raise ValueError("horizon.mode 'per_param' needs horizon.images_per_param and horizon.cap")
        if self.mode == "fixed" and (self.images_per_param is not None or self.cap is not None):
            raise ValueError("horizon.images_per_param and horizon.cap are only for horizon.mode 'per_param'")
        if self.cap is not None and self.cap < self.min_steps:
            raise ValueError(f"horizon.cap ({self.cap}) must be >= horizon.min_steps ({self.min_steps})")
        return self


class TimingSpec(BaseModel):
    """How the transfer measures each arm's cost per training step at each rung, before its runs start.

    `interleaved` (the default, `trials.steptime`): every arm built side by side in one process at the rung's
    training shapes, run in short blocks in turn on the same batches, each block a whole number of every arm's
    refresh period, the order rotated each round; thread-CPU time by default with wall time beside it, so the
    ratio pairs round by round. `isolated` (the earlier stage, kept so an earlier transfer's timing can be
    repeated): one short run of the real trial per arm, one after another, wall clock.

    `rounds` to `max_rounds` are the interleaved method's options for each rung's measurement
    (`trials.steptime.StepTimingConfig`, with the same bounds and meanings); an isolated timing refuses them. The
    training batch that bounds `local_batch` is the transfer's `trial.batch_size`, else the sweep's, and
    `block_steps` is checked against the source sweep's chosen K, both at submission."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["interleaved", "isolated"] = Field(
        "interleaved",
        description="interleaved: arms in turn inside one process, whole refresh periods (the per-round log SD of "
        "a ratio was 0.025 on thread-CPU time against 0.35 for isolated wall-clock runs on a loaded 2-core machine); "
        "isolated: one short run per arm, wall clock.",
    )
    # Bounded: the timing runs go one at a time before the transfer's runs start, so a huge count would hold the
    # whole transfer at its start.
    steps: int = Field(20, ge=0, le=10_000,
                       description="0: no timing (and no time saving), for either method; isolated: timed steps "
                       "per arm and rung.")
    warmup: int = Field(5, ge=1, le=1_000,
                        description="isolated: untimed steps first (allocator, caches, the first Newton-Schulz).")
    repeats: int = Field(1, ge=1, le=20,
                         description="isolated: timing runs per arm and rung, round by round with the arms' order "
                         "rotated each round; with 2 or more the per-step time ratio gets a paired interval over "
                         "rounds (one 20-step timing moved the ratio by up to 0.1 on a 2-core machine).")
    # The interleaved method's options, declared once for the transfer and `trials.steptime` alike; the transfer
    # caps `rounds` lower for the reason above.
    rounds: Annotated[TimedRounds, Field(le=1_000)] = 12
    warmup_rounds: WarmupRounds = 2
    block_steps: BlockSteps = None
    local_batch: LocalBatch = None
    clock: TimingClock = "thread"
    target_halfwidth: TargetHalfwidth = None
    max_rounds: MaxRounds = 60

    @model_validator(mode="after")
    def _consistent(self) -> TimingSpec:
        if self.max_rounds < self.rounds:
            raise ValueError(f"timing.max_rounds ({self.max_rounds}) must be >= timing.rounds ({self.rounds})")
        if self.method == "isolated":
            given = sorted(k for k in _INTERLEAVED_ONLY if k in self.model_fields_set)
            if given:
                raise ValueError(f"timing fields {given} are only for timing.method 'interleaved'")
        return self

    @property
    def measured(self) -> bool:
        return self.steps > 0


# The interleaved method's own fields (an isolated timing that sets one is refused: it would be ignored).
_INTERLEAVED_ONLY = ("rounds", "warmup_rounds", "block_steps", "local_batch", "clock", "target_halfwidth",
                     "max_rounds")


class PlateauSpec(BaseModel):
    """The plateau check of every run (see `scaling.plateau`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    window: float = Field(DEFAULT_PLATEAU_WINDOW, gt=0, le=1, description="Last fraction of the horizon checked.")
    max_drop: float = Field(
        DEFAULT_PLATEAU_MAX_DROP, ge=0, lt=1,
        description="A run whose fitted quality falls by more than this fraction over the window is undertrained.",
    )


def rung_horizon(spec: HorizonSpec, parameters: int, batch_size: int, default: int) -> int:
    """The steps one rung runs: `default` (fixed), or images_per_param x parameters / batch within the bounds."""
    if spec.mode == "fixed" or spec.images_per_param is None or spec.cap is None:
        return default
    return int(min(spec.cap, max(spec.min_steps, round(spec.images_per_param * parameters / batch_size))))

