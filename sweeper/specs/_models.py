"""The typed, strict sweep spec: what to search, on which rung and horizon, how to run it, where to record it.

A spec is plain data (JSON or YAML, `load_spec`); every field has a default that reproduces the paper's first
stage (K in {2,3,4} x gamma in {0.10,0.15,0.25,0.35} on the smallest rung, scored by mean FD at 2/3, 5/6 and 6/6 of
the horizon, beside AdamW and vanilla Muon). Unknown keys are errors, and a bad value names its field and the
allowed values. Validation imports `trials` lazily so that `import sweeper` stays light (no torch).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trials import CommandLine
from trials.core import read_mapping
from trials.optim import ArmName, ControlArmName
from trials.record import TAG

from ..errors import SweepError
from .checks import (
    _OWNED_TRIAL_FIELDS,
    MAX_BASELINES,
    MAX_HORIZON,
    MAX_POINTS,
    MAX_SEED,
    MAX_SEEDS,
    MIN_CROSSING_POINTS,
    Rung,
    Seeds,
    Step,
    TrialSection,
    Workers,
    _nested_errors,
    check_batch_split,
    check_numbers,
)

M = TypeVar("M", bound=BaseModel)

# Searchable names -> the OptimizerConfig field they set and their type. K and gamma are the paper's names.
SEARCH_PARAMS: dict[str, tuple[str, type]] = {
    "K": ("refresh_every", int),
    "gamma": ("gamma", float),
    "lr": ("lr", float),
    "aux_lr": ("aux_lr", float),
    "weight_decay": ("weight_decay", float),
    "momentum": ("momentum", float),
}


_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

# Searchable and optimizer values: K beyond 100k steps never refreshes; lr, gamma and decay above 10 diverge.
_PARAM_MAX: dict[str, float] = {"refresh_every": 100_000, "gamma": 10.0, "lr": 10.0, "aux_lr": 10.0,
                                "weight_decay": 10.0, "aux_weight_decay": 10.0, "adamw_eps": 1.0,
                                "betas[0]": 1.0, "betas[1]": 1.0}
# Searched values lie within +-the largest cap (K's); each value's own range (lr > 0, momentum < 1, ...) is
# then checked by the optimizer's config, with its own message.
_SPACE_MAX = 100_000


def canonical_value(name: str, value: float | int) -> float | int:
    """One value per point: K is an int; floats keep 6 significant digits so a point's key and value agree."""
    if SEARCH_PARAMS[name][1] is int:
        return int(value)
    return float(f"{float(value):.6g}")


def _format_value(value: float | int) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def format_params(params: Mapping[str, float | int]) -> str:
    """`{"gamma": 0.15, "K": 3}` -> `"K=3,gamma=0.15"`: the paper's names first, then the rest in registry order."""
    order = list(SEARCH_PARAMS)
    keys = sorted(params, key=lambda k: order.index(k) if k in order else len(order))
    return ",".join(f"{k}={_format_value(canonical_value(k, params[k]))}" for k in keys)


def _check_optimizer(overrides: Mapping[str, Any], where: str, *, with_field: bool = True) -> None:
    """Validate optimizer overrides through trials' own OptimizerConfig, re-raised with the spec's field path."""
    from trials.optim import OptimizerConfig

    check_numbers(dict(overrides), where, _PARAM_MAX if with_field else None)
    if not with_field:  # one searched value, named in `where`
        for field, cap in _PARAM_MAX.items():
            value = overrides.get(field)
            if isinstance(value, int | float) and value > cap:
                raise ValueError(f"{where}: {value:g} is above the largest allowed value {cap:g}")

    try:
        OptimizerConfig.model_validate(dict(overrides))
    except ValidationError as exc:
        raise ValueError(_nested_errors(exc, where, with_field=with_field)) from None



# Tags and names are checked here, where the spec enters, rather than by MLflow in the driver: there a 600-
# character experiment name or a NUL failed the sweep after it was accepted and queued (issue 53, L2). MLflow takes
# keys of 250 characters and experiment names of 500 (its PostgreSQL column holds 256); values are lineage, short.
MAX_TAGS = 32
MAX_TAG_KEY = 250
MAX_TAG_VALUE = 1000
MAX_EXPERIMENT_NAME = 250


def _printable(text: str, what: str, limit: int) -> str:
    """`text` if it has at most `limit` characters and no control character (NUL, newline, ...)."""
    if len(text) > limit:
        raise ValueError(f"{what} has {len(text):,} characters; at most {limit} are accepted")
    bad = sorted({repr(c) for c in text if ord(c) < 32 or ord(c) == 127})
    if bad:
        raise ValueError(f"{what} holds control characters {bad}; use printable text")
    return text


def _check_tags(tags: dict[str, str]) -> dict[str, str]:
    """Extra tags may not set the ledger's own (TAG) or MLflow's: the ledger reads them back as its record. At most
    `MAX_TAGS`, each key and value of bounded size and printable."""
    reserved = {v for k, v in vars(TAG).items() if k.isupper()}
    prefixes = ("mlflow.", TAG.BEST)
    bad = sorted(k for k in tags if k in reserved or k.startswith(prefixes) or not k.strip())
    if bad:
        raise ValueError(f"tags {bad} are set by the sweeper itself (or empty); choose other names")
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags; at most {MAX_TAGS} are accepted")
    for key, value in tags.items():
        _printable(key, f"tag key {key[:40]!r}", MAX_TAG_KEY)
        _printable(value, f"the value of tag {key[:40]!r}", MAX_TAG_VALUE)
    return tags


Tags = Annotated[dict[str, str], AfterValidator(_check_tags)]  # MLflow tags: the rule on the field


