"""Which trial runs next: baselines, then points asked from an Optuna study, each on every seed, with retries.

Pure bookkeeping over Optuna's ask-and-tell interface; it knows nothing of Ray or MLflow, so it is tested by
driving it directly. The sweep's driver (`sweeper.jobs`) asks it for the next trial and tells it how each ended.

- Samplers are looked up by name (`SAMPLERS`): grid = Optuna's GridSampler (every point exactly once), tpe =
  TPESampler (with a constant liar, since trials run concurrently), random = RandomSampler.
- A point is told to Optuna once all its seeds ended: COMPLETE with the mean over seeds, PRUNED (with the running
  objective at the eval step where it stopped as an intermediate value) or FAIL.
- Ray's Optuna bridge would record an ASHA-stopped trial as COMPLETE with its low-fidelity score; here it is PRUNED.
- A sampler may propose a point that already ran (TPE over categorical values repeats itself; after a resume the
  restored points are unknown to the grid sampler's bookkeeping): it is told the known outcome without running
  again, and does not count against the budget.
- Resume: the records of a previous run of the sweep (its MLflow runs) are replayed first. Succeeded, pruned and
  finally-failed trials are not run again; interrupted trials are relaunched (into the same run when the backend
  resumes from a checkpoint); failed trials with retries left get a new attempt.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from ..errors import SweepError
from ..selection import TrialRecord, point_state
from ..specs import ParamRange, SweepSpec, canonical_value, format_params
from ..specs.checks import MAX_SEED

if TYPE_CHECKING:
    import optuna

__all__ = ["FINISHED", "SAMPLERS", "Planner", "TrialRequest", "list_search_methods", "make_sampler"]

FINISHED = "FINISHED"
_MAX_DUPLICATE_ASKS = 200  # proposals of already-known points in a row before the space counts as exhausted


@dataclass(frozen=True)
class TrialRequest:
    """One trial to launch: a point (or baseline arm) on one seed, in one attempt."""

    trial_key: str
    point_key: str
    role: Literal["search", "baseline"]
    arm: str
    seed: int
    optimizer: dict[str, Any]
    params: dict[str, float | int] = field(default_factory=dict)
    attempt: int = 0
    run_id: str | None = None  # an existing MLflow run to continue (an interrupted trial being resumed)
    rung: str | None = None  # None = the sweep's rung (a baseline may run at another one)
    horizon: int | None = None  # None = the sweep's horizon (a baseline may have its own)
    eval_steps: list[int] | None = None  # None = the sweep's eval steps
    tags: dict[str, str] = field(default_factory=dict)  # extra MLflow tags of the run (the spec's, then the arm's)
    order_seed: int | None = None  # None = the seed's data order (a control arm runs on another)

    @property
    def run_name(self) -> str:
        return self.trial_key if self.attempt == 0 else f"{self.trial_key} (attempt {self.attempt + 1})"


def trial_key(point_key: str, seed: int) -> str:
    """`K=3,gamma=0.15` on seed 0 -> `K=3,gamma=0.15,seed=0`; `adamw` -> `adamw,seed=0`."""
    return f"{point_key},seed={seed}"


def _grid(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    import optuna

    class AskTellGridSampler(optuna.samplers.GridSampler):
        """GridSampler for ask-and-tell: its after_trial calls study.stop(), which raises outside study.optimize;
        the planner knows itself when every point has run."""

        def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
            return None

    values = {n: [canonical_value(n, v) for v in vals]
              for n, vals in spec.search.space.items() if isinstance(vals, list)}
    return AskTellGridSampler(values, seed=spec.search.sampler_seed)


def _tpe(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    import optuna

    return optuna.samplers.TPESampler(
        seed=spec.search.sampler_seed, n_startup_trials=spec.search.tpe_startup_points, constant_liar=True
    )


def _random(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    import optuna

    return optuna.samplers.RandomSampler(seed=spec.search.sampler_seed)


SAMPLERS: dict[str, Callable[[SweepSpec], optuna.samplers.BaseSampler]] = {
    "grid": _grid,
    "tpe": _tpe,
    "random": _random,
}


def list_search_methods() -> list[str]:
    """The search methods a spec may name."""
    return sorted(SAMPLERS)


def make_sampler(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    """The Optuna sampler of `spec.search.method`."""
    try:
        return SAMPLERS[spec.search.method](spec)
    except KeyError:
        raise SweepError(f"unknown search method {spec.search.method!r}; allowed: {list_search_methods()}") from None


def distributions(spec: SweepSpec) -> dict[str, optuna.distributions.BaseDistribution]:
    """Optuna distributions of the search space: categorical for lists, int/float for ranges."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for name, values in spec.search.space.items():
        if isinstance(values, ParamRange):
            if name == "K":
                out[name] = IntDistribution(int(values.low), int(values.high), log=values.log,
                                            step=int(values.step or 1))
            else:
                out[name] = FloatDistribution(values.low, values.high, log=values.log, step=values.step)
        else:
            out[name] = CategoricalDistribution([canonical_value(name, v) for v in values])
    return out


