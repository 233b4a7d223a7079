"""Confirmation before the choice is final: the top points run again on fresh seeds (a sweep of their own, in the
work folder's `confirm/`), and the selection rule is applied to those runs alone.

Why: the chosen point's objective on the seeds it was chosen on is biased low (of many noisy points, the one that
drew the luckiest seeds looks best: the winner's curse). Fresh seeds carry no selection, so their objective is an
honest estimate, and the rule applied to them is the choice that a transfer can rely on.

Recorded on the sweep's parent run as the tag `scalesweep.confirmation` (JSON: the confirmation sweep's id and
parent run, its seeds, and every confirmed point's per-seed objectives); `apply_confirmation` turns it into the
final choice when the result is read back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from trials.record import LINEAGE

from ..selection import PointSummary, SweepSelection, compare_with_baselines, runner_up_of, select_points_by_key
from ..specs import SweepSpec

__all__ = ["CONFIRM_TAG", "apply_confirmation", "confirmation_from_tags", "confirmation_spec", "controls_of",
           "top_points"]

CONFIRM_TAG = LINEAGE.CONFIRMATION
_POINT_TAG = LINEAGE.CONFIRM_POINT


def top_points(selection: SweepSelection, top: int) -> list[PointSummary]:
    """The chosen point, then the other scored points by mean objective, `top` in all."""
    rest = [p for p in selection.ranking if p.point_key != selection.point.point_key]
    return [selection.point, *rest][:top]


def controls_of(spec: SweepSpec, selection: SweepSelection) -> list[tuple[str, dict[str, Any]]]:
    """The controls a confirmation re-runs beside the top points: each baseline arm at its best setting on the
    sweep's seeds (lowest objective over its lr variants), as (setting name, optimizer config)."""
    configs = {name: cfg for b in spec.baselines for name, cfg in b.variants()}
    best: dict[str, PointSummary] = {}
    for b in selection.baselines:
        if b.objective is None or b.point_key not in configs:
            continue
        if b.arm not in best or b.objective < best[b.arm].objective:  # type: ignore[operator]
            best[b.arm] = b
    return [(p.point_key, configs[p.point_key]) for _, p in sorted(best.items())]


