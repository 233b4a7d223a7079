"""Transfer: carry a finished sweep's chosen pair, unchanged, to larger rungs beside the baseline arms, and read
what happened there (time to best, savings, scaling fits, exports).

The paper's second stage. From a sweep's work folder, every (rung, arm, seed) runs once at a horizon of
`horizon_factor` x the sweep's (2x: the paper's 30k -> 60k), with the same eval schedule shape (the sweep's eval
steps scaled by the same factor: 2/3, 5/6, 6/6 by default), the sweep's seeds, and the learning rate carried by a
stated rule per arm (`_lr_rules`: the Muon family `unchanged`, or `width` under `match_rms_adamw`; AdamW `width`; weight
decay keeps lr x wd by default). K and gamma are never re-tuned.

How it runs (one sweep that holds every rung). The whole rung x arm table is one sweeper sweep: the chosen pair at
the first rung is its (single-point) search, every other (rung, arm) a baseline with its own `rung`, optimizer and
tags (`sweeper.BaselineSpec.rung`, `.tags`). One driver, one Ray instance and one Tune run then keep both cores of
a small machine busy across rungs, largest runs first, with the sweeper's resume, retries, cancel and MLflow ledger
as they are. The alternative, one sweeper driver subprocess per rung, would leave a core idle at the end of each
rung, pay Ray's start (4-8 s) and a process per rung, and need its own bookkeeping of which rung finished; two
`Tuner.fit()` in one process interfere, so it could not run them in-process either (docs/design.md).

Work folder (default `out/transfers/<name>`): `transfer.json` (identity, the plan, the sweep spec it runs),
`outcome.json` (the final state once the driver ends), and the sweeper's own files (`sweep.json`, `status.json`,
`driver.lock`, `cancel`, `checkpoints/`, `ray/`), so `scalesweep sweep status DIR` works on it too.

MLflow (the sweep's store and experiment unless `tracking` says otherwise): a parent run `sweep:<transfer name>`,
one child run per (rung, arm, seed) attempt, named `K=3,gamma=0.15,seed=0` (the chosen pair at the first rung) or
`<arm>.<rung>,seed=<seed>`. Lineage tags on the parent and every child: `scalesweep.transfer_id`,
`scalesweep.transfer_name`, `scalesweep.source_sweep_id`, `scalesweep.source_sweep_name`,
`scalesweep.source_parent_run_id`, `scalesweep.transfer.chosen` (JSON of the pair); per child:
`scalesweep.lr_rule`, `scalesweep.lr_base` (the lr at the sweep's rung), `scalesweep.base_rung`,
`scalesweep.base_width`; the lr a run used is its param `optimizer.lr`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import statistics
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sweeper import MAX_HORIZON, MAX_SEEDS, ExecutionSpec, SweepSpec, SweepTracking, check_numbers, check_seeds
from sweeper._jobfiles import (
    OUTCOME_FILE,
    SPEC_FILE,
    STATE_FILE,
    TRANSFER_FILE,
    is_sweep_folder,
    is_transfer_folder,
    read_json,
    read_outcome,
    read_transfer,
    write_json,
)

from ._errors import ScalingError, ScalingInputError, TransferError
from ._export import Export, build_export
from ._fit import ScalingFit, fit_scaling
from ._lr_rules import LrRule, WdRule, carry_optimizer, default_lr_rule
from ._records import TransferRun, read_runs
from ._rungs import (
    HorizonSpec,
    PlateauSpec,
    TargetSpec,
    TimingSpec,
    measure_step_times,
    rung_horizon,
    rung_report,
    target_table,
)
from ._time_to_best import (
    Checkpoints,
    CommonTarget,
    Savings,
    TimeToBest,
    savings,
    time_to_best,
    time_to_common_target,
)
from ._verification import VerifySpec, is_verification_run, plan_verification, verification_verdict

__all__ = [
    "FIT_METRICS",
    "TransferResult",
    "TransferSpec",
    "cancel_transfer",
    "default_transfer_workdir",
    "export_from_sweep",
    "load_transfer_result",
    "load_transfer_spec",
    "run_transfer",
    "transfer_status",
]

FIT_METRICS = ("time_to_best", "best_fd", "endpoint_fd", "steps_to_target", "time_to_target")
# Fitted against size like time to best (A*N^-alpha, exponent of either sign): they grow with size at a fixed horizon.
_COST_METRICS = ("time_to_best", "steps_to_target", "time_to_target")
# Time to best grows with model size at a fixed horizon: the fit must allow a negative exponent.
_TIME_ALPHA_BOUNDS = (-3.0, 3.0)
_ARMS = ("periodic", "muon", "adamw", "rownorm")
_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

ArmName = Literal["periodic", "muon", "adamw", "rownorm"]
LrRuleName = LrRule
Metric = Literal["time_to_best", "best_fd", "endpoint_fd"]


# ----------------------------------------------------------------------------------------------------------
# The spec


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
    seeds: list[int] | None = Field(
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
    trial: dict[str, Any] = Field(
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

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int] | None) -> list[int] | None:
        return None if seeds is None else check_seeds(seeds)

    @field_validator("trial")
    @classmethod
    def _finite_trial(cls, trial: dict[str, Any]) -> dict[str, Any]:
        check_numbers(trial, "trial")  # the merged sweep spec applies the sweep's own limits as well
        return trial

    @model_validator(mode="after")
    def _rules_for_arms(self) -> TransferSpec:
        extra = sorted(set(self.lr_rules) - set(self.arms))
        if extra:
            raise ValueError(f"lr_rules names arms {extra} that are not in arms {self.arms}")
        if self.target.rule == "final_mean" and self.target.arm not in self.arms:
            raise ValueError(f"target.arm {self.target.arm!r} must be one of arms {self.arms}")
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
        if payload.get("verify", 0) is None:  # added later: older transfers resume
            payload.pop("verify")
        # Sections added later are left out while at their defaults, so transfers started before them resume.
        for key, default in (("target", TargetSpec()), ("horizon", HorizonSpec()), ("timing", TimingSpec()),
                             ("plateau", PlateauSpec())):
            if payload.get(key) == default.model_dump(mode="json"):
                payload.pop(key)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def load_transfer_spec(source: str | Path | Mapping[str, Any]) -> TransferSpec:
    """A `TransferSpec` from a YAML or JSON file, or a mapping. Raises FileNotFoundError, TransferError for
    unreadable text, and pydantic's ValidationError (a ValueError) naming the field and the allowed values."""
    if isinstance(source, Mapping):
        return TransferSpec.model_validate(dict(source))
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"no transfer spec at {path}")
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))  # YAML is a superset of JSON
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TransferError(f"{path}: not valid YAML/JSON: {first}") from None
    if not isinstance(data, dict):
        raise TransferError(f"{path}: a transfer spec is a mapping of fields, got {type(data).__name__}")
    return TransferSpec.model_validate(data)


def default_transfer_workdir(name: str) -> Path:
    """Where a transfer keeps its state unless told otherwise (`out/` is git-ignored)."""
    return Path("out") / "transfers" / name


