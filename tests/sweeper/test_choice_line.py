"""The sweep's chosen line as a reader sees it: a choice worse than every baseline says so with per-seed counts,
significant or not, and P(best) is a probability only from 5 seeds."""

from __future__ import annotations

from sweeper.analysis import SweepResult
from sweeper.selection import TrialRecord, select_best, summarise_points


def _result(seeds: list[int], search: dict[str, float], baselines: dict[str, float]) -> SweepResult:
    records = []
    for seed in seeds:
        for key, value in search.items():
            records.append(TrialRecord(trial_key=f"{key},seed={seed}", point_key=key, role="search", arm="periodic",
                                       seed=seed, status="SUCCEEDED", objective=value + seed,
                                       params={"K": int(key[2]), "gamma": 0.15}))
        for arm, value in baselines.items():
            records.append(TrialRecord(trial_key=f"{arm},seed={seed}", point_key=arm, role="baseline", arm=arm,
                                       seed=seed, status="SUCCEEDED", objective=value + seed, params={}))
    points = summarise_points(records, seeds)
    base = summarise_points(records, seeds, "baseline")
    selection = select_best(points, baselines=base, n_boot=200)
    return SweepResult(sweep_id="s-1", name="s", state="SUCCEEDED", parent_run_id="p", tracking_uri="u",
                       experiment="e", eval_steps=[20], seeds=seeds, selection=selection, points=points,
                       baselines=base, trials=records)


def test_a_choice_worse_than_every_baseline_warns_with_per_seed_counts_and_p_best_waits_for_5_seeds() -> None:
    # Every grid point 8 x worse than both baselines on 2 seeds: no difference is "shown" at n=2, and still it says so.
    result = _result([0, 1], {"K=3,gamma=0.15": 800.0, "K=2,gamma=0.15": 810.0}, {"adamw": 100.0, "muon": 96.0})
    warning = result.choice_warning()
    assert warning is not None and "worse than adamw and muon on 2 of 2 seeds" in warning
    text = result.table()
    assert f"WARNING: {warning}" in text
    assert "P(best) too few seeds (n=2)" in text and "n<5" in text and "P(best) withheld (n<5)" in text
    assert result.selection_document()["choice_warning"] == warning
    # A choice that beats a baseline says nothing; from 5 seeds P(best) is a probability again.
    fine = _result([0, 1, 2, 3, 4], {"K=3,gamma=0.15": 90.0, "K=2,gamma=0.15": 95.0}, {"adamw": 100.0, "muon": 96.0})
    assert fine.choice_warning() is None
    text = fine.table()
    assert "P(best) withheld" not in text and "WARNING" not in text
    assert f"P(best) {fine.selection.chosen_p_best:.2f}" in text  # type: ignore[union-attr]