class ParamRange(BaseModel):
    """A continuous (or integer, for K) range, for the tpe and random methods."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    low: float = Field(
        ..., ge=-_SPACE_MAX, le=_SPACE_MAX, description="Lower bound, inclusive (in the parameter's own unit)."
    )
    high: float = Field(..., ge=-_SPACE_MAX, le=_SPACE_MAX, description="Upper bound, inclusive.")
    log: bool = Field(False, description="Sample uniformly in log space (learning rates: true).")
    step: float | None = Field(
        None, gt=0, le=_SPACE_MAX, description="Quantisation step; None = continuous (1 for K)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> ParamRange:
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        if self.log and self.step is not None:
            raise ValueError("log and step cannot be combined (Optuna samples either in log space or on a grid)")
        return self


SpaceValue = (list[Annotated[int, Field(ge=-_SPACE_MAX, le=_SPACE_MAX)]
                   | Annotated[float, Field(ge=-_SPACE_MAX, le=_SPACE_MAX)]] | ParamRange)


def _default_space() -> dict[str, SpaceValue]:
    # The paper's grid (section "K and gamma sweep"): 3 x 4 = 12 points.
    return {"K": [2, 3, 4], "gamma": [0.10, 0.15, 0.25, 0.35]}


class SearchSpec(BaseModel):
    """What is searched and how: an Optuna sampler over the searched arm's optimizer parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    method: Literal["grid", "tpe", "random"] = Field(
        "grid",
        description="grid: Optuna's GridSampler, every point exactly once; tpe / random: Optuna's TPE or random "
        "sampler for `budget` distinct points.",
    )
    space: dict[str, SpaceValue] = Field(
        default_factory=_default_space,
        description="Parameter -> list of values, or a range {low, high, log, step} (tpe/random only). Names: "
        + ", ".join(SEARCH_PARAMS)
        + ". Default: the paper's grid K in {2,3,4} x gamma in {0.10,0.15,0.25,0.35}.",
    )
    budget: int | None = Field(
        None,
        ge=1,
        le=MAX_POINTS,
        description="Distinct points to evaluate (each on every seed) for tpe/random; grid evaluates every point "
        "once and takes none.",
    )
    sampler_seed: int = Field(
        0, ge=0, le=2**32 - 1, description="Seed of the Optuna sampler (grid order, TPE, random)."
    )
    tpe_startup_points: int = Field(
        4,
        ge=1,
        le=MAX_POINTS,
        description="Random points before TPE models the space. Optuna's default of 10 would spend most of a "
        "12-point grid's worth of budget on random points.",
    )
    optimizer: dict[str, Any] = Field(
        default_factory=lambda: {"name": "periodic"},
        description="The searched arm's OptimizerConfig fields besides the searched ones (default: Periodic "
        "Row-wise Muon with trials' defaults, e.g. lr 0.02).",
    )
    tags: Tags = Field(
        default_factory=dict,
        description="Extra MLflow tags on the search trials' runs (e.g. the lr rule a transfer carried them by).",
    )
    warm_start: list[str] = Field(
        default_factory=list, max_length=8,
        description="tpe/random only: sweep ids (their `scalesweep.sweep_id` tag) in the same MLflow store and "
        "experiment whose finished points the sampler is told before it proposes any (their mean objective over "
        "the seeds they ran); they are not run again and do not count against the budget or the selection.",
    )

    @field_validator("warm_start")
    @classmethod
    def _sweep_ids(cls, ids: list[str]) -> list[str]:
        for sweep_id in ids:
            if not sweep_id or len(sweep_id) > 200 or not all(c.isalnum() or c in "-_." for c in sweep_id):
                raise ValueError(f"warm_start: {sweep_id[:50]!r} is not a sweep id (letters, digits, - _ .; at most "
                                 "200 characters)")
        if len(set(ids)) != len(ids):
            raise ValueError(f"warm_start: repeated sweep ids {ids}")
        return ids

    @field_validator("space")
    @classmethod
    def _known_params(cls, space: dict[str, SpaceValue]) -> dict[str, SpaceValue]:
        if not space:
            raise ValueError(f"the search space is empty; give at least one of {list(SEARCH_PARAMS)}")
        for name, values in space.items():
            if name not in SEARCH_PARAMS:
                raise ValueError(f"unknown search parameter {name!r}; allowed: {list(SEARCH_PARAMS)}")
            kind = SEARCH_PARAMS[name][1]
            if isinstance(values, list):
                if not values:
                    raise ValueError(f"space.{name}: give at least one value")
                if len(values) > MAX_POINTS:
                    raise ValueError(f"space.{name}: {len(values)} values; at most {MAX_POINTS}")
                if kind is int and any(isinstance(v, float) and not float(v).is_integer() for v in values):
                    raise ValueError(f"space.{name}: {name} takes integers, got {values}")
                canon = [canonical_value(name, v) for v in values]
                if len(set(canon)) != len(canon):
                    raise ValueError(f"space.{name}: repeated values {values}")
            elif kind is int and not (float(values.low).is_integer() and float(values.high).is_integer()):
                raise ValueError(f"space.{name}: {name} takes an integer range, got [{values.low}, {values.high}]")
        return space

    @model_validator(mode="after")
    def _consistent(self) -> SearchSpec:
        if self.method == "grid" and math.isfinite(self.grid_size) and self.grid_size > MAX_POINTS:
            raise ValueError(f"the grid has {int(self.grid_size)} points; at most {MAX_POINTS} per sweep")
        arm = self.optimizer.get("name", "periodic")
        searched = {SEARCH_PARAMS[n][0]: n for n in self.space}
        clash = sorted(f for f in self.optimizer if f in searched or f in self.space)
        if clash:
            raise ValueError(f"search.optimizer sets {clash}, which the search space searches; remove them")
        _check_optimizer(self.optimizer, "search.optimizer")
        for name, values in self.space.items():  # every value must be a valid optimizer setting
            probe = values if isinstance(values, list) else [values.low, values.high]
            for v in probe:
                value = canonical_value(name, v)
                _check_optimizer({**self.optimizer, "name": arm, SEARCH_PARAMS[name][0]: value},
                                 f"search.space.{name}={value}", with_field=False)
        ranges = [n for n, v in self.space.items() if isinstance(v, ParamRange)]
        if self.method == "grid" and self.warm_start:
            raise ValueError("warm_start informs a tpe or random sampler; a grid runs every point whatever came "
                             "before (to add points or seeds to a finished grid, extend it: scalesweep sweep extend)")
        if self.method == "grid":
            if ranges:
                raise ValueError(f"method 'grid' needs a list of values for every parameter; {ranges} are ranges "
                                 "(use method 'tpe' or 'random' for ranges)")
            if self.budget is not None:
                raise ValueError("method 'grid' runs every point exactly once and takes no budget; remove it")
        else:
            if self.budget is None:
                raise ValueError(f"method {self.method!r} needs a budget (the number of distinct points to run)")
            if not ranges and self.budget > self.grid_size:
                raise ValueError(f"budget {self.budget} exceeds the {int(self.grid_size)} distinct points of the space")
        return self

    @property
    def arm(self) -> str:
        return str(self.optimizer.get("name", "periodic"))

    @property
    def grid_size(self) -> float:
        """Distinct points of an all-list space (math.inf with a range in it)."""
        if any(isinstance(v, ParamRange) for v in self.space.values()):
            return math.inf
        return math.prod(len(v) for v in self.space.values() if isinstance(v, list))

    def grid_points(self) -> list[dict[str, float | int]]:
        """Every point of an all-list space, in a fixed order."""
        lists = {n: [canonical_value(n, v) for v in vals] for n, vals in self.space.items() if isinstance(vals, list)}
        names = list(lists)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists.values())]

    def optimizer_for(self, params: Mapping[str, float | int]) -> dict[str, Any]:
        """The searched arm's full optimizer overrides at one point."""
        out = {"name": self.arm, **self.optimizer}
        out.update({SEARCH_PARAMS[n][0]: canonical_value(n, v) for n, v in params.items()})
        return out


