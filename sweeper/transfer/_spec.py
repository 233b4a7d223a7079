"""A transfer's spec: which finished sweep's chosen pair to carry, unchanged, to which larger rungs, beside which
baseline arms, at what horizon, with which lr and weight-decay rules, target, timing and verification. Validated
by pydantic; `TransferSpec.fingerprint` is what a resumed transfer must match.

The sections the analysis reads back (target, horizon, timing, plateau: `_sections`; verification) are this
package's; the lr rules are `scaling`'s, whose pure functions analyse the runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictInt,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from scaling.export import LrRule, WdRule
from scaling.rounds import RoundsSpec
from trials.core import register_union_forms
from trials.optim import ARMS

from ..specs import ExecutionSpec, SweepTracking, read_spec
from ..specs.checks import MAX_HORIZON, MAX_SEEDS, Seeds, TrialSection, Workers
from ._errors import TransferError
from ._sections import HorizonSpec, PlateauSpec, TargetSpec, TimingSpec
from ._verification import VerifySpec

__all__ = ["ARMS", "CONTROL_ARMS", "CONTROL_ORDER_OFFSET", "CONTROL_ORDER_OFFSETS", "DIAGNOSTIC_ARMS", "FIXED_ARMS",
           "ControlName", "DiagnosticName", "FixedArmName", "RungOptions", "TransferSpec", "default_transfer_workdir",
           "load_transfer_spec"]

_ARMS = ARMS
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

ArmName = Literal["periodic", "muon", "adamw", "rownorm"]
LrRuleName = LrRule
ControlName = Literal["negative", "positive", "steps"]
DiagnosticName = Literal["effective_step"]
FixedArmName = Literal["paper_default"]
# The fixed arms: the searched periodic arm at a stated point instead of the chosen one, at every rung beside it
# (paper_default: the paper's K=3, gamma=0.15, chosen on its smallest model and never re-tuned), its lr the chosen
# point's as carried: arm name and the optimizer fields it fixes.
FIXED_ARMS: dict[str, tuple[str, dict[str, Any]]] = {"paper_default": ("periodic_paper",
                                                                       {"refresh_every": 3, "gamma": 0.15})}
# Each control's arm, run beside Muon at every rung: the negative control a second, identical Muon under another
# name; the positive control Muon plus one discarded Newton-Schulz per matrix per step; the steps control Muon with
# a null step after every `control_stretch` steps (trials.optim, control arms).
CONTROL_ARMS: dict[str, str] = {"negative": "muon_twin", "positive": "muon_extra_ns", "steps": "muon_stretched"}
# A control's run on seed s draws batches and noise from seed s + its offset (control_data_order: other): any fixed
# offset gives another order; a large one keeps it apart from the orders of nearby judged seeds. Each control has
# its own, so no two controls train one run (the positive control's discarded Newton-Schulz changes nothing: on
# the negative control's order it would repeat the negative control's curve, and the two would not be independent).
CONTROL_ORDER_OFFSET = 1_000_003
CONTROL_ORDER_OFFSETS: dict[str, int] = {"negative": CONTROL_ORDER_OFFSET, "positive": 2 * CONTROL_ORDER_OFFSET,
                                         "steps": 3 * CONTROL_ORDER_OFFSET}
# The diagnostic arms: Muon at the searched arm's mean update size (lr x (1 + (K - 1) gamma) / K for periodic).
DIAGNOSTIC_ARMS: dict[str, str] = {"effective_step": "muon_effective_step"}
# The steps control's default stretch (trials.optim's): a null step after every 8th, a true steps ratio of 9/8.
_DEFAULT_STRETCH = 8
# The timing fields a transfer had before the interleaved method: the others are left out of the fingerprint at
# their defaults.
_FIRST_TIMING_FIELDS = ("steps", "warmup", "repeats")


class RungOptions(BaseModel):
    """How one rung of a transfer runs (the `rungs` mapping's values)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    workers: Workers | None = Field(
        None,
        description="Processes (ranks) per trial at this rung (FSDP2 on a placement group of that many bundles, "
        "each execution.cpus_per_trial CPUs); the timing stage times this rung's step on as many ranks. None = the "
        "transfer's execution.workers_per_trial, else its sweep's.",
    )


