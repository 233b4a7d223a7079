"""From trial records to points and a winner: pure functions, testable on a few numbers.

A *trial* is one point (or baseline arm) on one seed; a *point* is one setting of the searched parameters over
all seeds. A point's objective is the mean over seeds of each seed's objective (mean FD at the eval steps); it is
scored only when every seed succeeded. The winner is the best-ranked point, except that points within a relative
tie tolerance of the best count as tied and the tie rule then prefers the larger K (fewer Newton-Schulz refreshes,
so cheaper), then the lower objective.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "TRIAL_STATES",
    "PointSummary",
    "Selection",
    "TrialRecord",
    "point_state",
    "select_best",
    "summarise_points",
]

# Trial states (DESIGN.md): CANCELLED = interrupted by the sweep (cancel, lost driver); it resumes on --resume.
TRIAL_STATES = ("PENDING", "RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "CANCELLED")
TrialState = Literal["PENDING", "RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "CANCELLED"]
Role = Literal["search", "baseline"]


@dataclass
class TrialRecord:
    """One attempt of one trial, as recorded in its MLflow run."""

    trial_key: str
    point_key: str
    role: Role
    arm: str
    seed: int
    attempt: int = 0
    status: TrialState = "PENDING"
    params: dict[str, float | int] = field(default_factory=dict)
    diverged: bool = False
    run_id: str | None = None
    objective: float | None = None
    fd: dict[int, float] = field(default_factory=dict)
    steps_done: int = 0
    effective_time_s: float | None = None
    wall_time_s: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PointSummary:
    """One point (or baseline arm) over its seeds."""

    point_key: str
    role: Role
    arm: str
    params: dict[str, float | int]
    status: str  # SUCCEEDED | PRUNED | FAILED | RUNNING (some seeds still to finish)
    objective: float | None = None  # mean over seeds of the seed objectives; None unless every seed succeeded
    seed_objectives: dict[int, float] = field(default_factory=dict)
    seed_std: float | None = None  # sample standard deviation over seeds (None with one seed)
    seed_min: float | None = None
    seed_max: float | None = None
    fd_mean: dict[int, float] = field(default_factory=dict)  # eval step -> mean FD over seeds
    rank: int | None = None
    run_ids: dict[int, str] = field(default_factory=dict)  # seed -> run of the attempt that counts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Selection:
    """The chosen point, how it was chosen, and how clearly."""

    point: PointSummary
    best_by_objective: str
    tied: list[str]
    runner_up: PointSummary | None
    gap_abs: float | None  # runner-up objective minus the chosen one (negative when the tie rule chose a worse one)
    gap_rel: float | None  # gap_abs / chosen objective
    pooled_seed_std: float | None  # sqrt(mean of per-point seed variances), None with one seed
    tie_tolerance: float
    tie_break: str
    rule: str
    ranking: list[PointSummary]
    baselines: list[PointSummary]
    vs_baselines: dict[str, float]  # baseline -> (chosen - baseline) / baseline; negative = chosen is better

    @property
    def params(self) -> dict[str, float | int]:
        return dict(self.point.params)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def point_state(seed_states: Mapping[int, str], seeds: Sequence[int]) -> str:
    """A point's state from its seeds' latest states: any PRUNED -> PRUNED, any FAILED -> FAILED, all SUCCEEDED
    -> SUCCEEDED, otherwise RUNNING (seeds left to run or finish)."""
    states = [seed_states.get(s, "PENDING") for s in seeds]
    if "PRUNED" in states:
        return "PRUNED"
    if "FAILED" in states:
        return "FAILED"
    if all(s == "SUCCEEDED" for s in states):
        return "SUCCEEDED"
    return "RUNNING"


def _latest(records: Iterable[TrialRecord]) -> dict[str, TrialRecord]:
    """The attempt that counts per trial key: a succeeded one when there is one, else the latest."""
    out: dict[str, TrialRecord] = {}
    for rec in sorted(records, key=lambda r: r.attempt):
        prev = out.get(rec.trial_key)
        if prev is None or prev.status != "SUCCEEDED":
            out[rec.trial_key] = rec
    return out


def summarise_points(records: Iterable[TrialRecord], seeds: Sequence[int], role: Role = "search") -> list[PointSummary]:
    """Group trial records of one role into points over `seeds`, in first-seen order."""
    latest = [r for r in _latest(records).values() if r.role == role]
    by_point: dict[str, list[TrialRecord]] = {}
    for rec in latest:
        by_point.setdefault(rec.point_key, []).append(rec)
    points = []
    for key, recs in by_point.items():
        states = {r.seed: r.status for r in recs}
        summary = PointSummary(
            point_key=key,
            role=role,
            arm=recs[0].arm,
            params=dict(recs[0].params),
            status=point_state(states, seeds),
            run_ids={r.seed: r.run_id for r in recs if r.run_id},
        )
        done = {r.seed: r for r in recs if r.status == "SUCCEEDED" and r.objective is not None}
        summary.seed_objectives = {s: float(done[s].objective) for s in sorted(done)}  # type: ignore[arg-type]
        values = list(summary.seed_objectives.values())
        if values:
            summary.seed_min, summary.seed_max = min(values), max(values)
            summary.seed_std = statistics.stdev(values) if len(values) > 1 else None
            steps = sorted({s for r in done.values() for s in r.fd})
            summary.fd_mean = {
                s: statistics.fmean(r.fd[s] for r in done.values() if s in r.fd) for s in steps
            }
        if summary.status == "SUCCEEDED" and values:
            summary.objective = statistics.fmean(values)
        points.append(summary)
    return points


def select_best(
    points: Sequence[PointSummary],
    *,
    tie_tolerance: float = 0.01,
    tie_break: str = "larger_K",
    baselines: Sequence[PointSummary] = (),
) -> Selection | None:
    """Rank the scored points (lower objective first) and choose one; None when no point was scored."""
    value = {p.point_key: float(p.objective) for p in points if p.objective is not None}
    scored = sorted((p for p in points if p.point_key in value), key=lambda p: (value[p.point_key], p.point_key))
    if not scored:
        return None
    for rank, p in enumerate(scored, start=1):
        p.rank = rank
    best = scored[0]
    limit = value[best.point_key] + tie_tolerance * abs(value[best.point_key])
    tied = [p for p in scored if value[p.point_key] <= limit]
    chosen = best
    rule = f"lowest objective; points within {tie_tolerance:.1%} of it are tied"
    if tie_break == "larger_K" and all("K" in p.params for p in tied):
        chosen = min(tied, key=lambda p: (-p.params["K"], value[p.point_key], p.point_key))
        rule += ", and among tied points the larger K wins (cheaper), then the lower objective"
    else:
        rule += ", and among tied points the lower objective wins"
    runner_up = next((p for p in scored if p is not chosen), None)
    gap_abs = gap_rel = None
    if runner_up is not None:
        gap_abs = value[runner_up.point_key] - value[chosen.point_key]
        gap_rel = gap_abs / value[chosen.point_key] if value[chosen.point_key] else math.inf
    variances = [p.seed_std**2 for p in scored if p.seed_std is not None]
    pooled = math.sqrt(statistics.fmean(variances)) if variances else None
    vs = {b.point_key: (value[chosen.point_key] - b.objective) / b.objective for b in baselines if b.objective}
    return Selection(
        point=chosen,
        best_by_objective=best.point_key,
        tied=[p.point_key for p in tied],
        runner_up=runner_up,
        gap_abs=gap_abs,
        gap_rel=gap_rel,
        pooled_seed_std=pooled,
        tie_tolerance=tie_tolerance,
        tie_break=tie_break,
        rule=rule,
        ranking=list(scored),
        baselines=list(baselines),
        vs_baselines=vs,
    )
