"""Response schemas, one per role (`SweepPublic`, `SweepsPublic(data, count)`, ...)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, StrictInt, field_validator

__all__ = [
    "FieldError", "Links", "Page", "Prediction", "Problem", "RunsPublic", "SweepPublic", "SweepsPublic",
    "TransferCreate", "TransferLinks", "TransferPublic", "TransfersPublic", "TrialPublic", "TrialsPublic",
]

ItemT = TypeVar("ItemT")  # a page's item schema


class FieldError(BaseModel):
    field: str = Field(description="Dotted path of the offending field, e.g. search.space.K[0].")
    message: str
    type: str = ""


class Problem(BaseModel):
    """RFC 9457 problem details (served as application/problem+json)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[FieldError] | None = Field(None, description="Each invalid field (422 only).")


class Links(BaseModel):
    self: str
    trials: str | None = None
    best: str | None = None
    report: str | None = Field(None, description="The sweep's HTML report (figures and the decisions recorded).")
    mlflow_experiment: str | None = Field(None, description="MLflow UI link to the study's experiment.")
    mlflow_parent_run: str | None = Field(None, description="MLflow UI link to the sweep's parent run.")


class JobPublic(BaseModel):
    """What a sweep and a transfer both show: the service's record of the job and its MLflow ids."""

    id: str
    name: str
    state: str = Field(description="PENDING, RUNNING, SUCCEEDED, FAILED or CANCELLED.")
    owner: str
    created_at: dt.datetime
    updated_at: dt.datetime
    error: str | None = None
    progress: dict[str, int] = Field(default_factory=dict, description="Runs by state.")
    mlflow_experiment_id: str | None = None
    mlflow_parent_run_id: str | None = None
    spec: dict[str, Any]
    estimate: dict[str, Any] | None = Field(
        None, description="Machine-hours: the plan's estimate (from the cached calibration, as the driver started) "
        "beside the actual wall time of its driver runs; null until a driver ended.")


class SweepPublic(JobPublic):
    progress: dict[str, int] = Field(
        default_factory=dict, description="Trials by state (SUCCEEDED, RUNNING, PENDING, PRUNED, FAILED, ...)."
    )
    best_so_far: dict[str, Any] | None = Field(
        None,
        description="While the sweep runs: the lowest mean objective so far, with provisional=true (the rule may "
        "choose another point). Once it ended: the rule's choice, provisional=false, the same point as /best.",
    )
    links: Links


class Page(BaseModel, Generic[ItemT]):
    """One page of a list resource, newest first: its items, how many, and the cursor of the next page."""

    data: list[ItemT]
    count: int = Field(description="Items on this page.")
    next_cursor: str | None = Field(None, description="Pass as ?cursor= for the next page; null on the last.")


class SweepsPublic(Page[SweepPublic]):
    """A page of sweeps."""


class TrialPublic(BaseModel):
    key: str = Field(description="Trial key: point and seed, e.g. 'K=3,gamma=0.15,seed=0' or 'adamw,seed=0'.")
    role: str = Field(description="search or baseline.")
    arm: str
    params: dict[str, Any]
    seed: int
    state: str
    attempt: int
    fd: dict[int, float] = Field(default_factory=dict, description="FD at each eval step.")
    objective: float | None = None
    run_id: str
    metric_name: str | None = Field(None, description="What the FD was computed on, e.g. fd_shapes_cnn.")
    error: str | None = Field(None, description="Why the trial FAILED (e.g. its trainer's exit code and the last "
                              "lines of its stderr); null otherwise.")
    rank_restarts: int = Field(0, description="Restarts of a multi-worker trial's ranks after a lost rank, each from "
                               "its last checkpoint; a trial whose ranks are restarting reads RUNNING with this count.")


class TrialsPublic(BaseModel):
    data: list[TrialPublic]
    count: int


