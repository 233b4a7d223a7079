"""Two sweeps side by side: their points lined up, objectives, chosen pairs, and paired differences where seeds match.

The usual questions: the same grid on two rungs (does the choice move?), or before and after a code change (did
anything move beyond seed noise?). Points are matched by their key (`K=3,gamma=0.15`; a baseline by its label).
Where both sweeps ran a point on the same seed numbers, the difference is paired over those seeds (B - A, per
seed: the seed fixes the initialisation and the data order, so the seed's own luck cancels) with a Student-t
interval; where they share no seed, only the difference of means is given, labelled unpaired.

A comparison is only meaningful when both objectives are the same quantity: the eval steps and the FD's feature
space are compared and a difference is stated as a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from scaling.stats import paired_difference

from ..selection import PointSummary

if TYPE_CHECKING:
    from ._result import SweepResult

__all__ = ["ComparedPoint", "SweepComparison", "compare_sweeps"]


@dataclass
class ComparedPoint:
    """One point in both sweeps (or in one only)."""

    point_key: str
    role: str
    objective_a: float | None
    objective_b: float | None
    rank_a: int | None
    rank_b: int | None
    difference: float | None  # B - A, the mean objectives' difference (None unless both scored)
    paired: dict[str, Any] | None = None  # B - A per common seed: mean, sd, se, interval, n
    common_seeds: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepComparison:
    """Sweep A against sweep B (differences are B - A; lower objective is better, so negative: B is better)."""

    a: dict[str, Any]  # sweep id, name, state, eval steps, seeds, chosen point, metric
    b: dict[str, Any]
    points: list[ComparedPoint]
    same_choice: bool | None  # None when either sweep has no choice yet
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> SweepComparison:
        """Back from `to_dict()` (e.g. a REST answer), to print its `lines()`."""
        return cls(a=dict(doc["a"]), b=dict(doc["b"]), points=[ComparedPoint(**p) for p in doc["points"]],
                   same_choice=doc.get("same_choice"), warnings=list(doc.get("warnings") or []))

    def lines(self) -> list[str]:
        """The comparison as a text table."""
        out = [f"A: {self.a['name']} ({self.a['sweep_id']}), chosen {self.a['chosen']}",
               f"B: {self.b['name']} ({self.b['sweep_id']}), chosen {self.b['chosen']}"
               + ("  (the same choice)" if self.same_choice else ""),
               f"  {'point':<28} {'A':>10} {'B':>10} {'B - A':>10}  paired over common seeds"]
        for p in self.points:
            paired = "-"
            if p.paired is not None:
                iv = p.paired.get("interval")
                paired = (f"{p.paired['mean']:+.4g} [{iv[0]:+.4g}, {iv[1]:+.4g}], n={p.paired['n']}" if iv
                          else f"{p.paired['mean']:+.4g}, n=1 (one run)")
            elif p.difference is not None:
                paired = "no common seed: unpaired"
            out.append(f"  {p.point_key:<28} {_num(p.objective_a):>10} {_num(p.objective_b):>10} "
                       f"{'-' if p.difference is None else f'{p.difference:+.4g}':>10}  {paired}")
        out += [f"WARNING: {w}" for w in self.warnings]
        return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _side(result: SweepResult) -> dict[str, Any]:
    metrics = sorted({t.metric_name for t in result.trials if t.metric_name})
    return {"sweep_id": result.sweep_id, "name": result.name, "state": result.state,
            "parent_run_id": result.parent_run_id, "eval_steps": list(result.eval_steps),
            "seeds": list(result.seeds), "metric": metrics,
            "chosen": result.selection.point.point_key if result.selection is not None else None}


def _pair(a: PointSummary | None, b: PointSummary | None, role: str, key: str) -> ComparedPoint:
    obj_a = a.objective if a is not None else None
    obj_b = b.objective if b is not None else None
    row = ComparedPoint(point_key=key, role=role, objective_a=obj_a, objective_b=obj_b,
                        rank_a=a.rank if a is not None else None, rank_b=b.rank if b is not None else None,
                        difference=(obj_b - obj_a) if obj_a is not None and obj_b is not None else None)
    if a is not None and b is not None:
        common = sorted(set(a.seed_objectives) & set(b.seed_objectives))
        row.common_seeds = common
        if common:
            row.paired = paired_difference([b.seed_objectives[s] for s in common],
                                           [a.seed_objectives[s] for s in common]).to_dict()
    return row


def compare_sweeps(a: SweepResult, b: SweepResult) -> SweepComparison:
    """Sweep `a` against sweep `b`, point by point (see the module's docstring)."""
    side_a, side_b = _side(a), _side(b)
    warnings = []
    if side_a["eval_steps"] != side_b["eval_steps"]:
        warnings.append(f"the objectives average FD at different eval steps (A {side_a['eval_steps']}, B "
                        f"{side_b['eval_steps']}): their values are not the same quantity")
    if side_a["metric"] and side_b["metric"] and side_a["metric"] != side_b["metric"]:
        warnings.append(f"the FDs are on different feature spaces (A {side_a['metric']}, B {side_b['metric']})")
    rows = []
    for role, pa, pb in (("search", a.points, b.points), ("baseline", a.baselines, b.baselines)):
        by_a = {p.point_key: p for p in pa}
        by_b = {p.point_key: p for p in pb}
        keys = list(by_a) + [k for k in by_b if k not in by_a]
        rows += [_pair(by_a.get(k), by_b.get(k), role, k) for k in keys]
    if not any(r.difference is not None for r in rows):
        warnings.append("no point was scored in both sweeps: nothing to compare")
    same = (side_a["chosen"] == side_b["chosen"]) if side_a["chosen"] and side_b["chosen"] else None
    return SweepComparison(a=side_a, b=side_b, points=rows, same_choice=same, warnings=warnings)