def confirmation_spec(spec: SweepSpec, points: Sequence[PointSummary], sweep_id: str,
                      controls: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> SweepSpec:
    """The confirmation sweep: the first point as its (single-point) search, the others as baselines of the searched
    arm (labelled top2, top3, ...; tag `scalesweep.confirm_point` names the point), and each control (a baseline
    arm at its best setting, `controls_of`; labelled control-<arm>) on the same fresh seeds, without early stopping
    or a confirmation of its own. The controls measure how the fresh seeds differ from the selecting ones for
    points nobody selected on them: the winner's curse is read against that shift."""
    first, others = points[0], points[1:]
    data = spec.model_dump(mode="json")
    data.update(
        name=f"{spec.name}-confirm"[:64],
        seeds=spec.confirm_seeds,
        search={**data["search"], "method": "grid", "budget": None,
                "space": {k: [v] for k, v in first.params.items()},
                "tags": {**data["search"].get("tags", {}), _POINT_TAG: first.point_key}},
        baselines=[{"arm": spec.search.arm, "label": f"top{i}", "optimizer": spec.search.optimizer_for(p.params),
                    "tags": {**spec.search.tags, _POINT_TAG: p.point_key}}
                   for i, p in enumerate(others, start=2)]
                  + [{"arm": cfg["name"], "label": f"control-{cfg['name']}",
                      "optimizer": {k: v for k, v in cfg.items() if k != "name"}, "tags": {_POINT_TAG: name}}
                     for name, cfg in controls],
        early_stopping={"method": "none"},
        confirm={"top": 0},
        tags={**spec.tags, LINEAGE.CONFIRMS: sweep_id},
    )
    return SweepSpec.model_validate(data)


def apply_confirmation(selection: SweepSelection, doc: Mapping[str, Any], points: Sequence[PointSummary], *,
                       n_boot: int = 2000, seed: int = 0, tie_tolerance: float = 0.01,
                       front: Mapping[str, Any] | None = None) -> None:
    """Make the confirmed choice final on `selection` (in place): the rule on the fresh seeds' objectives of the
    points confirmed on every seed, and per point the selected vs confirmed objective (the winner's curse). `front`
    carries a front rule (`sweeper.selection.front_rule`) to the fresh seeds: the same rule chooses there."""
    by_key = {p.point_key: p for p in points}
    complete = {k: [float(v) for v in vals] for k, vals in doc.get("objectives", {}).items()
                if k in by_key and vals and all(v is not None for v in vals)}
    report: dict[str, Any] = {"seeds": list(doc.get("seeds", [])), "sweep_id": doc.get("sweep_id"),
                              "parent_run_id": doc.get("parent_run_id"), "chosen_before": selection.point.point_key,
                              "points": {}}
    for key, vals in complete.items():
        selected = by_key[key].objective
        confirmed = sum(vals) / len(vals)
        report["points"][key] = {"selected_objective": selected, "confirmed_objective": confirmed,
                                 "winners_curse": None if selected is None else confirmed - selected,
                                 "confirmed_seed_objectives": vals}
    _controls(selection, doc, report)
    if not complete:
        report.update(chosen=selection.point.point_key, final=False,
                      note="no confirmed point finished on every fresh seed: the choice stays the sweep's")
        selection.confirmation = report
        return
    sel = select_points_by_key(complete, {k: (float(by_key[k].params["K"]) if "K" in by_key[k].params else None)
                                          for k in complete},
                               n_boot=n_boot, seed=seed, tie_tolerance=tie_tolerance,
                               tie_break="larger_K" if selection.tie_break == "larger_K" else "none",
                               **(front or {}))
    report.update(chosen=sel.chosen, final=True, rule=sel.rule, p_best=sel.p_best,
                  diff_to_best={k: d.to_dict() for k, d in sel.diff_to_best.items()})
    if sel.chosen != selection.point.point_key:  # everything said about the choice follows it
        selection.point = by_key[sel.chosen]
        selection.rule = f"confirmed on fresh seeds {report['seeds']}: {sel.rule}"
        selection.tied = list(sel.candidates)
        selection.runner_up, selection.gap_abs, selection.gap_rel = runner_up_of(selection.ranking, selection.point)
        selection.vs_baselines, selection.vs_baselines_paired = compare_with_baselines(selection.point,
                                                                                       selection.baselines)
    selection.confirmation = report


def _controls(selection: SweepSelection, doc: Mapping[str, Any], report: dict[str, Any]) -> None:
    """The controls' shift from the selecting seeds to the fresh ones (relative: arms differ in scale), and each
    confirmed point's winner's curse against it: relative curse - the controls' mean relative shift."""
    baselines = {b.point_key: b for b in selection.baselines}
    shifts: dict[str, float] = {}
    report["controls"] = {}
    for name, vals in (doc.get("controls") or {}).items():
        b = baselines.get(name)
        if b is None or b.objective is None or not vals or any(v is None for v in vals):
            continue
        confirmed = sum(vals) / len(vals)
        shifts[name] = confirmed / b.objective - 1.0
        report["controls"][name] = {"selected_objective": b.objective, "confirmed_objective": confirmed,
                                    "relative_shift": shifts[name], "confirmed_seed_objectives": list(vals)}
    if not shifts:
        report["control_note"] = "no control ran on every fresh seed: the winner's curse has no control"
        return
    mean_shift = sum(shifts.values()) / len(shifts)
    report["control_shift"] = mean_shift
    for row in report["points"].values():
        if row["selected_objective"]:
            relative = row["confirmed_objective"] / row["selected_objective"] - 1.0
            row["relative_curse"] = relative
            row["controlled_curse"] = relative - mean_shift


def confirmation_from_tags(tags: Mapping[str, str]) -> dict[str, Any] | None:
    text = tags.get(CONFIRM_TAG)
    if not text:
        return None
    try:
        return dict(json.loads(text))
    except ValueError:
        return None