# ----------------------------------------------------------------------------------------------------------
# Planning: from the sweep to one multi-rung sweep spec


def _without_credentials(uri: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://host/db`: provenance is served to open reads (fits,
    exports) and a tracking URI may carry the store's password."""
    import re

    return re.sub(r"//[^/@]*@", "//", uri)


def size_basis(trial: Mapping[str, Any] | None) -> tuple[dict[str, int], str]:
    """(denoiser overrides, description) of a study's size basis: a rung's parameters counted as the study's
    trials build its denoiser (the text encoder's context and pooled widths, the image size and channels), the
    same count every run logs as `model.parameters`. The sweep export, the transfer's plan, fits and predictions
    all count sizes this way, so one study never mixes two counts of one rung."""
    from trials import TrialConfig
    from trials.data._base import _REGISTRY as _DATASETS

    cfg = TrialConfig.model_validate({**dict(trial or {}), "rung": "cpu-xs"})  # any rung: these fields are shared
    if cfg.text_encoder == "minilm":
        from trials.text._minilm import MiniLMEncoder

        context, pooled = int(MiniLMEncoder.context_dim), int(MiniLMEncoder.pooled_dim)
    else:
        from trials.text._learned import LearnedTextEncoder

        encoder = LearnedTextEncoder(max_length=cfg.text_max_length)
        context, pooled = int(encoder.context_dim), int(encoder.pooled_dim)
    # The dataset class's channel count (3: RGB); building the dataset itself would cost seconds.
    channels = int(getattr(_DATASETS.get(cfg.data.name), "channels", 3))
    overrides = {"image_size": cfg.data.image_size, "in_channels": channels, "context_dim": context,
                 "pooled_dim": pooled}
    text = (f"trainable denoiser parameters as this study's trials build them ({cfg.text_encoder} text encoder: "
            f"context {context}, pooled {pooled}; {cfg.data.image_size}px images, {channels} channels); frozen "
            "text encoders are not counted")
    return overrides, text


