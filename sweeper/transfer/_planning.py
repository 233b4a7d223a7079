"""Planning a transfer: from a finished sweep (`_Source`, read once) and a `TransferSpec` to the typed plan
(`TransferPlan`) and the one typed multi-rung sweep spec (`SweepSpec`) that runs it.

Every (rung, arm, seed) runs once at a horizon of `horizon_factor` x the sweep's (2x: the paper's 30k -> 60k),
with the same eval schedule shape (the sweep's eval steps scaled by the same factor), the sweep's seeds, and the
learning rate carried by a stated rule per arm (`scaling`'s lr rules). K and gamma are never re-tuned. The chosen
pair at the first rung is the sweep's (single-point) search; every other (rung, arm) is a baseline with its own
rung, optimizer and tags (`sweeper.BaselineSpec.rung`, `.tags`). The sweep spec is validated here, once, and
handed on typed: the job stores it and runs it as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaling.export import carry_optimizer, default_lr_rule
from trials.optim import ARMS as _ARMS
from trials.record import LINEAGE

from ..analysis import load_sweep_result
from ..jobfiles import SPEC_FILE, is_transfer_folder, read_json
from ..specs import SEARCH_PARAMS, SweepSpec, format_params
from ._errors import TransferError
from ._pilot import plan_pilot
from ._plan import TransferPlan, _rung_shape, size_basis
from ._rounds import planned_rounds
from ._sections import rung_horizon
from ._spec import CONTROL_ARMS, CONTROL_ORDER_OFFSETS, DIAGNOSTIC_ARMS, FIXED_ARMS, ArmName, LrRuleName, TransferSpec
from ._state import validated_sweep
from ._verification import plan_verification

__all__ = ["ARM_TAG", "effective_step_factor", "load_source"]

# The arm a run is analysed as where its optimizer's name does not say it: a control or diagnostic arm (the negative
# control's optimizer is `muon`), or an lr bracket's setting (`periodic@lr_x1.5`).
ARM_TAG = LINEAGE.TRANSFER_ARM


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
    selection: dict[str, Any] = field(default_factory=dict)  # how the choice was made (`_selection_doc`)

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
                "selection_seeds": list(self.spec.seeds), "selection_points": self._points(),
                "selection": dict(self.selection)}

    def _points(self) -> int | None:
        """Settings the sweep tried for its searched arm: its grid, else its budget of sampled points."""
        grid = self.spec.search.grid_size
        return int(grid) if math.isfinite(grid) else self.spec.search.budget


def load_source(workdir: str | Path, tracking_uri: str | None = None) -> _Source:
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
                   searched_arm=spec.search.arm, warnings=list(result.selection.warnings),
                   selection=_selection_doc(result.selection, len(spec.seeds)))


def _selection_doc(selection: Any, seeds: int) -> dict[str, Any]:
    """How the sweep chose, as the transfer's tuning report states it: the objective every trial scored (the
    transfer judges steps to target: equal tuning on the judged quantity is `steps_to_target`), the selection's
    standard error (the pooled seed sd over sqrt(seeds): the noise of one point's mean, the margin the rule
    reads), and the chosen point's winner's curse where fresh seeds confirmed it (confirmed - selected objective,
    relative, and against the controls' shift), else why it is not measured."""
    std = selection.pooled_seed_std
    doc: dict[str, Any] = {"objective": selection.objective, "objective_definition": selection.objective_definition,
                           "target": selection.target, "seeds": seeds, "pooled_seed_std": std,
                           "selection_se": std / math.sqrt(seeds) if std is not None and seeds > 0 else None}
    confirmation = selection.confirmation or {}
    row = (confirmation.get("points") or {}).get(confirmation.get("chosen_before") or selection.point.point_key)
    doc["winners_curse"] = ({k: row.get(k) for k in ("selected_objective", "confirmed_objective", "winners_curse",
                                                     "relative_curse", "controlled_curse")} if row else None)
    if row is None:
        doc["winners_curse_note"] = "not measured: the sweep confirmed no point on fresh seeds (confirm.top 0)"
    return doc


def _rule(lr_rules: Mapping[ArmName, LrRuleName], arm: str, adjust_lr_fn: str | None = None) -> str:
    """The spec's lr rule for `arm` (`lr_rules`), else the arm's default (which follows its `adjust_lr_fn`)."""
    given: dict[str, str] = {str(k): str(v) for k, v in lr_rules.items()}
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
                                           lr_rule=_rule(spec.lr_rules, arm, cfg.get("adjust_lr_fn")),
                                           wd_rule=spec.weight_decay_rule)
            rows.append({"rung": rung, "arm": arm, "width": width, "parameters": parameters, "lr": carried["lr"],
                         "lr_rule": how["lr_rule"], "lr_base": cfg["lr"], "weight_decay": carried["weight_decay"],
                         "weight_decay_rule": how["weight_decay_rule"], "optimizer": carried})
    return rows


