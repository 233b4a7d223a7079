"""A sweep's outcome, rebuilt from MLflow: the trials, the points over seeds, the baselines and the selection.

`load_sweep_result` reads only MLflow (and a work folder's `sweep.json` to find the sweep), so it works while a
sweep runs, after it ended, and from any process: the driver itself returns what this function reads back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scaling.claims import MIN_SEEDS_P_BEST, choice_warning, p_best_text

from ..errors import SweepError
from ..jobfiles import STATE_FILE, read_state
from ..ledger import TAG, SweepLedger
from ..selection import (
    PointSummary,
    SweepSelection,
    TrialRecord,
    describe_objective,
    front_rule,
    latest_attempts,
    select_best,
    summarise_points,
)
from ..specs import SelectionSpec
from ._confirm import apply_confirmation, confirmation_from_tags
from ._front import QualityCostFront, quality_cost_front
from ._importance import SweepImportance, sweep_importance

__all__ = ["SweepResult", "load_sweep_result"]


@dataclass
class SweepResult:
    """Everything a sweep measured and chose. FD values are on the trials' feature extractor (see the runs'
    `fd.metric_name` tag); the objective is the mean over seeds of the mean FD at `eval_steps`, or of the steps to a
    declared target (`objective` says which)."""

    sweep_id: str
    name: str
    state: str  # RUNNING | SUCCEEDED | FAILED | CANCELLED
    parent_run_id: str
    tracking_uri: str
    experiment: str
    eval_steps: list[int]
    seeds: list[int]
    selection: SweepSelection | None
    points: list[PointSummary]
    baselines: list[PointSummary]
    trials: list[TrialRecord]
    counts: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    workdir: str | None = None
    objective: str = ""  # the objective in words (`sweeper.selection.describe_objective`); "" = the mean FD

    @property
    def best(self) -> dict[str, float | int] | None:
        """The chosen point's parameters (e.g. {"K": 3, "gamma": 0.15}), or None when nothing was scored."""
        return self.selection.params if self.selection is not None else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def selection_document(self, *, views: bool = False) -> dict[str, Any]:
        """What `selection.json` on the parent run holds; with `views`, also the quality-cost front and the
        parameters' importance (seconds to compute: the driver stores them once, for the report)."""
        doc = self._selection_document()
        if views:
            doc["front"] = self.front().to_dict() if any(p.objective is not None for p in self.points) else None
            try:
                doc["importance"] = self.importance().to_dict()
            except SweepError as exc:  # too few points or nothing searched: said, not drawn
                doc["importance"] = {"error": str(exc)}
        return doc

    def choice_warning(self) -> str | None:
        """Said when the chosen point's mean objective is worse than every baseline arm's (each arm at its best
        setting), significant or not, with the per-seed counts (`scaling.choice_warning`); None otherwise."""
        if self.selection is None:
            return None
        best: dict[str, PointSummary] = {}
        for b in self.baselines:
            if b.objective is not None and (b.arm not in best or b.objective < (best[b.arm].objective or math.inf)):
                best[b.arm] = b
        point = self.selection.point
        warning = choice_warning(point.point_key, point.seed_objectives,
                                 {arm: b.seed_objectives for arm, b in best.items()})
        return warning.text() if warning is not None else None

    def _selection_document(self) -> dict[str, Any]:
        return {
            "sweep_id": self.sweep_id,
            "name": self.name,
            "objective": self.objective_text(),
            "eval_steps": self.eval_steps,
            "seeds": self.seeds,
            "selection": self.selection.to_dict() if self.selection is not None else None,
            "warnings": self.selection.warnings if self.selection is not None else [],
            "choice_warning": self.choice_warning(),
            "points": [p.to_dict() for p in self.points],
            "baselines": [b.to_dict() for b in self.baselines],
            "counts": self.counts,
            "budgets": self.budgets(),
        }

    def objective_text(self) -> str:
        """What chose the point, in words: the mean FD at the eval steps, or the steps to a declared target."""
        return self.objective or describe_objective("mean_fd", eval_steps=self.eval_steps, seeds=self.seeds)

    def budgets(self) -> dict[str, dict[str, int]]:
        """Tuning effort per arm: settings tried (points, or lrs of a baseline) and trials (settings x seeds), so
        a comparison between arms can state what each was given."""
        out: dict[str, dict[str, int]] = {}
        for rec in latest_attempts(self.trials).values():
            arm = out.setdefault(rec.arm, {"settings": 0, "trials": 0})
            arm["trials"] += 1
        for p in [*self.points, *self.baselines]:
            out.setdefault(p.arm, {"settings": 0, "trials": 0})["settings"] += 1
        return out

    def importance(self, *, evaluator: str = "fanova", n_boot: int = 100, seed: int = 0) -> SweepImportance:
        """Which searched parameter mattered (`sweeper.analysis._importance.sweep_importance` on the points)."""
        return sweep_importance(self.points, evaluator=evaluator, n_boot=n_boot, seed=seed)

    def front(self) -> QualityCostFront:
        """The points on the quality-cost plane, non-dominated ones marked (`sweeper.analysis._front`)."""
        return quality_cost_front(self.points, self.baselines, self.selection)

    def table(self) -> str:
        """The rank table, baselines and the choice, as text."""
        said = self.objective or f"mean FD at steps {self.eval_steps}, mean over seeds {self.seeds}"
        lines = [f"sweep {self.name} ({self.sweep_id}): {self.state}; objective = {said}"]
        counts = ", ".join(f"{v} {k.lower()}" for k, v in self.counts.items() if v)
        lines.append(f"trials: {counts or 'none'}")
        header = (f"{'rank':>4}  {'point':<28} {'objective':>10} {'seed std':>9} {'seeds':>5} {'P(best)':>7} "
                  f"{'vs best [95% CI]':>24}  status")
        lines += ["", header, "-" * len(header)]
        few = min((len(p.seed_objectives) for p in self.points if p.p_best is not None), default=MIN_SEEDS_P_BEST)
        ranked = sorted(self.points, key=lambda p: (p.rank is None, p.rank or 0, p.point_key))
        chosen = self.selection.point.point_key if self.selection else None
        for p in ranked:
            lines.append(
                f"{p.rank if p.rank else '-':>4}  {p.point_key:<28} {_num(p.objective):>10} {_num(p.seed_std):>9} "
                f"{len(p.seed_objectives):>5} {_prob(p.p_best, len(p.seed_objectives)):>7} "
                f"{_diff(p.diff_to_best):>24}  "
                f"{p.status}{'  <- chosen' if p.point_key == chosen else ''}"
            )
        if self.baselines:
            lines += ["", "baselines:"]
            for b in self.baselines:
                lines.append(f"{'':>4}  {b.point_key:<28} {_num(b.objective):>10} {_num(b.seed_std):>9} "
                             f"{len(b.seed_objectives):>5}  {b.status}")
        if few < MIN_SEEDS_P_BEST:
            lines.append(f"P(best) withheld (n<5): a paired bootstrap over {few} seeds has too few distinct resamples "
                         f"to state it as a probability (from {MIN_SEEDS_P_BEST} seeds)")
        if self.selection is not None:
            s = self.selection
            on_fresh = " on the confirmation's fresh seeds" if s.choice_confirmed else ""
            seeds = len(s.confirmation["seeds"]) if s.choice_confirmed and s.confirmation else len(
                s.point.seed_objectives)
            p_best = (f", P(best) {p_best_text(s.chosen_p_best, seeds)}{on_fresh}" if s.chosen_p_best is not None
                      else "")
            lines += ["", f"chosen: {s.point.point_key} (objective {_num(s.point.objective)}{p_best}); rule: {s.rule}"]
            warning = self.choice_warning()
            lines += [f"WARNING: {w}" for w in [*([warning] if warning else []), *s.warnings]]
            if s.runner_up is not None:
                lines.append(f"runner-up: {s.runner_up.point_key}, gap {_num(s.gap_abs)} ({s.gap_rel:+.2%})"
                             + (f"; pooled seed std {_num(s.pooled_seed_std)}" if s.pooled_seed_std else ""))
            if len(s.tied) > 1:
                lines.append(f"not told apart from the best: {', '.join(s.tied)}")
            if s.confirmation is not None:
                c = s.confirmation
                lines.append(f"confirmed on fresh seeds {c['seeds']} "
                             "(winner's curse = confirmed - selected objective):")
                for key, row in c["points"].items():
                    curse = row["winners_curse"]
                    controlled = row.get("controlled_curse")
                    lines.append(f"  {key:<28} selected {_num(row['selected_objective'])}, confirmed "
                                 f"{_num(row['confirmed_objective'])}"
                                 + (f", winner's curse {curse:+.4g}" if curse is not None else "")
                                 + (f" ({100 * controlled:+.1f} % beyond the controls' shift)"
                                    if controlled is not None else ""))
                for name, row in (c.get("controls") or {}).items():
                    lines.append(f"  control {name:<20} selected {_num(row['selected_objective'])}, confirmed "
                                 f"{_num(row['confirmed_objective'])} ({100 * row['relative_shift']:+.1f} %: "
                                 "the fresh seeds' shift for a point nobody selected)")
                if c.get("control_note"):
                    lines.append(f"  {c['control_note']}")
                lines.append(f"final choice: {c['chosen']} (before confirmation: {c['chosen_before']})"
                             if c.get("final") else str(c.get("note", "")))
            for name, rel in s.vs_baselines.items():
                pd = s.vs_baselines_paired.get(name)
                lines.append(f"vs {name}: {rel:+.2%} of its mean; paired: "
                             + (pd.describe(s.point.point_key, name, s.unit) if pd is not None else "no common seed"))
        else:
            lines += ["", "no point was scored on every seed yet"]
        budgets = self.budgets()
        if budgets:
            equal = "equal" if len({b["trials"] for b in budgets.values()}) == 1 else "NOT equal"
            lines.append("tuning budget per arm: " + "; ".join(
                f"{arm} {b['settings']} setting(s), {b['trials']} trials" for arm, b in budgets.items())
                + f" ({equal})")
        picked = self.selection
        if picked is not None:
            # the noise of one point's mean objective: the scale a choice between points is made on
            n = len(picked.point.seed_objectives)
            se = picked.pooled_seed_std / math.sqrt(n) if picked.pooled_seed_std and n else None
            lines.append(f"selected on {picked.objective}; selection standard error "
                         + (f"{_num(se)} (pooled seed std / sqrt({n}))" if se is not None else "- (one seed)")
                         + ("" if picked.confirmation else "; winner's curse not measured (no confirmation on fresh "
                                                           "seeds: confirm.top 0)"))
        return "\n".join(lines)


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.4g}"