def _rung_shape(rung: str, trial: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(width, parameters) of a rung's denoiser on the study's size basis (`size_basis(trial)`), counted on the
    meta device (no memory, any size)."""
    return _count(rung, json.dumps(dict(trial or {}), sort_keys=True))


@cache
def _count(rung: str, trial_json: str) -> tuple[int, int]:
    from trials.models import build_model, count_parameters, get_rung

    overrides, _ = size_basis(json.loads(trial_json))
    return get_rung(rung).config.width, count_parameters(build_model(rung, device="meta", **overrides)).total


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _scaled_eval_steps(eval_steps: Sequence[int], old: int, new: int) -> list[int]:
    """The sweep's eval steps at the same fractions of the new horizon (2/3, 5/6, 6/6 stay 2/3, 5/6, 6/6)."""
    return sorted({min(new, max(1, round(s * new / old))) for s in eval_steps})


def _default_rungs(base: str) -> list[str]:
    from trials.models import list_rungs

    family = list_rungs(base.split("-")[0])
    return family[family.index(base):]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class _Source:
    """What a transfer (or an export) needs of a finished sweep."""

    workdir: str
    sweep_id: str
    name: str
    parent_run_id: str
    tracking_uri: str
    experiment: str
    spec: SweepSpec
    best: dict[str, float | int]
    objectives: dict[str, Any]  # arm -> {objective, run_ids} at the sweep's rung
    searched_arm: str

    def base_optimizers(self) -> dict[str, dict[str, Any]]:
        """Each arm's full optimizer config at the sweep's rung, as the trials ran it (aux lr resolved)."""
        from trials import TrialConfig

        raw: dict[str, dict[str, Any]] = {arm: {"name": arm} for arm in _ARMS}
        for b in reversed(self.spec.baselines):  # the first baseline of an arm wins...
            raw[b.arm] = b.variants()[0][1]
        chosen = {arm: doc.get("point") for arm, doc in self.objectives.items()}
        for b in self.spec.baselines:  # ...unless the sweep measured another setting of it best (an lr bracket)
            options = dict(b.variants())
            if chosen.get(b.arm) in options:
                raw[b.arm] = options[str(chosen[b.arm])]
        raw[self.searched_arm] = self.spec.search.optimizer_for(self.best)
        out = {}
        for arm, cfg in raw.items():
            trial = TrialConfig.model_validate({"rung": self.spec.rung, "optimizer": cfg})
            out[arm] = trial.optimizer.model_dump(mode="json", exclude_none=True)
            out[arm]["lr"] = trial.optimizer.resolved_lr
        return out

    def provenance(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "sweep_name": self.name, "sweep_parent_run_id": self.parent_run_id,
                "sweep_workdir": self.workdir, "sweep_rung": self.spec.rung, "sweep_horizon": self.spec.horizon,
                "chosen": dict(self.best), "tracking_uri": _without_credentials(self.tracking_uri),
                "experiment": self.experiment}


def _load_source(workdir: str | Path, tracking_uri: str | None = None) -> _Source:
    from sweeper import load_sweep_result

    path = Path(workdir).resolve()
    if is_transfer_folder(path):
        raise TransferError(f"{path} is a transfer's work folder, not a sweep's; give the sweep it came from")
    spec_data = read_json(path / SPEC_FILE)
    if spec_data is None:
        raise TransferError(f"{path} is not a sweep work folder (no {SPEC_FILE})")
    result = load_sweep_result(path, tracking_uri=tracking_uri)
    if result.state != "SUCCEEDED":  # a running sweep's choice may still change
        raise TransferError(f"sweep {result.sweep_id} is {result.state}: transfer from a finished (SUCCEEDED) sweep")
    if result.selection is None or not result.best:
        raise TransferError(f"sweep {result.sweep_id} has no chosen point yet (state {result.state}): there is "
                            "nothing to transfer")
    spec = SweepSpec.model_validate(spec_data)
    objectives: dict[str, Any] = {spec.search.arm: {"objective": result.selection.point.objective,
                                                    "run_ids": list(result.selection.point.run_ids.values()),
                                                    "point": result.selection.point.point_key}}
    # Of an arm's settings (an lr bracket gives one per lr), the lowest mean objective is what a transfer carries.
    ranked = sorted(result.baselines, key=lambda b: (b.objective is None, b.objective or 0.0))
    for b in ranked:
        objectives.setdefault(b.arm, {"objective": b.objective, "run_ids": list(b.run_ids.values()),
                                      "point": b.point_key,
                                      "lr_tuning": {p.point_key: p.objective for p in result.baselines
                                                    if p.arm == b.arm}})
    return _Source(workdir=str(path), sweep_id=result.sweep_id, name=result.name,
                   parent_run_id=result.parent_run_id, tracking_uri=result.tracking_uri,
                   experiment=result.experiment, spec=spec, best=dict(result.best), objectives=objectives,
                   searched_arm=spec.search.arm)


def _rule(spec: TransferSpec, arm: str, adjust_lr_fn: str | None = None) -> str:
    """The spec's lr rule for `arm`, else the arm's default (which follows its `adjust_lr_fn`)."""
    given: dict[str, str] = {str(k): str(v) for k, v in spec.lr_rules.items()}
    return given.get(arm) or default_lr_rule(arm, adjust_lr_fn)


def _plan(spec: TransferSpec, source: _Source, transfer_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the plan, the sweep spec that runs it) for a transfer of `source`."""
    from sweeper import SEARCH_PARAMS, format_params

    if source.searched_arm not in spec.arms:
        raise TransferError(f"arms must include the sweep's searched arm {source.searched_arm!r} (it carries the "
                            f"chosen pair {format_params(source.best)}); got {list(spec.arms)}")
    base = source.spec
    base_rung = base.rung
    from trials.models import list_rungs

    order = list_rungs()
    rungs = sorted(spec.rungs or _default_rungs(base_rung), key=order.index)
    fixed_horizon = spec.steps or max(1, round(spec.horizon_factor * base.horizon))
    batch = int(_deep_merge(base.trial, spec.trial).get("batch_size", 32))
    study_trial = _deep_merge(base.trial, spec.trial)  # one size basis for the study: its trials' own models
    horizons = {r: rung_horizon(spec.horizon, _rung_shape(r, study_trial)[1], batch, fixed_horizon) for r in rungs}
    horizon = horizons[rungs[0]]  # the sweep's own horizon: the first rung's (its searched point runs there)
    eval_steps = _scaled_eval_steps(base.resolved_eval_steps, base.horizon, horizon)
    evals_by_rung = {r: _scaled_eval_steps(base.resolved_eval_steps, base.horizon, h) for r, h in horizons.items()}
    if spec.target.rule == "fixed":
        missing = [r for r in rungs if r not in spec.target.values]
        if missing:
            raise TransferError(f"target.values has no value for rungs {missing} (rule 'fixed' needs one per rung)")
    seeds = list(spec.seeds or base.seeds)
    base_width = _rung_shape(base_rung)[0]
    optimizers = source.base_optimizers()

    rows: list[dict[str, Any]] = []
    for rung in rungs:
        width, parameters = _rung_shape(rung, study_trial)
        for arm in spec.arms:
            cfg = optimizers[arm]
            carried, how = carry_optimizer(cfg, base_width=base_width, target_width=width,
                                           lr_rule=_rule(spec, arm, cfg.get("adjust_lr_fn")),
                                           wd_rule=spec.weight_decay_rule)
            rows.append({"rung": rung, "arm": arm, "width": width, "parameters": parameters, "lr": carried["lr"],
                         "lr_rule": how["lr_rule"], "lr_base": cfg["lr"], "weight_decay": carried["weight_decay"],
                         "weight_decay_rule": how["weight_decay_rule"], "optimizer": carried})

    def arm_tags(row: Mapping[str, Any]) -> dict[str, str]:
        return {"scalesweep.lr_rule": row["lr_rule"], "scalesweep.lr_base": f"{row['lr_base']:.6g}",
                "scalesweep.wd_rule": row["weight_decay_rule"],
                "scalesweep.base_rung": base_rung, "scalesweep.base_width": str(base_width)}

    # The chosen pair at the first rung is the sweep's one search point; everything else is a baseline with its
    # own rung. Largest rungs first: on a few cores the longest runs should start first (LPT scheduling).
    first = next(r for r in rows if r["rung"] == rungs[0] and r["arm"] == source.searched_arm)
    searched_fields = {SEARCH_PARAMS[n][0]: n for n in source.best}
    space = {name: [value] for name, value in source.best.items() if name != "lr"}
    search_optimizer = {k: v for k, v in first["optimizer"].items() if k not in searched_fields or k == "lr"}
    if not space:  # only lr was searched: the search point is the transferred lr itself
        space = {"lr": [first["lr"]]}
        search_optimizer.pop("lr")
    baselines = [
        {"arm": r["arm"], "label": f"{r['arm']}.{r['rung']}", "rung": r["rung"], "optimizer": r["optimizer"],
         "tags": arm_tags(r),
         **({"horizon": horizons[r["rung"]], "eval_steps": evals_by_rung[r["rung"]]}
            if horizons[r["rung"]] != horizon else {})}
        for r in sorted(rows, key=lambda r: -order.index(r["rung"]))
        if r is not first
    ]
    verification = None
    if spec.verify is not None:  # the bracket's runs join the one sweep as settings of their own
        try:
            verification, bracket = plan_verification(spec.verify, rungs=rungs, searched_arm=source.searched_arm,
                                                      rows=rows, baselines=baselines, first=first, arm_tags=arm_tags)
        except ValueError as exc:
            raise TransferError(str(exc)) from None
        baselines += bracket
    tracking = spec.tracking.model_dump(mode="json") if spec.tracking else {
        "tracking_uri": source.tracking_uri, "experiment": source.experiment}
    lineage = {
        "scalesweep.transfer_id": transfer_id,
        "scalesweep.transfer_name": spec.name,
        "scalesweep.source_sweep_id": source.sweep_id,
        "scalesweep.source_sweep_name": source.name,
        "scalesweep.source_parent_run_id": source.parent_run_id,
        "scalesweep.transfer.chosen": json.dumps(source.best, sort_keys=True),
        # Declared before any run: on the parent run from its creation, and on every child.
        "scalesweep.transfer.target": json.dumps(spec.target.model_dump(mode="json"), sort_keys=True),
        "scalesweep.transfer.horizons": json.dumps(horizons, sort_keys=True),
    }
    sweep_spec = {
        "name": spec.name,
        "rung": rungs[0],
        "horizon": horizon,
        "eval_steps": eval_steps,
        "search": {"method": "grid", "space": space, "optimizer": search_optimizer, "tags": arm_tags(first)},
        "seeds": seeds,
        "baselines": baselines,
        "execution": (spec.execution or base.execution).model_dump(mode="json"),
        "retries": base.retries.model_dump(mode="json"),
        "backend": base.backend.model_dump(mode="json"),
        "trial": _deep_merge(base.trial, spec.trial),
        "tracking": tracking,
        "tags": lineage,
    }
    try:
        validated = SweepSpec.model_validate(sweep_spec)
    except ValidationError as exc:  # e.g. a `trial` override that trials refuses
        parts = "; ".join(f"{'.'.join(map(str, e['loc']))}: {str(e['msg']).removeprefix('Value error, ')}"
                          for e in exc.errors())
        raise TransferError(f"the transfer's runs would be invalid: {parts}") from None
    plan = {
        "rungs": rungs,
        "horizon": horizon,
        "source_horizon": base.horizon,
        "eval_steps": eval_steps,
        "horizons": horizons,
        "eval_steps_by_rung": evals_by_rung,
        "horizon_rule": spec.horizon.model_dump(mode="json"),
        "target": spec.target.model_dump(mode="json"),
        "target_text": spec.target.describe(),
        "plateau": spec.plateau.model_dump(mode="json"),
        "seeds": seeds,
        "arms": list(spec.arms),
        "weight_decay_rule": spec.weight_decay_rule,
        "searched_arm": source.searched_arm,
        "chosen": dict(source.best),
        "size_basis": {"text": size_basis(study_trial)[1], "trial": study_trial},
        "base": {"rung": base_rung, "width": base_width, "parameters": _rung_shape(base_rung, study_trial)[1],
                 "optimizers": {a: optimizers[a] for a in spec.arms}},
        "runs": [{k: v for k, v in r.items() if k != "optimizer"} for r in rows],
    }
    if verification is not None:
        plan["verification"] = verification
    return plan, validated.model_dump(mode="json")


# ----------------------------------------------------------------------------------------------------------
# The driver


def run_transfer(
    spec: TransferSpec | str | Path | Mapping[str, Any],
    workdir: str | Path | None = None,
    resume: bool = False,
    show_progress: bool = False,
    *,
    stream: IO[str] | None = None,
) -> TransferResult:
    """Run a transfer to its end (or until cancelled) and return its result, read back from MLflow.

    `workdir` holds its state (default `out/transfers/<name>`). With `resume=True` a transfer already there
    continues where it stopped (finished runs are never re-run); without it an existing transfer is an error.
    `show_progress` prints the plan, one line per run event, and the savings at the end, to `stream` (stdout).
    Blocks; run it in a process of its own (the CLI does): Ray takes over signals and is not safe to share.
    """
    from sweeper import SweepFailedError, run_sweep

    spec = spec if isinstance(spec, TransferSpec) else load_transfer_spec(spec)
    path = Path(workdir or default_transfer_workdir(spec.name)).resolve()
    out = (stream or sys.stdout) if show_progress else None
    state = read_transfer(path)
    if state is not None and not resume:
        raise TransferError(f"{path} already holds transfer {state['transfer_id']}; pass resume=True (--resume) "
                            "to continue it, or choose another work folder")
    if state is not None and state.get("fingerprint") != spec.fingerprint():
        raise TransferError(f"the spec changed since transfer {state['transfer_id']} started in {path}; only "
                            "`execution` may change on resume")
    if state is None:
        transfer_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        source = _load_source(spec.sweep)
        plan, sweep_spec = _plan(spec, source, transfer_id)
        path.mkdir(parents=True, exist_ok=True)
        state = {"transfer_id": transfer_id, "name": spec.name, "fingerprint": spec.fingerprint(),
                 "spec": spec.model_dump(mode="json"), "source": source.provenance(),
                 "source_objectives": source.objectives, "plan": plan, "sweep_spec": sweep_spec,
                 "created_at": _now()}
        write_json(path / TRANSFER_FILE, state)
    sweep_spec = dict(state["sweep_spec"])
    if spec.execution is not None:  # execution may change between a run and its resume
        sweep_spec["execution"] = spec.execution.model_dump(mode="json")
    (path / OUTCOME_FILE).unlink(missing_ok=True)
    if out is not None:
        plan = state["plan"]
        print(f"transfer {state['transfer_id']}: {state['source']['chosen']} from sweep "
              f"{state['source']['sweep_id']} to {', '.join(plan['rungs'])}; arms {', '.join(plan['arms'])}; "
              f"{plan['horizon']} steps (sweep: {plan['source_horizon']}), evals at {plan['eval_steps']}, seeds "
              f"{plan['seeds']}; {len(plan['runs']) * len(plan['seeds'])} runs", file=out, flush=True)
        for row in plan["runs"]:
            print(f"  {row['rung']:<10} {row['arm']:<8} lr {row['lr']:.4g} ({row['lr_rule']} from "
                  f"{row['lr_base']:.4g})", file=out, flush=True)
        if "horizons" in plan:
            print(f"  horizons per rung: {plan['horizons']}; target: {plan['target_text']}", file=out, flush=True)
    if "step_timing" not in state:
        state["step_timing"] = _step_timing(spec, state, out)
        write_json(path / TRANSFER_FILE, state)
    try:
        swept = run_sweep(SweepSpec.model_validate(sweep_spec), workdir=path, resume=True,
                          show_progress=show_progress, stream=out, show_table=False)  # its table is below
    except SweepFailedError as exc:
        write_json(path / OUTCOME_FILE, {"state": "FAILED", "error": str(exc), "finished_at": _now()})
        raise
    result = load_transfer_result(path)
    if swept.state == "CANCELLED":
        final = "CANCELLED"
    elif any(r.state == "SUCCEEDED" for r in result.runs) and not any(
            r.state in ("RUNNING", "PENDING", "CANCELLED") for r in result.runs):
        final = "SUCCEEDED"  # failed or diverged runs are data (and counted), as in a sweep
    else:
        final = "FAILED"
    write_json(path / OUTCOME_FILE, {"state": final, "finished_at": _now(), "counts": result.counts})
    result.state = final
    if out is not None:
        print(result.table(), file=out, flush=True)
    return result


def _step_timing(spec: TransferSpec, state: Mapping[str, Any], out: IO[str] | None) -> dict[str, Any]:
    """Per-step time of every arm at every rung, each from a short run of its own before the transfer's runs start
    (so no other trial of the transfer shares the cores): the systems half of the time saving."""
    sweep_spec = state["sweep_spec"]
    if spec.timing.steps == 0:
        return {"measured": False, "reason": "timing.steps is 0"}
    if sweep_spec["backend"]["name"] != "builtin":
        return {"measured": False, "reason": "the command backend's trainer cannot be timed in isolation here"}
    rows = [(r["rung"], r["arm"], opt) for r in state["plan"]["runs"]
            for opt in [_row_optimizer(sweep_spec, r["rung"], r["arm"])] if opt is not None]
    if out is not None:
        print(f"timing {spec.timing.steps} steps per arm and rung, one at a time ({len(rows)} short runs)",
              file=out, flush=True)
    threads = int(sweep_spec["execution"].get("threads", 1))
    times = measure_step_times(sweep_spec["trial"], rows, spec.timing, threads=threads)
    if out is not None:
        for rung, per in times.items():
            print(f"  {rung:<10} " + ", ".join(f"{a} {1e3 * t:.1f} ms/step" for a, t in per.items()), file=out,
                  flush=True)
    return {"measured": True, "steps": spec.timing.steps, "warmup": spec.timing.warmup, "threads": threads,
            "seconds_per_step": times, "measured_at": _now()}


def _row_optimizer(sweep_spec: Mapping[str, Any], rung: str, arm: str) -> dict[str, Any] | None:
    """The optimizer a (rung, arm) of the plan runs with, as its sweep spec holds it."""
    for b in sweep_spec["baselines"]:
        if b["arm"] == arm and (b.get("rung") or sweep_spec["rung"]) == rung:
            return {**b["optimizer"], "name": arm}
    if rung == sweep_spec["rung"]:
        search = sweep_spec["search"]
        point = {k: v[0] for k, v in search["space"].items()}
        from sweeper import SEARCH_PARAMS

        return {**search["optimizer"], **{SEARCH_PARAMS[k][0]: v for k, v in point.items()}}  # it names its arm
    return None


def _transfer_state(path: Path) -> dict[str, Any]:
    state = read_transfer(path)
    if state is None:
        raise TransferError(f"{path} is not a transfer work folder (no {TRANSFER_FILE})")
    return state


def transfer_status(workdir: str | Path) -> dict[str, Any]:
    """The live status of the transfer in `workdir`: state (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, or
    INTERRUPTED when its driver died; `--resume` continues it), run counts, driver_alive, pid, MLflow ids and the
    last events."""
    from sweeper import sweep_status

    path = Path(workdir).resolve()
    state = _transfer_state(path)
    base = {"transfer_id": state["transfer_id"], "name": state["name"], "workdir": str(path),
            "source_sweep_id": state["source"]["sweep_id"], "rungs": state["plan"]["rungs"],
            "arms": state["plan"]["arms"], "horizon": state["plan"]["horizon"],
            "runs_planned": len(state["plan"]["runs"]) * len(state["plan"]["seeds"]),
            "tracking_uri": state["sweep_spec"]["tracking"]["tracking_uri"],
            "experiment": state["sweep_spec"]["tracking"]["experiment"]}
    if not is_sweep_folder(path):  # the driver has not reached its sweep yet
        return {**base, "state": "PENDING", "driver_alive": False, "counts": {}, "parent_run_id": None}
    status = sweep_status(path)
    outcome = read_outcome(path)
    sweep_state = status.get("state")
    if sweep_state in ("SUCCEEDED", "FAILED"):
        final = outcome["state"] if outcome else sweep_state
    else:
        final = sweep_state
    counts = {k: v for k, v in (status.get("counts") or {}).items()}
    return {**base, "state": final, "driver_alive": status.get("driver_alive", False), "pid": status.get("pid"),
            "counts": counts, "sweep_id": status.get("sweep_id"), "parent_run_id": status.get("parent_run_id"),
            "experiment_id": status.get("experiment_id"),
            "tracking_uri": status.get("tracking_uri", base["tracking_uri"]),
            "experiment": status.get("experiment", base["experiment"]), "summary": status.get("summary"),
            "running": status.get("running") or [], "events": status.get("events") or [],
            "error": (outcome or {}).get("error") or status.get("error"), "updated_at": status.get("updated_at")}


def cancel_transfer(workdir: str | Path, *, grace_s: float = 60.0) -> dict[str, Any]:
    """Stop the transfer in `workdir` (the sweeper's cancel: cancel file, SIGTERM, then its process group after
    `grace_s`); no run is left RUNNING and the transfer ends CANCELLED, resumable. Returns its status."""
    from sweeper import cancel_sweep

    path = Path(workdir).resolve()
    _transfer_state(path)
    if is_sweep_folder(path):
        cancel_sweep(path, grace_s=grace_s)  # a finished transfer stays as it ended
    return transfer_status(path)


# ----------------------------------------------------------------------------------------------------------
# Reading it back


def _clean(value: Any) -> Any:
    """JSON-able: NaN and inf -> None, tuples -> lists, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in (sorted(value) if isinstance(value, set) else value)]
    return value