class BaselineSpec(BaseModel):
    """A reference arm run beside the sweep at the same rung, horizon and seeds (not searched)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    arm: Literal[ArmName, ControlArmName] = Field(
        ...,
        description="Optimizer arm: adamw, muon, periodic or rownorm; or a control arm, muon_extra_ns or "
        "muon_stretched.",
    )
    label: str | None = Field(
        None, pattern=_NAME_PATTERN, description="Name in run names and tables; default: the arm's name."
    )
    optimizer: dict[str, Any] = Field(
        default_factory=dict, description="Other OptimizerConfig fields of this arm (e.g. {lr: 0.001})."
    )
    rung: Rung | None = Field(
        None,
        description="Rung of this arm's runs; None = the sweep's rung. Lets one sweep hold reference runs at "
        "several rungs (a transfer runs its whole rung x arm table as one sweep).",
    )
    tags: Tags = Field(
        default_factory=dict, description="Extra MLflow tags on this arm's runs (e.g. a transfer's lr rule)."
    )
    horizon: int | None = Field(
        None,
        ge=1,
        le=MAX_HORIZON,
        description="Training steps of this arm's runs; None = the sweep's horizon. Lets a transfer give each rung "
        "a horizon that grows with its size.",
    )
    eval_steps: list[Step] | None = Field(
        None,
        max_length=1000,
        description="Eval steps of this arm's runs (as many as the sweep's, in [1, horizon]); None = the sweep's, "
        "or with `horizon` set, the sweep's eval steps at the same fractions of it.",
    )
    order_seed_offset: int | None = Field(
        None,
        ge=1,
        le=MAX_SEED,
        description="Run this arm on another data order: each run's batch draws and diffusion noise come from "
        "(seed + this offset) mod 2^31 (its model init still from the seed), as a transfer's controls do. None = "
        "the seed's own order, as every other arm.",
    )
    lr_factors: list[Annotated[float, Field(gt=0, le=1000)]] | None = Field(
        None,
        min_length=1,
        max_length=9,
        description="Equal tuning budgets: run this arm at each multiple of its lr (its `optimizer.lr`, else the "
        "arm's default), e.g. [0.5, 1, 2], on the sweep's seeds; each is a baseline named '<name>.lr_x<factor>', "
        "and the best (lowest mean objective) is the lr a transfer carries. None = the one lr.",
    )

    @field_validator("lr_factors")
    @classmethod
    def _positive_factors(cls, factors: list[float] | None) -> list[float] | None:
        if factors is not None and (any(not f > 0 for f in factors) or len(set(factors)) != len(factors)):
            raise ValueError(f"lr_factors must be distinct numbers > 0, e.g. [0.5, 1, 2]; got {factors}")
        return factors

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"arm": value} if isinstance(value, str) else value  # "adamw" is short for {arm: adamw}

    @model_validator(mode="after")
    def _valid_optimizer(self) -> BaselineSpec:
        if "name" in self.optimizer and self.optimizer["name"] != self.arm:
            raise ValueError(f"optimizer.name {self.optimizer['name']!r} contradicts arm {self.arm!r}")
        _check_optimizer({**self.optimizer, "name": self.arm}, "optimizer")
        for name, config in self.variants() if self.lr_factors else ():  # each lr multiple within the caps
            _check_optimizer(config, f"lr_factors ({name})")
        return self

    @property
    def name(self) -> str:
        return self.label or self.arm

    def optimizer_config(self) -> dict[str, Any]:
        return {**self.optimizer, "name": self.arm}

    def variants(self) -> list[tuple[str, dict[str, Any]]]:
        """(point name, optimizer config) of each run setting: one, or one per lr factor (`lr_factors`)."""
        if not self.lr_factors:
            return [(self.name, self.optimizer_config())]
        from trials.optim import DEFAULT_LR

        base = float(self.optimizer.get("lr") or DEFAULT_LR[self.arm])
        return [(f"{self.name}.lr_x{f:g}", {**self.optimizer_config(), "lr": float(f"{base * f:.6g}")})
                for f in self.lr_factors]


def _default_baselines() -> list[BaselineSpec]:
    # The paper's two references: AdamW and vanilla Muon, at the same rung and horizon.
    return [BaselineSpec(arm="adamw"), BaselineSpec(arm="muon")]


class EarlyStoppingSpec(BaseModel):
    """Stop unpromising search trials at eval steps (ASHA). Baselines are never stopped."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    method: Literal["none", "asha"] = Field(
        "none", description="none (default: every trial runs its horizon, as in the paper) or asha."
    )
    grace_evals: int = Field(1, ge=1, le=1000, description="Eval steps every trial reaches before it may be stopped.")
    reduction_factor: float = Field(
        2.0,
        gt=1,
        le=1000,
        description="ASHA keeps the best 1/reduction_factor at each rung. 2: with the default three eval steps "
        "the rungs fall on the first two of them (Ray's default 4 leaves a single rung).",
    )