def _prob(value: float | None, n_seeds: int) -> str:
    """P(best) in the rank table's column: a probability from `MIN_SEEDS_P_BEST` seeds, else "n<5" (a footnote
    says why: `scaling.p_best_text`)."""
    if value is None:
        return "-"
    return f"{value:.2f}" if n_seeds >= MIN_SEEDS_P_BEST else f"n<{MIN_SEEDS_P_BEST}"


def _diff(doc: Mapping[str, Any] | None) -> str:
    """A point's paired difference to the best as '+1.2 [-0.5, +2.9]' (no interval with one seed)."""
    if not doc:
        return "-"
    interval = doc.get("interval")
    if not interval:
        return f"{doc['mean']:+.3g}"
    return f"{doc['mean']:+.3g} [{interval[0]:+.3g}, {interval[1]:+.3g}]"


def count_states(records: list[TrialRecord]) -> dict[str, int]:
    """Trials (not attempts) by the state of the attempt that counts, plus the number of attempts."""
    out = {s: 0 for s in ("SUCCEEDED", "RUNNING", "PENDING", "PRUNED", "FAILED", "CANCELLED")}
    for rec in latest_attempts(records).values():
        out[rec.status] = out.get(rec.status, 0) + 1
    out["attempts"] = len(records)
    return out


