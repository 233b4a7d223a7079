"""A job priced before it runs: its stages, the machine-hours they take on this machine, each trial's memory and the
smallest saving its seeds can detect (`JobEstimate`), or a refusal naming the rung and the figure.

A stage is a group of like trials (`PlanStage`: one rung, one arm, how many, their steps and evaluations). Its
trial costs the calibration's setup + steps x step + evaluations x evaluation (`_calibration`, measured per rung
and trial shape, cached). The stages run in phases (a transfer's pilot, then its timing, then its runs; a sweep's
search and baselines, then its confirmation); within a phase the trials are packed largest first on the job's
trial slots (its concurrency, else the CPUs it is given over the CPUs per trial), so a phase takes its makespan.
Each slot's worker starts once a phase (its imports: `worker_start`, measured once per machine). The driver's own
time (Ray's start, MLflow's parent run, the selection, the finish stage's figures) and each trial's on a started
worker (a Tune step, its MLflow child run) are fixed overheads, measured on this project's 2-core machine
(docs/benchmarks.md, "The planner's calibration"). Machine-hours are the job's estimated wall-clock hours on this
machine, the whole machine counted.

Refused (a `SweepError`, one line): a trial whose modelled memory (`trial_memory`) exceeds this machine's
available memory, and an estimate over a stated budget of hours.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SweepError
from ._calibration import StepCost, machine, step_cost, worker_start
from ._memory import TrialMemory, trial_memory

__all__ = ["JOB_OVERHEAD_PER_START", "JOB_OVERHEAD_S", "TRIAL_OVERHEAD_S", "UNKNOWN_DETECTABLE", "JobEstimate",
           "PlanStage", "available_memory", "check_budget", "detectable_saving", "estimate_job", "job_slots",
           "sweep_estimate", "sweep_stages"]

# The driver's own time (its start and MLflow store, Ray's start, the finish stage's selection and figures) is
# process starts and imports, so it moves with the machine's load as a worker's start does: JOB_OVERHEAD_S +
# JOB_OVERHEAD_PER_START x the measured worker start. Two tiny sweeps on the 2-core Xeon (docs/benchmarks.md, "The
# planner's calibration"), one run each: under load 8 a worker's start was about 20 s and the driver's time 24 s;
# on the quiet machine 4.5 s and about 10.5 s. A trial's own overhead on a started worker (a Tune step, its MLflow
# child run): about 1 s.
JOB_OVERHEAD_S = 6.6
JOB_OVERHEAD_PER_START = 0.87
TRIAL_OVERHEAD_S = 1.0
UNKNOWN_DETECTABLE = "unknown until a pilot"
DEFAULT_ALPHA = 0.05  # the transfer's claims use it where the spec sets no rounds.alpha


@dataclass(frozen=True)
class PlanStage:
    """`trials` like trials of one stage: at `rung`, arm `arm`, each `steps` training steps, `evals` full and
    `tracks` tracking evaluations; `trial` is one of them (a TrialConfig mapping: its shape is what is priced).
    `phase` orders the stages (a phase starts when the one before ended); `slots`, where set, caps the trials of
    the stage at once (the timing stage runs one process at a time)."""

    stage: str
    rung: str
    arm: str
    trials: int
    steps: int
    evals: int
    tracks: int
    trial: dict[str, Any]
    phase: int = 1
    slots: int | None = None
    in_ray: bool = True  # a trial on a Ray worker (False: run by the driver itself, as the timing stage is)

    @classmethod
    def of(cls, stage: str, arm: str, trials: int, trial: dict[str, Any], phase: int = 1,
           slots: int | None = None, in_ray: bool = True) -> PlanStage:
        """A stage of `trials` trials like `trial` (a TrialConfig mapping): its steps and evaluations counted as the
        trial runs them (a tracking point at an eval step costs nothing where it reuses the full evaluation's
        images: as many sampler steps, no more images)."""
        from trials import TrialConfig

        cfg = TrialConfig.model_validate(trial)
        evals, tracks = set(cfg.resolved_eval_steps), set(cfg.resolved_track_steps)
        if cfg.eval.track_sample_steps == cfg.eval.sample_steps:
            tracks -= evals
        return cls(stage, cfg.rung, arm, trials, cfg.steps, len(evals), len(tracks), trial, phase, slots, in_ray)


@dataclass
class JobEstimate:
    """A job's plan priced on this machine (see the module's docstring)."""

    kind: str
    name: str
    stages: list[PlanStage]
    costs: dict[str, StepCost | None]  # calibration key -> cost (None: not measurable: an external trainer)
    stage_keys: list[str]
    slots: int
    wall_s: float | None
    memory: dict[str, TrialMemory]  # rung -> the largest trial's estimate there (modelled)
    available_bytes: int | None
    detectable: list[str]
    seeds: int
    alpha: float
    machine: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # rungs with no cached calibration (measure off)
    worker_start_s: float | None = None  # a trial worker's start, once per slot and phase (`worker_start`)
    worker_start_source: str | None = None
    job_overhead_s: float = JOB_OVERHEAD_S  # the driver's own time (a transfer's adds reading its source sweep)
    builtin: bool = True  # False: a command trainer, which is not timed here

    @property
    def machine_hours(self) -> float | None:
        return None if self.wall_s is None else self.wall_s / 3600

    def stage_seconds(self, i: int) -> float | None:
        """One trial of stage `i`, overhead included."""
        s, cost = self.stages[i], self.costs[self.stage_keys[i]]
        return None if cost is None else TRIAL_OVERHEAD_S + cost.trial_s(s.steps, s.evals, s.tracks)

    def rung_hours(self) -> dict[str, float]:
        """Trial-hours by rung (one trial at a time): where the time goes."""
        out: dict[str, float] = {}
        for i, s in enumerate(self.stages):
            one = self.stage_seconds(i)
            if one is not None:
                out[s.rung] = out.get(s.rung, 0.0) + s.trials * one / 3600
        return out

    def to_dict(self) -> dict[str, Any]:
        stages = []
        for i, s in enumerate(self.stages):
            cost = self.costs[self.stage_keys[i]]
            stages.append({"stage": s.stage, "rung": s.rung, "arm": s.arm, "trials": s.trials, "steps": s.steps,
                           "evals": s.evals, "tracks": s.tracks, "phase": s.phase,
                           "trial_s": self.stage_seconds(i), "cost_source": cost.source if cost else None})
        return {
            "kind": self.kind, "name": self.name, "machine": self.machine, "slots": self.slots,
            "trials": sum(s.trials for s in self.stages), "steps": sum(s.trials * s.steps for s in self.stages),
            "estimated_wall_s": self.wall_s, "machine_hours": self.machine_hours,
            "overheads_s": {"job": self.job_overhead_s, "trial": TRIAL_OVERHEAD_S, "worker_start": self.worker_start_s,
                            "worker_start_source": self.worker_start_source},
            "stages": stages,
            "calibration": {k: (c.to_dict() if c else None) for k, c in self.costs.items()},
            "memory": {r: {**m._asdict(), "how": "modelled"} for r, m in self.memory.items()},
            "available_memory_bytes": self.available_bytes,
            "detectable_saving": self.detectable, "seeds": self.seeds, "alpha": self.alpha,
            "no_estimate": self.no_estimate(),
        }

    def no_estimate(self) -> str | None:
        """Why there is no machine-hours figure, or None when there is one."""
        if not self.builtin:
            return "the command backend's trainer is not timed here"
        if self.missing:
            return (f"no cached calibration for {', '.join(self.missing)}: `scalesweep {self.kind} plan SPEC` "
                    "measures it")
        return None

    def lines(self) -> list[str]:
        """The plan as text: stages, costs and their sources, memory, the detectable saving."""
        m = self.machine
        out = [f"{self.kind} {self.name}: {sum(s.trials for s in self.stages)} trials, "
               f"{sum(s.trials * s.steps for s in self.stages):,} training steps, {self.slots} at once "
               f"on this machine ({m.get('cpu')}, {m.get('cores')} cores, torch {m.get('torch')})",
               f"  {'stage':<10} {'rung':<10} {'arm':<20} {'trials':>6} {'steps':>6} {'evals':>5} {'tracks':>6} "
               f"{'s/trial':>8}"]
        for i, s in enumerate(self.stages):
            one = self.stage_seconds(i)
            out.append(f"  {s.stage:<10} {s.rung:<10} {s.arm:<20} {s.trials:>6} {s.steps:>6} {s.evals:>5} "
                       f"{s.tracks:>6} {'-' if one is None else f'{one:.1f}':>8}")
        out.append("step costs:")
        for key, cost in self.costs.items():
            if cost is None:
                out.append(f"  {key}: none ({self.no_estimate()})")
                continue
            out.append(f"  {cost.rung} ({cost.shape.get('optimizer')}, batch {cost.shape.get('batch_size')}, "
                       f"{cost.shape.get('image_size')}px): step {cost.step_s * 1000:.1f} ms, evaluation "
                       f"{cost.eval_s:.2f} s, tracking evaluation {cost.track_s:.2f} s (modelled), setup "
                       f"{cost.setup_s:.2f} s; {cost.source}"
                       + (f" (measured {cost.measured_at})" if cost.source == "cache" else ""))
        if self.worker_start_s is not None:
            out.append(f"  a trial worker's start: {self.worker_start_s:.1f} s (once per slot); "
                       f"{self.worker_start_source}")
        if self.wall_s is None:
            out.append(f"estimate: none ({self.no_estimate()})")
        else:
            by_rung = ", ".join(f"{r} {h:.3f}" for r, h in self.rung_hours().items())
            out.append(f"estimate: {self.machine_hours:.3f} machine-hours ({self.wall_s:.0f} s wall on this machine, "
                       f"overheads {self.job_overhead_s:g} s a job, {TRIAL_OVERHEAD_S:g} s a trial and the workers' "
                       f"starts included); trial-hours by rung: {by_rung}")
        avail = "unknown" if self.available_bytes is None else _gib(self.available_bytes)
        for rung, mem in self.memory.items():
            out.append(f"peak memory per trial at {rung}: {_gib(mem.total)} (modelled: parameters, optimizer "
                       f"state, activations, evaluation images); available here {avail}")
        seeds = f"{self.seeds} seed" + ("s" if self.seeds != 1 else "")
        out.append(f"smallest saving detectable at alpha {self.alpha:g} with {seeds}: "
                   + "; ".join(self.detectable))
        return out


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def available_memory() -> int | None:
    """This machine's available memory in bytes (/proc/meminfo's MemAvailable), None where it cannot be read."""
    try:
        for line in open("/proc/meminfo", encoding="ascii"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def detectable_saving(spread: Mapping[str, float] | None, seeds: int, alpha: float,
                      comparisons: int = 1) -> list[str]:
    """The smallest time saving detectable with 80 % power at `alpha` (Bonferroni over `comparisons`, the first
    step of Holm) with `seeds` paired seeds, per comparison, from the sd over seeds of its log steps ratio in a
    prior study (`spread`: comparison -> sd); `UNKNOWN_DETECTABLE` without one."""
    if not spread:
        return [UNKNOWN_DETECTABLE]
    if seeds < 2:
        return [f"none with {seeds} seed (a paired interval needs 2)"]
    from scaling.claims import power_at_alpha

    out = []
    for name, sd in spread.items():
        stmt = power_at_alpha(sd_seed_log=sd, n=seeds, alpha=alpha / max(1, comparisons))
        out.append(f"{name}: {stmt.detectable_pct:.0f} % (seed sd of the log ratio {sd:.3f}, from the prior study)")
    return out


def sweep_stages(spec: Any) -> list[PlanStage]:
    """A sweep's stages: its search points on every seed, each baseline setting on every seed, the confirmation's
    points on their fresh seeds (`sweep_work` counts the same trials)."""
    seed = spec.seeds[0]
    out = []
    stage = PlanStage.of
    search = spec.trial_config({"name": spec.search.arm}, seed)
    points = spec.search.grid_size if spec.search.method == "grid" else spec.search.budget or 0
    out.append(stage("search", spec.search.arm, int(points) * len(spec.seeds), search))
    for b in spec.baselines:
        for label, optimizer in b.variants():
            trial = spec.trial_config(optimizer, seed, b.rung, horizon=b.horizon,
                                      eval_steps=spec.baseline_eval_steps(b))
            out.append(stage("baseline", label, len(spec.seeds), trial))
    if spec.confirm.top:
        out.append(stage("confirm", spec.search.arm, spec.confirm.top * len(spec.confirm_seeds), search, phase=2))
    return out


def _makespan(durations: Sequence[float], slots: int, start: float = 0.0) -> float:
    """Longest-first packing of `durations` on `slots` workers, each `start` seconds to start: the time the last
    one ends."""
    ends = [start] * max(1, min(slots, len(durations) or 1))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + d)
    return max(ends)


def estimate_job(kind: str, name: str, stages: Sequence[PlanStage], *, slots: int, seeds: int,
                 alpha: float = DEFAULT_ALPHA, spread: Mapping[str, float] | None = None, comparisons: int = 1,
                 measure: bool = True, builtin: bool = True, budget_hours: float | None = None,
                 extra_overhead_starts: float = 0.0) -> JobEstimate:
    """Price `stages` on this machine (module docstring); refuse a trial over the available memory, and an
    estimate over `budget_hours`. With `builtin` off (a command trainer) nothing is timed: no estimate. A job
    kind's own driver time beyond a sweep driver's is `extra_overhead_starts` worker starts."""
    memory: dict[str, TrialMemory] = {}
    for s in stages:
        mem = trial_memory(s.trial)
        if s.rung not in memory or mem.total > memory[s.rung].total:
            memory[s.rung] = mem
    available = available_memory()
    if available is not None:
        for rung, mem in memory.items():
            if mem.total > available:
                raise SweepError(f"rung {rung}: a trial needs an estimated {_gib(mem.total)} (modelled), more than "
                                 f"this machine's available memory, {_gib(available)}: nothing started")
    from ._calibration import calibration_key

    costs: dict[str, StepCost | None] = {}
    keys = []
    for s in stages:
        key = calibration_key(s.trial)[0]
        if key not in costs:
            costs[key] = step_cost(s.trial, measure=measure) if builtin else None
        keys.append(key)
    start_s, start_source = worker_start(measure=measure) if builtin else (None, None)
    est = JobEstimate(kind=kind, name=name, stages=list(stages), costs=costs, stage_keys=keys, slots=slots,
                      wall_s=None, memory=memory, available_bytes=available,
                      detectable=detectable_saving(spread, seeds, alpha, comparisons), seeds=seeds, alpha=alpha,
                      machine=machine(), builtin=builtin,
                      missing=sorted({f"rung {s.rung}" for s, k in zip(stages, keys, strict=True) if costs[k] is None}
                                     | ({"the workers' start"} if builtin and start_s is None else set())),
                      worker_start_s=start_s, worker_start_source=start_source)
    if any(c is None for c in costs.values()) or start_s is None:
        return est
    est.job_overhead_s = JOB_OVERHEAD_S + (JOB_OVERHEAD_PER_START + extra_overhead_starts) * start_s
    wall = est.job_overhead_s
    for phase in sorted({s.phase for s in stages}):
        lanes: dict[tuple[int, bool], list[float]] = {}
        for i, s in enumerate(stages):
            if s.phase == phase:
                lane = (min(slots, s.slots or slots), s.in_ray)
                lanes.setdefault(lane, []).extend([est.stage_seconds(i) or 0.0] * s.trials)
        wall += sum(_makespan(d, n, start_s if in_ray else 0.0) for (n, in_ray), d in lanes.items())
    est.wall_s = wall
    if budget_hours is not None:
        check_budget(est, budget_hours)
    return est


def check_budget(est: JobEstimate, budget_hours: float) -> None:
    """Refuse an estimate over `budget_hours`, naming the rung that takes the most time."""
    if not (math.isfinite(budget_hours) and budget_hours > 0):
        raise SweepError(f"budget_hours must be a positive number of hours, got {budget_hours!r}")
    hours = est.machine_hours
    if hours is not None and hours > budget_hours:
        rung, share = max(est.rung_hours().items(), key=lambda item: item[1])
        raise SweepError(f"rung {rung}: the plan's estimate, {hours:.3f} machine-hours ({share:.3f} trial-hours at "
                         f"{rung}), is over budget_hours {budget_hours:g}: nothing started")


def job_slots(execution: Any) -> int:
    """Trials at once under an `ExecutionSpec`: its concurrency, else the CPUs it is given (its num_cpus, else this
    machine's) over the CPUs one trial reserves."""
    if execution.concurrency is not None:
        return int(execution.concurrency)
    cpus = execution.num_cpus or os.cpu_count() or 1
    return max(1, int(cpus // max(execution.trial_cpus, 1e-9)))


def sweep_estimate(spec: Any, *, measure: bool = True, budget_hours: float | None = None,
                   spread: Mapping[str, float] | None = None) -> JobEstimate:
    """A sweep (`SweepSpec`) priced on this machine: `estimate_job` over `sweep_stages`."""
    return estimate_job("sweep", spec.name, sweep_stages(spec), slots=job_slots(spec.execution),
                        seeds=len(spec.seeds), spread=spread, comparisons=max(1, len(spec.baselines)),
                        measure=measure, builtin=spec.backend.name == "builtin", budget_hours=budget_hours)
