"""The transfer job reads its runs through the run record (`trials.record.read_runs`): one state reading, the
latest attempt of a retried trial, and the step series its analysis needs, under the tag values stored runs carry."""

from __future__ import annotations

from pathlib import Path

from mlflow import MlflowClient

from sweeper.transfer._reading import read_runs
from trials.record import LINEAGE, METRIC, TAG, TRIAL_TAG


def _trial(client: MlflowClient, exp: str, name: str, *, transfer: str = "t1", attempt: int = 0,
           status: str = "FINISHED", tag: str | None = None, params: dict[str, str] | None = None,
           tags: dict[str, str] | None = None, points: tuple[tuple[int, float, float], ...] = ()) -> str:
    run = client.create_run(exp, run_name=f"{name}#{attempt}", tags={
        TAG.KIND: "trial", LINEAGE.TRANSFER_ID: transfer, TAG.TRIAL_KEY: name, TAG.ATTEMPT: str(attempt),
        **({TAG.STATUS: tag} if tag else {}), **(tags or {})})
    run_id = run.info.run_id
    for key, value in (params or {}).items():
        client.log_param(run_id, key, value)
    for step, time_s, fd in points:
        client.log_metric(run_id, METRIC.EFFECTIVE_TIME_S, time_s, step=step)
        client.log_metric(run_id, METRIC.FD, fd, step=step)
    if status != "RUNNING":
        client.set_terminated(run_id, status=status)
    return run_id


def test_transfer_runs_are_read_as_run_records(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("transfer")
    arm = {"optimizer.name": "periodic", "rung": "cpu-s", "seed": "1", "optimizer.lr": "0.02",
           "optimizer.refresh_every": "3", "optimizer.gamma": "0.15", "steps": "20"}
    _trial(client, exp, "periodic.cpu-s,seed=1", status="FAILED", tag="FAILED", params=arm)
    retried = _trial(client, exp, "periodic.cpu-s,seed=1", attempt=1, tag="SUCCEEDED", params=arm,
                     tags={LINEAGE.LR_RULE: "unchanged", LINEAGE.LR_BASE: "0.02", TRIAL_TAG.PARAMETERS: "1000",
                           TRIAL_TAG.FD_METRIC_NAME: "fd_pixels"},
                     points=((10, 1.0, 40.0), (20, 2.0, 35.0), (20, 2.5, 34.0)))  # a resumed trial re-logs a step
    _trial(client, exp, "adamw.cpu-s,seed=0", status="FAILED", tag="DIVERGED",
           params={"optimizer.name": "adamw", "rung": "cpu-s", "optimizer.gamma": "0.15", "optimizer.lr": "None"},
           tags={LINEAGE.LR: "0.001"})
    _trial(client, exp, "muon.cpu-s,seed=0", status="KILLED", tag="PRUNED")
    _trial(client, exp, "muon.cpu-s,seed=1", status="KILLED", tag="KILLED")
    _trial(client, exp, "muon.cpu-m,seed=0", status="RUNNING", tag="PENDING")  # a running trial's tag says PENDING
    _trial(client, exp, "muon.cpu-m,seed=1", transfer="other")

    runs = read_runs(uri, "transfer", LINEAGE.TRANSFER_ID, "t1")
    assert [r.trial_key for r in runs] == sorted(r.trial_key for r in runs)
    by_key = {r.trial_key: r for r in runs}
    assert set(by_key) == {"periodic.cpu-s,seed=1", "adamw.cpu-s,seed=0", "muon.cpu-s,seed=0", "muon.cpu-s,seed=1",
                           "muon.cpu-m,seed=0"}
    assert {k: r.state for k, r in by_key.items()} == {
        "periodic.cpu-s,seed=1": "SUCCEEDED", "adamw.cpu-s,seed=0": "DIVERGED", "muon.cpu-s,seed=0": "PRUNED",
        "muon.cpu-s,seed=1": "CANCELLED", "muon.cpu-m,seed=0": "RUNNING"}

    done = by_key["periodic.cpu-s,seed=1"]
    assert (done.run_id, done.attempt) == (retried, 1)
    assert done.checkpoints == ((10, 1.0, 40.0), (20, 2.5, 34.0))
    assert (done.arm, done.rung, done.seed, done.K, done.gamma, done.horizon) == ("periodic", "cpu-s", 1, 3, 0.15, 20)
    assert (done.lr, done.lr_rule, done.lr_base) == (0.02, "unchanged", 0.02)
    assert (done.parameters, done.metric_name) == (1000, "fd_pixels")

    diverged = by_key["adamw.cpu-s,seed=0"]
    assert (diverged.lr, diverged.gamma, diverged.K, diverged.checkpoints) == (0.001, None, None, ())
    assert read_runs(uri, "no such experiment", LINEAGE.TRANSFER_ID, "t1") == []