def build_result(ledger: SweepLedger, parent: Any, spec: Mapping[str, Any], *, workdir: str | None = None,
                 state: str | None = None) -> SweepResult:
    """A `SweepResult` from the parent run, the stored spec and the child runs."""
    tags = parent.data.tags
    sweep_id = tags[TAG.SWEEP_ID]
    seeds = list(spec.get("seeds", [0]))
    eval_steps = list(spec.get("resolved_eval_steps") or spec.get("eval_steps") or [])
    # The rule the sweep was run with; a field its stored spec predates takes the spec's default.
    rule = SelectionSpec.model_validate(spec.get("selection", {}))
    records = ledger.records(sweep_id)
    records.sort(key=lambda r: (r.role != "baseline", r.trial_key, r.attempt))
    points = summarise_points(records, seeds, "search")
    baselines = summarise_points(records, seeds, "baseline")
    selection = select_best(points, baselines=baselines, **rule.model_dump())
    confirmation = confirmation_from_tags(tags)
    if selection is not None and confirmation is not None:
        apply_confirmation(selection, confirmation, points, n_boot=rule.n_boot, seed=rule.bootstrap_seed,
                           tie_tolerance=rule.tie_tolerance,
                           front=front_rule(points, rule.rule, rule.tolerance, rule.cost))
    timing_keys = ("sweep_wall_s", "fit_wall_s", "trial_wall_s_sum", "ray_init_s", "store_init_s",
                   "overhead_fraction")
    return SweepResult(
        sweep_id=sweep_id,
        name=tags.get(TAG.SWEEP_NAME, ""),
        state=state or tags.get(TAG.STATUS, "RUNNING"),
        parent_run_id=parent.info.run_id,
        tracking_uri=ledger.tracking_uri,
        experiment=ledger.experiment,
        eval_steps=eval_steps,
        seeds=seeds,
        selection=selection,
        points=points,
        baselines=baselines,
        trials=records,
        counts=count_states(records),
        timings={k: parent.data.metrics[k] for k in timing_keys if k in parent.data.metrics},
        workdir=workdir or tags.get(TAG.WORKDIR),
        objective=describe_objective(rule.objective, target=rule.target, curve=rule.curve, seeds=seeds)
        if rule.objective != "mean_fd" else "",
    )


def load_sweep_result(
    sweep: str | Path,
    *,
    tracking_uri: str | None = None,
    experiment: str | None = None,
) -> SweepResult:
    """The result of a sweep, read from MLflow.

    `sweep` is a sweep's work folder (its `sweep.json` names the store and the sweep), or a sweep id, a sweep
    name (its latest sweep) or a parent run id, with `tracking_uri` and `experiment` saying where to look.
    """
    path = Path(sweep)
    state = read_state(path) if path.is_dir() else None
    if state is not None:
        tracking_uri = tracking_uri or state["tracking_uri"]
        experiment = experiment or state["experiment"]
        sweep = state["sweep_id"]
    elif path.is_dir():
        raise SweepError(f"{path} is not a sweep work folder (no {STATE_FILE})")
    if tracking_uri is None:
        raise SweepError("say where the sweep is recorded: a work folder, or tracking_uri (--tracking-uri)")
    from trials import DEFAULT_EXPERIMENT

    ledger = SweepLedger(tracking_uri, experiment or DEFAULT_EXPERIMENT)
    parent = ledger.find_parent(str(sweep))
    spec = ledger.spec_dict(parent.info.run_id)
    return build_result(ledger, parent, spec, workdir=str(path.resolve()) if state is not None else None)
