"""The quality-cost front of a sweep: every scored point's objective against its optimizer cost.

For this optimizer the trade-off is the point of the search: a larger K runs Newton-Schulz less often (cheaper) and
may cost quality. Each scored point is placed on two cost axes, Newton-Schulz calls per step (counted by the
optimizer: 1/K for a periodic point) and the measured optimizer seconds per step (mean over seeds; noisy on a
shared machine), and marked non-dominated on each: no other point is at least as good on both objective and that
cost and strictly better on one. The baselines (AdamW: no Newton-Schulz call; vanilla Muon: one per step) are
drawn beside the points as references, not counted in the front.

Pure functions of the sweep's `PointSummary` records: `quality_cost_front` takes what `load_sweep_result` returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..selection import COSTS, PointSummary, SweepSelection, point_cost

__all__ = ["FrontPoint", "QualityCostFront", "non_dominated", "quality_cost_front"]


# Each cost axis (a key of `COSTS`): the FrontPoint field it reads and the flag that marks its front.
_AXES = {"ns_calls": ("ns_calls_per_step", "on_front_ns"), "optimizer_time": ("optimizer_step_s", "on_front_time")}


def non_dominated(pairs: Sequence[tuple[float, float]]) -> list[bool]:
    """For (objective, cost) pairs, lower both better: True where no other pair is <= on both and < on one."""
    out = []
    for i, (q, c) in enumerate(pairs):
        dominated = any((q2 <= q and c2 <= c) and (q2 < q or c2 < c) for j, (q2, c2) in enumerate(pairs) if j != i)
        out.append(not dominated)
    return out


@dataclass
class FrontPoint:
    """One point (or baseline) on the front's axes."""

    point_key: str
    role: str
    arm: str
    params: dict[str, float | int]
    objective: float
    seed_std: float | None
    n_seeds: int
    ns_calls_per_step: float | None
    optimizer_step_s: float | None
    rel_to_best: float | None = None  # paired mean difference to the best point / best's mean (None: baseline)
    diff_to_best: dict[str, Any] | None = None  # the paired difference itself (mean, interval, n)
    on_front_ns: bool = False  # non-dominated on (objective, Newton-Schulz calls per step)
    on_front_time: bool = False  # non-dominated on (objective, optimizer seconds per step)
    chosen: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class QualityCostFront:
    """A sweep's points on the quality-cost plane, the non-dominated ones marked, the chosen one named."""

    points: list[FrontPoint]
    baselines: list[FrontPoint]
    chosen: str | None
    best: str | None
    rule: str | None  # the rule that chose (the sweep's selection rule)
    notes: list[str] = field(default_factory=list)

    def front(self, cost: str = "ns_calls") -> list[FrontPoint]:
        """The non-dominated points on one cost axis (a key of `COSTS`), cheapest first."""
        if cost not in _AXES:
            raise ValueError(f"cost must be one of {', '.join(_AXES)}, got {cost!r}")
        axis, flag = _AXES[cost]
        return sorted((p for p in self.points if getattr(p, flag)), key=lambda p: (getattr(p, axis), p.objective))

    def to_dict(self) -> dict[str, Any]:
        return {"points": [p.to_dict() for p in self.points], "baselines": [b.to_dict() for b in self.baselines],
                "chosen": self.chosen, "best": self.best, "rule": self.rule, "costs": dict(COSTS),
                "front_ns_calls": [p.point_key for p in self.front("ns_calls")],
                "front_optimizer_time": [p.point_key for p in self.front("optimizer_time")], "notes": self.notes}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> QualityCostFront:
        """Back from `to_dict()` (e.g. a REST answer), to print its `lines()`."""
        fields = set(FrontPoint.__dataclass_fields__)
        return cls(points=[FrontPoint(**{k: v for k, v in p.items() if k in fields}) for p in doc["points"]],
                   baselines=[FrontPoint(**{k: v for k, v in b.items() if k in fields}) for b in doc["baselines"]],
                   chosen=doc.get("chosen"), best=doc.get("best"), rule=doc.get("rule"),
                   notes=list(doc.get("notes") or []))

    def lines(self) -> list[str]:
        """The front as a text table, cheapest first."""
        head = (f"  {'point':<26} {'objective':>10} {'vs best':>9} {'NS/step':>8} {'opt ms/step':>11}  front "
                "(NS, time)")
        out = ["quality-cost front (lower is better on every axis):", head]
        for p in sorted(self.points, key=lambda p: (p.ns_calls_per_step or 0.0, p.objective)):
            rel = "-" if p.rel_to_best is None else f"{100 * p.rel_to_best:+.1f}%"
            ms = "-" if p.optimizer_step_s is None else f"{1000 * p.optimizer_step_s:.2f}"
            ns = "-" if p.ns_calls_per_step is None else f"{p.ns_calls_per_step:.3f}"
            marks = f"{'*' if p.on_front_ns else ' '} {'*' if p.on_front_time else ' '}"
            out.append(f"  {p.point_key:<26} {p.objective:>10.4g} {rel:>9} {ns:>8} {ms:>11}  {marks}"
                       + ("  <- chosen" if p.chosen else ""))
        for b in self.baselines:
            ms = "-" if b.optimizer_step_s is None else f"{1000 * b.optimizer_step_s:.2f}"
            ns = "-" if b.ns_calls_per_step is None else f"{b.ns_calls_per_step:.3f}"
            out.append(f"  {b.point_key:<26} {b.objective:>10.4g} {'':>9} {ns:>8} {ms:>11}  (baseline)")
        out += [f"  note: {n}" for n in self.notes]
        return out


def _place(p: PointSummary) -> FrontPoint:
    return FrontPoint(point_key=p.point_key, role=p.role, arm=p.arm, params=dict(p.params),
                      objective=float(p.objective), seed_std=p.seed_std,  # type: ignore[arg-type]
                      n_seeds=len(p.seed_objectives), ns_calls_per_step=point_cost(p, "ns_calls"),
                      optimizer_step_s=p.optimizer_step_s, diff_to_best=p.diff_to_best)


def quality_cost_front(points: Sequence[PointSummary], baselines: Sequence[PointSummary] = (),
                       selection: SweepSelection | None = None) -> QualityCostFront:
    """The scored points of a sweep on the quality-cost plane (see the module's docstring)."""
    scored = [_place(p) for p in points if p.objective is not None]
    refs = [_place(b) for b in baselines if b.objective is not None]
    notes: list[str] = []
    best = min(scored, key=lambda p: (p.objective, p.point_key)) if scored else None
    for p in scored:
        if best is not None and best.objective:
            mean = p.diff_to_best["mean"] if p.diff_to_best else p.objective - best.objective
            p.rel_to_best = mean / abs(best.objective)
    for axis, flag in _AXES.values():
        placed = [p for p in scored if getattr(p, axis) is not None]
        if len(placed) < len(scored):
            notes.append(f"{len(scored) - len(placed)} point(s) have no recorded {axis}: left off that front")
        for p, keep in zip(placed, non_dominated([(p.objective, getattr(p, axis)) for p in placed]), strict=True):
            setattr(p, flag, keep)
    chosen = selection.point.point_key if selection is not None else None
    for p in scored:
        p.chosen = p.point_key == chosen
    if scored and any(p.optimizer_step_s is not None for p in scored):
        notes.append("optimizer seconds per step are measured on the machine that ran each trial: compare them "
                     "only between trials that ran on the same kind of machine")
    return QualityCostFront(points=scored, baselines=refs, chosen=chosen,
                            best=best.point_key if best is not None else None,
                            rule=selection.rule if selection is not None else None, notes=notes)