def _control_rows(spec: TransferSpec, rows: Sequence[Mapping[str, Any]], searched_arm: str) -> list[dict[str, Any]]:
    """One row per (rung, control or diagnostic): Muon's row at that rung again, under the extra arm's name. The
    controls keep Muon's carried lr and weight decay (the positive control's optimizer is `muon_extra_ns`, the steps
    control's `muon_stretched` with the spec's stretch, the same settings), each control on a data order of its own
    (`control_data_order: other`), so no two controls train one run; the effective-step diagnostic is Muon at the
    searched arm's lr at that rung x (1 + (K - 1) gamma) / K (the searched arm's mean update RMS relative to Muon's
    at the same lr), with the searched arm's weight decay / that factor, so its mean update size and its per-step
    decay lr x wd are the searched arm's."""
    out = []
    muon_rows = [r for r in rows if r["arm"] == "muon"]
    for kind in spec.controls:
        arm = CONTROL_ARMS[kind]
        order = {"order_seed_offset": CONTROL_ORDER_OFFSETS[kind]} if spec.control_data_order == "other" else {}
        stretch = {"stretch": spec.control_stretch} if kind == "steps" else {}
        for row in muon_rows:
            name = "muon" if kind == "negative" else arm
            out.append({**row, "arm": arm, "optimizer": {**row["optimizer"], "name": name, **stretch}, **order})
    for fixed in spec.fixed_arms:
        if searched_arm != "periodic":
            raise TransferError(f"fixed_arms {list(spec.fixed_arms)} fix the periodic arm's K and gamma: the sweep "
                                f"must search periodic, not {searched_arm!r}; allowed: []")
        name, point = FIXED_ARMS[fixed]
        for row in (r for r in rows if r["arm"] == searched_arm):
            out.append({**row, "arm": name, "optimizer": {**row["optimizer"], **point}})
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