class ExecutionSpec(BaseModel):
    """Where and how wide the trials run. May change between a run and its resume."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    concurrency: int | None = Field(
        None,
        ge=1,
        le=10_000,
        strict=True,
        description="Trials at once; None = as many as the Ray cluster's CPUs/GPUs fit per trial.",
    )
    cpus_per_trial: float = Field(
        1.0, gt=0, le=1024, description="CPUs reserved per trial worker; torch uses as many threads (at least 1)."
    )
    gpus_per_trial: float = Field(
        0.0, ge=0, le=64, description="GPUs per trial worker; above 0 the trial's device defaults to 'auto' (CUDA)."
    )
    workers_per_trial: Workers = Field(
        1,
        description="Processes (ranks) per trial, each with cpus_per_trial CPUs and gpus_per_trial GPUs, reserved "
        "as one Ray placement group packed on one node where it fits. Above 1 the built-in trial trains with FSDP2 "
        "(gloo on CPU, NCCL on CUDA) and splits the trial's global batch_size across the ranks; a command trainer "
        "gets {workers}, {master_addr} and {master_port} for torchrun.",
    )
    num_cpus: int | None = Field(
        None,
        ge=1,
        le=100_000,
        strict=True,
        description="CPUs of the local Ray instance (None = this machine's); not used when attaching to a cluster.",
    )
    ray_address: str | None = Field(
        None,
        description="Ray cluster to attach to (host:port or ray://...); None = $RAY_ADDRESS when set, else a "
        "local Ray instance for this sweep only.",
    )
    rendezvous_timeout_s: float | None = Field(
        None,
        ge=5,
        le=86_400,
        description="Seconds a multi-worker trial's ranks may take to meet, and may wait in any one collective; a "
        "rank that dies before it joins ends the wait at once. None = 300 (or stall_timeout_s when larger).",
    )
    stall_timeout_s: float | None = Field(
        None,
        ge=5,
        le=86_400,
        description="Seconds without progress after which a multi-worker trial is ended (all its ranks killed) and "
        "failed with the stalled rank named, then retried under `retries`: a rank that sends no heartbeat, or every "
        "rank waiting in a collective, that long. None = max(120, 20 x the trial's measured step time).",
    )

    @property
    def threads(self) -> int:
        return max(1, int(self.cpus_per_trial))

    @property
    def trial_cpus(self) -> float:
        """CPUs one trial reserves: every worker's."""
        return self.cpus_per_trial * self.workers_per_trial

    @property
    def trial_gpus(self) -> float:
        """GPUs one trial reserves: every worker's."""
        return self.gpus_per_trial * self.workers_per_trial


class RetrySpec(BaseModel):
    """What happens to a trial that fails."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    max_retries: int = Field(
        1, ge=0, le=100, description="Extra attempts for a trial that raises (lost worker, out of memory); each "
        "attempt is its own MLflow run."
    )
    retry_diverged: bool = Field(
        False,
        description="Retry diverged (NaN) trials too. Off: divergence is deterministic for a fixed seed and "
        "config, so a retry diverges again.",
    )


class BuiltinBackend(BaseModel):
    """Trials run `trials.run_trial` (the built-in MMDiT trainer) inside the Ray worker."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: Literal["builtin"] = Field("builtin", description="Backend name.")
    checkpoints: bool = Field(
        True,
        description="Checkpoint at every eval step (in the sweep's work folder: shared storage on a multi-machine "
        "cluster) so that an interrupted trial resumes where it stopped.",
    )

    @property
    def resumable(self) -> bool:
        return self.checkpoints


