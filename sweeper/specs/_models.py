"""The typed, strict sweep spec: what to search, on which rung and horizon, how to run it, where to record it.

A spec is plain data (JSON or YAML, `load_spec`); every field has a default that reproduces the paper's first
stage (K in {2,3,4} x gamma in {0.10,0.15,0.25,0.35} on the smallest rung, scored by mean FD at 2/3, 5/6 and 6/6 of
the horizon, beside AdamW and vanilla Muon). Unknown keys are errors, and a bad value names its field and the
allowed values. Validation imports `trials` lazily so that `import sweeper` stays light (no torch).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trials.core import read_mapping

from ..errors import SweepError
from ._sections import (
    Backend,
    BaselineSpec,
    BuiltinBackend,
    ConfirmSpec,
    EarlyStoppingSpec,
    ExecutionSpec,
    RetrySpec,
    SearchSpec,
    SelectionSpec,
    SweepTracking,
    _default_baselines,
)
from ._values import (
    _NAME_PATTERN,
    Tags,
)
from .checks import (
    _OWNED_TRIAL_FIELDS,
    MAX_BASELINES,
    MAX_HORIZON,
    MAX_SEEDS,
    MIN_CROSSING_POINTS,
    Rung,
    Seeds,
    Step,
    TrialSection,
    Workers,
    _nested_errors,
    check_batch_split,
)

M = TypeVar("M", bound=BaseModel)


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
