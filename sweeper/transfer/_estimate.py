"""A transfer priced before it runs (`transfer_estimate`): the stages `transfer_work` counts (the pilot, the timing
stage, every rung x arm x seed, the controls, diagnostics and lr brackets, the verification bracket) as
`sweeper.demand.PlanStage`s, priced by `sweeper.demand.estimate_job`; and the spread over seeds of a prior study's
time ratios (`prior_spread`), from which the smallest detectable saving is stated."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..demand import JobEstimate, PlanStage, estimate_job, job_slots
from ..jobfiles import SPEC_FILE, read_json
from ..specs import SweepSpec
from ._errors import TransferError
from ._pilot import PILOT_TRACK_FROM
from ._plan import _rung_shape
from ._planning import _deep_merge, _default_rungs, _scaled_eval_steps
from ._sections import rung_horizon
from ._spec import CONTROL_ARMS, TransferSpec

__all__ = ["base_sweep_spec", "prior_spread", "transfer_estimate", "transfer_stages"]

# The timing stage's block where the chosen K is not known yet (before the sweep chose): the paper's K.
_DEFAULT_BLOCK = 3
# A transfer's driver reads its source sweep back from MLflow and plans before its stages, beside the sweep driver's
# own time: 5 s measured on the 2-core machine when a worker's start took 20 s (docs/benchmarks.md, "The planner's
# calibration"), counted in worker starts so it moves with the load as they do.
SOURCE_READ_STARTS = 0.25


def base_sweep_spec(spec: TransferSpec) -> SweepSpec:
    """The source sweep's spec, read from its work folder (`spec.sweep`): what a transfer is planned from."""
    doc = read_json(Path(spec.sweep) / SPEC_FILE)
    if doc is None:
        raise TransferError(f"sweep: {spec.sweep} holds no sweep spec ({SPEC_FILE}): give a sweep's work folder")
    return SweepSpec.model_validate(doc)


def _trial(base: SweepSpec, study: Mapping[str, Any], rung: str, arm: str, steps: int,
           eval_steps: list[int], **extra: Any) -> dict[str, Any]:
    """One TrialConfig mapping of the transfer at `rung` for optimizer `arm`."""
    cfg = {**dict(study), "rung": rung, "steps": steps, "eval_steps": eval_steps, "optimizer": {"name": arm},
           "seed": 0, "threads": base.execution.threads, **extra}
    if base.workers_at(rung) > 1:
        cfg["workers"] = base.workers_at(rung)
    return cfg


