"""From trial records to points and a winner: pure functions, testable on a few numbers.

A *trial* is one point (or baseline arm) on one seed; a *point* is one setting of the searched parameters over
all seeds. A point's objective is the mean over seeds of each seed's objective (mean FD at the eval steps, or the
steps to a declared FD target: `_objective`); it is scored only when every seed succeeded. The winner follows
`select_point`'s rule (`_rule`): among the points whose paired mean difference to the lowest-mean point is within
one pooled standard error (with one seed: within a relative tie tolerance), the larger K (fewer Newton-Schulz
refreshes, so cheaper), then the lower objective. Every point carries its probability of being best (paired
bootstrap over seeds) and its paired difference to the best.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from scaling.stats import PairedDifference, paired_difference
from trials.record import STATES

from ._objective import describe_objective, is_censored
from ._rule import Selection, select_points_by_key

__all__ = [
    "COSTS",
    "TRIAL_STATES",
    "PointSummary",
    "SweepSelection",
    "TrialRecord",
    "compare_with_baselines",
    "front_rule",
    "latest_attempts",
    "point_cost",
    "point_state",
    "runner_up_of",
    "select_best",
    "summarise_points",
]

# Trial states (`trials.record.STATES`): CANCELLED = interrupted by the sweep (cancel, lost driver); it resumes on
# --resume.
TRIAL_STATES = STATES
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
    metric_name: str | None = None  # what the FD was computed on (the run's fd.metric_name tag), e.g. fd_pixels
    optimizer_step_time_s: float | None = None  # measured optimizer time per step, at the run's last eval step
    ns5_calls: float | None = None  # Newton-Schulz orthogonalisations the optimizer ran, at the last eval step
    rank_restarts: int = 0  # restarts of a multi-worker trial's rank group after a lost rank (RUNNING meanwhile)

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
    p_best: float | None = None  # probability of being best (paired bootstrap over seeds); None unless scored
    diff_to_best: dict[str, Any] | None = None  # paired difference to the lowest-mean point (PairedDifference)
    # Its optimizer cost, means over the seeds that finished: measured seconds per optimizer step, and
    # Newton-Schulz calls per step (1/K for a periodic point, 1 for vanilla Muon, 0 for AdamW). None when unrecorded.
    optimizer_step_s: float | None = None
    ns_calls_per_step: float | None = None
    seed_steps: dict[int, int] = field(default_factory=dict)  # seed -> steps its counted run trained
    # Objective steps_to_target: the seeds that never reached the target (scored horizon x final / target, an "at
    # least the horizon", not a measured crossing); None under the mean-FD objective.
    censored_seeds: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SweepSelection:
    """The chosen point of a sweep, how it was chosen, and how clearly (`uncertainty`: `select_point`'s outcome)."""

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
    uncertainty: Selection | None = None
    # baseline -> chosen - baseline per seed (common seeds), mean, interval, n: the claim the sweep can make
    vs_baselines_paired: dict[str, PairedDifference] = field(default_factory=dict)
    # the top points re-run on fresh seeds (the confirmation): selected vs confirmed objective, the final choice
    confirmation: dict[str, Any] | None = None
    # What each trial scored (`sweeper.specs.SelectionSpec.objective`): mean_fd, or steps_to_target with its
    # target and curve; `objective_definition` says it in words.
    objective: str = "mean_fd"
    target: float | None = None
    curve: str | None = None
    objective_definition: str = ""

    @property
    def unit(self) -> str:
        """What the objective's numbers are, for the sentences that state a difference."""
        return "steps to target" if self.objective == "steps_to_target" else "FD"

    @property
    def params(self) -> dict[str, float | int]:
        return dict(self.point.params)

    @property
    def p_best(self) -> dict[str, float]:
        """Point key -> probability of being best (empty without an uncertainty record)."""
        return dict(self.uncertainty.p_best) if self.uncertainty is not None else {}

    @property
    def choice_confirmed(self) -> bool:
        """Whether a confirmation on fresh seeds made the choice final."""
        return self.confirmation is not None and bool(self.confirmation.get("final"))

    @property
    def chosen_p_best(self) -> float | None:
        """The chosen point's probability of being best, from the runs that made the choice: the confirmation's
        fresh seeds when a confirmation made it final, else the sweep's own seeds."""
        if self.choice_confirmed and self.confirmation is not None:
            return self.confirmation["p_best"].get(self.point.point_key)
        return self.p_best.get(self.point.point_key)

    @property
    def loses_to(self) -> list[str]:
        """Baselines the chosen point is worse than with confidence: the paired interval of chosen - baseline lies
        entirely above zero (lower objective is better)."""
        return [name for name, d in self.vs_baselines_paired.items()
                if d.interval is not None and d.interval[0] > 0]

    @property
    def warnings(self) -> list[str]:
        """What a reader of the choice must see beside it: one line per baseline the chosen point loses to."""
        lines = [f"the chosen point is worse than {name} with confidence: "
                 f"{self.vs_baselines_paired[name].describe('chosen', name, self.unit)}; the grid may lie outside the "
                 "useful range (e.g. its lr)" for name in self.loses_to]
        censored = self.point.censored_seeds
        if censored:
            lines.append(f"the chosen point did not reach {self.curve} <= {self.target:g} on {len(censored)} of "
                         f"{len(self.point.seed_objectives)} seeds ({censored}): each counts as horizon x final / "
                         "target, a lower bound on its steps, not a measured crossing")
        return lines

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["loses_to"] = self.loses_to
        out["warnings"] = self.warnings
        out["uncertainty"] = self.uncertainty.to_dict() if self.uncertainty is not None else None
        out["vs_baselines_paired"] = {k: v.to_dict() for k, v in self.vs_baselines_paired.items()}
        return out


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


def latest_attempts(records: Iterable[TrialRecord]) -> dict[str, TrialRecord]:
    """The attempt that counts per trial key: a succeeded one when there is one, else the latest."""
    out: dict[str, TrialRecord] = {}
    for rec in sorted(records, key=lambda r: r.attempt):
        prev = out.get(rec.trial_key)
        if prev is None or prev.status != "SUCCEEDED":
            out[rec.trial_key] = rec
    return out


def summarise_points(records: Iterable[TrialRecord], seeds: Sequence[int], role: Role = "search") -> list[PointSummary]:
    """Group trial records of one role into points over `seeds`, in first-seen order."""
    latest = [r for r in latest_attempts(records).values() if r.role == role]
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
        times = [r.optimizer_step_time_s for r in done.values() if r.optimizer_step_time_s is not None]
        calls = [r.ns5_calls / r.steps_done for r in done.values() if r.ns5_calls is not None and r.steps_done]
        summary.optimizer_step_s = statistics.fmean(times) if times else None
        summary.seed_steps = {s: done[s].steps_done for s in sorted(done)}
        summary.ns_calls_per_step = statistics.fmean(calls) if calls else None
        points.append(summary)
    return points


def compare_with_baselines(
    chosen: PointSummary, baselines: Sequence[PointSummary]
) -> tuple[dict[str, float], dict[str, PairedDifference]]:
    """(relative difference of the means, paired difference over common seeds) of `chosen` against each baseline."""
    vs = {b.point_key: (float(chosen.objective) - b.objective) / b.objective
          for b in baselines if b.objective and chosen.objective is not None}
    paired: dict[str, PairedDifference] = {}
    for b in baselines:
        common = sorted(set(b.seed_objectives) & set(chosen.seed_objectives))
        if common:
            paired[b.point_key] = paired_difference([chosen.seed_objectives[s] for s in common],
                                                    [b.seed_objectives[s] for s in common])
    return vs, paired


def runner_up_of(
    ranking: Sequence[PointSummary], chosen: PointSummary
) -> tuple[PointSummary | None, float | None, float | None]:
    """(runner-up, its objective minus the chosen one's, that gap relative to the chosen objective): the best-ranked
    scored point other than the chosen one."""
    runner_up = next((p for p in ranking if p is not chosen and p.objective is not None), None)
    if runner_up is None or chosen.objective is None:
        return runner_up, None, None
    gap_abs = float(runner_up.objective) - float(chosen.objective)  # type: ignore[arg-type]
    return runner_up, gap_abs, gap_abs / chosen.objective if chosen.objective else math.inf


COSTS = {"ns_calls": "Newton-Schulz calls per step", "optimizer_time": "measured optimizer seconds per step"}


def point_cost(point: PointSummary, cost: str) -> float | None:
    """A point's optimizer cost on the front's axis `cost` (a key of `COSTS`)."""
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {', '.join(COSTS)}, got {cost!r}")
    if cost == "optimizer_time":
        return point.optimizer_step_s
    if point.ns_calls_per_step is not None:
        return point.ns_calls_per_step
    k = point.params.get("K")
    return 1.0 / float(k) if k else None  # a periodic point refreshes every K steps


def front_rule(points: Sequence[PointSummary], rule: str, tolerance: float, cost: str) -> dict[str, Any]:
    """The arguments that carry a selection rule to `select_points_by_key`."""
    if rule == "one_se":
        return {}
    return {"rule": rule, "tolerance": tolerance, "cost": {p.point_key: point_cost(p, cost) for p in points},
            "cost_name": COSTS[cost]}


def select_best(
    points: Sequence[PointSummary],
    *,
    tie_tolerance: float = 0.01,
    tie_break: str = "larger_K",
    baselines: Sequence[PointSummary] = (),
    n_boot: int = 2000,
    bootstrap_seed: int = 0,
    rule: Literal["one_se", "cheapest_within"] = "one_se",
    tolerance: float = 0.03,
    cost: Literal["ns_calls", "optimizer_time"] = "ns_calls",
    objective: Literal["mean_fd", "steps_to_target"] = "mean_fd",
    target: float | None = None,
    curve: Literal["fd_track", "fd"] = "fd_track",
) -> SweepSelection | None:
    """Rank the scored points (lower objective first) and choose one by `select_point`'s rule (or, with
    `rule="cheapest_within"`, the cheapest point by `cost` within `tolerance` of the best); None when no point was
    scored. Scored points succeeded on every seed, so their per-seed objectives align by seed, and every rule
    compares them paired by seed whatever the `objective` they hold (`_objective`: under `steps_to_target` each
    point and baseline also counts its censored seeds)."""
    if objective == "steps_to_target":
        for p in [*points, *baselines]:
            p.censored_seeds = sorted(s for s, v in p.seed_objectives.items()
                                      if s in p.seed_steps and is_censored(v, p.seed_steps[s]))
    value = {p.point_key: float(p.objective) for p in points if p.objective is not None}
    scored = sorted((p for p in points if p.point_key in value), key=lambda p: (value[p.point_key], p.point_key))
    if not scored:
        return None
    for rank, p in enumerate(scored, start=1):
        p.rank = rank
    seeds = sorted(set.intersection(*(set(p.seed_objectives) for p in scored)))
    uncertainty = None
    if seeds:
        uncertainty = select_points_by_key(
            {p.point_key: [p.seed_objectives[s] for s in seeds] for p in scored},
            {p.point_key: (float(p.params["K"]) if "K" in p.params else None) for p in scored},
            n_boot=n_boot, seed=bootstrap_seed, tie_tolerance=tie_tolerance,
            tie_break="larger_K" if tie_break == "larger_K" else "none",
            **front_rule(scored, rule, tolerance, cost),
        )
        for p in scored:
            p.p_best = uncertainty.p_best[p.point_key]
            p.diff_to_best = uncertainty.diff_to_best[p.point_key].to_dict()
    best = scored[0]
    by_key = {p.point_key: p for p in scored}
    chosen = by_key[uncertainty.chosen] if uncertainty is not None else best
    tied = [by_key[k] for k in uncertainty.candidates] if uncertainty is not None else [best]
    said = uncertainty.rule if uncertainty is not None else "lowest objective"
    runner_up, gap_abs, gap_rel = runner_up_of(scored, chosen)
    variances = [p.seed_std**2 for p in scored if p.seed_std is not None]
    pooled = math.sqrt(statistics.fmean(variances)) if variances else None
    vs, paired = compare_with_baselines(chosen, baselines)
    return SweepSelection(
        point=chosen,
        best_by_objective=best.point_key,
        tied=[p.point_key for p in tied],
        runner_up=runner_up,
        gap_abs=gap_abs,
        gap_rel=gap_rel,
        pooled_seed_std=pooled,
        tie_tolerance=tie_tolerance,
        tie_break=tie_break,
        rule=said,
        ranking=list(scored),
        baselines=list(baselines),
        vs_baselines=vs,
        uncertainty=uncertainty,
        vs_baselines_paired=paired,
        objective=objective,
        target=target if objective == "steps_to_target" else None,
        curve=curve if objective == "steps_to_target" else None,
        objective_definition=describe_objective(objective, target=target, curve=curve),
    )
