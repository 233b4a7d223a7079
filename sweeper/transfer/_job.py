"""The transfer job: carry a finished sweep's chosen pair, unchanged, to larger rungs beside the baseline arms
(`run_transfer`), say how it goes (`transfer_status`), stop it (`cancel_transfer`), and read its runs back from
MLflow (`load_transfer_result`) into `sweeper.TransferResult`, whose analysis (time to best, savings, fits,
exports) is pure.

The paper's second stage. From a sweep's work folder, every (rung, arm, seed) runs once at a horizon of
`horizon_factor` x the sweep's (2x: the paper's 30k -> 60k), with the same eval schedule shape (the sweep's eval
steps scaled by the same factor: 2/3, 5/6, 6/6 by default), the sweep's seeds, and the learning rate carried by a
stated rule per arm (`scaling`'s lr rules: the Muon family `unchanged`, or `width` under `match_rms_adamw`; AdamW
`width`; weight decay keeps lr x wd by default). K and gamma are never re-tuned. The plan is typed
(`sweeper.TransferPlan`) and stored in the work folder with the sweep spec that runs it.

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
`scalesweep.base_width`; the lr a run used is its param `optimizer.lr`. With target rule `pilot`, the pilot's runs
come first, a sweep of their own in `pilot/` tagged `scalesweep.transfer.pilot_of` (not `scalesweep.transfer_id`:
they are never judged), and the target they give is on the parent run as `scalesweep.transfer.pilot` (`_pilot`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scaling import TransferRun
from scaling.export import Export, build_export, carry_optimizer, default_lr_rule, refuse_losing_choice
from scaling.rungs import median_step_times
from trials import JobFailedError
from trials.optim import ARMS as _ARMS
from trials.optim import ARMS_WITH_GAMMA
from trials.record import LINEAGE, METRIC, PROVENANCE, TAG, TRIAL_TAG, StoredRun, parse_float, parse_int, trials_tagged
from trials.record import read_runs as read_stored_runs

from ..analysis import load_sweep_result
from ..jobfiles import (
    ANALYSIS_FILE,
    OUTCOME_FILE,
    SPEC_FILE,
    STATE_FILE,
    TRANSFER_FILE,
    driver_running,
    is_sweep_folder,
    is_transfer_folder,
    read_json,
    read_outcome,
    read_status,
    read_transfer,
    request_cancel,
    transfer_version,
    write_json,
    write_labelled,
)
from ..jobs import JobRun, SweepJob, cancel_sweep, log_transfer_figures, run_locked_job, run_stages, sweep_status
from ..specs import SEARCH_PARAMS, SweepSpec, format_params
from ._errors import TransferError
from ._pilot import PILOT_FOLDER, PILOT_OF_TAG, pilot_sweep_spec, plan_pilot, run_pilot
from ._result import TransferPlan, TransferResult, _clean, _rung_shape, size_basis
from ._rounds import catch_up, planned_rounds, run_rounds
from ._sections import PlateauSpec, rung_horizon
from ._spec import (
    CONTROL_ARMS,
    CONTROL_ORDER_OFFSET,
    DIAGNOSTIC_ARMS,
    TransferSpec,
    default_transfer_workdir,
    load_transfer_spec,
)
from ._timing import measure_interleaved, measure_step_time_runs, timing_lines
from ._verification import is_verification_run, plan_verification

__all__ = [
    "cancel_transfer",
    "export_from_sweep",
    "load_transfer_result",
    "read_runs",
    "run_transfer",
    "transfer_status",
]

# The arm a run is analysed as where its optimizer's name does not say it: a control or diagnostic arm (the negative
# control's optimizer is `muon`), or an lr bracket's setting (`periodic@lr_x1.5`).
ARM_TAG = "scalesweep.transfer.arm"

# The step series a transfer's analysis reads from each run.
_HISTORIES = (METRIC.FD, METRIC.EFFECTIVE_TIME_S, METRIC.FD_TRACK, METRIC.TRACK_EFFECTIVE_TIME_S, METRIC.FD_BIAS)

# ----------------------------------------------------------------------------------------------------------
# Planning: from the sweep to one multi-rung sweep spec


def _without_credentials(uri: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://host/db`: provenance is served to open reads (fits,
    exports) and a tracking URI may carry the store's password."""
    from trials import without_credentials

    return without_credentials(uri)


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
    warnings: list[str] = field(default_factory=list)  # the choice loses to a baseline with confidence

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
                "experiment": self.experiment, "warnings": list(self.warnings),
                "selection_seeds": list(self.spec.seeds), "selection_points": self._points()}

    def _points(self) -> int | None:
        """Settings the sweep tried for its searched arm: its grid, else its budget of sampled points."""
        grid = self.spec.search.grid_size
        return int(grid) if math.isfinite(grid) else self.spec.search.budget


def _load_source(workdir: str | Path, tracking_uri: str | None = None) -> _Source:
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
                   searched_arm=spec.search.arm, warnings=list(result.selection.warnings))