def _rungs_form(value: Any) -> str | None:
    """Which form `rungs` is written in: a list of names, or a mapping name -> options (None: neither)."""
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "mapping"
    return None


# `rungs`: a list of rung names (as before), or a mapping rung -> {workers: N} (or null: the transfer's count), in
# order. The discriminator keeps a refusal to the form written, instead of one error per form.
RungsField = Annotated[
    Annotated[list[str], Tag("list")] | Annotated[dict[str, RungOptions | None], Tag("mapping")],
    Discriminator(_rungs_form, custom_error_type="rungs_form",
                  custom_error_message="rungs must be a list of rung names, e.g. [cpu-s, cpu-l], or a mapping rung "
                  "-> options, e.g. {cpu-s: {}, cpu-l: {workers: 2}}"),
]


register_union_forms("rungs", ("list", "mapping"))  # refusals name rungs.<rung>.workers, as the spec is written


class TransferSpec(BaseModel):
    """One transfer: the chosen pair of a finished sweep, fixed, at larger rungs beside the baseline arms."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(..., pattern=_NAME_PATTERN, description="Transfer name (run names, work folder).")
    sweep: str = Field(..., min_length=1, description="The finished sweep's work folder (holds sweep.json).")
    rungs: RungsField | None = Field(
        None,
        description="Rungs to run (trials.models.list_rungs()): a list of names, or a mapping name -> {workers: N} "
        "to run a rung's trials on N workers, e.g. {cpu-s: {}, cpu-l: {workers: 2}} (a rung without workers: the "
        "transfer's execution.workers_per_trial, else its sweep's); None = the sweep's rung and every larger rung "
        "of its family. The sweep's rung is run again at the transfer horizon: a fit must not mix horizons.",
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
        default_factory=TargetSpec,
        description="The quality target, declared before any run and applied alike to every arm and seed "
        "(recorded on the parent run and in exports): final_mean (default: 1.1 x AdamW's mean final quality "
        "at each rung), fixed values per rung, or pilot (one target for every rung: 1.1 x the plateau quality of "
        "a longer pilot of the reference arm, run and recorded before the judged runs).",
    )
    horizon: HorizonSpec = Field(
        default_factory=HorizonSpec,
        description="Steps per rung: fixed (the paper: every rung at the transfer horizon) or per_param "
        "(images_per_param x parameters / batch, capped).",
    )
    timing: TimingSpec = Field(
        default_factory=TimingSpec,
        description="Short timing runs per arm and rung (per-step time in isolation, before the runs start).",
    )
    plateau: PlateauSpec = Field(
        default_factory=PlateauSpec, description="The plateau check that flags undertrained rungs."
    )
    rounds: RoundsSpec | None = Field(
        None,
        description="Seeds added in rounds (rounds.add new seeds each) until the searched arm's saving against "
        "rounds.against at rounds.rung is shown (its test at alpha over the looks the budget allows) or the "
        "budget (rounds.max_seeds) is spent. None = one round on the transfer's seeds.",
    )
    controls: list[ControlName] = Field(
        default_factory=list,
        max_length=3,
        description="Control arms trained, timed and analysed beside the arms at every rung, each against Muon and on "
        "runs of its own: negative (a second Muon arm, muon_twin: the steps ratio, per-step ratio and saving must "
        "come out null), positive (muon_extra_ns: Muon plus one discarded Newton-Schulz per step, the same updates "
        "rule, so a known per-step saving that must be detected) and steps (muon_stretched: Muon with a null step "
        "after every control_stretch steps, so a known steps ratio, (stretch + 1) / stretch of Muon's steps, that "
        "must be detected). Each is judged at the level the strongest claim must pass. Needs the muon arm and the "
        "builtin trainer. Default: none.",
    )
    control_stretch: StrictInt = Field(
        _DEFAULT_STRETCH, ge=1, le=1000,
        description="The steps control's stretch: a null step (no batch, no update) after every this many steps, an "
        "integer 1 to 1000 (8: the stretched arm needs 9/8 of Muon's steps, the size of the steps penalties the "
        "evidence study measured). Only with controls including steps.",
    )
    control_data_order: Literal["other", "same"] = Field(
        "other",
        description="The controls' data order. other (default): each control run draws its batches and diffusion "
        "noise from another stream than Muon's run on the same seed (model init the same), so its steps ratio "
        "carries the spread of a real comparison: the negative control's null is then a calibrated null, and the "
        "positive control's known per-step saving must be detected through the steps' noise as the searched arm's "
        "would be. same: Muon's own order; on CPU the control then trains bit-identically to Muon, so its steps "
        "ratio is exactly 1 and it calibrates the per-step half only.",
    )
    lr_brackets: dict[ArmName, list[Annotated[float, Field(gt=0, le=100)]]] = Field(
        default_factory=dict,
        description="Equal tuning on what is judged: each listed arm runs at each multiple of its carried lr at "
        "every rung (1 included: the carried lr), e.g. {periodic: [1, 1.5, 2.3], muon: [1, 1.5, 2.3]}; each (rung, "
        "arm) is judged at the multiple with the lowest mean final quality over the transfer's seeds, and the "
        "report prints each arm's settings and runs. Default: none (one setting per arm and rung: equal).",
    )
    diagnostics: list[DiagnosticName] = Field(
        default_factory=list,
        max_length=1,
        description="Diagnostic arms trained beside the arms at every rung: effective_step (muon_effective_step: "
        "Muon at lr x the periodic arm's mean update-RMS ratio (1 + (K - 1) gamma) / K), whose verdict says whether "
        "a steps penalty of periodic against Muon is its smaller step or its direction. Needs the muon arm, a "
        "periodic searched arm and the builtin trainer. Default: none.",
    )

    fixed_arms: list[FixedArmName] = Field(
        default_factory=list,
        max_length=1,
        description="Fixed arms trained beside the arms at every rung and compared with each of them at the first "
        "crossing (reported, not among the judged claims): paper_default (periodic_paper: the periodic arm at the "
        "paper's K=3, gamma=0.15 with the chosen point's carried lr), so the chosen pair is seen against the pair "
        "the paper would have carried untuned. Needs a periodic searched arm. Default: none.",
    )

    @field_validator("rungs")
    @classmethod
    def _known_rungs(cls, rungs: list[str] | dict[str, RungOptions | None] | None
                     ) -> list[str] | dict[str, RungOptions | None] | None:
        if rungs is None:
            return None
        from trials.models import check_rung

        if isinstance(rungs, dict):
            if not rungs:
                raise ValueError("rungs must name at least one rung, got {}")
            return {check_rung(r): options for r, options in rungs.items()}
        if not rungs or len(set(rungs)) != len(rungs):
            raise ValueError(f"rungs must be a non-empty list of distinct rungs, got {rungs}")
        return [check_rung(r) for r in rungs]

    @property
    def rung_names(self) -> list[str] | None:
        """The rungs the spec names, in its order (None: the sweep's rung and every larger one)."""
        return None if self.rungs is None else list(self.rungs)

    @property
    def rung_workers(self) -> dict[str, int]:
        """rung -> workers per trial, for the rungs whose own count the spec sets (`rungs: {cpu-l: {workers: 2}}`);
        the others run on the transfer's execution.workers_per_trial, else the sweep's."""
        if not isinstance(self.rungs, dict):
            return {}
        return {r: o.workers for r, o in self.rungs.items() if o is not None and o.workers is not None}

    @field_validator("arms")
    @classmethod
    def _distinct_arms(cls, arms: list[str]) -> list[str]:
        if not arms or len(set(arms)) != len(arms):
            raise ValueError(f"arms must be a non-empty list of distinct arms from {list(_ARMS)}, got {arms}")
        return arms

    @field_validator("timing")
    @classmethod
    def _timing_fits_the_study(cls, timing: TimingSpec, info: ValidationInfo) -> TimingSpec:
        """local_batch within the training batch and blocks of whole refresh periods, where the spec or its source
        sweep's folder tells them (a submission over REST names the sweep's folder on the server): the allowed
        values depend on the sweep, and submission is where a wrong value should be refused."""
        if not timing.measured or timing.method != "interleaved":
            return timing
        facts = _source_facts(info.data.get("sweep"), info.data.get("trial") or {})
        if timing.local_batch is not None and facts.batch is not None and timing.local_batch > facts.batch:
            raise ValueError(f"timing.local_batch must be between 1 and the training batch ({facts.batch}), got "
                             f"{timing.local_batch}")
        if timing.block_steps is not None and facts.period is not None and timing.block_steps % facts.period:
            p = facts.period
            raise ValueError(f"timing.block_steps must be a whole number of every arm's refresh period (the chosen "
                             f"K={p}; 1 for the other arms): a multiple of {p} ({p}, {2 * p}, {3 * p}, ...), got "
                             f"{timing.block_steps}")
        return timing

    @field_validator("target")
    @classmethod
    def _pilot_fits_the_study(cls, target: TargetSpec, info: ValidationInfo) -> TargetSpec:
        """The pilot's seeds apart from the judged ones and its rung among the transfer's: the judged seeds and
        rungs are the spec's, else the source sweep's where its folder is readable here (the plan checks again)."""
        pilot = target.pilot
        if target.rule != "pilot" or pilot is None:
            return target
        facts = _source_facts(info.data.get("sweep"), info.data.get("trial") or {})
        judged: list[int] = info.data.get("seeds") or facts.seeds or []
        shared = sorted(set(pilot.seeds) & set(judged))
        if shared:
            raise ValueError(f"target.pilot.seeds must be disjoint from the transfer's judged seeds {sorted(judged)} "
                             f"(the runs that are judged must not set their own line); {shared} are among them")
        named = info.data.get("rungs")
        rungs = list(named) if named else facts.rungs
        if pilot.rung is not None and rungs is not None and pilot.rung not in rungs:
            raise ValueError(f"target.pilot.rung must be one of the transfer's rungs {rungs}, got {pilot.rung!r}")
        return target

    @field_validator("controls", "diagnostics")
    @classmethod
    def _extra_arms_buildable(cls, names: list[str], info: ValidationInfo) -> list[str]:
        field = info.field_name
        if len(set(names)) != len(names):
            raise ValueError(f"{field} must be distinct; got {names}")
        arms = info.data.get("arms")
        if names and arms is not None and "muon" not in arms:
            raise ValueError(f"{field} {names} compare against Muon: arms must include 'muon', got {arms}")
        facts = _source_facts(info.data.get("sweep"), info.data.get("trial") or {})
        if names and facts.backend not in (None, "builtin"):
            raise ValueError(f"{field} {names} cannot be built for the sweep's {facts.backend!r} trainer: their "
                             "arms are optimizers of the builtin trial (backend 'builtin'); allowed: [] with this "
                             "sweep")
        if field == "diagnostics" and names and facts.period == 1:
            raise ValueError(f"diagnostics {names} need a periodic searched arm (its K and gamma set the step size); "
                             "allowed: [] with this sweep")
        return names

    @field_validator("fixed_arms")
    @classmethod
    def _fixed_arms_need_periodic(cls, names: list[str], info: ValidationInfo) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError(f"fixed_arms must be distinct; got {names}")
        facts = _source_facts(info.data.get("sweep"), info.data.get("trial") or {})
        if names and facts.period == 1:
            raise ValueError(f"fixed_arms {names} fix the periodic arm's K and gamma: the sweep must search "
                             "periodic; allowed: [] with this sweep")
        return names

    @field_validator("lr_brackets")
    @classmethod
    def _brackets(cls, brackets: dict[str, list[float]]) -> dict[str, list[float]]:
        for arm, factors in brackets.items():
            if 1 not in factors or len(set(factors)) != len(factors) or len(factors) > 9:
                raise ValueError(f"lr_brackets.{arm} must be 1 to 9 distinct multiples of the carried lr including 1, "
                                 f"e.g. [1, 1.5, 2.3]; got {factors}")
        return brackets

    @model_validator(mode="after")
    def _rules_for_arms(self) -> TransferSpec:
        extra = sorted(set(self.lr_rules) - set(self.arms))
        if extra:
            raise ValueError(f"lr_rules names arms {extra} that are not in arms {self.arms}")
        extra = sorted(set(self.lr_brackets) - set(self.arms))
        if extra:
            raise ValueError(f"lr_brackets names arms {extra} that are not in arms {self.arms}")
        if self.target.rule in ("final_mean", "pilot") and self.target.arm not in self.arms:
            raise ValueError(f"target.arm {self.target.arm!r} must be one of arms {self.arms}")
        if self.rounds is not None:
            if self.rounds.against not in self.arms:
                raise ValueError(f"rounds.against {self.rounds.against!r} must be one of arms {self.arms}")
            if self.rounds.rung is not None and self.rungs is not None and self.rounds.rung not in self.rungs:
                raise ValueError(f"rounds.rung {self.rounds.rung!r} must be one of rungs {self.rung_names}")
            if self.seeds is not None and len(self.seeds) > self.rounds.max_seeds:
                raise ValueError(f"rounds.max_seeds ({self.rounds.max_seeds}) is below the {len(self.seeds)} "
                                 "seeds the first round runs")
        if self.control_stretch != _DEFAULT_STRETCH and "steps" not in self.controls:  # a dumped spec re-reads
            raise ValueError(f"control_stretch is the steps control's: controls must include 'steps', got "
                             f"{self.controls}")
        if self.rungs is not None and self.target.rule == "fixed":
            missing = [r for r in self.rungs if r not in self.target.values]
            if missing:
                raise ValueError(f"target.values has no value for rungs {missing}")
        return self

    @model_validator(mode="after")
    def _workers_fit(self) -> TransferSpec:
        """A transfer whose trials run on N workers at some rung (the rung's own `workers`, else its execution
        section's `workers_per_trial`, else its sweep's where the sweep's folder is readable here): N divides the
        training batch, and every arm, control and the timing can run on N ranks (the arms and controls run at
        every rung). Each refusal names the field (the rung's, where it sets the count) and the values allowed."""
        facts = _source_facts(self.sweep, self.trial or {})
        default = self.execution.workers_per_trial if self.execution is not None else facts.workers
        default_field = "execution.workers_per_trial" if self.execution is not None else "the sweep's workers_per_trial"
        own = self.rung_workers
        # field -> worker count, for each count above 1 that some rung runs on
        widths = {f"rungs.{rung}.workers": n for rung, n in own.items() if n > 1}
        if default is not None and default > 1 and (self.rungs is None or any(r not in own for r in self.rungs)):
            widths[default_field] = default
        for field, workers in widths.items():
            self._fits_on(field, workers, facts.batch, own_count=field != default_field or self.execution is not None)
        return self

    def _fits_on(self, field: str, workers: int, batch: int | None, *, own_count: bool) -> None:
        """The refusals of `_workers_fit` for one worker count above 1, set by `field` (`own_count`: in this spec,
        else the sweep's)."""
        if batch is not None and batch % workers:
            divisors = [d for d in range(1, batch + 1) if batch % d == 0]
            raise ValueError(f"{field} {workers} does not divide the training batch (trial.batch_size {batch}): "
                             f"each rank trains batch_size / workers samples; allowed worker counts: {divisors}"
                             + ("" if own_count else f"; or set trial.batch_size to a multiple of {workers}"))
        if "rownorm" in self.arms:
            raise ValueError(f"arms {self.arms}: 'rownorm' has no sharded form, so it cannot run on {field} "
                             f"{workers}; allowed arms on several workers: adamw, muon, periodic")
        if "positive" in self.controls:
            raise ValueError(f"controls {self.controls}: the positive control (muon_extra_ns) runs in one process "
                             f"only; with {field} {workers} allowed: [], ['negative']")
        if self.timing.measured and self.timing.method == "isolated":
            raise ValueError(f"timing.method 'isolated' times one process; with {field} {workers} the timing stage "
                             "times the N-rank step: allowed: 'interleaved'")
        if self.timing.local_batch is not None:
            raise ValueError(f"timing.local_batch is the one-process stand-in for a rank's batch; with {field} "
                             f"{workers} each timing rank trains batch_size / {workers} itself: allowed: unset (null)")

    def fingerprint(self) -> str:
        """What a resumed transfer must match: everything but `execution`, which may change on resume."""
        payload = self.model_dump(mode="json", exclude={"execution"})
        if isinstance(self.rungs, dict):  # a list as before unless a rung sets its own workers
            own = self.rung_workers
            payload["rungs"] = {r: own.get(r) for r in self.rungs} if own else list(self.rungs)
        if payload.get("weight_decay_rule") == "keep_lr_wd":  # added later: older transfers resume
            payload.pop("weight_decay_rule")
        for later in ("verify", "rounds"):  # added later: older transfers resume
            if payload.get(later, 0) is None:
                payload.pop(later)
        for later in ("controls", "diagnostics", "lr_brackets", "fixed_arms"):  # added later, empty by default
            if not payload.get(later):
                payload.pop(later, None)
        if payload.get("control_data_order") == "same" or not payload.get("controls"):  # as before it existed
            payload.pop("control_data_order", None)
        if "steps" not in (payload.get("controls") or []):  # added with the steps control
            payload.pop("control_stretch", None)
        timing_default = TimingSpec().model_dump(mode="json")
        payload["timing"] = {k: v for k, v in payload["timing"].items()
                             if k in _FIRST_TIMING_FIELDS or v != timing_default[k]}
        # Sections added later are left out while at their defaults, so transfers started before them resume.
        first_timing = {k: timing_default[k] for k in _FIRST_TIMING_FIELDS}
        for key, default in (("target", TargetSpec().model_dump(mode="json")),
                             ("horizon", HorizonSpec().model_dump(mode="json")), ("timing", first_timing),
                             ("plateau", PlateauSpec().model_dump(mode="json"))):
            if payload.get(key) == default:
                payload.pop(key)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


class _SourceFacts(BaseModel):
    """What the source sweep's folder says about the allowed timing values and controls (None: not known here)."""

    batch: int | None = None
    backend: str | None = None
    period: int | None = None  # the searched arm's refresh period at the chosen point (K for periodic)
    seeds: list[int] | None = None  # the sweep's seeds: a transfer's judged seeds when it names none
    rungs: list[str] | None = None  # the sweep's rung and every larger one of its family: the default rungs
    workers: int | None = None  # the sweep's execution.workers_per_trial


def _source_facts(sweep: str | None, trial: Mapping[str, Any]) -> _SourceFacts:
    """The training batch (the transfer's `trial` over the sweep's), the sweep's trainer and the chosen point's
    refresh period, from the sweep's stored spec and status when its folder is readable here; each None when not
    (e.g. a spec checked away from the sweep's machine: the plan checks them again)."""
    from ..jobfiles import SPEC_FILE, STATUS_FILE, read_json

    folder = Path(sweep) if sweep else None
    spec = read_json(folder / SPEC_FILE) if folder is not None else None
    batch = trial.get("batch_size")
    if batch is None and spec is not None:
        batch = (spec.get("trial") or {}).get("batch_size", 32)  # TrialConfig's default batch
    backend = ((spec or {}).get("backend") or {}).get("name", "builtin") if spec is not None else None
    period = None
    if spec is not None:
        search = spec.get("search") or {}
        if (search.get("optimizer") or {}).get("name", "periodic") != "periodic":
            period = 1
        else:
            best = (read_json(folder / STATUS_FILE) or {}).get("best") or {} if folder is not None else {}
            chosen = re.search(r"(?:^|,)K=(\d+)", str(best.get("point_key", "")))
            space = [int(k) for k in (search.get("space") or {}).get("K") or [] if isinstance(k, int)]
            period = int(chosen.group(1)) if chosen else (space[0] if len(set(space)) == 1 else None)
    seeds = (spec or {}).get("seeds")
    rungs = None
    if spec is not None:
        from trials.models import list_rungs

        rung = str(spec.get("rung", "cpu-xs"))
        family = list_rungs(rung.split("-")[0])
        rungs = family[family.index(rung):] if rung in family else None
    workers = ((spec.get("execution") or {}).get("workers_per_trial", 1)) if spec is not None else None
    return _SourceFacts(batch=int(batch) if isinstance(batch, int) else None, backend=backend,
                        period=period if period and period > 0 else None,
                        seeds=[int(s) for s in seeds] if isinstance(seeds, list) else None, rungs=rungs,
                        workers=workers if isinstance(workers, int) and not isinstance(workers, bool) else None)


def load_transfer_spec(source: str | Path | Mapping[str, Any]) -> TransferSpec:
    """A `TransferSpec` from a YAML or JSON file, or a mapping. Raises FileNotFoundError, TransferError for
    unreadable text, and pydantic's ValidationError (a ValueError) naming the field and the allowed values."""
    return read_spec(source, TransferSpec, "transfer", TransferError)


def default_transfer_workdir(name: str) -> Path:
    """Where a transfer keeps its state unless told otherwise (`out/` is git-ignored)."""
    return Path("out") / "transfers" / name
