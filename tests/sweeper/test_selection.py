"""Points over seeds and the choice: objective, spread, rank table, gap, tie rule, on a few numbers."""

from __future__ import annotations

import math
import statistics

import pytest

from sweeper.analysis import SweepResult
from sweeper.selection import TrialRecord, select_best, summarise_points


def _rec(k: int, gamma: float, seed: int, objective: float | None, status: str = "SUCCEEDED",
         attempt: int = 0) -> TrialRecord:
    key = f"K={k},gamma={gamma:g}"
    return TrialRecord(trial_key=f"{key},seed={seed}", point_key=key, role="search", arm="periodic", seed=seed,
                       attempt=attempt, status=status, params={"K": k, "gamma": gamma},  # type: ignore[arg-type]
                       objective=objective, fd={10: (objective or 0) + 1, 20: (objective or 0) - 1},
                       run_id=f"run-{key}-{seed}-{attempt}")


def _base(arm: str, seed: int, objective: float) -> TrialRecord:
    return TrialRecord(trial_key=f"{arm},seed={seed}", point_key=arm, role="baseline", arm=arm, seed=seed,
                       status="SUCCEEDED", objective=objective)


def test_points_average_over_seeds_and_keep_the_spread() -> None:
    records = [_rec(3, 0.15, 0, 40.0), _rec(3, 0.15, 1, 44.0), _rec(2, 0.25, 0, 41.0),
               _rec(2, 0.25, 1, None, status="RUNNING")]
    points = {p.point_key: p for p in summarise_points(records, seeds=[0, 1])}
    a = points["K=3,gamma=0.15"]
    assert a.status == "SUCCEEDED" and a.objective == 42.0
    assert a.seed_objectives == {0: 40.0, 1: 44.0} and a.seed_std == pytest.approx(statistics.stdev([40, 44]))
    assert (a.seed_min, a.seed_max) == (40.0, 44.0) and a.fd_mean == {10: 43.0, 20: 41.0}
    b = points["K=2,gamma=0.25"]
    assert b.status == "RUNNING" and b.objective is None  # not scored until every seed succeeded


def test_retried_trial_counts_its_succeeded_attempt_and_failed_points_are_not_scored() -> None:
    records = [_rec(3, 0.15, 0, None, status="FAILED", attempt=0), _rec(3, 0.15, 0, 40.0, attempt=1),
               _rec(4, 0.15, 0, None, status="FAILED"), _rec(2, 0.15, 0, None, status="PRUNED")]
    points = {p.point_key: p for p in summarise_points(records, seeds=[0])}
    assert points["K=3,gamma=0.15"].objective == 40.0
    assert points["K=3,gamma=0.15"].run_ids == {0: "run-K=3,gamma=0.15-0-1"}
    assert points["K=4,gamma=0.15"].status == "FAILED" and points["K=4,gamma=0.15"].objective is None
    assert points["K=2,gamma=0.15"].status == "PRUNED" and points["K=2,gamma=0.15"].objective is None
    selection = select_best(list(points.values()))
    assert selection is not None and [p.point_key for p in selection.ranking] == ["K=3,gamma=0.15"]
    assert selection.runner_up is None and selection.gap_abs is None


def test_rank_table_gap_and_baselines() -> None:
    records = [_rec(2, 0.10, 0, 50.0), _rec(3, 0.15, 0, 40.0), _rec(4, 0.35, 0, 45.0)]
    baselines = summarise_points([_base("adamw", 0, 60.0), _base("muon", 0, 38.0)], seeds=[0], role="baseline")
    selection = select_best(summarise_points(records, seeds=[0]), baselines=baselines)
    assert selection is not None
    assert [(p.point_key, p.rank) for p in selection.ranking] == [
        ("K=3,gamma=0.15", 1), ("K=4,gamma=0.35", 2), ("K=2,gamma=0.1", 3)]
    assert selection.params == {"K": 3, "gamma": 0.15} and selection.tied == ["K=3,gamma=0.15"]
    assert selection.runner_up is not None and selection.runner_up.point_key == "K=4,gamma=0.35"
    assert selection.gap_abs == 5.0 and selection.gap_rel == pytest.approx(5.0 / 40.0)
    assert selection.vs_baselines == {"adamw": pytest.approx(-1 / 3), "muon": pytest.approx(2 / 38)}
    assert selection.pooled_seed_std is None  # one seed: no spread to pool


def test_tie_rule_prefers_the_larger_k_within_the_tolerance_only() -> None:
    records = [_rec(2, 0.15, 0, 40.0), _rec(3, 0.15, 0, 40.3), _rec(4, 0.25, 0, 40.35)]
    points = summarise_points(records, seeds=[0])
    within = select_best(points, tie_tolerance=0.01)  # 40.3 and 40.35 are within 1% of 40.0
    assert within is not None and within.point.point_key == "K=4,gamma=0.25"
    assert within.best_by_objective == "K=2,gamma=0.15" and len(within.tied) == 3
    assert within.runner_up is not None and within.runner_up.point_key == "K=2,gamma=0.15"
    assert within.gap_abs == pytest.approx(-0.35)  # the rule chose a (tied) worse objective: the gap says so
    tight = select_best(points, tie_tolerance=0.005)  # 40.3 is 0.75% above 40.0: no tie at 0.5%
    assert tight is not None and tight.point.point_key == "K=2,gamma=0.15" and tight.tied == ["K=2,gamma=0.15"]
    plain = select_best(points, tie_tolerance=0.01, tie_break="none")
    assert plain is not None and plain.point.point_key == "K=2,gamma=0.15"