@dataclass
class _Point:
    key: str
    params: dict[str, float | int]
    trial: Any = None  # the Optuna trial to tell (None once told, or when restored as finished)
    told: bool = False
    outcome: str = "RUNNING"
    objective: float | None = None
    parked: list[Any] = field(default_factory=list)  # duplicate proposals waiting for this point's outcome
    reached: dict[int, dict[int, float]] = field(default_factory=dict)  # seed -> eval index -> running objective


class Planner:
    """Decides the next trial and keeps the Optuna study told. Not thread-safe (Tune calls it from one thread)."""

    def __init__(self, spec: SweepSpec, records: Iterable[TrialRecord] = (), *, resumable: bool | None = None,
                 prior: Iterable[TrialRecord] = ()):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)  # no INFO line per told trial
        self.spec = spec
        self.resumable = spec.backend.resumable if resumable is None else resumable
        self.eval_steps = spec.resolved_eval_steps
        self.study = optuna.create_study(direction="minimize", sampler=make_sampler(spec))
        self.dists = distributions(spec)
        # grid: every point; tpe/random: the budget (the spec refuses them without one)
        self.budget = int(spec.search.grid_size) if spec.search.method == "grid" else int(spec.search.budget or 0)
        self.queue: deque[TrialRequest] = deque()
        self.inflight: dict[str, TrialRequest] = {}
        self.state: dict[str, str] = {}  # trial key -> latest state
        self.failures: dict[str, int] = {}
        self.attempts: dict[str, int] = {}
        self.points: dict[str, _Point] = {}
        self.search_done = False
        self.seed_objectives: dict[str, dict[int, float]] = {}
        self.warm_started = self._warm_start(list(prior))
        self._restore(list(records))

    def _warm_start(self, prior: list[TrialRecord]) -> int:
        """Tell the sampler the finished points of earlier sweeps (`search.warm_start`): each point's mean
        objective over the seeds it finished on, as a COMPLETE trial; points outside this sweep's space, or of
        another arm, are left out. They are not this sweep's points: not run, not counted, not selected.
        Returns how many points were told."""
        import optuna
        from optuna.trial import create_trial

        finished: dict[str, list[TrialRecord]] = {}
        for rec in prior:
            if (rec.role == "search" and rec.arm == self.spec.search.arm and rec.status == "SUCCEEDED"
                    and rec.objective is not None and math.isfinite(rec.objective)):
                finished.setdefault(rec.point_key, []).append(rec)
        told = 0
        for recs in finished.values():
            params = {n: canonical_value(n, v) for n, v in recs[0].params.items()}
            if set(params) != set(self.dists):
                continue
            by_seed = {r.seed: float(r.objective) for r in recs}  # type: ignore[arg-type]
            try:
                self.study.add_trial(create_trial(params=params, distributions=self._dists_for(params),
                                                  value=statistics.fmean(by_seed.values()),
                                                  user_attrs={"warm_start": recs[0].point_key}))
            except (ValueError, optuna.exceptions.OptunaError):  # outside this sweep's space
                continue
            told += 1
        return told

    # -- restore ---------------------------------------------------------------------------------------------

    def _baselines(self) -> list[TrialRequest]:
        return [
            TrialRequest(
                trial_key=trial_key(name, seed),
                point_key=name,
                role="baseline",
                arm=b.arm,
                seed=seed,
                optimizer=optimizer,
                rung=b.rung,
                horizon=b.horizon,
                eval_steps=self.spec.baseline_eval_steps(b) if b.horizon is not None else None,
                tags={**self.spec.tags, **b.tags},
                order_seed=None if b.order_seed_offset is None else (seed + b.order_seed_offset) % (MAX_SEED + 1),
            )
            for b in self.spec.baselines
            for name, optimizer in b.variants()  # one per lr factor with `lr_factors` (equal tuning budgets)
            for seed in self.spec.seeds
        ]

    def _search_request(self, params: dict[str, float | int], seed: int) -> TrialRequest:
        point_key = format_params(params)
        return TrialRequest(
            trial_key=trial_key(point_key, seed),
            point_key=point_key,
            role="search",
            arm=self.spec.search.arm,
            seed=seed,
            optimizer=self.spec.search.optimizer_for(params),
            params=dict(params),
            tags={**self.spec.tags, **self.spec.search.tags},
        )

    def _restore(self, records: list[TrialRecord]) -> None:
        by_key: dict[str, list[TrialRecord]] = {}
        for rec in records:
            by_key.setdefault(rec.trial_key, []).append(rec)
        relaunch: dict[str, TrialRequest] = {}
        templates: dict[str, TrialRequest] = {r.trial_key: r for r in self._baselines()}
        for key, recs in by_key.items():
            recs.sort(key=lambda r: r.attempt)
            last = recs[-1]
            if last.role == "search":
                params = {n: canonical_value(n, v) for n, v in last.params.items()}
                templates[key] = self._search_request(params, last.seed)
                point = self.points.setdefault(last.point_key, _Point(last.point_key, params))
                if last.status == "SUCCEEDED" and last.objective is not None:
                    point.reached[last.seed] = {len(self.eval_steps): last.objective}
            self.attempts[key] = last.attempt
            self.failures[key] = sum(r.status == "FAILED" for r in recs)
            if any(r.status == "SUCCEEDED" for r in recs):
                ok = next(r for r in reversed(recs) if r.status == "SUCCEEDED")
                self.state[key] = "SUCCEEDED"
                if ok.objective is not None:
                    self.seed_objectives.setdefault(ok.point_key, {})[ok.seed] = ok.objective
            elif last.status == "PRUNED":
                self.state[key] = "PRUNED"
                self._note_reached(last)
            elif last.status == "FAILED":
                if key in templates and self._retriable(key, last.diverged):
                    relaunch[key] = replace(templates[key], attempt=last.attempt + 1)
                    self.state[key] = "PENDING"
                else:
                    self.state[key] = "FAILED"
            elif key in templates:  # interrupted (CANCELLED / stale RUNNING / never started)
                if self.resumable and last.run_id:
                    relaunch[key] = replace(templates[key], attempt=last.attempt, run_id=last.run_id)
                else:
                    relaunch[key] = replace(templates[key], attempt=last.attempt + 1)
                self.state[key] = "PENDING"

        # Baselines first (few, known up front, and every comparison needs them), then restored open points.
        for req in self._baselines():
            if req.trial_key in relaunch:
                self.queue.append(relaunch[req.trial_key])
            elif req.trial_key not in self.state:
                self.queue.append(req)
        for point in self.points.values():
            outcome = self._point_outcome(point)
            if outcome == "RUNNING":
                point.trial = self._ask_fixed(point.params)
                for seed in self.spec.seeds:
                    key = trial_key(point.key, seed)
                    if key in relaunch:
                        self.queue.append(relaunch[key])
                    elif key not in self.state:
                        self.queue.append(self._search_request(point.params, seed))
            else:
                self._tell_restored(point, outcome)

    def _ask_fixed(self, params: dict[str, float | int]) -> Any:
        self.study.enqueue_trial(params, skip_if_exists=False)
        return self.study.ask(self.dists)

    def _tell_restored(self, point: _Point, outcome: str) -> None:
        import optuna
        from optuna.trial import TrialState, create_trial

        point.outcome, point.told = outcome, True
        if outcome == "SUCCEEDED":
            point.objective = statistics.fmean(self.seed_objectives[point.key].values())
            trial = create_trial(params=point.params, distributions=self._dists_for(point.params),
                                 value=point.objective)
        elif outcome == "PRUNED":
            index, value = self._pruned_value(point)
            trial = create_trial(params=point.params, distributions=self._dists_for(point.params),
                                 state=TrialState.PRUNED, intermediate_values={index: value} if index else None)
        else:
            trial = create_trial(params=point.params, distributions=self._dists_for(point.params),
                                 state=TrialState.FAIL)
        try:
            self.study.add_trial(trial)
        except (ValueError, optuna.exceptions.OptunaError):  # a value outside today's space: keep it out of Optuna
            pass

    def _dists_for(self, params: dict[str, float | int]) -> dict[str, Any]:
        return {n: self.dists[n] for n in params if n in self.dists}

    # -- the loop -----------------------------------------------------------------------------------------------

    def _retriable(self, key: str, diverged: bool) -> bool:
        if diverged and not self.spec.retries.retry_diverged:
            return False
        return self.failures.get(key, 0) <= self.spec.retries.max_retries

    def next(self) -> TrialRequest | str | None:
        """The next trial to launch; None = nothing now (wait for running trials); FINISHED = the sweep is done."""
        while True:
            while self.queue:
                req = self.queue.popleft()
                point = self.points.get(req.point_key)
                if req.role == "search" and point is not None and point.told and point.outcome != "SUCCEEDED":
                    continue  # its point was pruned or failed on another seed: this seed would not count
                self.inflight[req.trial_key] = req
                self.state[req.trial_key] = "RUNNING"
                self.attempts[req.trial_key] = req.attempt
                return req
            if not self.search_done and self._new_point() is not None:
                continue
            return None if self.inflight else FINISHED

    def _new_point(self) -> _Point | None:
        if len(self.points) >= self.budget:
            self.search_done = True
            return None
        for _ in range(_MAX_DUPLICATE_ASKS):
            trial = self.study.ask(self.dists)
            params = {n: canonical_value(n, v) for n, v in trial.params.items()}
            key = format_params(params)
            known = self.points.get(key)
            if known is None:
                point = _Point(key, params, trial=trial)
                self.points[key] = point
                for seed in self.spec.seeds:
                    self.queue.append(self._search_request(params, seed))
                return point
            if known.told:
                self._tell(trial, known)
            else:
                known.parked.append(trial)
        self.search_done = True  # the sampler keeps proposing known points: the space is exhausted
        return None

    def complete(
        self,
        request: TrialRequest,
        status: str,
        *,
        objective: float | None = None,
        diverged: bool = False,
        running_objective: dict[int, float] | None = None,
    ) -> TrialRequest | None:
        """Record how a launched trial ended (SUCCEEDED, PRUNED, FAILED or CANCELLED); returns the retry queued
        for it, if any. `running_objective` maps eval index (1-based) to the live objective so far."""
        key = request.trial_key
        self.inflight.pop(key, None)
        retry = None
        if status == "SUCCEEDED":
            self.state[key] = "SUCCEEDED"
            if objective is not None:
                self.seed_objectives.setdefault(request.point_key, {})[request.seed] = objective
        elif status == "FAILED":
            self.failures[key] = self.failures.get(key, 0) + 1
            if self._retriable(key, diverged):
                retry = replace(request, attempt=request.attempt + 1, run_id=None)
                self.queue.appendleft(retry)
                self.state[key] = "PENDING"
            else:
                self.state[key] = "FAILED"
        elif status in ("PRUNED", "CANCELLED"):
            self.state[key] = status
        else:
            raise SweepError(f"unknown trial outcome {status!r}")
        point = self.points.get(request.point_key) if request.role == "search" else None
        if point is not None:
            if running_objective:
                point.reached[request.seed] = dict(running_objective)
            outcome = self._point_outcome(point)
            if outcome != "RUNNING" and not point.told and status != "CANCELLED":
                point.outcome = outcome
                if outcome == "SUCCEEDED":
                    point.objective = statistics.fmean(self.seed_objectives[point.key].values())
                self._tell(point.trial, point)
                for parked in point.parked:
                    self._tell(parked, point)
                point.parked.clear()
        return retry

    def _point_outcome(self, point: _Point) -> str:
        states = {s: self.state.get(trial_key(point.key, s), "PENDING") for s in self.spec.seeds}
        return point_state(states, self.spec.seeds)

    def _note_reached(self, rec: TrialRecord) -> None:
        point = self.points.get(rec.point_key)
        if point is not None and rec.fd:
            steps = [s for s in self.eval_steps if s in rec.fd]
            point.reached[rec.seed] = {
                i + 1: statistics.fmean(rec.fd[s] for s in steps[: i + 1]) for i in range(len(steps))
            }

    def _pruned_value(self, point: _Point) -> tuple[int | None, float]:
        """The deepest eval index every reporting seed reached, and the mean running objective there."""
        reached = [r for r in point.reached.values() if r]
        if not reached:
            return None, math.nan
        index = min(max(r) for r in reached)
        return index, statistics.fmean(r[index] for r in reached if index in r)

    def _tell(self, trial: Any, point: _Point) -> None:
        from optuna.trial import TrialState

        if trial is None:
            return
        if point.outcome == "SUCCEEDED":
            self.study.tell(trial, point.objective)
        elif point.outcome == "PRUNED":
            index, value = self._pruned_value(point)
            if index is not None and math.isfinite(value):
                trial.report(value, index)
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, state=TrialState.FAIL)
        if trial is point.trial:
            point.told, point.trial = True, None

    def has_work(self) -> bool:
        """Whether anything is left to launch (False for a sweep that already ran to its end)."""
        return bool(self.queue or self.inflight) or (not self.search_done and len(self.points) < self.budget)

    # -- views ----------------------------------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Trials by state, plus queued ones."""
        out = {s: 0 for s in ("RUNNING", "SUCCEEDED", "PRUNED", "FAILED", "CANCELLED")}
        for key, state in self.state.items():
            if state in out and not (state == "RUNNING" and key not in self.inflight):
                out[state] += 1
        out["QUEUED"] = len(self.queue)
        return out

    def best(self) -> tuple[str, float] | None:
        """The best scored point so far (lowest mean objective over all seeds), ignoring the tie rule."""
        done = [(p.objective, p.key) for p in self.points.values() if p.outcome == "SUCCEEDED" and p.objective]
        if not done:
            return None
        value, key = min(done)
        return key, value

    def point_keys(self) -> Sequence[str]:
        return list(self.points)