class CommandBackend(BaseModel):
    """Trials launch an external trainer (`trials.run_command_trial`); see trials' command protocol.

    Either a free-form `command` (the local CLI only) or the name of a `trainer` the operator registered
    (`sweeper.search._trainers`: the only form the service accepts over REST)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: Literal["command"] = Field(..., description="Backend name.")
    trainer: str | None = Field(
        None,
        pattern=_NAME_PATTERN,
        description="A trainer registered by the operator (SCALESWEEP_TRAINERS): its command, environment and "
        "working directory come from the registry. The only form accepted over REST.",
    )
    command: CommandLine | None = Field(
        None,
        min_length=1,
        description="Argument list or one shell-like string, with {placeholders} (local CLI only; over REST name "
        "a registered `trainer`).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment variables of the trainer (local CLI only)."
    )
    cwd: str | None = Field(
        None,
        description="Working directory of the trainer; None = the directory the sweep was started from (it must "
        "exist on every Ray node). Local CLI only.",
    )
    timeout_s: float | None = Field(
        None, gt=0, le=30 * 86400, description="Kill a trainer after this many seconds (at most 30 days)."
    )
    poll_s: float = Field(
        0.5, ge=0.05, le=3600, description="Seconds between reads of the trainer's progress file (0.05 to 3600)."
    )
    kill_grace_s: float = Field(
        10.0, ge=0, le=600, description="Seconds between SIGTERM to everything a stopped trainer started and SIGKILL "
        "to what is left (0 to 600)."
    )

    @model_validator(mode="after")
    def _valid_command(self) -> CommandBackend:
        from trials import CommandConfig

        if self.command is None:
            if self.trainer is None:
                raise ValueError("give backend.trainer (a trainer registered with SCALESWEEP_TRAINERS) or, from "
                                 "the local CLI, backend.command (a command template)")
            return self  # resolved against the registry where it runs (`sweeper.search.resolve_trainer`)
        try:
            CommandConfig.model_validate(self.model_dump(exclude={"name", "trainer"}))
        except ValidationError as exc:
            raise ValueError(_nested_errors(exc, "")) from None
        return self

    @property
    def resumable(self) -> bool:
        return False  # the protocol has no checkpoint hand-over: an interrupted trainer starts again


Backend = Annotated[BuiltinBackend | CommandBackend, Field(discriminator="name")]


class SelectionSpec(BaseModel):
    """How the sweep's winner is chosen from the ranked points (`sweeper.select_point`'s rule): among the points
    whose paired mean difference to the lowest-mean point is within one pooled standard error, the larger K; and
    what each trial scores (`objective`: the mean FD, or the steps to a declared target)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    tie_tolerance: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="With a single seed (no standard error), points whose objective is within this relative "
        "distance of the best are tied (0.01: half the study's 2% 'near best' tolerance). With two seeds or more "
        "the tie is one pooled standard error of the paired differences instead.",
    )
    tie_break: Literal["larger_K", "none"] = Field(
        "larger_K",
        description="Among tied points prefer the larger K (fewer Newton-Schulz refreshes: cheaper), then the "
        "lower objective; 'none' = the lowest objective.",
    )
    n_boot: int = Field(
        2000, ge=100, le=100_000,
        description="Paired bootstrap resamples of the seeds behind each point's probability of being best "
        "(2000: the probabilities to about +-0.01).",
    )
    bootstrap_seed: int = Field(
        0, ge=0, le=MAX_SEED, description="Seed of the bootstrap's resampling (the result is reproducible)."
    )
    rule: Literal["one_se", "cheapest_within"] = Field(
        "one_se",
        description="'one_se': the points within one pooled standard error of the best are candidates and the "
        "larger K wins (tie_break). 'cheapest_within': choose on the quality-cost front, the cheapest point (by "
        "`cost`) whose paired mean objective is within `tolerance` of the best's (the paper weighed K=3's 2.8 % "
        "worse FD against a third fewer Newton-Schulz calls than K=2).",
    )
    tolerance: float = Field(
        0.03, ge=0, lt=1,
        description="For rule 'cheapest_within': how much worse than the best's mean objective (relative, paired "
        "mean difference) the chosen point may be (0.03: admits the paper's K=3 at 2.8 %, not K=4 at 8.2 %).",
    )
    cost: Literal["ns_calls", "optimizer_time"] = Field(
        "ns_calls",
        description="For rule 'cheapest_within': the cost axis, Newton-Schulz calls per step (counted by the "
        "optimizer; exact) or the measured optimizer seconds per step (noisy on a shared machine).",
    )
    objective: Literal["mean_fd", "steps_to_target"] = Field(
        "mean_fd",
        description="What each trial scores (lower is better): 'mean_fd', the mean FD at the eval steps (the "
        "paper's), or 'steps_to_target', the steps to reach `target` on `curve` (the first crossing, interpolated "
        "between checkpoints, the quantity a transfer judges); a trial that never reaches scores horizon x final "
        "FD / target, finite and above every trial that reaches.",
    )
    target: float | None = Field(
        None, gt=0, le=1e9,
        description="For objective 'steps_to_target' (required there, refused otherwise): the FD to reach, on "
        "`curve`'s scale (the tracking FD is biased above the full FD: compare like with like).",
    )
    curve: Literal["fd_track", "fd"] = Field(
        "fd_track",
        description="For objective 'steps_to_target': the curve read for the crossing, the dense tracking FD "
        f"('fd_track': trial.eval.track_points >= {MIN_CROSSING_POINTS}, built-in backend) or the FD at the eval "
        f"steps ('fd': at least {MIN_CROSSING_POINTS} eval_steps).",
    )

    @model_validator(mode="after")
    def _objective_options(self) -> SelectionSpec:
        if self.objective == "steps_to_target" and self.target is None:
            raise ValueError("selection.target: objective 'steps_to_target' needs a target, an FD value > 0 on "
                             "selection.curve's scale")
        if self.objective == "mean_fd" and (self.target is not None or self.curve != "fd_track"):
            raise ValueError("selection.target and selection.curve apply to objective 'steps_to_target' only; "
                             "remove them or set selection.objective: steps_to_target (allowed objectives: "
                             "mean_fd, steps_to_target)")
        return self

    def trial_objective(self) -> dict[str, Any]:
        """What a trial worker needs to score a finished trial (`sweeper.search`): the objective and its options."""
        if self.objective == "mean_fd":
            return {"name": "mean_fd"}
        return {"name": self.objective, "target": self.target, "curve": self.curve}


