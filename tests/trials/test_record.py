"""`trials.record`: one reading of a run's state, the latest attempt per trial, and the run lifecycle both trial
backends share (the command backend writes the same summary as the built-in one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from trials import TrialError, run_command_trial
from trials.record import (
    METRIC,
    STATES,
    TAG,
    StoredRun,
    latest_attempts,
    read_run,
    read_runs,
    run_state,
    trial_run,
    trials_tagged,
)

# A trainer that reports two checkpoints at once (no braces: the command is a template).
_REPORT = (
    "import json, sys; out = open(sys.argv[1], 'a'); "
    "[out.write(json.dumps(dict(step=s, fd=f, effective_time_s=t)) + chr(10)) for s, f, t in "
    "((10, 40.0, 1.5), (20, 35.0, 3.0))]"
)
TINY = {"rung": "cpu-xs", "steps": 20, "eval_steps": [10, 20]}


@pytest.mark.parametrize(
    ("mlflow_status", "tag", "state", "diverged"),
    [
        ("FINISHED", "SUCCEEDED", "SUCCEEDED", False),
        ("FINISHED", None, "SUCCEEDED", False),  # a run nobody tagged: MLflow's word
        ("FAILED", "FAILED", "FAILED", False),
        ("FAILED", "DIVERGED", "FAILED", True),
        ("KILLED", "PRUNED", "PRUNED", False),
        ("KILLED", "KILLED", "CANCELLED", False),  # interrupted: resumable, never shown as raw KILLED
        ("KILLED", None, "CANCELLED", False),
        ("RUNNING", "PENDING", "RUNNING", False),  # a running trial's tag still says PENDING
        ("SCHEDULED", "PENDING", "PENDING", False),
    ],
)
def test_one_state_from_mlflow_status_and_tag(mlflow_status: str, tag: str | None, state: str, diverged: bool) -> None:
    assert run_state(mlflow_status, tag) == (state, diverged)
    assert state in STATES


def _run(run_id: str, key: str | None, attempt: int, start: int) -> StoredRun:
    tags = {} if key is None else {TAG.TRIAL_KEY: key, TAG.ATTEMPT: str(attempt)}
    return StoredRun(run_id=run_id, start_time=start, tags=tags)


def test_latest_attempt_per_trial_keeps_order_and_untagged_runs() -> None:
    runs = [_run("a0", "a", 0, 1), _run("b0", "b", 0, 2), _run("x", None, 0, 3), _run("a1", "a", 1, 4)]
    assert [r.run_id for r in latest_attempts(runs)] == ["b0", "x", "a1"]


def test_trial_filters_quote_the_value() -> None:
    assert trials_tagged(TAG.SWEEP_ID, "it's") == (
        "tags.`scalesweep.kind` = 'trial' and tags.`scalesweep.sweep_id` = 'it\\'s'")


def test_command_backend_writes_the_same_summary_as_the_builtin_one(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = {**TINY, "tracking": {"tracking_uri": uri, "experiment": "record"}}
    result = run_command_trial(cfg, {"command": [sys.executable, "-c", _REPORT, "{progress_file}"], "poll_s": 0.1})
    assert result.total_effective_time_s == 3.0
    run = read_run(MlflowClient(uri), result.run_id, histories=[METRIC.FD])
    assert run.state == "SUCCEEDED" and run.history(METRIC.FD) == {10: 40.0, 20: 35.0}
    # Every summary metric the run has a value for, the total training time included (the ledger reads it).
    assert run.metrics[METRIC.TOTAL_EFFECTIVE_TIME_S] == 3.0
    assert {k for k in METRIC.SUMMARY if k != METRIC.TIME_TO_BEST_S} <= set(run.metrics)


def test_a_failing_body_tags_and_finishes_the_run(tmp_path: Path) -> None:
    from trials import TrackingConfig

    tracking = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", experiment="record")
    with pytest.raises(TrialError, match="boom"), trial_run(tracking, params={"seed": 0}) as run:
        run.defer(4, {METRIC.LOSS: 1.5})
        raise TrialError("boom")
    client = MlflowClient(tracking.tracking_uri)
    stored = read_runs(client, [client.get_experiment_by_name("record").experiment_id], "", histories=[METRIC.LOSS])
    assert len(stored) == 1
    (failed,) = stored
    assert failed.state == "FAILED" and failed.tags[TAG.STATUS] == "FAILED" and "boom" in failed.tags[TAG.ERROR]
    assert failed.tags[TAG.KIND] == "trial" and failed.params["seed"] == "0"
    assert failed.history(METRIC.LOSS) == {4: 1.5}  # what was held back is written before the run closes
