"""The planner without Ray: grid exactly once, seeds, baselines, TPE budgets, retries, pruning, resume."""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from sweeper import SweepSpec
from sweeper.search import FINISHED, Planner, TrialRequest
from sweeper.selection import TrialRecord

from .conftest import TINY_TRIAL


def _spec(**fields: Any) -> SweepSpec:
    return SweepSpec.model_validate({"name": "p", "horizon": 30, "trial": TINY_TRIAL, **fields})


def _objective(req: TrialRequest) -> float:
    if req.role == "baseline":
        return 50.0
    return 10 + (req.params["K"] - 3) ** 2 + 100 * (req.params["gamma"] - 0.15) ** 2 + 0.1 * req.seed


def _drain(planner: Planner, outcome: Any = None) -> list[TrialRequest]:
    """Run every trial the planner hands out, one at a time; `outcome(req)` -> (status, kwargs) or None = success."""
    launched = []
    while True:
        req = planner.next()
        if req is None or req == FINISHED:
            return launched
        launched.append(req)
        status, kwargs = (outcome(req) if outcome else None) or ("SUCCEEDED", {"objective": _objective(req)})
        planner.complete(req, status, **kwargs)


def test_grid_runs_every_point_exactly_once_on_every_seed_after_the_baselines() -> None:
    planner = Planner(_spec(seeds=[0, 1]))
    launched = _drain(planner)
    keys = [r.trial_key for r in launched]
    assert keys[:4] == ["adamw,seed=0", "adamw,seed=1", "muon,seed=0", "muon,seed=1"]
    assert len(keys) == len(set(keys)) == 4 + 12 * 2
    points = {r.point_key for r in launched if r.role == "search"}
    assert len(points) == 12 and "K=3,gamma=0.15" in points
    assert planner.best() == ("K=3,gamma=0.15", 10.05)  # mean over seeds 0 and 1
    completed = [t for t in planner.study.trials if t.state == TrialState.COMPLETE]
    assert len(completed) == 12 and planner.next() == FINISHED
    req = next(r for r in launched if r.point_key == "K=4,gamma=0.35")
    assert req.optimizer == {"name": "periodic", "refresh_every": 4, "gamma": 0.35} and req.run_name == req.trial_key


def test_tpe_spends_its_budget_on_distinct_points_and_answers_repeats_from_memory() -> None:
    planner = Planner(_spec(baselines=[], search={"method": "tpe", "budget": 9, "tpe_startup_points": 2}))
    launched = _drain(planner)
    points = [r.point_key for r in launched]
    assert len(points) == len(set(points)) == 9
    assert len(planner.study.trials) >= 9  # repeats were told the known value, not run again
    assert all(t.state == TrialState.COMPLETE for t in planner.study.trials)


def test_failed_trials_are_retried_up_to_the_limit_and_divergence_is_not() -> None:
    planner = Planner(_spec(baselines=[], search={"space": {"K": [2, 3], "gamma": [0.15]}},
                            retries={"max_retries": 2}))

    def outcome(req: TrialRequest) -> tuple[str, dict[str, Any]] | None:
        if req.point_key == "K=2,gamma=0.15":
            return "FAILED", {}
        if req.point_key == "K=3,gamma=0.15":
            return "FAILED", {"diverged": True}
        return None

    launched = _drain(planner, outcome)
    assert [(r.trial_key, r.attempt) for r in launched if r.point_key == "K=2,gamma=0.15"] == [
        ("K=2,gamma=0.15,seed=0", 0), ("K=2,gamma=0.15,seed=0", 1), ("K=2,gamma=0.15,seed=0", 2)]
    assert [r.attempt for r in launched if r.point_key == "K=3,gamma=0.15"] == [0]  # diverged: deterministic
    assert [r.run_name for r in launched if r.point_key == "K=2,gamma=0.15"][1] == "K=2,gamma=0.15,seed=0 (attempt 2)"
    assert planner.state == {"K=2,gamma=0.15,seed=0": "FAILED", "K=3,gamma=0.15,seed=0": "FAILED"}
    assert [t.state for t in planner.study.trials] == [TrialState.FAIL, TrialState.FAIL]

    retry_nan = Planner(_spec(baselines=[], search={"space": {"K": [3], "gamma": [0.15]}},
                              retries={"max_retries": 1, "retry_diverged": True}))
    tries = _drain(retry_nan, lambda r: ("FAILED", {"diverged": True}) if r.attempt == 0 else None)
    assert [r.attempt for r in tries] == [0, 1]
    assert retry_nan.best() == ("K=3,gamma=0.15", 10.0)  # the retry's objective, seed 0: 10 + 0 + 0 + 0