def _default_tracking_uri() -> str:
    from trials import TrackingConfig  # the trials' own default store, read where it is set

    return str(TrackingConfig.model_fields["tracking_uri"].default)


def _default_experiment() -> str:
    from trials import DEFAULT_EXPERIMENT

    return DEFAULT_EXPERIMENT


class ConfirmSpec(BaseModel):
    """Confirmation before the choice is final: the top points by the selection rule run again on fresh seeds, and
    the rule is applied to those runs alone (their objectives carry no selection bias: the winner's curse,
    measured as confirmed minus selected objective)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    top: int = Field(
        0, ge=0, le=12,
        description="Points to confirm: the chosen one, then the next by mean objective. 0 = no confirmation (the "
        "paper's protocol); 3 = the study profile's.",
    )
    seeds: Seeds | None = Field(
        None, min_length=1, max_length=32,
        description="Fresh seeds of the confirmation; None = as many as the sweep's, numbered after its largest.",
    )


class SweepTracking(BaseModel):
    """The MLflow destination of the sweep's parent run and its trials' child runs."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    tracking_uri: str = Field(
        default_factory=_default_tracking_uri,
        description="MLflow tracking URI: sqlite:///file.db (a relative path resolves against the directory "
        "the sweep starts from) or http(s)://server.",
    )
    experiment: str = Field(
        default_factory=_default_experiment, min_length=1, description="MLflow experiment: one per study "
        f"(printable, at most {MAX_EXPERIMENT_NAME} characters)."
    )

    @field_validator("experiment")
    @classmethod
    def _printable_experiment(cls, name: str) -> str:
        return _printable(name, "the experiment name", MAX_EXPERIMENT_NAME)