class TransferCreate(BaseModel):
    """A transfer of a SUCCEEDED sweep's chosen (K, gamma) to larger rungs; unset fields take the transfer spec's
    defaults (sweeper.TransferSpec: horizon 2x the sweep's, the sweep's seeds, every arm)."""

    model_config = {"extra": "forbid", "allow_inf_nan": False}

    sweep_id: str = Field(description="A SUCCEEDED sweep of this service, e.g. sw-0123456789ab.")
    name: str | None = Field(None, max_length=200, description="Default: '<sweep name>-transfer'.")
    rungs: list[str] | dict[str, dict[str, Any] | None] = Field(
        min_length=1, description="Rungs of the model-size ladder to run at, e.g. ['cpu-s'], or a mapping rung -> "
        "options with a rung's own worker count, e.g. {'cpu-s': {}, 'cpu-l': {'workers': 2}} "
        "(sweeper.TransferSpec.rungs)")
    arms: list[str] | None = Field(None, description="Arms to run (periodic with the chosen pair, adamw, muon).")
    horizon_factor: float | None = Field(None, gt=0, le=100, description="Training steps = factor x the sweep's.")
    steps: int | None = Field(None, ge=1, le=10_000_000,
                              description="Training steps per run (overrides horizon_factor).")
    seeds: list[StrictInt] | None = Field(None, min_length=1, max_length=100, description="Seeds per arm and rung.")
    lr_rules: dict[str, Any] | None = Field(None, description="Per-arm learning-rate transfer rule.")
    execution: dict[str, Any] | None = Field(None, description="Concurrency and CPUs (as in a sweep spec).")
    trial: dict[str, Any] | None = Field(None, description="TrialConfig overrides shared by every run.")
    target: dict[str, Any] | None = Field(
        None, description="Quality target declared before the runs (sweeper.TransferSpec.target): "
        "{rule: final_mean, arm: adamw, slack: 0.1} (default), {rule: fixed, values: {rung: value}} or {rule: pilot, "
        "pilot: {rung, horizon_factor, seeds, points}} (one target from a longer pilot run first).")
    horizon: dict[str, Any] | None = Field(
        None, description="Steps per rung: {mode: fixed} (default) or {mode: per_param, images_per_param, cap}.")
    timing: dict[str, Any] | None = Field(
        None, description="Per-step timing: {method: interleaved (default: the arms in short blocks of whole "
        "refresh periods in one process) | isolated, clock: thread | wall, local_batch, rounds, block_steps, "
        "target_halfwidth, max_rounds}; {steps: 0} = none (sweeper.TransferSpec.timing).")
    plateau: dict[str, Any] | None = Field(
        None, description="Plateau check: {window: 1/3, max_drop: 0.1} (undertrained above max_drop).")
    weight_decay_rule: str | None = Field(
        None, description="keep_lr_wd (default: wd scaled so lr x wd is kept when the lr changes with width) or "
        "keep_wd (docs/decisions.md).")
    verify: dict[str, Any] | None = Field(
        None, description="A verification bracket around the transferred point: {} for the largest rung, or "
        "{rung, knobs, tolerance}; the verdict (held / moved / inconclusive) is in /fits (docs/decisions.md).")
    rounds: dict[str, Any] | None = Field(
        None, description="Seeds added in rounds until the saving is shown or the budget is spent: {against: muon, "
        "measure: time_saving_pct, add: 3, max_seeds: 9, alpha: 0.05} (docs/guide.md).")
    controls: list[Literal["negative", "positive", "steps"]] | None = Field(
        None, max_length=3, description="Controls run through the whole pipeline beside the arms, each on runs of "
        "its own and judged at the level the strongest claim must pass: negative (a second Muon arm: everything "
        "must come out null), positive (Muon plus one discarded Newton-Schulz per step: Muon's updates, a known "
        "per-step cost), steps (Muon with a null step after every control_stretch steps: a known steps ratio, 9/8 "
        "at the default) (docs/targets.md).")
    control_stretch: StrictInt | None = Field(
        None, ge=1, le=1000,
        description="The steps control's stretch, an integer 1 to 1000 (default 8: 9/8 of Muon's steps).")
    control_data_order: Literal["other", "same"] | None = Field(
        None, description="The controls' data order: other (default: batches and noise from another stream than "
        "Muon's, so the controls' steps ratio has a real comparison's spread) or same (Muon's: bit-identical "
        "training on CPU, the per-step half calibrated only).")
    diagnostics: list[Literal["effective_step"]] | None = Field(
        None, max_length=1, description="effective_step: Muon at lr x the periodic arm's mean update-RMS ratio, to "
        "tell a steps penalty of the step size from one of the direction.")
    fixed_arms: list[Literal["paper_default"]] | None = Field(
        None, max_length=1, description="paper_default: the periodic arm at the paper's K=3, gamma=0.15 beside the "
        "chosen pair at every rung, compared with every arm and reported, not judged (docs/targets.md).")
    lr_brackets: dict[str, Any] | None = Field(
        None, description="Per-arm lr multiples run at every rung, e.g. {periodic: [1, 1.5, 2.3]}; each (rung, arm) "
        "is judged at its best multiple.")

    @field_validator("rungs", "lr_rules", "execution", "trial", "target", "horizon", "timing", "plateau", "verify",
                     "rounds", "lr_brackets")
    @classmethod
    def _bounded_shape(cls, value: Any, info: Any) -> Any:
        from sweeper.specs.checks import check_shape  # depth, keys and size of free-form data (docs/security.md)

        if isinstance(value, dict):
            check_shape(value, info.field_name)
        return value


class TransferExtend(BaseModel):
    """More seeds for a finished transfer (`POST /v1/transfers/{id}/extend`): its seeds with the new ones added;
    only the new seeds' runs run, and the extension counts as one more look in the claims' alpha budget."""

    model_config = {"extra": "forbid"}

    seeds: list[StrictInt] = Field(min_length=1, max_length=100, description="The transfer's seeds (all kept) and the "
                             "seeds to add, e.g. [6, 7, 8, 9, 10, 11, 12]; fresh ones: not the sweep's selection "
                             "seeds or the pilot's.")
    execution: dict[str, Any] | None = Field(None, description="Concurrency and CPUs for the new runs (as in a "
                                             "sweep spec); the transfer's own when unset.")


class TransferLinks(BaseModel):
    self: str
    sweep: str
    runs: str
    fits: str
    export: str
    report: str
    mlflow_experiment: str | None = None
    mlflow_parent_run: str | None = None


class TransferPublic(JobPublic):
    sweep_id: str
    links: TransferLinks


class TransfersPublic(Page[TransferPublic]):
    """A page of transfers."""


class RunsPublic(BaseModel):
    data: list[dict[str, Any]] = Field(description="Each run: arm, rung, parameters, seed, state, FD per step, ...")
    count: int


class Prediction(BaseModel):
    arm: str
    size: float = Field(description="Model size N (parameters).")
    metric: str
    point: float
    lo: float | None = Field(description="Lower end of the confidence interval; null when the fit has none (e.g. "
                             "as many parameters as sizes: nothing left to bootstrap).")
    hi: float | None = Field(description="Upper end of the confidence interval; null as for lo.")
