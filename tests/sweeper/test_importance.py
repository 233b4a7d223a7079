"""Importance of the searched parameters (`sweeper.analysis`): on points built so that one parameter matters and
one does not, with the seeds' spread taken into account."""

from __future__ import annotations

import random
import statistics

import pytest

from sweeper import SweepError
from sweeper.analysis import sweep_importance
from sweeper.selection import PointSummary

SEEDS = (0, 1, 2)


def _points(objective, ks=(2, 3, 4), gammas=(0.1, 0.15, 0.25), seeds=SEEDS, noise=0.3) -> list[PointSummary]:
    rng = random.Random(7)
    offsets = {s: rng.gauss(0, noise) for s in seeds}  # a shift per seed, shared by every point: paired noise
    out = []
    for k in ks:
        for g in gammas:
            per_seed = {s: objective(k, g) + offsets[s] + rng.gauss(0, noise / 3) for s in seeds}
            out.append(PointSummary(point_key=f"K={k},gamma={g}", role="search", arm="periodic",
                                    params={"K": k, "gamma": g}, status="SUCCEEDED",
                                    objective=statistics.fmean(per_seed.values()), seed_objectives=per_seed))
    return out


def test_the_parameter_built_to_matter_ranks_first_with_its_interval_above_the_other() -> None:
    found = sweep_importance(_points(lambda k, g: 10 + 3 * k), n_boot=60)
    k, gamma = found.params
    assert (k.param, gamma.param) == ("K", "gamma")
    assert k.importance > 0.9 > 0.1 > gamma.importance
    assert k.importance + gamma.importance == pytest.approx(1.0)
    assert k.interval is not None and gamma.interval is not None and k.interval[0] > gamma.interval[1]
    assert k.p_first == 1.0 and gamma.p_first == 0.0
    assert found.n_boot == 60 and found.seeds == list(SEEDS) and found.n_points == 9
    # K's steps of 3 against a seed shift of sd 0.3: K explains far more of the per-trial variance than the seed.
    assert k.variance_share is not None and found.seed_share is not None
    assert k.variance_share > 10 * found.seed_share
    assert "K" in "\n".join(found.lines()) and found.to_dict()["method"].startswith("Optuna's fanova")


def test_a_parameter_that_moves_less_than_the_seeds_shows_a_smaller_share_than_the_seed() -> None:
    found = sweep_importance(_points(lambda k, g: 10 + 0.01 * k + 0.01 * g, noise=2.0), n_boot=20)
    assert found.seed_share is not None
    assert all(p.variance_share is not None and p.variance_share < found.seed_share for p in found.params)


def test_gamma_ranks_first_when_it_is_the_one_that_matters_with_either_evaluator() -> None:
    points = _points(lambda k, g: 10 + 40 * g, ks=(2, 3, 4, 5), gammas=(0.05, 0.1, 0.15, 0.25, 0.4))
    assert sweep_importance(points, n_boot=0).params[0].param == "gamma"
    ped = sweep_importance(points, evaluator="ped-anova", n_boot=0)
    assert sum(p.importance for p in ped.params) == pytest.approx(1.0) and ped.evaluator == "ped-anova"


def test_one_seed_gives_importances_without_interval_and_says_so() -> None:
    found = sweep_importance(_points(lambda k, g: 10 + 3 * k, seeds=(0,)), n_boot=50)
    assert found.params[0].param == "K" and found.params[0].interval is None and found.seed_share is None
    assert found.n_boot == 0 and any("one seed" in n for n in found.notes)


def test_refusals_name_what_is_missing() -> None:
    points = _points(lambda k, g: 10 + k)
    with pytest.raises(SweepError, match="at least 3 points"):
        sweep_importance(points[:2])
    with pytest.raises(SweepError, match="took two values"):
        sweep_importance(_points(lambda k, g: 10 + k, ks=(3,), gammas=(0.15,)) * 3)
    with pytest.raises(SweepError, match="not one of fanova, ped-anova"):
        sweep_importance(points, evaluator="shap")
    with pytest.raises(SweepError, match="n_boot"):
        sweep_importance(points, n_boot=-1)
    unscored = [PointSummary(point_key=p.point_key, role="search", arm="periodic", params=p.params,
                             status="RUNNING") for p in points]
    with pytest.raises(SweepError, match="this sweep has 0"):
        sweep_importance(unscored)


def test_the_importance_document_reads_back_to_the_same_table() -> None:
    found = sweep_importance(_points(lambda k, g: 10 + 3 * k), n_boot=10)
    again = type(found).from_dict(found.to_dict())
    assert again.lines() == found.lines() and again.to_dict() == found.to_dict()


def test_ped_anova_misranks_a_small_grid_where_fanova_does_not() -> None:
    """The evidence for fANOVA as the default (the module's docstring, docs/guide.md): on a 3 x 3 grid whose
    objective depends on K alone (10 + 3K + 0.1 gamma, one seed), PED-ANOVA puts gamma first, fANOVA K."""
    points = _points(lambda k, g: 10 + 3 * k + 0.1 * g, seeds=(0,), noise=0.0)
    ped = {p.param: p.importance for p in sweep_importance(points, evaluator="ped-anova", n_boot=0).params}
    fanova = {p.param: p.importance for p in sweep_importance(points, n_boot=0).params}
    assert ped["gamma"] > ped["K"]
    assert fanova["K"] > 0.95 > 0.05 > fanova["gamma"]


def test_an_evaluator_that_breaks_on_huge_objectives_is_a_sweep_error_naming_it() -> None:
    # Issue 53 M3: objectives near 1e308 (a trainer's FD before the command backend bounded it) make the sums of
    # squares inside fANOVA overflow and Optuna assert. That must be the analysis's refusal (a SweepError, which
    # the routes answer 409 and the finish stage records), never an AssertionError that ends a finished sweep.
    points = _points(lambda k, g: 10 + k)
    points[4].objective = 1e308
    points[4].seed_objectives = dict.fromkeys(SEEDS, 1e308)
    with pytest.raises(SweepError, match=r"importance: Optuna's fanova evaluator failed .*AssertionError"):
        sweep_importance(points, n_boot=5)


def test_a_failing_view_is_recorded_in_the_selection_document_not_raised() -> None:
    # The driver's finish stage stores the views with the selection (`selection_document(views=True)`); a view
    # that fails must leave the document (and so the sweep's end) whole, with the view's reason in its place.
    from sweeper.analysis import SweepResult

    points = _points(lambda k, g: 10 + k)
    points[4].objective = 1e308
    points[4].seed_objectives = dict.fromkeys(SEEDS, 1e308)
    result = SweepResult(sweep_id="s", name="s", state="SUCCEEDED", parent_run_id="p", tracking_uri="", experiment="e",
                         eval_steps=[1, 2], seeds=list(SEEDS), selection=None, points=points, baselines=[], trials=[])
    doc = result.selection_document(views=True)
    assert "AssertionError" in doc["importance"]["error"]
    assert doc["importance"]["error"].startswith("importance: Optuna's fanova evaluator failed")
    assert len(doc["points"]) == 9 and doc["front"] is not None