class SweepSpec(BaseModel):
    """One sweep: search the searched arm's parameters on one rung, beside baselines, and pick the best point."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(..., pattern=_NAME_PATTERN, description="Sweep name (run names, work folder, Ray names).")
    rung: Rung = Field("cpu-xs", description="Model rung (trials.models.list_rungs()); the paper sweeps the smallest.")
    horizon: int = Field(
        1800,
        ge=1,
        le=MAX_HORIZON,
        description="Training steps of every trial (the paper: 30k at 1.3B; 1800: trials' CPU default).",
    )
    eval_steps: list[Step] | None = Field(
        None,
        max_length=1000,
        description="Steps scored by FD; the objective is their mean (selection.objective mean_fd). Default 2/3, 5/6 "
        "and 6/6 of the horizon.",
    )
    search: SearchSpec = Field(default_factory=SearchSpec, description="The search space and method.")
    seeds: Seeds = Field(
        default_factory=lambda: [0],
        min_length=1,
        max_length=MAX_SEEDS,
        description="Every point runs on every seed; the objective is the mean over seeds and the spread is kept "
        "(default one seed, as in the paper).",
    )
    baselines: list[BaselineSpec] = Field(
        default_factory=_default_baselines,
        max_length=MAX_BASELINES,
        description="Reference arms (default AdamW and vanilla Muon); [] = none.",
    )
    early_stopping: EarlyStoppingSpec = Field(default_factory=EarlyStoppingSpec, description="ASHA, off by default.")
    execution: ExecutionSpec = Field(default_factory=ExecutionSpec, description="Concurrency, resources, cluster.")
    retries: RetrySpec = Field(default_factory=RetrySpec, description="Retries of failed trials.")
    backend: Backend = Field(default_factory=BuiltinBackend, description="builtin (run_trial) or command.")
    selection: SelectionSpec = Field(
        default_factory=SelectionSpec,
        description="The choice rule's options (tie, bootstrap resamples) and what each trial scores (objective).",
    )
    confirm: ConfirmSpec = Field(
        default_factory=ConfirmSpec, description="Re-run the top points on fresh seeds before the choice is final."
    )
    # The rules a transfer's trial section follows too; those that depend on the rung: in `_consistent`.
    trial: TrialSection = Field(
        default_factory=dict,
        description="Other TrialConfig fields of every trial (batch_size, eval, text_encoder, data, ...). The "
        "sweep sets " + ", ".join(_OWNED_TRIAL_FIELDS) + " itself.",
    )
    tracking: SweepTracking = Field(default_factory=SweepTracking, description="MLflow URI and experiment.")
    tags: Tags = Field(
        default_factory=dict,
        description="Extra MLflow tags on the parent run and every trial run (lineage, e.g. the transfer and the "
        "sweep it comes from); an arm's own `tags` win over these.",
    )
    workers_by_rung: dict[Rung, Workers] = Field(
        default_factory=dict,
        description="Processes (ranks) per trial at the named rungs (the sweep's `rung` or a baseline's), in place "
        "of execution.workers_per_trial there, e.g. {cpu-l: 2}: a transfer's per-rung worker counts (its rung x arm "
        "table is one sweep). Each reserves its own placement group; {} = every rung on execution.workers_per_trial.",
    )


    @field_validator("baselines")
    @classmethod
    def _distinct_labels(cls, baselines: list[BaselineSpec]) -> list[BaselineSpec]:
        names = [n for b in baselines for n in ([b.name] if not b.lr_factors else [v for v, _ in b.variants()])]
        if len(set(names)) != len(names):
            raise ValueError(f"baseline names must be distinct (set `label`), got {names}")
        return baselines


    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        reused = sorted(set(self.confirm.seeds or ()) & set(self.seeds))
        if reused:
            raise ValueError(f"confirm.seeds must be fresh (not among seeds {self.seeds}); {reused} are not")
        if self.eval_steps is not None:
            bad = [s for s in self.eval_steps if not 1 <= s <= self.horizon]
            if bad or not self.eval_steps or len(set(self.eval_steps)) != len(self.eval_steps):
                raise ValueError(
                    f"eval_steps must be distinct steps in [1, horizon={self.horizon}], got {self.eval_steps}"
                )
        run = self.rungs_run()
        if any(rung not in self.workers_by_rung for rung in run):  # some rung runs on the execution section's count
            check_batch_split(self.execution.workers_per_trial, self.trial)
        for rung, workers in self.workers_by_rung.items():
            if rung not in run:
                raise ValueError(f"workers_by_rung names rung {rung!r}, which this sweep does not run; allowed: "
                                 f"{run}")
            check_batch_split(workers, self.trial, field=f"workers_by_rung.{rung}")
        from trials import TrialConfig

        try:  # one probe trial per rung validates the `trial` section with trials' own rules
            for rung in self.rungs_run():
                TrialConfig.model_validate(self.trial_config({"name": self.search.arm}, self.seeds[0], rung))
        except ValidationError as exc:
            raise ValueError(_nested_errors(exc, "trial")) from None
        n_evals = len(self.resolved_eval_steps)
        for b in self.baselines:
            if b.horizon is None and b.eval_steps is not None:
                raise ValueError(f"baselines[{b.name}].eval_steps needs baselines[{b.name}].horizon")
            steps = self.baseline_eval_steps(b)
            if len(set(steps)) != n_evals or not all(1 <= s <= (b.horizon or self.horizon) for s in steps):
                raise ValueError(
                    f"baselines[{b.name}].eval_steps must be {n_evals} distinct steps (as many as the sweep's) in "
                    f"[1, horizon={b.horizon or self.horizon}], got {steps}"
                )
        if self.early_stopping.method == "asha" and self.early_stopping.grace_evals >= n_evals:
            raise ValueError(
                f"early_stopping.grace_evals ({self.early_stopping.grace_evals}) must be below the number of "
                f"eval steps ({n_evals}): ASHA can only stop a trial before its last eval step"
            )
        if self.selection.objective == "steps_to_target":
            self._check_crossing_curve(n_evals)
        return self

    def _check_crossing_curve(self, n_evals: int) -> None:
        """Objective steps_to_target: a curve dense enough to locate a crossing, and nothing that scores or
        stops trials on another objective."""
        sel = self.selection
        if sel.curve == "fd_track":
            from trials import TrialConfig

            points = TrialConfig.model_validate(self.trial_config({"name": self.search.arm}, self.seeds[0])
                                                ).eval.track_points
            if points < MIN_CROSSING_POINTS:
                raise ValueError(f"trial.eval.track_points is {points}; selection.curve 'fd_track' needs at least "
                                 f"{MIN_CROSSING_POINTS} tracking checkpoints to locate a crossing (or set "
                                 f"selection.curve: fd with at least {MIN_CROSSING_POINTS} eval_steps)")
            if self.backend.name != "builtin":
                raise ValueError("selection.curve 'fd_track' needs the builtin backend (a command trainer reports "
                                 f"FD at the eval steps only); set selection.curve: fd with at least "
                                 f"{MIN_CROSSING_POINTS} eval_steps")
        elif n_evals < MIN_CROSSING_POINTS:
            raise ValueError(f"eval_steps has {n_evals} steps; selection.curve 'fd' needs at least "
                             f"{MIN_CROSSING_POINTS} to locate a crossing (or set selection.curve: fd_track)")
        if self.early_stopping.method != "none":
            raise ValueError("early_stopping.method 'asha' stops trials on their live value at a rung, which for a "
                             "trial not yet at the target is a projection (step x FD / target), not a bound on its "
                             "steps to target; with selection.objective 'steps_to_target' it must be 'none'")
        if self.search.warm_start:
            raise ValueError("search.warm_start tells the sampler earlier sweeps' objectives, which need not be "
                             "steps to the same target; with selection.objective 'steps_to_target' leave it empty")

    def rungs_run(self) -> list[str]:
        """The rungs this sweep's trials run at: its own, then its baselines' in order."""
        return list(dict.fromkeys([self.rung, *(b.rung for b in self.baselines if b.rung)]))

    def workers_at(self, rung: str) -> int:
        """Ranks per trial at `rung`: `workers_by_rung`'s count there, else execution.workers_per_trial."""
        return self.workers_by_rung.get(rung, self.execution.workers_per_trial)

    @property
    def widest_trial(self) -> tuple[str, int]:
        """(the field that sets it, its count) of the most workers one trial of this sweep takes: what must fit the
        cluster, as one placement group."""
        fields = {f"workers_by_rung.{r}": self.workers_at(r) for r in self.rungs_run() if r in self.workers_by_rung}
        if any(r not in self.workers_by_rung for r in self.rungs_run()):
            fields["execution.workers_per_trial"] = self.execution.workers_per_trial
        return max(fields.items(), key=lambda item: item[1])

    @property
    def confirm_seeds(self) -> list[int]:
        """The confirmation's fresh seeds: `confirm.seeds`, else as many as the sweep's after its largest."""
        if self.confirm.seeds:
            return list(self.confirm.seeds)
        start = max(self.seeds) + 1
        return list(range(start, start + len(self.seeds)))

    @property
    def resolved_eval_steps(self) -> list[int]:
        from trials import default_eval_steps

        return sorted(self.eval_steps) if self.eval_steps else default_eval_steps(self.horizon)

    def baseline_eval_steps(self, baseline: BaselineSpec) -> list[int]:
        """A baseline's eval steps: its own, else the sweep's at the same fractions of its own horizon."""
        if baseline.eval_steps is not None:
            return sorted(baseline.eval_steps)
        if baseline.horizon is None or baseline.horizon == self.horizon:
            return self.resolved_eval_steps
        h = baseline.horizon
        return sorted(min(h, max(1, round(s * h / self.horizon))) for s in self.resolved_eval_steps)

    def trial_config(
        self,
        optimizer: Mapping[str, Any],
        seed: int,
        rung: str | None = None,
        *,
        horizon: int | None = None,
        eval_steps: list[int] | None = None,
        order_seed: int | None = None,
    ) -> dict[str, Any]:
        """A plain TrialConfig mapping for one arm and seed (without tracking or checkpoints), at `rung` (default
        the sweep's), `horizon` and `eval_steps` (default the sweep's: a baseline may set its own), on the data
        order of `order_seed` (default the seed's)."""
        cfg: dict[str, Any] = json.loads(json.dumps(self.trial))
        if self.execution.gpus_per_trial > 0:
            cfg.setdefault("device", "auto")
        cfg.update(
            rung=rung or self.rung,
            steps=horizon or self.horizon,
            eval_steps=list(eval_steps) if eval_steps else self.resolved_eval_steps,
            optimizer=dict(optimizer),
            seed=seed,
            threads=self.execution.threads,
        )
        if order_seed is not None:  # left out otherwise: trial configs of earlier sweeps unchanged
            cfg["order_seed"] = order_seed
        workers = self.workers_at(cfg["rung"])
        if workers > 1:  # left out at 1: trial configs of earlier sweeps unchanged
            cfg["workers"] = workers
        return cfg

    def fingerprint(self) -> str:
        """What a resumed sweep must match: everything but execution and retries, which may change on resume."""
        payload = self.model_dump(mode="json", exclude={"execution", "retries"})
        # Fields added later are left out while at their defaults, so sweeps started before them still resume.
        if payload["search"].get("warm_start") == []:  # added later: sweeps started before it resume
            payload["search"].pop("warm_start")
        for section in (payload, payload["search"], *payload["baselines"]):
            if section.get("tags") == {}:
                section.pop("tags")
            if "rung" in section and section["rung"] is None:  # a baseline at the sweep's rung
                section.pop("rung")
            if "lr_factors" in section and section["lr_factors"] is None:  # one lr per baseline, as before
                section.pop("lr_factors")
            if "order_seed_offset" in section and section["order_seed_offset"] is None:  # the seed's own order
                section.pop("order_seed_offset")
            for key in ("horizon", "eval_steps"):  # a baseline at the sweep's horizon
                if key in section and section[key] is None and section is not payload:
                    section.pop(key)
        if payload["backend"].get("kill_grace_s") == 10.0:  # added later at its default: older sweeps resume
            payload["backend"].pop("kill_grace_s")
        if payload["backend"].get("trainer", "") is None:  # a free-form command, as before trainers existed
            payload["backend"].pop("trainer")
        for key, default in (("n_boot", 2000), ("bootstrap_seed", 0),  # the selection's bootstrap options
                             ("rule", "one_se"), ("tolerance", 0.03), ("cost", "ns_calls"),  # its front rule
                             ("objective", "mean_fd"), ("target", None), ("curve", "fd_track")):  # its objective
            if payload["selection"].get(key) == default:
                payload["selection"].pop(key)
        if payload.get("confirm") == ConfirmSpec().model_dump(mode="json"):  # no confirmation, as before
            payload.pop("confirm")
        if not payload.get("workers_by_rung"):  # added later, empty by default: older sweeps resume
            payload.pop("workers_by_rung", None)
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