def test_a_pruned_point_is_told_pruned_not_complete_and_its_other_seeds_are_skipped() -> None:
    planner = Planner(_spec(baselines=[], seeds=[0, 1], search={"space": {"K": [2, 3], "gamma": [0.15]}}))

    def outcome(req: TrialRequest) -> tuple[str, dict[str, Any]] | None:
        if req.point_key == "K=2,gamma=0.15":
            return "PRUNED", {"running_objective": {1: 55.0}}
        return None

    launched = _drain(planner, outcome)
    assert [r.trial_key for r in launched if r.point_key == "K=2,gamma=0.15"] == ["K=2,gamma=0.15,seed=0"]
    by_params = {t.params["K"]: t for t in planner.study.trials}
    assert by_params[2].state == TrialState.PRUNED  # not COMPLETE with its low-fidelity score
    assert by_params[2].intermediate_values == {1: 55.0}  # TPE ranks pruned trials by their last report
    assert by_params[3].state == TrialState.COMPLETE and by_params[3].value == 10.05


def _record(req: TrialRequest, status: str, objective: float | None = None, run_id: str | None = None,
            attempt: int | None = None) -> TrialRecord:
    return TrialRecord(trial_key=req.trial_key, point_key=req.point_key, role=req.role, arm=req.arm, seed=req.seed,
                       attempt=req.attempt if attempt is None else attempt, status=status,  # type: ignore[arg-type]
                       params=req.params, objective=objective, run_id=run_id or f"run-{req.trial_key}")


def test_resume_skips_finished_trials_and_relaunches_interrupted_ones() -> None:
    spec = _spec(seeds=[0, 1], baselines=["adamw"], search={"space": {"K": [2, 3, 4], "gamma": [0.15]}},
                 retries={"max_retries": 1})
    first = Planner(spec)
    handed = [first.next() for _ in range(6)]
    assert all(isinstance(r, TrialRequest) for r in handed)
    # The previous driver saw: baselines done, K=a seed 0 done, K=a seed 1 running (killed), one point failed once.
    b0, b1, p0, p1, q0, q1 = handed  # type: ignore[misc]
    records = [
        _record(b0, "SUCCEEDED", 50.0), _record(b1, "SUCCEEDED", 50.0),
        _record(p0, "SUCCEEDED", _objective(p0)), _record(p1, "CANCELLED"),
        _record(q0, "FAILED"), _record(q1, "SUCCEEDED", _objective(q1)),
    ]
    resumed = Planner(spec, records, resumable=True)
    launched = _drain(resumed)
    keys = [r.trial_key for r in launched]
    assert b0.trial_key not in keys and p0.trial_key not in keys and q1.trial_key not in keys
    relaunch = next(r for r in launched if r.trial_key == p1.trial_key)
    assert relaunch.run_id == f"run-{p1.trial_key}" and relaunch.attempt == 0  # into its own run, from its checkpoint
    retry = next(r for r in launched if r.trial_key == q0.trial_key)
    assert retry.run_id is None and retry.attempt == 1  # a failure: a new attempt, a new run
    assert len(keys) == len(set(keys))
    fresh = [r for r in launched if r.point_key not in (p0.point_key, q0.point_key)]
    assert [r.seed for r in fresh] == [0, 1]  # the point never started runs both seeds
    # K=3 wins: 10 + 0.1·seed, whose mean over seeds 0 and 1 is 10.05, with seed 0 restored from the records.
    assert resumed.best() == ("K=3,gamma=0.15", 10.05) and resumed.next() == FINISHED
    assert sum(t.state == TrialState.COMPLETE for t in resumed.study.trials) == 3

    not_resumable = Planner(spec, records, resumable=False)
    relaunch = next(r for r in _drain(not_resumable) if r.trial_key == p1.trial_key)
    assert relaunch.run_id is None and relaunch.attempt == 1  # the command backend starts over in a new run


def test_resuming_a_finished_sweep_has_nothing_to_do() -> None:
    spec = _spec(baselines=[], search={"space": {"K": [2, 3], "gamma": [0.15]}})
    first = Planner(spec)
    launched = _drain(first)
    records = [_record(r, "SUCCEEDED", _objective(r)) for r in launched]
    again = Planner(spec, records)
    assert not again.has_work() and again.next() == FINISHED
    assert again.best() == first.best()