def test_pooled_seed_spread_and_empty_selection() -> None:
    records = [_rec(3, 0.15, 0, 40.0), _rec(3, 0.15, 1, 42.0), _rec(2, 0.15, 0, 50.0), _rec(2, 0.15, 1, 54.0)]
    selection = select_best(summarise_points(records, seeds=[0, 1]))
    assert selection is not None
    assert selection.pooled_seed_std == pytest.approx(math.sqrt((2.0 + 8.0) / 2))
    assert select_best(summarise_points([_rec(3, 0.15, 0, None, status="FAILED")], seeds=[0])) is None


def _seeded(k: int, gamma: float, values: list[float]) -> list[TrialRecord]:
    return [_rec(k, gamma, seed, v) for seed, v in enumerate(values)]


def test_with_seeds_the_sweep_chooses_by_one_standard_error_and_recordsthe_uncertainty() -> None:
    # K=2 has the lowest mean; K=4 is +1.0 on average with per-seed differences 4, -2, 3, -1 (SE 1.47): not told
    # apart, so the cheaper K=4 is chosen. K=3 is +10 on average (6 to 14): clearly worse.
    best, near = [40.0, 50.0, 45.0, 42.0], [44.0, 48.0, 48.0, 41.0]
    far = [b + d for b, d in zip(best, [6.0, 14.0, 8.0, 12.0], strict=True)]
    records = [*_seeded(2, 0.15, best), *_seeded(4, 0.15, near), *_seeded(3, 0.15, far),
               *(_base("adamw", s, b + 30.0) for s, b in enumerate(best)),
               *(_base("muon", s, b + d) for s, (b, d) in enumerate(zip(best, [-3.0, 2.0, 1.0, -4.0], strict=True)))]
    seeds = [0, 1, 2, 3]
    sel = select_best(summarise_points(records, seeds), baselines=summarise_points(records, seeds, "baseline"))
    assert sel is not None and sel.best_by_objective == "K=2,gamma=0.15" and sel.params == {"K": 4, "gamma": 0.15}
    assert sel.tied == ["K=2,gamma=0.15", "K=4,gamma=0.15"] and "one pooled standard error" in sel.rule
    assert sel.uncertainty is not None and sel.uncertainty.n == 4
    assert sum(sel.p_best.values()) == pytest.approx(1.0) and sel.p_best["K=3,gamma=0.15"] == 0.0
    assert sel.p_best["K=2,gamma=0.15"] > sel.p_best["K=4,gamma=0.15"] > 0.0
    ranked = {p.point_key: p for p in sel.ranking}
    assert ranked["K=3,gamma=0.15"].diff_to_best is not None
    assert ranked["K=3,gamma=0.15"].diff_to_best["mean"] == pytest.approx(10.0)
    assert ranked["K=3,gamma=0.15"].p_best == 0.0
    # Paired against the baselines: chosen (near) - adamw is about -29 on every seed; vs muon the interval holds 0.
    adamw, muon = sel.vs_baselines_paired["adamw"], sel.vs_baselines_paired["muon"]
    assert adamw.n == 4 and adamw.mean == pytest.approx(1.0 - 30.0) and not adamw.includes_zero
    assert muon.mean == pytest.approx(1.0 - (-1.0)) and muon.includes_zero
    doc = sel.to_dict()
    assert doc["uncertainty"]["chosen"] == "K=4,gamma=0.15" and doc["vs_baselines_paired"]["muon"]["n"] == 4


def test_a_choice_worse_than_a_baseline_with_confidence_says_so() -> None:
    """A grid whose every point is far worse than both baselines (an lr outside the useful range) still has a
    chosen point; the choice carries a warning per baseline it loses to, and a baseline it cannot be told apart
    from gets none."""
    best = [400.0, 420.0, 410.0]
    records = [*_seeded(2, 0.15, best), *_seeded(3, 0.15, [b + 5 for b in best]),
               *(_base("adamw", s, b / 7) for s, b in enumerate(best)),
               *(_base("muon", s, b + d) for s, (b, d) in enumerate(zip(best, [-30.0, 40.0, 5.0], strict=True)))]
    seeds = [0, 1, 2]
    sel = select_best(summarise_points(records, seeds), baselines=summarise_points(records, seeds, "baseline"))
    assert sel is not None and sel.loses_to == ["adamw"]
    assert len(sel.warnings) == 1 and sel.warnings[0].startswith("the chosen point is worse than adamw with confidence")
    assert "(adamw is better)" in sel.warnings[0]
    doc = sel.to_dict()
    assert doc["loses_to"] == ["adamw"] and doc["warnings"] == sel.warnings
    result = SweepResult(sweep_id="w-1", name="w", state="SUCCEEDED", parent_run_id="p", tracking_uri="u",
                         experiment="e", eval_steps=[20], seeds=seeds, selection=sel,
                         points=summarise_points(records, seeds), baselines=summarise_points(records, seeds,
                                                                                              "baseline"),
                         trials=records)
    lines = result.table().splitlines()
    chosen = next(i for i, line in enumerate(lines) if line.startswith("chosen: "))
    assert lines[chosen + 1].startswith("WARNING: the chosen point is worse than adamw with confidence")
    assert result.selection_document()["warnings"] == sel.warnings  # what /best answers with


def test_an_export_of_a_losing_choice_needs_the_flag_and_then_carries_the_warning() -> None:
    from scaling import ScalingInputError
    from scaling.export import refuse_losing_choice

    warning = "the chosen point is worse than adamw with confidence: chosen - adamw = +3 FD"
    with pytest.raises(ScalingInputError, match="allow_losing") as info:
        refuse_losing_choice([warning], allow_losing=False)
    assert str(info.value).startswith(warning)
    refuse_losing_choice([warning], allow_losing=True)  # said, then allowed
    refuse_losing_choice([], allow_losing=False)  # nothing to say
