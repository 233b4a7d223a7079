"""The sweep spec's sections: the search space, baselines, early stopping, execution, retries, the trial backends,
selection, confirmation and tracking. `SweepSpec` (`_models`) puts them together."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trials import CommandLine
from trials.optim import ArmName, ControlArmName

from ._values import (
    _NAME_PATTERN,
    _SPACE_MAX,
    MAX_EXPERIMENT_NAME,
    SEARCH_PARAMS,
    Tags,
    _check_optimizer,
    _printable,
    canonical_value,
)
from .checks import (
    MAX_HORIZON,
    MAX_POINTS,
    MAX_SEED,
    MIN_CROSSING_POINTS,
    Rung,
    Seeds,
    Step,
    Workers,
    _nested_errors,
)


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
    # Up to 36: the paper's whole grid (K in {2, 3, 4} x gamma in four values) with a 3-point lr bracket is 36
    # settings of the searched arm, and an equal budget gives each baseline as many lr multiples.
    lr_factors: list[Annotated[float, Field(gt=0, le=1000)]] | None = Field(
        None,
        min_length=1,
        max_length=36,
        description="Equal tuning budgets: run this arm at each multiple of its lr (its `optimizer.lr`, else the "
        "arm's default), 1 to 36 of them, e.g. [0.5, 1, 2], on the sweep's seeds; each is a baseline named "
        "'<name>.lr_x<factor>', and the best (lowest mean objective) is the lr a transfer carries. None = the one lr.",
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
