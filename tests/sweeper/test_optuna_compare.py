"""A sweep written to an Optuna storage and read back by Optuna (`sweeper.analysis`), and two sweeps compared
(`sweeper.analysis`)."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest

from sweeper import SweepError
from sweeper.analysis import SweepResult, compare_sweeps, default_optuna_storage, optuna_study_name, write_optuna_study
from sweeper.selection import TrialRecord, select_best, summarise_points

SEEDS = [0, 1, 2]


def _result(shift: float = 0.0, *, seeds=SEEDS, sweep_id: str = "s1", eval_steps=(8, 10, 12),
            failed: bool = False) -> SweepResult:
    trials = []
    for k in (2, 3):
        for g in (0.1, 0.25):
            for s in seeds:
                obj = 10 + k + 4 * g + 0.1 * s + (shift if k == 3 else 0.0)
                trials.append(TrialRecord(
                    trial_key=f"K={k},gamma={g}-s{s}", point_key=f"K={k},gamma={g}", role="search", arm="periodic",
                    seed=s, status="SUCCEEDED", params={"K": k, "gamma": g}, run_id=f"run-{k}-{g}-{s}",
                    objective=obj, fd={8: obj + 1, 10: obj + 0.5, 12: obj}, steps_done=12, ns5_calls=12 / k,
                    optimizer_step_time_s=0.001 * (1 + 1 / k), metric_name="fd_pixels"))
    for s in seeds:
        trials.append(TrialRecord(trial_key=f"adamw-s{s}", point_key="adamw", role="baseline", arm="adamw", seed=s,
                                  status="SUCCEEDED", params={"lr": 3e-4}, objective=14.0 + 0.2 * s,
                                  fd={12: 14.0 + 0.2 * s}, steps_done=12, metric_name="fd_pixels"))
    if failed:
        trials.append(TrialRecord(trial_key="K=4,gamma=0.1-s0", point_key="K=4,gamma=0.1", role="search",
                                  arm="periodic", seed=0, status="FAILED", params={"K": 4, "gamma": 0.1},
                                  error="diverged at step 5", diverged=True))
    points, baselines = summarise_points(trials, seeds, "search"), summarise_points(trials, seeds, "baseline")
    selection = select_best(points, baselines=baselines, n_boot=200)
    return SweepResult(sweep_id=sweep_id, name="grid", state="SUCCEEDED", parent_run_id=f"parent-{sweep_id}",
                       tracking_uri="http://alice:secret@127.0.0.1:5000", experiment="e",
                       eval_steps=list(eval_steps), seeds=list(seeds), selection=selection, points=points,
                       baselines=baselines, trials=trials)


def test_every_trial_reads_back_from_the_optuna_study(tmp_path: Path) -> None:
    result = _result(failed=True)
    storage = default_optuna_storage(tmp_path)
    name = write_optuna_study(result, storage)
    assert name == optuna_study_name(result) == "grid-s1"
    study = optuna.load_study(study_name=name, storage=storage)
    assert len(study.trials) == len(result.trials) == 16
    for rec, trial in zip(result.trials, study.trials, strict=True):
        assert trial.params == {**rec.params, "seed": rec.seed, "arm": rec.arm}
        assert trial.user_attrs["mlflow_run_id" if rec.run_id else "trial_key"] == (rec.run_id or rec.trial_key)
        if rec.status == "SUCCEEDED":
            assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == rec.objective
            assert trial.intermediate_values == rec.fd
        else:
            assert trial.state == optuna.trial.TrialState.FAIL and trial.value is None
            assert trial.user_attrs["error"] == "diverged at step 5"
    assert study.best_trial.params == {"K": 2, "gamma": 0.1, "seed": 0, "arm": "periodic"}
    attrs = study.user_attrs
    assert attrs["chosen"] == result.selection.point.point_key and attrs["mlflow_parent_run_id"] == "parent-s1"
    assert "secret" not in attrs["mlflow_tracking_uri"]
    # Optuna's own figures take it as it is (its matplotlib backend: plotly is not a dependency here).
    ax = optuna.visualization.matplotlib.plot_parallel_coordinate(study, params=["K", "gamma"])
    assert ax.get_title() == "Parallel Coordinate Plot"

    # Writing again replaces the sweep's study: the same trials, not twice as many.
    write_optuna_study(result, storage)
    assert len(optuna.load_study(study_name=name, storage=storage).trials) == 16


def test_a_sweep_with_no_trial_run_is_refused(tmp_path: Path) -> None:
    empty = _result()
    empty.trials = []
    with pytest.raises(SweepError, match="no trial that ran"):
        write_optuna_study(empty, default_optuna_storage(tmp_path))


def test_a_sweep_compared_with_itself_shows_zero_differences() -> None:
    result = _result()
    same = compare_sweeps(result, result)
    assert same.same_choice is True and not same.warnings
    assert len(same.points) == 5  # four grid points and the baseline
    for row in same.points:
        assert row.difference == 0.0 and row.common_seeds == SEEDS
        assert row.paired is not None and row.paired["mean"] == 0.0 and row.paired["n"] == 3
        assert row.rank_a == row.rank_b


def test_a_shift_of_one_point_shows_as_its_paired_difference_and_moves_the_choice() -> None:
    before, after = _result(), _result(shift=-3.0, sweep_id="s2")
    diff = compare_sweeps(before, after)
    moved = {r.point_key: r for r in diff.points}
    assert moved["K=3,gamma=0.1"].paired["mean"] == pytest.approx(-3.0)
    assert moved["K=3,gamma=0.1"].paired["interval"] == pytest.approx((-3.0, -3.0))
    assert moved["K=2,gamma=0.1"].paired["mean"] == 0.0
    assert diff.a["chosen"] == "K=2,gamma=0.1" and diff.b["chosen"] == "K=3,gamma=0.1" and not diff.same_choice
    assert "B - A" in "\n".join(diff.lines())


def test_different_seeds_and_eval_steps_are_stated_not_paired() -> None:
    other = _result(seeds=[5, 6], sweep_id="s3", eval_steps=(16, 20, 24))
    diff = compare_sweeps(_result(), other)
    assert all(r.paired is None and r.common_seeds == [] for r in diff.points)
    assert all(r.difference is not None and math.isfinite(r.difference) for r in diff.points)
    assert any("different eval steps" in w for w in diff.warnings)
    assert "unpaired" in "\n".join(diff.lines())


def test_the_comparison_document_reads_back_to_the_same_table() -> None:
    diff = compare_sweeps(_result(), _result(shift=-1.0, sweep_id="s2"))
    again = type(diff).from_dict(diff.to_dict())
    assert again.lines() == diff.lines() and again.to_dict() == diff.to_dict()


def test_the_comparison_page_draws_each_paired_difference_and_states_the_warnings(tmp_path: Path) -> None:
    from dashboards import JobFigures, build_report, comparison_report
    from dashboards._sweepviews import comparison_from_document, plot_comparison

    diff = compare_sweeps(_result(), _result(shift=-3.0, sweep_id="s2"))
    drawn = comparison_from_document(diff.to_dict())
    assert drawn is not None
    figure = plot_comparison(drawn)
    right = figure.axes[1]
    means = sorted(float(x) for c in right.collections for x, _ in c.get_offsets())
    assert means == [-3.0, -3.0, 0.0, 0.0, 0.0]  # the two K=3 points moved, the rest and adamw did not
    page = build_report(comparison_report(diff.to_dict()))
    assert 'id="comparison"' in page and page.count("-3 [-3, -3], n=3") == 2 and page.count("+0 [+0, +0], n=3") == 3
    written = JobFigures().comparison_page(diff, tmp_path / "cmp")
    assert [Path(p).name for p in written] == ["report.html", "comparison.png"]
    # Nothing scored in both: no figure, the page says why.
    apart = compare_sweeps(_result(), SweepResult(
        sweep_id="s4", name="empty", state="FAILED", parent_run_id=None, tracking_uri="", experiment="e",
        eval_steps=[8, 10, 12], seeds=SEEDS, selection=None, points=[], baselines=[], trials=[]))
    assert comparison_from_document(apart.to_dict()) is None
    empty = build_report(comparison_report(apart.to_dict()))
    assert 'id="comparison"' not in empty and "no point was scored in both sweeps" in empty


def test_writing_a_report_without_a_figure_hook_is_a_clear_error() -> None:
    import sweeper
    from sweeper.jobs import write_sweep_report

    previous = sweeper.set_figure_hook(None)
    try:
        with pytest.raises(SweepError, match="no figure hook is registered to write a sweep's report"):
            write_sweep_report(_result(), "unused")
    finally:
        sweeper.set_figure_hook(previous)