def _bracket_rows(lr_brackets: Mapping[ArmName, Sequence[float]],
                  rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per (rung, bracketed arm, multiple other than 1): the arm's row at lr x the multiple, its other
    settings (weight decay included) unchanged, as a sweep's `lr_factors` does, under the arm name
    `<arm>@lr_x<multiple>` (the analysis judges each rung's arm at its best multiple)."""
    out = []
    for arm, factors in lr_brackets.items():
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


@dataclass(frozen=True)
class _Study:
    """What the plan and its sweep share, fixed before any row is carried: the rungs in ladder order, the steps and
    eval steps at each, the study's trial section (one size basis) and seeds, and the base rung's width."""

    rungs: list[str]
    order: list[str]  # every rung of the ladder, smallest first
    horizons: dict[str, int]
    evals_by_rung: dict[str, list[int]]
    study_trial: dict[str, Any]
    batch: int
    seeds: list[int]
    base_width: int

    @property
    def horizon(self) -> int:
        """The sweep's own horizon: the first rung's (its searched point runs there)."""
        return self.horizons[self.rungs[0]]

    def own_horizon(self, rung: str) -> dict[str, Any]:
        """A baseline's horizon and eval steps where its rung's differ from the sweep's own; {} where not."""
        if self.horizons[rung] == self.horizon:
            return {}
        return {"horizon": self.horizons[rung], "eval_steps": self.evals_by_rung[rung]}


def _study(spec: TransferSpec, base: SweepSpec) -> _Study:
    from trials.models import list_rungs

    order = list_rungs()
    rungs = sorted(spec.rung_names or _default_rungs(base.rung), key=order.index)
    fixed_horizon = spec.steps or max(1, round(spec.horizon_factor * base.horizon))
    study_trial = _deep_merge(base.trial, spec.trial)  # one size basis for the study: its trials' own models
    batch = int(study_trial.get("batch_size", 32))
    horizons = {r: rung_horizon(spec.horizon, _rung_shape(r, study_trial)[1], batch, fixed_horizon) for r in rungs}
    if spec.target.rule == "fixed":
        missing = [r for r in rungs if r not in spec.target.values]
        if missing:
            raise TransferError(f"target.values has no value for rungs {missing} (rule 'fixed' needs one per rung)")
    return _Study(rungs=rungs, order=order, horizons=horizons,
                  evals_by_rung={r: _scaled_eval_steps(base.resolved_eval_steps, base.horizon, h)
                                 for r, h in horizons.items()},
                  study_trial=study_trial, batch=batch, seeds=list(spec.seeds or base.seeds),
                  base_width=_rung_shape(base.rung)[0])


def _baselines(study: _Study, rows: Sequence[Mapping[str, Any]], control_rows: Sequence[Mapping[str, Any]],
               bracket_rows: Sequence[Mapping[str, Any]], first: Mapping[str, Any],
               arm_tags: Callable[[Mapping[str, Any]], dict[str, str]]) -> list[dict[str, Any]]:
    """Every (rung, arm) but the searched point as a baseline with its own rung, then the controls' and the lr
    brackets' rows under their arm's name. Largest rungs first: on a few cores the longest runs should start first
    (LPT scheduling)."""
    def largest_first(group: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return sorted(group, key=lambda r: -study.order.index(r["rung"]))

    out = [{"arm": r["arm"], "label": f"{r['arm']}.{r['rung']}", "rung": r["rung"], "optimizer": r["optimizer"],
            "tags": arm_tags(r), **study.own_horizon(r["rung"])}
           for r in largest_first(rows) if r is not first]
    out += [{"arm": r["optimizer"]["name"], "label": f"{r['arm']}.{r['rung']}", "rung": r["rung"],
             "optimizer": r["optimizer"], "tags": {**arm_tags(r), ARM_TAG: r["arm"]},
             **({"order_seed_offset": r["order_seed_offset"]} if "order_seed_offset" in r else {}),
             **study.own_horizon(r["rung"])}
            for r in largest_first(control_rows)]
    out += [{"arm": r["optimizer"]["name"], "label": f"{r['arm'].replace('@', '.')}.{r['rung']}",
             "rung": r["rung"], "optimizer": r["optimizer"], "tags": {**arm_tags(r), ARM_TAG: r["arm"]},
             **study.own_horizon(r["rung"])}
            for r in largest_first(bracket_rows)]
    return out


def _sweep(spec: TransferSpec, source: _Source, study: _Study, transfer_id: str, *, search: dict[str, Any],
           baselines: list[dict[str, Any]]) -> SweepSpec:
    """The one sweep that runs the whole rung x arm table, validated (the only time in this process)."""
    base = source.spec
    tracking = spec.tracking.model_dump(mode="json") if spec.tracking else {
        "tracking_uri": source.tracking_uri, "experiment": source.experiment}
    doc: dict[str, Any] = {
        "name": spec.name,
        "rung": study.rungs[0],
        "horizon": study.horizon,
        "eval_steps": study.evals_by_rung[study.rungs[0]],
        "search": search,
        "seeds": study.seeds,
        "baselines": baselines,
        "execution": (spec.execution or base.execution).model_dump(mode="json"),
        "retries": base.retries.model_dump(mode="json"),
        "backend": base.backend.model_dump(mode="json"),
        "trial": study.study_trial,
        "tracking": tracking,
        "tags": _lineage(spec, source, transfer_id, study.horizons),
    }
    own_workers = {r: spec.rung_workers[r] for r in study.rungs if r in spec.rung_workers}
    if own_workers:  # the rungs that set their own workers; the others run on `execution`'s
        doc["workers_by_rung"] = own_workers
    sweep = validated_sweep(doc)
    wide = {r: sweep.workers_at(r) for r in study.rungs if sweep.workers_at(r) > 1}
    if wide and spec.timing.measured and spec.timing.method == "isolated":  # the spec checks it where it can
        raise TransferError(f"timing.method 'isolated' times one process; rungs {sorted(wide)} run on "
                            f"{sorted(set(wide.values()))} workers, whose step the timing stage times on as many "
                            "ranks: allowed: 'interleaved'")
    return sweep


def _without_optimizer(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "optimizer"} for r in rows]


def _plan_doc(spec: TransferSpec, source: _Source, study: _Study, optimizers: Mapping[str, dict[str, Any]],
              rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The plan's core sections, in the order the plan document lists them."""
    base = source.spec
    plan: dict[str, Any] = {
        "rungs": study.rungs,
        "horizon": study.horizon,
        "source_horizon": base.horizon,
        "eval_steps": study.evals_by_rung[study.rungs[0]],
        "horizons": study.horizons,
        "eval_steps_by_rung": study.evals_by_rung,
        "horizon_rule": spec.horizon.model_dump(mode="json"),
        "target": spec.target.model_dump(mode="json"),
        "target_text": spec.target.describe(),
        "plateau": spec.plateau.model_dump(mode="json"),
        "seeds": study.seeds,
        "arms": list(spec.arms),
        "weight_decay_rule": spec.weight_decay_rule,
        "searched_arm": source.searched_arm,
        "chosen": dict(source.best),
        "size_basis": {"text": size_basis(study.study_trial)[1], "trial": study.study_trial},
        "base": {"rung": base.rung, "width": study.base_width,
                 "parameters": _rung_shape(base.rung, study.study_trial)[1],
                 "optimizers": {a: optimizers[a] for a in spec.arms}},
        "runs": _without_optimizer(rows),
    }
    own_workers = {r: spec.rung_workers[r] for r in study.rungs if r in spec.rung_workers}
    if own_workers:  # rung -> ranks per trial, where a rung sets its own (the others: `execution`'s)
        plan["workers_by_rung"] = own_workers
    return plan


def _extra_sections(spec: TransferSpec, source: _Source, rows: Sequence[Mapping[str, Any]],
                    control_rows: Sequence[Mapping[str, Any]],
                    bracket_rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The plan's sections for the controls, diagnostics and lr brackets, where the spec asks for them."""
    out: dict[str, Any] = {}
    if spec.controls:
        out["controls"] = {kind: {"arm": CONTROL_ARMS[kind], "against": "muon", "data_order": spec.control_data_order,
                                  **({"order_seed_offset": CONTROL_ORDER_OFFSETS[kind]}
                                     if spec.control_data_order == "other" else {}),
                                  **({"stretch": spec.control_stretch,
                                      "expected_steps_ratio": spec.control_stretch / (spec.control_stretch + 1)}
                                     if kind == "steps" else {})}
                           for kind in spec.controls}
    if spec.diagnostics:
        first_searched = next(r for r in rows if r["arm"] == source.searched_arm)["optimizer"]
        out["diagnostics"] = {kind: {"arm": DIAGNOSTIC_ARMS[kind], "against": source.searched_arm,
                                     "reference": "muon", "lr_factor": effective_step_factor(first_searched)}
                              for kind in spec.diagnostics}
    if spec.fixed_arms:
        out["fixed_arms"] = {kind: {"arm": FIXED_ARMS[kind][0], "of": source.searched_arm, **FIXED_ARMS[kind][1]}
                             for kind in spec.fixed_arms}
    if control_rows:
        out["control_runs"] = _without_optimizer(control_rows)
    if spec.lr_brackets:
        out["lr_brackets"] = {arm: list(factors) for arm, factors in spec.lr_brackets.items()}
        out["bracket_runs"] = _without_optimizer(bracket_rows)
    return out


def _plan(spec: TransferSpec, source: _Source, transfer_id: str) -> tuple[TransferPlan, SweepSpec]:
    """(the plan, the typed sweep spec that runs it) for a transfer of `source`: the study's rungs and horizons,
    each (rung, arm) carried by its rules, the one sweep that runs them all, and the plan that records it."""
    if source.searched_arm not in spec.arms:
        raise TransferError(f"arms must include the sweep's searched arm {source.searched_arm!r} (it carries the "
                            f"chosen pair {format_params(source.best)}); got {list(spec.arms)}")
    base = source.spec
    study = _study(spec, base)
    rounds = planned_rounds(spec.rounds, study.rungs, study.seeds, source.searched_arm)
    optimizers = source.base_optimizers()
    rows = _carried_rows(spec, study.rungs, study.study_trial, optimizers, study.base_width)

    def arm_tags(row: Mapping[str, Any]) -> dict[str, str]:
        return {LINEAGE.LR_RULE: row["lr_rule"], LINEAGE.LR_BASE: f"{row['lr_base']:.6g}",
                LINEAGE.WD_RULE: row["weight_decay_rule"],
                LINEAGE.BASE_RUNG: base.rung, LINEAGE.BASE_WIDTH: str(study.base_width)}

    # The chosen pair at the first rung is the sweep's one search point; everything else is a baseline.
    first = next(r for r in rows if r["rung"] == study.rungs[0] and r["arm"] == source.searched_arm)
    space, search_optimizer = _search_point(source.best, first)
    control_rows = _control_rows(spec, rows, source.searched_arm)
    bracket_rows = _bracket_rows(spec.lr_brackets, rows)
    baselines = _baselines(study, rows, control_rows, bracket_rows, first, arm_tags)
    for section, names in (("controls", spec.controls), ("diagnostics", spec.diagnostics)):
        if names and base.backend.name != "builtin":
            raise TransferError(f"{section} {list(names)} cannot be built for the sweep's {base.backend.name!r} "
                                "trainer: their arms are optimizers of the builtin trial; allowed: []")
    _check_timing(spec, study.batch, [*rows, *control_rows])  # a fixed arm's K counts in the blocks too
    verification = None
    if spec.verify is not None:  # the bracket's runs join the one sweep as settings of their own
        try:
            verification, bracket = plan_verification(spec.verify, rungs=study.rungs,
                                                      searched_arm=source.searched_arm, rows=rows,
                                                      baselines=baselines, first=first, arm_tags=arm_tags)
        except ValueError as exc:
            raise TransferError(str(exc)) from None
        baselines += bracket
    search = {"method": "grid", "space": space, "optimizer": search_optimizer, "tags": arm_tags(first)}
    sweep = _sweep(spec, source, study, transfer_id, search=search, baselines=baselines)
    plan = {**_plan_doc(spec, source, study, optimizers, rows),
            **_extra_sections(spec, source, rows, control_rows, bracket_rows)}
    if verification is not None:
        plan["verification"] = verification
    if rounds is not None:
        plan["rounds"] = rounds
    if spec.target.rule == "pilot":
        plan["pilot"] = plan_pilot(spec.target, rungs=study.rungs, seeds=study.seeds, horizons=study.horizons,
                                   rows=rows, study_trial=study.study_trial,
                                   scaled_eval_steps=lambda h: _scaled_eval_steps(base.resolved_eval_steps,
                                                                                  base.horizon, h))
    return TransferPlan.model_validate(plan), sweep