@dataclass
class TransferResult:
    """A transfer's runs, read from MLflow, and what follows from them: time to best per run, savings of the
    searched arm against each baseline per rung, scaling fits per metric, predictions and exports."""

    transfer_id: str
    name: str
    state: str
    workdir: str
    tracking_uri: str
    experiment: str
    parent_run_id: str | None
    source: dict[str, Any]
    plan: dict[str, Any]
    runs: list[TransferRun]
    counts: dict[str, int] = field(default_factory=dict)
    source_objectives: dict[str, Any] = field(default_factory=dict)
    verification_runs: list[TransferRun] = field(default_factory=list)  # the bracket's, kept out of the analysis
    step_timing: dict[str, Any] = field(default_factory=dict)  # per-step time per rung and arm, in isolation
    _fits: dict[tuple[Any, ...], ScalingFit] = field(default_factory=dict, repr=False)

    @property
    def searched_arm(self) -> str:
        return str(self.plan["searched_arm"])

    @property
    def chosen(self) -> dict[str, Any]:
        return dict(self.plan["chosen"])

    def parameters(self, rung: str) -> int:
        """A rung's parameter count: as the runs logged it (tag `model.parameters`), else the plan's."""
        for run in self.runs:
            if run.rung == rung and run.parameters:
                return run.parameters
        for row in self.plan["runs"]:
            if row["rung"] == rung:
                return int(row["parameters"])
        # A rung this transfer did not run: counted on the study's basis (a transfer planned before the basis was
        # recorded falls back to the rung's default model).
        return _rung_shape(rung, (self.plan.get("size_basis") or {}).get("trial"))[1]

    @property
    def size_basis(self) -> str:
        """What `parameters` counts, in words (one basis per study)."""
        basis = self.plan.get("size_basis") or {}
        return str(basis.get("text") or "parameters of each rung's default model (a transfer planned before the "
                   "size basis was recorded)")

    def time_to_best(self, **kwargs: Any) -> dict[str, TimeToBest]:
        """Run id -> `time_to_best` of its checkpoints, for runs that succeeded or diverged part-way (keyword
        arguments go to `time_to_best`: tol, volatility_tol)."""
        out: dict[str, TimeToBest] = {}
        for run in self.runs:
            if run.state not in ("SUCCEEDED", "DIVERGED") or not run.checkpoints:
                continue
            if not any(math.isfinite(f) for _, _, f in run.checkpoints):
                continue
            steps, times, fds = zip(*run.checkpoints, strict=True)
            try:
                out[run.run_id] = time_to_best(steps, times, fds, **kwargs)
            except ScalingInputError:
                if kwargs:
                    raise  # the caller's tolerances are wrong, not the run
                continue  # records that cannot be read as checkpoints (e.g. a clock reset): left out
        return out

    def _succeeded(self) -> list[tuple[TransferRun, TimeToBest]]:
        ttb = self.time_to_best()
        return [(r, ttb[r.run_id]) for r in self.runs if r.state == "SUCCEEDED" and r.run_id in ttb]

    def savings(self, *, robust: bool = False) -> dict[str, dict[str, Savings]]:
        """Rung -> baseline arm -> time to best saved by the searched arm, in % of the baseline's (positive:
        faster), seeds paired, with the seed spread. Rungs or baselines without a common seed are left out."""
        by_rung: dict[str, dict[str, dict[int | str, float | TimeToBest]]] = {}
        for run, ttb in self._succeeded():
            by_rung.setdefault(run.rung, {}).setdefault(run.arm, {})[run.seed] = ttb
        out: dict[str, dict[str, Savings]] = {}
        for rung in self.plan["rungs"]:
            times = by_rung.get(rung, {})
            if self.searched_arm not in times:
                continue
            for base in (a for a in self.plan["arms"] if a != self.searched_arm and a in times):
                try:
                    s = savings({self.searched_arm: times[self.searched_arm], base: times[base]},
                                periodic=self.searched_arm, baselines=[base], robust=robust)
                except ScalingInputError:
                    continue  # no seed in common
                out.setdefault(rung, {})[base] = s[base]
        return out

    def common_targets(self) -> dict[str, dict[int, CommonTarget]]:
        """Rung -> seed -> each arm's time to reach the worst arm's smoothed best FD x 1.02 (time_to_common_target),
        for seeds where at least two arms succeeded."""
        by: dict[str, dict[int, dict[str, Checkpoints]]] = {}
        for run in self.runs:
            if run.state == "SUCCEEDED" and run.checkpoints:
                by.setdefault(run.rung, {}).setdefault(run.seed, {})[run.arm] = Checkpoints.from_rows(run.checkpoints)
        out: dict[str, dict[int, CommonTarget]] = {}
        for rung, seeds in by.items():
            for seed, arms in seeds.items():
                if len(arms) >= 2:
                    with contextlib.suppress(ScalingInputError):
                        out.setdefault(rung, {})[seed] = time_to_common_target(arms)
        return out

    def targets(self) -> dict[str, Any]:
        """The per-rung report against the target declared in the spec (`scaling._rungs.rung_report`): target
        value and its source, fraction of seeds reaching it per arm, steps and time to target, the paired
        steps-to-target ratio, the per-step time ratio measured in isolation and the time saving, time to best
        (the paper's definition) beside them, and the plateau flag per rung. Computed once per result (the
        analysis, the export and the fits each ask for it); callers get their own top-level copy."""
        return dict(self._target_report)

    @cached_property
    def _target_report(self) -> dict[str, Any]:
        ttb = {rid: t.best_time_s for rid, t in self.time_to_best().items()}
        plan = self.plan
        # Transfers planned before targets existed get the default rule, applied now (and said so in the text).
        return rung_report(
            self.runs, rungs=plan["rungs"], arms=plan["arms"], searched_arm=self.searched_arm,
            seeds=plan["seeds"], target=TargetSpec.model_validate(plan.get("target") or {}),
            step_times=self.step_timing.get("seconds_per_step"), time_to_best=ttb,
            plateau_spec=PlateauSpec.model_validate(plan.get("plateau") or {}),
            horizons=plan.get("horizons") or {r: plan["horizon"] for r in plan["rungs"]})

    def target_summary(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """The target report (without its per-run rows), the fits of steps and time to target (as in
        `analysis()`), the undertrained rungs and the searched arm: what the HTML report's target section shows."""
        report = self.targets()
        report.pop("per_run")
        extra: dict[str, Any] = {} if n_boot is None else {"n_boot": n_boot}
        fits: dict[str, Any] = {}
        for metric in ("steps_to_target", "time_to_target"):
            try:
                fits[metric] = _fit_doc(self.fits(metric, **extra))
            except ScalingError as exc:
                fits[metric] = {"error": str(exc)}
        return _clean({"report": report, "fits": fits, "undertrained_rungs": self.undertrained_rungs(),
                       "searched_arm": self.searched_arm})

    def undertrained_rungs(self) -> list[str]:
        """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
        return [r for r, e in self.targets()["rungs"].items() if e["plateau"]["undertrained"]]

    def fit_data(self, metric: str = "time_to_best") -> dict[str, tuple[list[float], list[float]]]:
        """Arm -> (sizes, values): one entry per succeeded run (sizes repeat over seeds), arms with fewer than two
        rungs left out. Steps and time to target count only runs that reached the target."""
        if metric not in FIT_METRICS:
            raise ScalingInputError(f"unknown metric {metric!r}; allowed: {list(FIT_METRICS)}")
        data: dict[str, tuple[list[float], list[float]]] = {}
        hits = self.targets()["per_run"] if metric in ("steps_to_target", "time_to_target") else {}
        for run, ttb in self._succeeded():
            if hits:
                hit = hits.get(run.run_id)
                value = math.nan if not hit or not hit["reached"] else (
                    hit["steps"] if metric == "steps_to_target" else hit["time_s"])
            else:
                value = {"time_to_best": ttb.best_time_s, "best_fd": ttb.best_fd,
                         "endpoint_fd": ttb.endpoint_fd}.get(metric, math.nan)
            if not (math.isfinite(value) and value > 0):
                continue
            sizes, values = data.setdefault(run.arm, ([], []))
            sizes.append(float(self.parameters(run.rung)))
            values.append(float(value))
        return {arm: d for arm, d in data.items() if len(set(d[0])) >= 2}

    def fits(self, metric: str = "time_to_best", form: str | None = None, share: Sequence[str] = (),
             **kwargs: Any) -> ScalingFit:
        """`fit_scaling` over the arms for `metric` (time_to_best | best_fd | endpoint_fd) against parameter
        count. Default form: `A*N^-alpha` for time to best (with alpha in (-3, 3): it grows with size), `E+A*N^-alpha`
        for FD. Other keyword arguments go to `fit_scaling` (n_boot, seed, allow_extrapolation, ...)."""
        data = self.fit_data(metric)
        if not data:
            raise ScalingInputError(f"no arm has succeeded runs at two rungs or more to fit {metric} on")
        form = form or ("A*N^-alpha" if metric in _COST_METRICS else "E+A*N^-alpha")
        if metric in _COST_METRICS:
            kwargs.setdefault("alpha_bounds", _TIME_ALPHA_BOUNDS)
        share_t = (share,) if isinstance(share, str) else tuple(share)
        key = (metric, form, share_t, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        if key not in self._fits:
            self._fits[key] = fit_scaling(data, form=form, share=share_t, **kwargs)
        return self._fits[key]

    def predict(self, arm: str, size: float | int | str, metric: str = "time_to_best",
                **kwargs: Any) -> tuple[float, float, float]:
        """(point, lo, hi) of `metric` for `arm` at `size` (a parameter count or a rung name), from `fits(metric)`;
        raises `ExtrapolationRefused` with the reason beyond the fit's limit."""
        n = self.parameters(size) if isinstance(size, str) else size
        allow = kwargs.pop("allow_extrapolation", None)
        return self.fits(metric, **kwargs).predict(arm, n, allow_extrapolation=allow)

    def verification(self) -> Any:
        """The verification stage's verdict (`scaling.TransferVerdict`), or None without one or before its runs."""
        return verification_verdict(self.plan, [*self.runs, *self.verification_runs], self.searched_arm,
                                    self.plan["seeds"])

    def verification_doc(self) -> dict[str, Any] | None:
        """The verdict as data, {"verdict": "pending", ...} while its runs are missing, None without a stage."""
        plan = self.plan.get("verification")
        if not plan:
            return None
        verdict = self.verification()
        if verdict is None:
            return _clean({"verdict": "pending", "rung": plan["rung"], "points": plan["points"],
                           "reason": "the bracket's runs have not all succeeded on a common seed yet"})
        return _clean({"rung": plan["rung"], "points": plan["points"], **verdict.to_dict()})

    def analysis(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """Everything as JSON-able data: per-run time to best, the savings table, and fits per metric (params,
        intervals, flags, leave-one-rung-out errors) with the chosen pair, FD metric name and sample count."""
        ttb = self.time_to_best()
        report = self.targets()
        hits = report.pop("per_run")
        drops = {rid: d for e in report["rungs"].values() for rid, d in e["plateau"]["runs"].items()}
        runs = []
        for run in self.runs:
            t = ttb.get(run.run_id)
            hit = hits.get(run.run_id) or {}
            runs.append({**run.to_dict(), "parameters": self.parameters(run.rung),
                         "best_fd": t.best_fd if t else None, "best_step": t.best_step if t else None,
                         "time_to_best_s": t.best_time_s if t else None,
                         "robust_time_to_best_s": t.robust_time_s if t else None,
                         "endpoint_fd": t.endpoint_fd if t else None,
                         "volatile_steps": list(t.volatile_steps) if t else [],
                         "horizon": run.horizon, "fd_track": [[s, tt, f] for s, tt, f in run.track],
                         "target": hit.get("target"), "target_reached": hit.get("reached"),
                         "steps_to_target": hit.get("steps"), "time_to_target_s": hit.get("time_s"),
                         "plateau_drop": drops.get(run.run_id), "fd_samples": run.fd_samples,
                         # FD - FD-infinity at the last deciding checkpoint: how much of endpoint_fd is sample bias
                         "fd_bias_estimate": run.fd_bias[-1][1] if run.fd_bias else None})
        undertrained = [r for r, e in report["rungs"].items() if e["plateau"]["undertrained"]]
        fits: dict[str, Any] = {}
        extra: dict[str, Any] = {} if n_boot is None else {"n_boot": n_boot}
        for metric in FIT_METRICS:
            try:
                fit = self.fits(metric, **extra)
            except ScalingError as exc:
                fits[metric] = {"error": str(exc)}
                continue
            fits[metric] = _fit_doc(fit)
            over = [r for r in undertrained if float(self.parameters(r)) in {s for a in fit.arms for s in fit.sizes[a]}]
            if over:  # a size fit over rungs still improving fast mixes model size with training length
                fits[metric]["flags"] = sorted({*fits[metric]["flags"], "undertrained"})
                fits[metric]["flag_details"]["undertrained"] = (
                    f"fitted over rungs whose runs were still improving fast at their end: {over}; the fit mixes "
                    "model size with under-training")
        metric_names = sorted({r.metric_name for r in self.runs if r.metric_name})
        samples = sorted({r.fd_samples for r in self.runs if r.fd_samples})
        return _clean({
            "transfer_id": self.transfer_id, "name": self.name, "state": self.state,
            "chosen": self.chosen, "searched_arm": self.searched_arm, "source": self.source,
            "metric_name": metric_names[0] if len(metric_names) == 1 else metric_names,
            "fd_samples": samples[0] if len(samples) == 1 else samples,
            "horizon": self.plan["horizon"], "eval_steps": self.plan["eval_steps"], "seeds": self.plan["seeds"],
            "rungs": {r: self.parameters(r) for r in self.plan["rungs"]}, "size_basis": self.size_basis,
            "counts": self.counts, "runs": runs,
            "savings": {rung: {b: {"mean_pct": s.mean_pct, "std_pct": s.std_pct, "n": s.n,
                                   "per_seed_pct": list(s.per_seed_pct), "seeds": list(s.seeds)}
                               for b, s in per.items()} for rung, per in self.savings().items()},
            "common_target": {rung: {str(seed): {"target_fd": c.target_fd, "reference_arm": c.reference_arm,
                                                 "time_s": c.time_s, "step": c.step}
                                     for seed, c in per.items()} for rung, per in self.common_targets().items()},
            "targets": report, "horizons": self.plan.get("horizons") or {r: self.plan["horizon"]
                                                                          for r in self.plan["rungs"]},
            "horizon_rule": self.plan.get("horizon_rule", {"mode": "fixed"}),
            "step_timing": self.step_timing, "undertrained_rungs": undertrained,
            "track_samples": sorted({r.track_samples for r in self.runs if r.track_samples}),
            "fits": fits,
            "verification": self.verification_doc(),
        })

    def export(self, target_rung: str, *, lr_rules: Mapping[str, str] | None = None) -> Export:
        """The transferred hyperparameters for `target_rung` (any rung: verified only where this transfer ran
        that arm there and it succeeded), with the rule behind each value and provenance."""
        from trials.models import check_rung

        check_rung(target_rung)
        base = self.plan["base"]
        rules = {a: r["lr_rule"] for r in self.plan["runs"] for a in [r["arm"]]}
        rules.update(lr_rules or {})
        verified = {arm: any(r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED" for r in self.runs)
                    for arm in self.plan["arms"]}
        ttb = self.time_to_best()
        evidence: dict[str, dict[str, Any]] = {}
        for arm in self.plan["arms"]:
            at = [r for r in self.runs if r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED"]
            ev: dict[str, Any] = {"sweep": self.source_objectives.get(arm, {})}
            if at:
                ev["transfer_run_ids"] = [r.run_id for r in at]
                ev["best_fd_mean"] = statistics.fmean(ttb[r.run_id].best_fd for r in at if r.run_id in ttb)
                ev["time_to_best_s_mean"] = statistics.fmean(ttb[r.run_id].best_time_s for r in at
                                                             if r.run_id in ttb)
            evidence[arm] = _clean(ev)
        report = self.targets()
        at_rung = report["rungs"].get(target_rung)
        if at_rung is not None:  # against the declared target, where this transfer ran the rung
            for arm in self.plan["arms"]:
                a = at_rung["arms"].get(arm, {})
                evidence[arm] = {**evidence[arm], **_clean({
                    "target": at_rung["target"], "fraction_reached": a.get("fraction_reached"),
                    "steps_to_target_mean": (a.get("steps_to_target") or {}).get("mean"),
                    "time_to_target_s_mean": (a.get("time_to_target_s") or {}).get("mean"),
                    "undertrained_rung": at_rung["plateau"]["undertrained"]})}
        under = self.undertrained_rungs()
        for metric in ("steps_to_target", "time_to_target"):  # the fitted curve at the target, or why there is none
            try:
                fit = self.fits(metric)
            except ScalingError as exc:
                for arm in self.plan["arms"]:
                    evidence[arm] = {**evidence[arm], f"{metric}_fit": {"error": str(exc)}}
                continue
            flags = sorted({*fit.flags, *(["undertrained"] if under else [])})
            for arm in self.plan["arms"]:
                doc: dict[str, Any] = {"form": fit.form, "flags": flags, "loss_function": fit.loss_function,
                                       "loo_error": fit.loo_error.get(arm),
                                       "loo_baseline_error": fit.loo_baseline_error.get(arm)}
                try:
                    point, lo, hi = fit.predict(arm, self.parameters(target_rung))
                    doc.update(point=point, lo=lo, hi=hi, level=fit.level)
                except ScalingError as exc:  # not fitted for this arm, or beyond the extrapolation limit
                    doc["refused"] = str(exc)
                evidence[arm] = {**evidence[arm], f"{metric}_fit": _clean(doc)}
        shas = sorted({r.git_sha for r in self.runs if r.git_sha})
        return build_export(
            {a: base["optimizers"][a] for a in self.plan["arms"]},
            base_width=int(base["width"]),
            target_width=_rung_shape(target_rung)[0],
            target={"rung": target_rung, "parameters": self.parameters(target_rung), "size_basis": self.size_basis,
                    "base_rung": base["rung"],
                    "horizon": self.plan["horizon"]},
            lr_rules=rules,
            verified=verified,
            evidence=evidence,
            weight_decay_rule=str(self.plan.get("weight_decay_rule", "keep_wd")),  # older transfers kept wd
            provenance={**self.source, "verification": self.verification_doc(), "transfer_id": self.transfer_id,
                        "transfer_parent_run_id": self.parent_run_id,
                        "code_version": shas[0] if len(shas) == 1 else shas,
                        "target_rule": report["rule"], "target_rule_text": report["rule_text"],
                        "horizon_rule": self.plan.get("horizon_rule", {"mode": "fixed"}),
                        "horizons": self.plan.get("horizons") or {r: self.plan["horizon"]
                                                                  for r in self.plan["rungs"]}},
        )

    def table(self) -> str:
        """Time to best per rung and arm (mean over seeds), and the savings, as text."""
        lines = [f"transfer {self.name} ({self.transfer_id}): {self.state}; chosen {self.chosen}, "
                 f"{self.plan['horizon']} steps"]
        ttb = self.time_to_best()
        header = f"{'rung':<10} {'params':>10} {'arm':<9} {'seeds':>5} {'best FD':>9} {'time to best s':>15}"
        lines += [header, "-" * len(header)]
        for rung in self.plan["rungs"]:
            for arm in self.plan["arms"]:
                done = [ttb[r.run_id] for r in self.runs
                        if r.rung == rung and r.arm == arm and r.state == "SUCCEEDED" and r.run_id in ttb]
                fd = f"{statistics.fmean(t.best_fd for t in done):.4g}" if done else "-"
                tt = f"{statistics.fmean(t.best_time_s for t in done):.4g}" if done else "-"
                lines.append(f"{rung:<10} {self.parameters(rung):>10} {arm:<9} {len(done):>5} {fd:>9} {tt:>15}")
        sav = self.savings()
        if sav:
            lines.append(f"\ntime to best saved by {self.searched_arm} (% of the baseline's; + = faster):")
            for rung, per in sav.items():
                for b, s in per.items():
                    spread = f" ± {s.std_pct:.1f}" if s.std_pct is not None else ""
                    lines.append(f"  {rung:<10} vs {b:<8} {s.mean_pct:+.1f}%{spread} (n={s.n})")
        lines += target_table(self.targets(), self.searched_arm)
        doc = self.verification_doc()
        if doc is not None:
            lines.append(f"\nverification at {doc['rung']}: {doc['verdict']}: {doc.get('reason', '')}"
                         + (f" (seeds that would settle it: {doc['seeds_needed']})" if doc.get("seeds_needed") else ""))
        return "\n".join(lines)


def _fit_doc(fit: ScalingFit) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "form": fit.form, "share": list(fit.share), "flags": sorted(fit.flags), "flag_details": fit.flag_details,
        "bootstrap": fit.bootstrap, "n_boot_ok": fit.n_boot_ok, "level": fit.level, "converged": fit.converged,
        "notes": list(fit.notes), "suggestion": fit.suggestion,
        "loss_function": fit.loss_function, "loss_reason": fit.loss_reason,
        "arms": {arm: {"params": fit.params[arm], "intervals": {p: list(v) for p, v in fit.intervals[arm].items()},
                       "loo_error": fit.loo_error.get(arm), "loo_baseline_error": fit.loo_baseline_error.get(arm),
                       "sizes": list(fit.sizes[arm])} for arm in fit.arms},
    }
    if fit.alternative is not None:
        doc["alternative"] = _fit_doc(fit.alternative)
    return doc


def load_transfer_result(workdir: str | Path, tracking_uri: str | None = None) -> TransferResult:
    """The transfer in `workdir`, its runs read from MLflow (`tracking_uri` overrides the stored one, e.g. when
    the store moved). Works while it runs and after it ended, from any process."""
    path = Path(workdir).resolve()
    state = _transfer_state(path)
    tracking = state["sweep_spec"]["tracking"]
    uri = tracking_uri or _stored_uri(path) or tracking["tracking_uri"]
    runs = read_runs(uri, tracking["experiment"], "scalesweep.transfer_id", state["transfer_id"])
    verification_runs = [r for r in runs if is_verification_run(r)]
    runs = [r for r in runs if not is_verification_run(r)]
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.state] = counts.get(run.state, 0) + 1
    status: dict[str, Any] = {}
    if is_sweep_folder(path):
        status = transfer_status(path)
    return TransferResult(
        transfer_id=state["transfer_id"], name=state["name"], state=str(status.get("state", "PENDING")),
        workdir=str(path), tracking_uri=uri, experiment=tracking["experiment"],
        parent_run_id=status.get("parent_run_id"), source=dict(state["source"]), plan=dict(state["plan"]),
        runs=runs, counts=counts, source_objectives=dict(state.get("source_objectives", {})),
        verification_runs=verification_runs,
        step_timing=dict(state.get("step_timing") or {}),
    )


def _stored_uri(path: Path) -> str | None:
    sweep = read_json(path / STATE_FILE)
    return str(sweep["tracking_uri"]) if sweep else None


def export_from_sweep(sweep_workdir: str | Path, target_rung: str, tracking_uri: str | None = None) -> Export:
    """The sweep's choice carried to `target_rung` by the default lr rules alone, without transfer runs (every
    arm `verified_at_target` False), with the sweep's objectives and run ids as evidence."""
    from trials.models import check_rung

    check_rung(target_rung)
    source = _load_source(sweep_workdir, tracking_uri)
    optimizers = source.base_optimizers()
    arms = [source.searched_arm, *(a for a in ("muon", "adamw") if a != source.searched_arm)]
    return build_export(
        {a: optimizers[a] for a in arms},
        base_width=_rung_shape(source.spec.rung)[0],
        target_width=_rung_shape(target_rung)[0],
        target={"rung": target_rung, "parameters": _rung_shape(target_rung, source.spec.trial)[1],
                "size_basis": size_basis(source.spec.trial)[1], "base_rung": source.spec.rung},
        verified={a: False for a in arms},
        evidence={a: _clean({"sweep": source.objectives.get(a, {})}) for a in arms},
        provenance=source.provenance(),
    )
