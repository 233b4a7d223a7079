"""The selection objective `steps_to_target`: the score is the first crossing of a known curve, a censored trial
ranks after every trial that reaches (among censored ones by final FD), the rules still pair by seed, the choice
says which objective made it, a spec that cannot locate a crossing is refused naming the field, and a running
trial's live value (`steps_to_target_so_far`) is on the final score's scale: the crossing once crossed, above every
crossed trial before, the final objective on the whole curve."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from pydantic import ValidationError

from scaling.targets import time_to_target
from sweeper import SweepSpec, load_spec
from sweeper.analysis import SweepResult
from sweeper.search import FINISHED, Planner
from sweeper.search._trainable import declared_objective, objective_so_far, trial_objective
from sweeper.selection import TrialRecord, select_best, steps_to_target_score, steps_to_target_so_far, summarise_points
from trials import TrialError, TrialResult

from .conftest import TINY_TRIAL

HORIZON = 400
TARGET = 50.0


def test_the_score_is_the_interpolated_first_crossing_of_the_curve() -> None:
    curve = {100: 80.0, 200: 60.0, 300: 40.0, 400: 45.0}  # crosses 50 half-way from 200 (60) to 300 (40)
    score = steps_to_target_score(curve, TARGET, HORIZON)
    assert score.reached and score.score == score.step == 250.0
    assert score.score == time_to_target(list(curve), [0.0] * 4, list(curve.values()), TARGET).step
    assert score.score <= HORIZON  # a crossing is never past the horizon
    # Exactly on the target at a checkpoint: there, no interpolation. Below it at the first point: counted there,
    # flagged as an upper bound.
    assert steps_to_target_score({100: 80.0, 200: 50.0, 400: 30.0}, TARGET, HORIZON).score == 200.0
    early = steps_to_target_score({100: 40.0, 400: 30.0}, TARGET, HORIZON)
    assert early.score == 100.0 and early.left_censored


def test_a_censored_trial_scores_horizon_times_final_over_target_after_every_trial_that_reaches() -> None:
    near = steps_to_target_score({100: 90.0, 400: 55.0}, TARGET, HORIZON)
    far = steps_to_target_score({100: 90.0, 400: 75.0}, TARGET, HORIZON)
    assert not near.reached and near.step is None and near.final == 55.0
    assert near.score == pytest.approx(400 * 55 / 50) == pytest.approx(440.0)
    assert far.score == pytest.approx(600.0) and math.isfinite(far.score)
    latest = steps_to_target_score({100: 90.0, 400: 50.0}, TARGET, HORIZON)  # reaches at its very last step
    assert latest.reached and latest.score == 400.0 < near.score < far.score


@pytest.mark.parametrize(("curve", "target", "horizon", "message"), [
    ({}, TARGET, HORIZON, "no checkpoint"),
    ({100: 90.0, 400: math.nan}, TARGET, HORIZON, "no finite FD at its last step 400"),
    ({100: 90.0}, 0.0, HORIZON, "target must be a finite FD above 0"),
    ({100: 90.0, 500: 40.0}, TARGET, HORIZON, "horizon 400 is before the curve's last step 500"),
])
def test_a_curve_that_cannot_be_scored_is_refused(curve: dict[int, float], target: float, horizon: int,
                                                  message: str) -> None:
    with pytest.raises(ValueError, match=message):
        steps_to_target_score(curve, target, horizon)


def _result(fd_track: dict[int, float], fd: dict[int, float]) -> TrialResult:
    return TrialResult(status="SUCCEEDED", metric_name="fd_pixels", fd_samples=96, fd=fd, fd_track=fd_track,
                       steps_done=HORIZON, track_effective_time_s={s: s / 100 for s in fd_track},
                       effective_time_s={s: s / 100 for s in fd})


def test_a_finished_trial_is_scored_on_the_curve_the_selection_names() -> None:
    fd = {300: 52.0, 400: 44.0}
    track = {150: 90.0, 200: 70.0, 250: 58.0, 300: 54.0, 350: 48.0, 400: 47.0}
    result = _result(track, fd)
    assert trial_objective(result, [300, 400]) == declared_objective(fd, [300, 400]) == 48.0  # the default
    assert trial_objective(result, [300, 400], {"name": "mean_fd"}) == 48.0
    on_track = trial_objective(result, [300, 400], {"name": "steps_to_target", "target": TARGET, "curve": "fd_track"})
    assert on_track == pytest.approx(300 + 50 * (54 - 50) / (54 - 48))  # 333.3
    on_fd = trial_objective(result, [300, 400], {"name": "steps_to_target", "target": TARGET, "curve": "fd"})
    assert on_fd == pytest.approx(300 + 100 * (52 - 50) / (52 - 44))  # 325
    censored = trial_objective(result, [300, 400], {"name": "steps_to_target", "target": 40.0, "curve": "fd_track"})
    assert censored == pytest.approx(400 * 47 / 40)
    with pytest.raises(TrialError, match="steps to target on fd_track: the curve has no finite FD at its last"):
        trial_objective(_result({**track, 400: math.nan}, fd), [300, 400],
                        {"name": "steps_to_target", "target": TARGET, "curve": "fd_track"})


def test_the_live_value_of_a_crossed_curve_is_its_final_score() -> None:
    curve = {100: 80.0, 200: 60.0, 300: 40.0, 400: 45.0}  # crosses 50 at 250 (the first test's curve)
    final = steps_to_target_score(curve, TARGET, HORIZON).score
    assert final == 250.0
    # Seen up to 300, or up to 350 (no checkpoint since 300): the crossing, already the final score.
    assert steps_to_target_so_far(curve, TARGET, 300) == steps_to_target_so_far(curve, TARGET, 350) == final
    assert steps_to_target_so_far(curve, TARGET, HORIZON) == final  # the back up to 45 after it changes nothing
    assert steps_to_target_so_far({100: 40.0, 400: 30.0}, TARGET, 100) == 100.0  # below at its first checkpoint


def test_a_live_value_not_yet_crossed_is_above_every_earlier_crossing_and_orders_by_the_latest_fd() -> None:
    crossed = steps_to_target_so_far({100: 60.0, 200: 40.0}, TARGET, 200)  # crossed at 150
    near = steps_to_target_so_far({100: 80.0, 200: 55.0, 300: 30.0}, TARGET, 200)  # at 200: 55 (crosses later)
    far = steps_to_target_so_far({100: 80.0, 200: 70.0}, TARGET, 200)
    just = steps_to_target_so_far({100: 80.0, 200: 50.5}, TARGET, 200)
    assert crossed == 150.0
    assert near == pytest.approx(200 * 55 / 50) == pytest.approx(220.0)  # what the final rule gives if it ended now
    assert far == pytest.approx(280.0) and just == pytest.approx(202.0)
    assert crossed <= 200 < just < near < far  # crossed first, then by how far above the target
    # Not a bound on the final score (the docstring says so): 240 at step 200, then a crossing at 233.3 by 300.
    steep = {100: 80.0, 200: 60.0, 300: 30.0}
    assert steps_to_target_so_far(steep, TARGET, 200) == pytest.approx(240.0)
    assert steps_to_target_so_far(steep, TARGET, 300) == pytest.approx(200 + 100 * 10 / 30)
    with pytest.raises(ValueError, match="no finite FD at its last step 200"):
        steps_to_target_so_far({100: 80.0, 200: math.nan, 300: 40.0}, TARGET, 250)


def test_the_live_value_on_the_whole_curve_is_the_trial_objective_and_mean_fd_is_unchanged() -> None:
    fd = {300: 52.0, 400: 44.0}
    track = {150: 90.0, 200: 70.0, 250: 58.0, 300: 54.0, 350: 48.0, 400: 47.0}
    result = _result(track, fd)
    for target, curve, whole in ((TARGET, "fd_track", track), (TARGET, "fd", fd), (40.0, "fd_track", track),
                                 (40.0, "fd", fd)):
        job = {"name": "steps_to_target", "target": target, "curve": curve}
        final = trial_objective(result, [300, 400], job)
        assert steps_to_target_so_far(whole, target, result.steps_done) == final
        # What the trainable reports at the last eval step's record, on the curve it names.
        assert objective_so_far(job, fd, {"fd_track_so_far": track}, 400) == final
    assert objective_so_far({"name": "steps_to_target", "target": 40.0, "curve": "fd"}, fd, {}, 400) == 440.0
    # At eval step 300, seen so far: fd {300: 52}; the tracking points up to 300 (54 at 300, not yet 50).
    job = {"name": "steps_to_target", "target": TARGET, "curve": "fd_track"}
    assert objective_so_far({**job, "curve": "fd"}, {300: 52.0}, {}, 300) == pytest.approx(300 * 52 / 50)
    early = {s: v for s, v in track.items() if s <= 300}
    assert objective_so_far(job, {300: 52.0}, {"fd_track_so_far": early}, 300) == pytest.approx(300 * 54 / 50)
    # A latest tracking FD that is not finite: no score now.
    assert objective_so_far(job, {300: 52.0}, {"fd_track_so_far": {**early, 300: math.nan}}, 300) == math.inf
    # mean_fd: the running mean of the finite FDs so far, as before (math.fsum of v / n), whatever the record holds.
    odd = {300: 0.1, 350: 0.2, 400: 0.7}
    for objective in (None, {}, {"name": "mean_fd"}):
        live = objective_so_far(objective, odd, {"fd_track_so_far": track}, 400)
        assert live == math.fsum(v / 3 for v in odd.values()) and live == pytest.approx(1 / 3)
        assert objective_so_far(objective, fd, {}, 400) == 48.0


def test_a_real_tiny_trial_scores_its_tracking_curves_crossing() -> None:
    """A real 24-step trial: the score is `time_to_target` on the run's own tracking curve, for a target between
    its first and last values (crossed) and one below its best value (censored). Each eval step's progress record
    carries the tracking points so far, on which the live value is the score on that prefix."""
    from trials import run_trial

    cfg: dict[str, Any] = {"rung": "cpu-xs", "steps": 24, "eval_steps": [12, 24], "threads": 1,
                           **copy.deepcopy(TINY_TRIAL)}
    cfg["eval"] = {**cfg["eval"], "track_points": 6, "track_from": 0.25}
    records: list[dict[str, Any]] = []
    result = run_trial(cfg, progress=records.append)
    steps = sorted(result.fd_track)
    values = [result.fd_track[s] for s in steps]
    assert len(steps) >= 6 and all(math.isfinite(v) for v in values)
    target = (max(values) + min(values)) / 2
    expected = time_to_target(steps, [result.track_effective_time_s[s] for s in steps], values, target).step
    job = {"name": "steps_to_target", "target": target, "curve": "fd_track"}
    assert expected is not None and trial_objective(result, [12, 24], job) == pytest.approx(expected)
    low = min(values) * 0.9
    assert trial_objective(result, [12, 24], {**job, "target": low}) == pytest.approx(24 * values[-1] / low)
    assert [r["step"] for r in records] == [12, 24]
    assert records[0]["fd_track_so_far"] == {s: v for s, v in result.fd_track.items() if s <= 12}
    assert records[1]["fd_track_so_far"] == result.fd_track
    assert len(result.fd_track) > len(records[0]["fd_track_so_far"]) > 0
    for t in (target, low):
        live = [objective_so_far({**job, "target": t}, {}, r, r["step"]) for r in records]
        assert live[0] == steps_to_target_so_far(result.fd_track, t, 12)
        assert live[1] == trial_objective(result, [12, 24], {**job, "target": t})


def _trial(k: int, seed: int, score: float, steps: int = HORIZON) -> TrialRecord:
    key = f"K={k},gamma=0.15"
    return TrialRecord(trial_key=f"{key},seed={seed}", point_key=key, role="search", arm="periodic", seed=seed,
                       status="SUCCEEDED", params={"K": k, "gamma": 0.15}, objective=score, steps_done=steps,
                       run_id=f"run-{key}-{seed}")


def _muon(seed: int, score: float) -> TrialRecord:
    return TrialRecord(trial_key=f"muon,seed={seed}", point_key="muon", role="baseline", arm="muon", seed=seed,
                       status="SUCCEEDED", objective=score, steps_done=HORIZON)


def test_selection_by_steps_ranks_censored_seeds_last_pairs_by_seed_and_says_which_objective_chose() -> None:
    seeds = [0, 1, 2]
    records = [
        *(_trial(2, s, v) for s, v in zip(seeds, [250.0, 270.0, 260.0], strict=True)),  # reaches on every seed
        *(_trial(3, s, v) for s, v in zip(seeds, [300.0, 320.0, 440.0], strict=True)),  # censored on seed 2
        *(_trial(4, s, v) for s, v in zip(seeds, [460.0, 480.0, 600.0], strict=True)),  # never reaches
        *(_muon(s, v) for s, v in zip(seeds, [200.0, 210.0, 205.0], strict=True)),
    ]
    points = summarise_points(records, seeds)
    baselines = summarise_points(records, seeds, "baseline")
    sel = select_best(points, baselines=baselines, tie_break="none", objective="steps_to_target", target=TARGET,
                      curve="fd_track")
    assert sel is not None and sel.point.point_key == "K=2,gamma=0.15"
    assert [p.point_key for p in sel.ranking] == ["K=2,gamma=0.15", "K=3,gamma=0.15", "K=4,gamma=0.15"]
    censored = {p.point_key: p.censored_seeds for p in sel.ranking}
    assert censored == {"K=2,gamma=0.15": [], "K=3,gamma=0.15": [2], "K=4,gamma=0.15": [0, 1, 2]}
    assert baselines[0].censored_seeds == []
    # Paired by seed: K=3 - K=2 per seed is 50, 50, 180 -> mean 93.33.
    diff = sel.ranking[1].diff_to_best
    assert diff is not None and diff["n"] == 3 and diff["mean"] == pytest.approx(280 / 3)
    assert sel.objective == "steps_to_target" and sel.target == TARGET and sel.curve == "fd_track"
    assert sel.unit == "steps to target" and "steps to reach fd_track <= 50" in sel.objective_definition
    # Worse than Muon on every seed (50, 60, 55 steps more): said in steps, not FD.
    assert sel.loses_to == ["muon"] and "steps to target" in sel.warnings[0]
    doc = sel.to_dict()
    assert doc["objective"] == "steps_to_target" and doc["target"] == TARGET and doc["point"]["censored_seeds"] == []
    result = SweepResult(sweep_id="s-1", name="s", state="SUCCEEDED", parent_run_id="p", tracking_uri="u",
                         experiment="e", eval_steps=[300, 400], seeds=seeds, selection=sel, points=points,
                         baselines=baselines, trials=records, objective=sel.objective_definition)
    assert result.selection_document()["objective"] == sel.objective_definition
    assert result.selection_document()["selection"]["objective"] == "steps_to_target"
    assert "objective = mean over seeds of the steps to reach fd_track <= 50" in result.table().splitlines()[0]


def test_a_chosen_point_with_censored_seeds_says_so() -> None:
    seeds = [0, 1]
    records = [*(_trial(3, s, v) for s, v in zip(seeds, [380.0, 420.0], strict=True)),
               *(_trial(2, s, v) for s, v in zip(seeds, [500.0, 520.0], strict=True))]
    sel = select_best(summarise_points(records, seeds), objective="steps_to_target", target=TARGET)
    assert sel is not None and sel.point.point_key == "K=3,gamma=0.15" and sel.point.censored_seeds == [1]
    assert sel.warnings == ["the chosen point did not reach fd_track <= 50 on 1 of 2 seeds ([1]): each counts as "
                            "horizon x final / target, a lower bound on its steps, not a measured crossing"]
    plain = select_best(summarise_points(records, seeds))  # mean FD: no censoring is read into the numbers
    assert plain is not None and plain.point.censored_seeds is None and plain.objective == "mean_fd"
    assert plain.warnings == [] and plain.unit == "FD"


def _spec(**fields: Any) -> dict[str, Any]:
    return {"name": "t", "horizon": 30, "trial": copy.deepcopy(TINY_TRIAL), **fields}


STEPS = {"objective": "steps_to_target", "target": 50}
SIX_EVALS = [5, 10, 15, 20, 25, 30]


def test_the_default_objective_is_the_mean_fd_and_leaves_the_fingerprint_alone() -> None:
    default = load_spec(_spec())
    assert default.selection.objective == "mean_fd" and default.selection.trial_objective() == {"name": "mean_fd"}
    explicit = load_spec(_spec(selection={"objective": "mean_fd", "curve": "fd_track"}))
    assert explicit.fingerprint() == default.fingerprint()  # sweeps started before the option still resume
    steps = load_spec(_spec(selection=STEPS, trial={**TINY_TRIAL, "eval": {**TINY_TRIAL["eval"], "track_points": 6}}))
    assert steps.selection.trial_objective() == {"name": "steps_to_target", "target": 50.0, "curve": "fd_track"}
    assert steps.fingerprint() != default.fingerprint()
    on_fd = load_spec(_spec(selection={**STEPS, "curve": "fd"}, eval_steps=SIX_EVALS,
                            search={"method": "tpe", "budget": 2}))
    assert on_fd.selection.curve == "fd" and on_fd.search.method == "tpe"


@pytest.mark.parametrize(("fields", "message"), [
    ({"selection": {"objective": "steps_to_target"}}, "selection.target: objective 'steps_to_target' needs a target"),
    ({"selection": {**STEPS, "target": 0}}, "greater than 0"),
    ({"selection": {**STEPS, "target": -1.5}}, "greater than 0"),
    ({"selection": {**STEPS, "target": math.inf}}, "finite number"),
    ({"selection": {"target": 50}}, "apply to objective 'steps_to_target' only"),
    ({"selection": {"objective": "steps"}}, "Input should be 'mean_fd' or 'steps_to_target'"),
    ({"selection": STEPS}, "trial.eval.track_points is 4; selection.curve 'fd_track' needs at least 6"),
    ({"selection": {**STEPS, "curve": "fd"}}, "eval_steps has 3 steps; selection.curve 'fd' needs at least 6"),
    ({"selection": {**STEPS, "curve": "fd"}, "eval_steps": SIX_EVALS, "early_stopping": {"method": "asha"}},
     "early_stopping.method 'asha'"),
    ({"selection": {**STEPS, "curve": "fd"}, "eval_steps": SIX_EVALS,
      "search": {"method": "tpe", "budget": 2, "warm_start": ["s-1"]}}, "search.warm_start"),
    ({"selection": STEPS, "trial": {**TINY_TRIAL, "eval": {**TINY_TRIAL["eval"], "track_points": 6}},
      "backend": {"name": "command", "command": "train {seed}"}}, "selection.curve 'fd_track' needs the builtin"),
])
def test_a_steps_to_target_spec_that_cannot_locate_a_crossing_is_refused(fields: dict[str, Any],
                                                                         message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_spec(_spec(**fields))


def test_optuna_is_told_finite_means_of_steps_with_censored_seeds() -> None:
    """TPE minimises the points' means of steps to target; a point censored on every seed is told a finite value
    above every point that reaches."""
    spec = SweepSpec.model_validate(_spec(baselines=[], seeds=[0, 1], eval_steps=SIX_EVALS,
                                          selection={**STEPS, "curve": "fd"},
                                          search={"method": "tpe", "budget": 3, "tpe_startup_points": 3,
                                                  "space": {"K": [2, 3, 4], "gamma": [0.15]}}))
    planner = Planner(spec)
    finals = {2: 30.0, 3: 45.0, 4: 70.0}  # final FD on each point's curve; K=4 never reaches 50
    while (req := planner.next()) not in (None, FINISHED):
        assert not isinstance(req, str) and req is not None
        k = int(req.params["K"])
        curve = {5: 90.0, 30: finals[k]}
        score = steps_to_target_score(curve, 50.0, 30).score
        planner.complete(req, "SUCCEEDED", objective=score)
    told = {int(t.params["K"]): t.value for t in planner.study.trials}
    assert told[2] == pytest.approx(5 + 25 * 40 / 60) and told[3] == pytest.approx(5 + 25 * 40 / 45)
    assert told[4] == pytest.approx(30 * 70 / 50) and all(math.isfinite(v) for v in told.values())
    assert planner.study.best_trial.params["K"] == 2


def test_the_cli_refuses_a_steps_to_target_spec_in_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from scalesweep_cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nselection: {objective: steps_to_target, target: 40, curve: fd}\n")
    assert main(["sweep", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("scalesweep sweep validate: error: ") and "selection.curve 'fd' needs at least 6" in err