def transfer_stages(spec: TransferSpec, base: SweepSpec) -> list[PlanStage]:
    """The transfer's stages, in phases: 0 the pilot (target rule `pilot`), 1 the timing stage (one process at a
    time), 2 the runs (arms, controls, diagnostics, lr brackets) and the verification bracket."""
    rungs = list(spec.rung_names or _default_rungs(base.rung))
    study = _deep_merge(base.trial, spec.trial)
    batch = int(study.get("batch_size", 32))
    fixed = spec.steps or max(1, round(spec.horizon_factor * base.horizon))
    seeds = len(spec.seeds or base.seeds)
    horizons = {r: rung_horizon(spec.horizon, _rung_shape(r, study)[1], batch, fixed) for r in rungs}

    def stage(name: str, rung: str, arm: str, trials: int, trial: dict[str, Any], phase: int = 2,
              slots: int | None = None) -> PlanStage:
        return PlanStage.of(name, arm, trials, trial, phase, slots, in_ray=slots is None)

    def at(rung: str, arm: str, steps: int | None = None, **extra: Any) -> dict[str, Any]:
        h = steps or horizons[rung]
        return _trial(base, study, rung, arm, h, _scaled_eval_steps(base.resolved_eval_steps, base.horizon, h),
                      **extra)

    out: list[PlanStage] = []
    pilot = spec.target.pilot
    if spec.target.rule == "pilot" and pilot is not None:
        from trials.models import list_rungs

        rung = pilot.rung or min(rungs, key=list_rungs().index)
        steps = max(1, round(pilot.horizon_factor * rung_horizon(spec.horizon, _rung_shape(rung, study)[1], batch,
                                                                 fixed)))
        arm = spec.target.arm  # the pilot trains the target's reference arm
        trial = at(rung, arm, steps, eval={**study.get("eval", {}), "track_points": pilot.points,
                                           "track_from": PILOT_TRACK_FROM})
        out.append(stage("pilot", rung, arm, len(pilot.seeds), trial, phase=0))
    controls = [CONTROL_ARMS[k] if k == "positive" else "muon" for k in spec.controls]
    if spec.timing.measured and base.backend.name == "builtin":
        arms = [*spec.arms, *(c for c in controls if c != "muon")]
        for rung in rungs:
            if spec.timing.method == "isolated":
                steps = spec.timing.warmup + spec.timing.steps
                trial = at(rung, "muon", steps, eval={"extractor": "pixels", "extractor_options": {"size": 4},
                                                     "fd_samples": 16, "reference_samples": 16, "sample_steps": 1,
                                                     "val_samples": 1, "track_points": 0})
                out.append(stage("timing", rung, "every arm", len(arms) * spec.timing.repeats, trial, 1, 1))
            else:  # one process per rung: every arm's blocks, warm-up rounds included, after one build
                block = spec.timing.block_steps or _DEFAULT_BLOCK
                steps = (spec.timing.warmup_rounds + spec.timing.rounds) * block * len(arms)
                out.append(PlanStage("timing", rung, "every arm", 1, steps, 0, 0, at(rung, "muon"), 1, 1, False))
    for rung in rungs:
        for arm in spec.arms:
            out.append(stage("run", rung, arm, seeds, at(rung, arm)))
        for control in controls:
            out.append(stage("control", rung, control, seeds, at(rung, control)))
        for _ in spec.diagnostics:
            out.append(stage("diagnostic", rung, "muon", seeds, at(rung, "muon")))
        for arm, factors in spec.lr_brackets.items():
            out.append(stage("lr bracket", rung, arm, seeds * (len(factors) - 1), at(rung, arm)))
    if spec.verify is not None:
        rung = spec.verify.rung or rungs[-1]
        out.append(stage("verify", rung, base.search.arm, 2 * len(spec.verify.knobs) * seeds,
                         at(rung, base.search.arm)))
    return out


def transfer_estimate(spec: TransferSpec, base: SweepSpec | None = None, *, measure: bool = True,
                      budget_hours: float | None = None, spread: Mapping[str, float] | None = None) -> JobEstimate:
    """A transfer of sweep `base` (read from `spec.sweep` when not given) priced on this machine."""
    base = base or base_sweep_spec(spec)
    rungs = list(spec.rung_names or _default_rungs(base.rung))
    alpha = float(spec.rounds.alpha) if spec.rounds is not None else 0.05
    return estimate_job("transfer", spec.name, transfer_stages(spec, base),
                        slots=job_slots(spec.execution or base.execution), seeds=len(spec.seeds or base.seeds),
                        alpha=alpha, spread=spread, comparisons=max(1, (len(spec.arms) - 1) * len(rungs)),
                        measure=measure, builtin=base.backend.name == "builtin", budget_hours=budget_hours,
                        extra_overhead_starts=SOURCE_READ_STARTS)


def prior_spread(folder: str | Path) -> dict[str, float]:
    """The sd over seeds of each comparison's log steps ratio at the first crossing (`<arm> vs <base> at <rung>`)
    in a prior transfer: its work folder, or a folder of its records (`transfer records`)."""
    from ._reading import load_transfer_result
    from ._records import is_records_folder, read_transfer_records
    from ._targets import _sd_seed_log, comparisons_of

    path = Path(folder)
    if not path.is_dir():
        raise TransferError(f"--prior: no folder {path}")
    result = read_transfer_records(path) if is_records_folder(path) else load_transfer_result(path)
    out: dict[str, float] = {}
    for (rung, other), comp in comparisons_of(result).items():
        sd = None if isinstance(comp, str) else _sd_seed_log(comp, "first")
        if sd is not None and math.isfinite(sd):
            out[f"{result.searched_arm} vs {other} at {rung}"] = sd
    if not out:
        raise TransferError(f"--prior: {path} holds no comparison with a spread over seeds (it needs two seeds "
                            "that reached the target on both arms)")
    return out