def _rule(spec: TransferSpec, arm: str, adjust_lr_fn: str | None = None) -> str:
    """The spec's lr rule for `arm`, else the arm's default (which follows its `adjust_lr_fn`)."""
    given: dict[str, str] = {str(k): str(v) for k, v in spec.lr_rules.items()}
    return given.get(arm) or default_lr_rule(arm, adjust_lr_fn)


def _carried_rows(spec: TransferSpec, rungs: list[str], study_trial: Mapping[str, Any],
                  optimizers: Mapping[str, dict[str, Any]], base_width: int) -> list[dict[str, Any]]:
    """One row per (rung, arm): the model's size and the arm's optimizer carried from the base rung's width by
    the spec's lr and weight-decay rules."""
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
    return rows


def _control_rows(spec: TransferSpec, rows: Sequence[Mapping[str, Any]], searched_arm: str) -> list[dict[str, Any]]:
    """One row per (rung, control or diagnostic): Muon's row at that rung again, under the extra arm's name. The
    controls keep Muon's carried lr and weight decay (the positive control's optimizer is `muon_extra_ns`, the same
    settings); the effective-step diagnostic is Muon at the searched arm's lr at that rung x (1 + (K - 1) gamma) / K
    (the searched arm's mean update RMS relative to Muon's at the same lr), with the searched arm's weight decay /
    that factor, so its mean update size and its per-step decay lr x wd are the searched arm's."""
    out = []
    muon_rows = [r for r in rows if r["arm"] == "muon"]
    order = {"order_seed_offset": CONTROL_ORDER_OFFSET} if spec.control_data_order == "other" else {}
    for kind in spec.controls:
        arm = CONTROL_ARMS[kind]
        for row in muon_rows:
            name = "muon" if kind == "negative" else arm
            out.append({**row, "arm": arm, "optimizer": {**row["optimizer"], "name": name}, **order})
    for diagnostic in spec.diagnostics:
        if searched_arm != "periodic":
            raise TransferError(f"diagnostics {list(spec.diagnostics)} need a periodic searched arm (its K and gamma "
                                f"set the step size), not {searched_arm!r}; allowed: []")
        for row in muon_rows:
            searched = next(r for r in rows if r["rung"] == row["rung"] and r["arm"] == searched_arm)["optimizer"]
            factor = effective_step_factor(searched)
            # Muon at the searched arm's own lr x factor: the searched arm's mean update RMS, whatever lr each arm
            # carried (their lrs differ once each was tuned on its own), and its per-step decay lr x wd.
            opt = {**row["optimizer"], "lr": searched["lr"] * factor}
            if searched.get("weight_decay") is not None:
                opt["weight_decay"] = searched["weight_decay"] / factor
            out.append({**row, "arm": DIAGNOSTIC_ARMS[diagnostic], "lr": opt["lr"],
                        "weight_decay": opt.get("weight_decay"), "lr_factor": factor, "optimizer": opt})
    return out