REDACTED = "<redacted>"


def redact_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A spec (plain data) fit to show: the values of `backend.env` replaced by a marker (their names kept).

    A trainer's environment is where tokens and passwords end up; reads of a spec (REST, MLflow's spec.json)
    show that a variable is set, never its value."""
    out = json.loads(json.dumps(dict(spec), default=str))
    backend = out.get("backend")
    if isinstance(backend, dict) and isinstance(backend.get("env"), dict):
        backend["env"] = {k: REDACTED for k in backend["env"]}
    return out


def load_spec(source: str | Path | Mapping[str, Any]) -> SweepSpec:
    """A `SweepSpec` from a JSON or YAML file (by suffix; YAML otherwise), or from a mapping.

    Raises FileNotFoundError for a missing file, SweepError for unreadable text and pydantic's ValidationError
    (a ValueError) for an invalid spec, naming the field and the allowed values.
    """
    return read_spec(source, SweepSpec, "sweep", SweepError)


def read_spec(source: str | Path | Mapping[str, Any], model: type[M], what: str, error: type[Exception]) -> M:
    """A job's spec (`model`, a `what` spec) from a JSON or YAML file (by suffix; YAML otherwise), or a mapping;
    `error` for a file that is not a mapping of fields."""
    if isinstance(source, Mapping):
        return model.model_validate(dict(source))
    data = read_mapping(source, what=f"a {what} spec (a mapping of fields)", error=error,
                        missing=lambda _: FileNotFoundError(f"no {what} spec at {source}"))
    return model.model_validate(data)