def _bracket_rows(spec: TransferSpec, rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (rung, bracketed arm, multiple other than 1): the arm's row at lr x the multiple, its other
    settings (weight decay included) unchanged, as a sweep's `lr_factors` does, under the arm name
    `<arm>@lr_x<multiple>` (the analysis judges each rung's arm at its best multiple)."""
    out = []
    for arm, factors in spec.lr_brackets.items():
        for row in (r for r in rows if r["arm"] == arm):
            for factor in (f for f in factors if f != 1):
                opt = {**row["optimizer"], "lr": row["optimizer"]["lr"] * factor}
                out.append({**row, "arm": f"{arm}@lr_x{factor:g}", "lr": opt["lr"], "lr_factor": factor,
                            "optimizer": opt})
    return out


def effective_step_factor(periodic: Mapping[str, Any]) -> float:
    """The periodic arm's mean update RMS per step relative to Muon's at the same lr: one full orthogonalised step
    (RMS as Muon's) and K - 1 cheap steps at gamma of it in every K, so (1 + (K - 1) gamma) / K (0.43 at K=3,
    gamma=0.15)."""
    k, gamma = int(periodic.get("refresh_every") or 3), float(periodic.get("gamma") or 0.0)
    return (1 + (k - 1) * gamma) / k


def _check_timing(spec: TransferSpec, batch: int, rows: Sequence[Mapping[str, Any]]) -> None:
    """The timing options against the study as planned (the spec checked them where the sweep's folder was
    readable): local_batch within the training batch, blocks of whole refresh periods of the chosen K."""
    timing = spec.timing
    if not timing.measured or timing.method != "interleaved":
        return
    if timing.local_batch is not None and timing.local_batch > batch:
        raise TransferError(f"timing.local_batch must be between 1 and the training batch ({batch}), got "
                            f"{timing.local_batch}")
    from trials.steptime import refresh_period

    period = math.lcm(*(refresh_period(r["optimizer"]) for r in rows))
    if timing.block_steps is not None and timing.block_steps % period:
        raise TransferError(f"timing.block_steps must be a whole number of every arm's refresh period (K={period} "
                            f"for periodic, 1 for the other arms): a multiple of {period}, got {timing.block_steps}")


def _search_point(best: Mapping[str, Any], first: Mapping[str, Any]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The sweep's one search point (the chosen pair as a one-value grid) and the optimizer settings around it,
    from the searched arm's row at the first rung."""
    searched_fields = {SEARCH_PARAMS[n][0]: n for n in best}
    space = {name: [value] for name, value in best.items() if name != "lr"}
    search_optimizer = {k: v for k, v in first["optimizer"].items() if k not in searched_fields or k == "lr"}
    if not space:  # only lr was searched: the search point is the transferred lr itself
        space = {"lr": [first["lr"]]}
        search_optimizer.pop("lr")
    return space, search_optimizer


def _lineage(spec: TransferSpec, source: _Source, transfer_id: str, horizons: Mapping[str, int]) -> dict[str, Any]:
    """The tags that tie every run to this transfer and its source sweep, with the target and horizons."""
    return {
        LINEAGE.TRANSFER_ID: transfer_id,
        LINEAGE.TRANSFER_NAME: spec.name,
        LINEAGE.SOURCE_SWEEP_ID: source.sweep_id,
        LINEAGE.SOURCE_SWEEP_NAME: source.name,
        LINEAGE.SOURCE_PARENT_RUN_ID: source.parent_run_id,
        LINEAGE.TRANSFER_CHOSEN: json.dumps(source.best, sort_keys=True),
        # Declared before any run: on the parent run from its creation, and on every child.
        LINEAGE.TRANSFER_TARGET: json.dumps(spec.target.model_dump(mode="json"), sort_keys=True),
        LINEAGE.TRANSFER_HORIZONS: json.dumps(horizons, sort_keys=True),
    }


def _validated_sweep(sweep_spec: dict[str, Any]) -> SweepSpec:
    """The sweep spec that runs the transfer, validated; its errors are the transfer's, naming each field."""
    try:
        validated = SweepSpec.model_validate(sweep_spec)
    except ValidationError as exc:  # e.g. a `trial` override that trials refuses
        parts = "; ".join(f"{'.'.join(map(str, e['loc']))}: {str(e['msg']).removeprefix('Value error, ')}"
                          for e in exc.errors())
        raise TransferError(f"the transfer's runs would be invalid: {parts}") from None
    return validated


def _plan(spec: TransferSpec, source: _Source, transfer_id: str) -> tuple[TransferPlan, dict[str, Any]]:
    """(the plan, the sweep spec that runs it) for a transfer of `source`."""
    # Long on purpose: one straight compile from the transfer spec to the plan and the sweep spec, in the order
    # the plan document lists them; its steps with a name of their own are the helpers above.
    if source.searched_arm not in spec.arms:
        raise TransferError(f"arms must include the sweep's searched arm {source.searched_arm!r} (it carries the "
                            f"chosen pair {format_params(source.best)}); got {list(spec.arms)}")
    base = source.spec
    base_rung = base.rung
    from trials.models import list_rungs

    order = list_rungs()
    rungs = sorted(spec.rung_names or _default_rungs(base_rung), key=order.index)
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
    rounds = planned_rounds(spec, rungs, seeds, source.searched_arm)
    base_width = _rung_shape(base_rung)[0]
    optimizers = source.base_optimizers()

    rows = _carried_rows(spec, rungs, study_trial, optimizers, base_width)

    def arm_tags(row: Mapping[str, Any]) -> dict[str, str]:
        return {LINEAGE.LR_RULE: row["lr_rule"], LINEAGE.LR_BASE: f"{row['lr_base']:.6g}",
                LINEAGE.WD_RULE: row["weight_decay_rule"],
                LINEAGE.BASE_RUNG: base_rung, LINEAGE.BASE_WIDTH: str(base_width)}

    # The chosen pair at the first rung is the sweep's one search point; everything else is a baseline with its
    # own rung. Largest rungs first: on a few cores the longest runs should start first (LPT scheduling).
    first = next(r for r in rows if r["rung"] == rungs[0] and r["arm"] == source.searched_arm)
    space, search_optimizer = _search_point(source.best, first)
    baselines = [
        {"arm": r["arm"], "label": f"{r['arm']}.{r['rung']}", "rung": r["rung"], "optimizer": r["optimizer"],
         "tags": arm_tags(r),
         **({"horizon": horizons[r["rung"]], "eval_steps": evals_by_rung[r["rung"]]}
            if horizons[r["rung"]] != horizon else {})}
        for r in sorted(rows, key=lambda r: -order.index(r["rung"]))
        if r is not first
    ]
    control_rows = _control_rows(spec, rows, source.searched_arm)
    baselines += [{"arm": r["optimizer"]["name"], "label": f"{r['arm']}.{r['rung']}", "rung": r["rung"],
                   "optimizer": r["optimizer"], "tags": {**arm_tags(r), ARM_TAG: r["arm"]},
                   **({"order_seed_offset": r["order_seed_offset"]} if "order_seed_offset" in r else {}),
                   **({"horizon": horizons[r["rung"]], "eval_steps": evals_by_rung[r["rung"]]}
                      if horizons[r["rung"]] != horizon else {})}
                  for r in sorted(control_rows, key=lambda r: -order.index(r["rung"]))]
    bracket_rows = _bracket_rows(spec, rows)
    baselines += [{"arm": r["optimizer"]["name"], "label": f"{r['arm'].replace('@', '.')}.{r['rung']}",
                   "rung": r["rung"], "optimizer": r["optimizer"], "tags": {**arm_tags(r), ARM_TAG: r["arm"]},
                   **({"horizon": horizons[r["rung"]], "eval_steps": evals_by_rung[r["rung"]]}
                      if horizons[r["rung"]] != horizon else {})}
                  for r in sorted(bracket_rows, key=lambda r: -order.index(r["rung"]))]
    for section, names in (("controls", spec.controls), ("diagnostics", spec.diagnostics)):
        if names and base.backend.name != "builtin":
            raise TransferError(f"{section} {list(names)} cannot be built for the sweep's {base.backend.name!r} "
                                "trainer: their arms are optimizers of the builtin trial; allowed: []")
    _check_timing(spec, batch, rows)
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
    lineage = _lineage(spec, source, transfer_id, horizons)
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
    own_workers = {r: spec.rung_workers[r] for r in rungs if r in spec.rung_workers}
    if own_workers:  # the rungs that set their own workers; the others run on `execution`'s
        sweep_spec["workers_by_rung"] = own_workers
    validated = _validated_sweep(sweep_spec)
    wide = {r: validated.workers_at(r) for r in rungs if validated.workers_at(r) > 1}
    if wide and spec.timing.measured and spec.timing.method == "isolated":  # the spec checks it where it can
        raise TransferError(f"timing.method 'isolated' times one process; rungs {sorted(wide)} run on "
                            f"{sorted(set(wide.values()))} workers, whose step the timing stage times on as many "
                            "ranks: allowed: 'interleaved'")
    plan: dict[str, Any] = {
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
    if own_workers:  # rung -> ranks per trial, where a rung sets its own (the others: `execution`'s)
        plan["workers_by_rung"] = own_workers
    if spec.controls:
        plan["controls"] = {kind: {"arm": CONTROL_ARMS[kind], "against": "muon", "data_order": spec.control_data_order}
                            for kind in spec.controls}
    if spec.diagnostics:
        first_searched = next(r for r in rows if r["arm"] == source.searched_arm)["optimizer"]
        plan["diagnostics"] = {kind: {"arm": DIAGNOSTIC_ARMS[kind], "against": source.searched_arm,
                                      "reference": "muon", "lr_factor": effective_step_factor(first_searched)}
                               for kind in spec.diagnostics}
    if control_rows:
        plan["control_runs"] = [{k: v for k, v in r.items() if k != "optimizer"} for r in control_rows]
    if spec.lr_brackets:
        plan["lr_brackets"] = {arm: list(factors) for arm, factors in spec.lr_brackets.items()}
        plan["bracket_runs"] = [{k: v for k, v in r.items() if k != "optimizer"} for r in bracket_rows]
    if verification is not None:
        plan["verification"] = verification
    if rounds is not None:
        plan["rounds"] = rounds
    if spec.target.rule == "pilot":
        plan["pilot"] = plan_pilot(spec.target, rungs=rungs, seeds=seeds, horizons=horizons, rows=rows,
                                   study_trial=study_trial,
                                   scaled_eval_steps=lambda h: _scaled_eval_steps(base.resolved_eval_steps,
                                                                                  base.horizon, h))
    return TransferPlan.model_validate(plan), validated.model_dump(mode="json")



class TransferState(BaseModel):
    """What `transfer.json` holds: the transfer's identity, its source, its plan and the sweep spec that runs it,
    and the per-step timing once measured. Written when the transfer is planned, read by every later call."""

    model_config = ConfigDict(extra="allow")

    transfer_id: str
    name: str
    fingerprint: str | None = None
    spec: dict[str, Any] = {}
    source: dict[str, Any]  # the sweep's provenance (`_Source.provenance`)
    source_objectives: dict[str, Any] = {}
    plan: TransferPlan
    sweep_spec: dict[str, Any]
    created_at: str | None = None
    step_timing: dict[str, Any] | None = None  # None until measured, before the first run
    pilot_sweep_spec: dict[str, Any] | None = None  # the pilot's sweep (target rule `pilot`), validated when planned

    @property
    def tracking(self) -> dict[str, str]:
        return dict(self.sweep_spec["tracking"])

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.model_dump(mode="json", exclude={"plan"}).items() if v is not None}
        return {**doc, "plan": self.plan.to_dict()}

    def write(self, path: Path) -> None:
        write_json(path / TRANSFER_FILE, self.to_dict())


def _transfer_state(path: Path) -> TransferState:
    state = read_transfer(path)
    if state is None:
        raise TransferError(f"{path} is not a transfer work folder (no {TRANSFER_FILE})")
    try:
        return TransferState.model_validate(state)
    except ValidationError as exc:
        raise TransferError(f"{path / TRANSFER_FILE} is not a transfer's state: {exc.errors()[0]['msg']}") from None


# ----------------------------------------------------------------------------------------------------------
# The driver


@dataclass
class TransferJob:
    """A transfer as the job runner runs it (`sweeper.jobs`' `Job`): plan it (once), time its steps (once), run its
    one multi-rung sweep as an inner job, read its runs back. The lock, the resume check, the table, the outcome of a
    broken driver and the figures are the runner's."""

    spec: TransferSpec
    kind = "transfer"
    refused = TransferError
    may_change = "`execution`"

    def stored(self, workdir: Path) -> tuple[str, str | None] | None:
        if not is_transfer_folder(workdir):
            return None
        state = _transfer_state(workdir)
        return state.transfer_id, state.fingerprint

    def run(self, run: JobRun) -> TransferResult:
        spec, path, out = self.spec, run.workdir, run.stream
        state = _transfer_state(path) if is_transfer_folder(path) else None
        if state is None:
            transfer_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
            source = _load_source(spec.sweep)
            plan, sweep_spec = _plan(spec, source, transfer_id)
            pilot_spec = None
            if plan.pilot is not None:
                pilot_spec = _validated_sweep(pilot_sweep_spec(plan.pilot, sweep_spec, name=spec.name,
                                                               transfer_id=transfer_id)).model_dump(mode="json")
            state = TransferState(transfer_id=transfer_id, name=spec.name, fingerprint=spec.fingerprint(),
                                  spec=spec.model_dump(mode="json"), source=source.provenance(),
                                  source_objectives=source.objectives, plan=plan, sweep_spec=sweep_spec,
                                  created_at=_now(), pilot_sweep_spec=pilot_spec)
            state.write(path)
        (path / OUTCOME_FILE).unlink(missing_ok=True)
        if out is not None:
            _print_plan(state, out)
        if state.plan.pilot is not None:  # the target, fixed before the timing and the judged runs
            pilot_state = self._pilot(state, run)
            if pilot_state != "SUCCEEDED":
                result = load_transfer_result(path)
                result.state = "CANCELLED" if pilot_state == "CANCELLED" else "FAILED"
                write_json(path / OUTCOME_FILE, {"state": result.state, "finished_at": _now(),
                                                 "error": f"the pilot ended {pilot_state}", "counts": {}})
                return result
        sweep_spec = dict(state.sweep_spec)
        if spec.execution is not None:  # execution may change between a run and its resume
            sweep_spec["execution"] = spec.execution.model_dump(mode="json")
        if state.step_timing is None:
            state.step_timing = _step_timing(spec, state, out)
            state.write(path)
        catch_up(state, path)  # a round's seeds recorded before a restart

        def run_round(sweep: SweepSpec) -> str:
            return run_stages(SweepJob(sweep), run.inner(), resume=True).state

        # The transfer's table and figures, drawn by the runner once it ends, cover the sweep's runs.
        swept_state = run_rounds(state, path, sweep_spec, run_round(SweepSpec.model_validate(sweep_spec)),
                                 load=lambda: load_transfer_result(path), run_round=run_round, out=out)
        result = load_transfer_result(path)
        if swept_state == "CANCELLED":
            final = "CANCELLED"
        elif any(r.state == "SUCCEEDED" for r in result.runs) and not any(
                r.state in ("RUNNING", "PENDING", "CANCELLED") for r in result.runs):
            final = "SUCCEEDED"  # failed or diverged runs are data (and counted), as in a sweep
        else:
            final = "FAILED"
        write_json(path / OUTCOME_FILE, {"state": final, "finished_at": _now(), "counts": result.counts})
        result.state = final
        return result

    def _pilot(self, state: TransferState, run: JobRun) -> str:
        """The pilot (target rule `pilot`) run, or reused, and its target recorded: how it ended."""

        def run_sweep(pilot_spec: dict[str, Any], folder: Path) -> str:
            if self.spec.execution is not None:  # as the transfer's own sweep: execution may change on resume
                pilot_spec = {**pilot_spec, "execution": self.spec.execution.model_dump(mode="json")}
            folder.mkdir(parents=True, exist_ok=True)
            return run_stages(SweepJob(SweepSpec.model_validate(pilot_spec)), replace(run.inner(), workdir=folder),
                              resume=True).state

        def read() -> list[TransferRun]:
            uri = _stored_uri(run.workdir / PILOT_FOLDER) or state.tracking["tracking_uri"]
            return read_runs(uri, state.tracking["experiment"], PILOT_OF_TAG, state.transfer_id)

        plateau = PlateauSpec.model_validate(state.plan.plateau or {})
        return run_pilot(state, run.workdir, run_sweep=run_sweep, read=read, plateau_spec=plateau, out=run.stream)

    def failed(self, run: JobRun, exc: JobFailedError) -> None:
        write_json(run.workdir / OUTCOME_FILE, {"state": "FAILED", "error": str(exc), "finished_at": _now()})

    def finished(self, run: JobRun, result: TransferResult) -> None:
        _store_analysis(run.workdir, result, run.stream)  # first: its fits are reused by the report's panels
        log_transfer_figures(result, run.stream)


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
    A SUCCEEDED transfer stores its analysis and, through the figure hook (`set_figure_hook`), its report page and
    figures. Blocks; run it in a process of its own (the CLI does): Ray takes over signals and is not safe to share.
    """
    spec = spec if isinstance(spec, TransferSpec) else load_transfer_spec(spec)
    return run_locked_job(TransferJob(spec), Path(workdir or default_transfer_workdir(spec.name)), resume=resume,
                   show_progress=show_progress, stream=stream)


def _store_analysis(path: Path, result: TransferResult, out: IO[str] | None) -> None:
    """The finished transfer's analysis (its bootstrap fits take tens of CPU seconds), computed once here and
    stored beside its state: readers (the service's `/fits`) serve it instead of computing it again. Best effort:
    the runs are stored already, and a reader computes the analysis itself when this file is missing."""
    version = transfer_version(path)  # read before computing: a label never newer than what it labels
    try:
        write_labelled(path / ANALYSIS_FILE, result.analysis(), version)
    except Exception as exc:
        print(f"warning: analysis not stored: {type(exc).__name__}: {exc}", file=out or sys.stderr)


def _print_plan(state: TransferState, out: IO[str]) -> None:
    plan = state.plan
    horizons = set(plan.horizon_of().values())
    # One number when every rung runs the same steps; otherwise the range (the per-rung steps follow below).
    if len(horizons) <= 1:
        steps, evals = f"{plan.horizon} steps", f"evals at {plan.eval_steps}"
    else:
        steps, evals = (f"{min(horizons)}-{max(horizons)} steps by rung",
                        "evals at the sweep's fractions of each rung's horizon")
    print(f"transfer {state.transfer_id}: {state.source['chosen']} from sweep {state.source['sweep_id']} to "
          f"{', '.join(plan.rungs)}; arms {', '.join(plan.arms)}; {steps} (sweep: "
          f"{plan.source_horizon}), {evals}, seeds {plan.seeds}; "
          f"{plan.planned_runs()} runs", file=out, flush=True)
    for row in [*plan.runs, *plan.bracket_runs, *plan.control_runs]:
        print(f"  {row.rung:<10} {row.arm:<8} lr {row.lr or 0.0:.4g} ({row.lr_rule} from {row.lr_base or 0.0:.4g})",
              file=out, flush=True)
    if plan.controls:
        print("  controls: " + "; ".join(f"{kind}: {c['arm']} against {c['against']}"
                                         for kind, c in plan.controls.items()), file=out, flush=True)
    if plan.get("workers_by_rung"):
        print(f"  workers per trial by rung: {plan['workers_by_rung']} (other rungs: the execution section's)",
              file=out, flush=True)
    if plan.horizons is not None:
        print(f"  horizons per rung: {plan.horizons}; target: {plan.target_text}", file=out, flush=True)
    if plan.pilot is not None:
        p = plan.pilot
        print(f"  pilot: {p['arm']} at {p['rung']}, {p['horizon']} steps, seeds {p['seeds']}, {p['points']} tracking "
              "points: one target for every rung, derived before the judged runs", file=out, flush=True)


def _where_timed(workers: Mapping[str, int]) -> str:
    """Where the interleaved timing runs each rung's step (rung -> ranks), for its progress line."""
    ranks = set(workers.values())
    if len(ranks) == 1:
        n = ranks.pop()
        return "in one process per rung" if n == 1 else f"on {n} gloo ranks per rung"
    return ", ".join(f"on {n} gloo ranks at {r}" if n > 1 else f"in one process at {r}" for r, n in workers.items())


def _step_timing(spec: TransferSpec, state: TransferState, out: IO[str] | None) -> dict[str, Any]:
    """Per-step cost of every arm (the control arms included) at every rung, measured before the transfer's runs
    start (so no other trial of the transfer shares the cores): the systems half of the time saving."""
    sweep_spec = state.sweep_spec
    if spec.timing.steps == 0:
        return {"measured": False, "reason": "timing.steps is 0"}
    if sweep_spec["backend"]["name"] != "builtin":
        return {"measured": False, "reason": "the command backend's trainer cannot be timed in isolation here"}
    timed_controls = {c["arm"] for c in (state.plan.controls or {}).values()}  # a diagnostic costs as Muon does
    control_rows = [r for r in state.plan.control_runs if r.arm in timed_controls]
    rows = [(r.rung, r.arm, opt) for r in [*state.plan.runs, *control_rows]
            for opt in [_row_optimizer(sweep_spec, r.rung, r.arm)] if opt is not None]
    threads = int(sweep_spec["execution"].get("threads", 1))
    # each rung's N-rank step, as its runs train: its own workers, else the execution section's
    runs_at = SweepSpec.model_validate(sweep_spec).workers_at
    workers = {r.rung: runs_at(r.rung) for r in state.plan.runs}
    if spec.timing.method == "interleaved":
        by_rung: dict[str, dict[str, Mapping[str, Any]]] = {}
        for rung, arm, opt in rows:
            by_rung.setdefault(rung, {})[arm] = opt
        if out is not None:
            print(f"timing {', '.join(next(iter(by_rung.values()), {}))} interleaved {_where_timed(workers)} "
                  f"({spec.timing.rounds} rounds, {spec.timing.clock} clock"
                  + (f", local batch {spec.timing.local_batch}" if spec.timing.local_batch else "") + ")",
                  file=out, flush=True)

        def show(rung: str, digest: dict[str, Any]) -> None:
            if out is not None:
                print("\n".join(timing_lines({"rungs": {rung: digest}})), file=out, flush=True)

        trial = dict(sweep_spec["trial"])
        if float(sweep_spec["execution"].get("gpus_per_trial", 0)) > 0:
            trial.setdefault("device", "auto")  # as the sweeper runs a trial given a GPU
        doc = measure_interleaved(trial, by_rung, spec.timing, threads=threads, progress=show, workers=workers)
        return {**doc, "measured_at": _now()}
    if out is not None:
        rounds = f" in {spec.timing.repeats} rounds" if spec.timing.repeats > 1 else ""
        print(f"timing {spec.timing.steps} steps per arm and rung, one at a time "
              f"({len(rows) * spec.timing.repeats} short runs{rounds})", file=out, flush=True)
    runs = measure_step_time_runs(sweep_spec["trial"], rows, spec.timing, threads=threads)
    times = median_step_times(runs)
    if out is not None:
        for rung, per in times.items():
            print(f"  {rung:<10} " + ", ".join(
                f"{a} {1e3 * t:.1f} ms/step" + (f" (median of {len(runs[rung][a])})" if len(runs[rung][a]) > 1 else "")
                for a, t in per.items()), file=out, flush=True)
    return {"measured": True, "method": "isolated", "steps": spec.timing.steps, "warmup": spec.timing.warmup,
            "threads": threads, "repeats": spec.timing.repeats, "seconds_per_step": times,
            "seconds_per_step_runs": runs, "measured_at": _now()}


def _row_optimizer(sweep_spec: Mapping[str, Any], rung: str, arm: str) -> dict[str, Any] | None:
    """The optimizer a (rung, arm) of the plan runs with, as its sweep spec holds it (a control arm by its label:
    the negative control's optimizer is Muon's)."""
    for b in sweep_spec["baselines"]:
        if b.get("label") == f"{arm}.{rung}" or (b["arm"] == arm and b.get("label") is None
                                                and (b.get("rung") or sweep_spec["rung"]) == rung):
            return {**b["optimizer"], "name": b["arm"]}
    if rung == sweep_spec["rung"]:
        search = sweep_spec["search"]
        point = {k: v[0] for k, v in search["space"].items()}
        return {**search["optimizer"], **{SEARCH_PARAMS[k][0]: v for k, v in point.items()}}  # it names its arm
    return None


def transfer_status(workdir: str | Path) -> dict[str, Any]:
    """The live status of the transfer in `workdir`: state (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, or
    INTERRUPTED when its driver died; `--resume` continues it), run counts, driver_alive, pid, MLflow ids and the
    last events."""
    path = Path(workdir).resolve()
    state = _transfer_state(path)
    plan = state.plan
    base = {"transfer_id": state.transfer_id, "name": state.name, "workdir": str(path),
            "source_sweep_id": state.source["sweep_id"], "rungs": plan.rungs, "arms": plan.arms,
            "horizon": plan.horizon, "runs_planned": plan.planned_runs(),
            "tracking_uri": state.tracking["tracking_uri"], "experiment": state.tracking["experiment"]}
    if not is_sweep_folder(path):  # the driver has not reached its sweep yet (timing, or the pilot)
        outcome = read_outcome(path)  # a transfer stopped in its pilot ended there
        return {**base, "state": outcome["state"] if outcome else "PENDING", "driver_alive": driver_running(path),
                "counts": {}, "parent_run_id": None, **_pilot_status(path, state.plan)}
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
            "error": (outcome or {}).get("error") or status.get("error"), "updated_at": status.get("updated_at"),
            **_pilot_status(path, plan)}


def _pilot_status(path: Path, plan: TransferPlan) -> dict[str, Any]:
    """{"pilot": its state, run counts and target once derived} for a transfer with a pilot; {} without."""
    if plan.pilot is None:
        return {}
    status = read_status(path / PILOT_FOLDER) or {}
    state = status.get("state", "PENDING")
    if state == "RUNNING" and not driver_running(path):  # its driver is the transfer's
        state = "INTERRUPTED"
    return {"pilot": {"state": state, "counts": status.get("counts") or {},
                      "target": (plan.pilot.get("result") or {}).get("value")}}


def cancel_transfer(workdir: str | Path, *, grace_s: float = 60.0) -> dict[str, Any]:
    """Stop the transfer in `workdir` (the sweeper's cancel: cancel file, SIGTERM, then its process group after
    `grace_s`); no run is left RUNNING and the transfer ends CANCELLED, resumable. Returns its status."""
    path = Path(workdir).resolve()
    _transfer_state(path)
    if is_sweep_folder(path):
        cancel_sweep(path, grace_s=grace_s)  # a finished transfer stays as it ended
    elif is_sweep_folder(path / PILOT_FOLDER):  # still in its pilot: the pilot's driver stops at its next check
        request_cancel(path / PILOT_FOLDER)
    return transfer_status(path)


# ----------------------------------------------------------------------------------------------------------
# Reading it back


def load_transfer_result(workdir: str | Path, tracking_uri: str | None = None) -> TransferResult:
    """The transfer in `workdir`, its runs read from MLflow (`tracking_uri` overrides the stored one, e.g. when
    the store moved). Works while it runs and after it ended, from any process."""
    path = Path(workdir).resolve()
    state = _transfer_state(path)
    tracking = state.tracking
    uri = tracking_uri or _stored_uri(path) or tracking["tracking_uri"]
    runs = read_runs(uri, tracking["experiment"], LINEAGE.TRANSFER_ID, state.transfer_id)
    verification_runs = [r for r in runs if is_verification_run(r)]
    runs = [r for r in runs if not is_verification_run(r)]
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.state] = counts.get(run.state, 0) + 1
    status: dict[str, Any] = {}
    if is_sweep_folder(path):
        status = transfer_status(path)
    return TransferResult(
        transfer_id=state.transfer_id, name=state.name, state=str(status.get("state", "PENDING")),
        workdir=str(path), tracking_uri=uri, experiment=tracking["experiment"],
        parent_run_id=status.get("parent_run_id"), source=dict(state.source), plan=state.plan,
        runs=runs, counts=counts, source_objectives=dict(state.source_objectives),
        verification_runs=verification_runs, step_timing=dict(state.step_timing or {}),
    )


def _stored_uri(path: Path) -> str | None:
    sweep = read_json(path / STATE_FILE)
    return str(sweep["tracking_uri"]) if sweep else None


def export_from_sweep(sweep_workdir: str | Path, target_rung: str, tracking_uri: str | None = None, *,
                      allow_losing: bool = False) -> Export:
    """The sweep's choice carried to `target_rung` by the default lr rules alone, without transfer runs (every
    arm `verified_at_target` False), with the sweep's objectives and run ids as evidence. Refused
    (`ScalingInputError`) when the choice is worse than a baseline with confidence, unless `allow_losing`; the
    export then carries the warning in its provenance."""
    from trials.models import check_rung

    check_rung(target_rung)
    source = _load_source(sweep_workdir, tracking_uri)
    refuse_losing_choice(source.warnings, allow_losing)
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


def _num(text: str | None) -> float | None:
    """A finite number from a tag or param; None otherwise (e.g. "None": an lr left to the arm's default)."""
    value = parse_float(text)
    return value if value is not None and math.isfinite(value) else None


def _transfer_run(run: StoredRun) -> TransferRun:
    """The analysis's record of one stored run (its histories read for `_HISTORIES`)."""
    params, tags = run.params, run.tags
    arm = tags.get(ARM_TAG) or run.arm
    fd, times = run.history(METRIC.FD), run.history(METRIC.EFFECTIVE_TIME_S)
    checkpoints = tuple((int(s), float(times[s]), float(fd[s])) for s in sorted(fd) if s in times)
    track_fd, track_times = run.history(METRIC.FD_TRACK), run.history(METRIC.TRACK_EFFECTIVE_TIME_S)
    track = tuple((int(s), float(track_times[s]), float(track_fd[s])) for s in sorted(track_fd) if s in track_times)
    bias = run.history(METRIC.FD_BIAS)
    return TransferRun(
        rung=params.get("rung", ""),
        parameters=parse_int(tags.get(TRIAL_TAG.PARAMETERS)),
        arm=arm,
        seed=parse_int(params.get("seed", tags.get(TAG.SEED))) or 0,
        lr=_num(params.get("optimizer.lr")) or _num(tags.get(LINEAGE.LR)),
        lr_rule=tags.get(LINEAGE.LR_RULE),
        lr_base=_num(tags.get(LINEAGE.LR_BASE)),
        # Every trial logs its whole config, so a baseline carries K and gamma params it never used.
        K=parse_int(params.get("optimizer.refresh_every")) if run.arm == "periodic" else None,
        gamma=_num(params.get("optimizer.gamma")) if run.arm in ARMS_WITH_GAMMA else None,
        run_id=run.run_id,
        state=run.status,
        trial_key=run.trial_key if run.trial_key is not None else (run.run_name or run.run_id),
        attempt=run.attempt,
        checkpoints=checkpoints,
        metric_name=tags.get(TRIAL_TAG.FD_METRIC_NAME),
        fd_samples=parse_int(tags.get(TRIAL_TAG.FD_SAMPLES) or params.get("eval.fd_samples")),
        git_sha=tags.get(PROVENANCE.GIT_SHA),
        track=track,
        horizon=parse_int(params.get("steps")),
        track_samples=parse_int(tags.get(TRIAL_TAG.FD_TRACK_SAMPLES)) or None,
        fd_bias=tuple((int(s), float(bias[s])) for s in sorted(bias)),
    )


def read_runs(tracking_uri: str, experiment: str, tag: str, value: str) -> list[TransferRun]:
    """The trial runs whose tag `tag` equals `value` (e.g. a transfer's id), last attempt per trial, ordered by
    trial key. Read with `trials.record.read_runs`, so a run's state is the run record's (`run_state`)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    stored = read_stored_runs(client, [exp.experiment_id], trials_tagged(tag, value), histories=_HISTORIES)
    stored.sort(key=lambda r: r.trial_key if r.trial_key is not None else r.run_id)
    return [_transfer_run(run) for run in stored]
