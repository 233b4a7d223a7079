"""Trials on N workers (`execution.workers_per_trial`): the spec's rules and refusals, and a 2-worker sweep on a
real local Ray (FSDP2 on 2 gloo ranks in one placement group) into one MLflow run per trial, with a rank killed
mid-trial that the trial restarts and resumes from its torch.distributed.checkpoint."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient
from pydantic import ValidationError

from scalesweep_cli import main
from sweeper import load_spec, run_sweep
from sweeper.specs.checks import check_capacity

from .conftest import REPO, make_spec, write_spec


def _two_workers(name: str, store_uri: str, **fields: object) -> dict:
    """One trial (one grid point, no baselines) on 2 workers of 1 CPU each."""
    return make_spec(name, store_uri, search={"space": {"K": [3], "gamma": [0.15]}}, baselines=[],
                     execution={"workers_per_trial": 2, "cpus_per_trial": 1, "num_cpus": 2}, **fields)


def test_workers_per_trial_defaults_to_one_and_validate_shows_it(store_uri: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert load_spec(make_spec("one", store_uri)).execution.workers_per_trial == 1
    spec = load_spec(_two_workers("two", store_uri))
    assert spec.execution.workers_per_trial == 2 and spec.execution.trial_cpus == 2
    assert spec.trial_config({"name": "periodic"}, 0)["workers"] == 2
    assert "workers" not in load_spec(make_spec("one", store_uri)).trial_config({"name": "periodic"}, 0)
    assert main(["sweep", "validate", str(write_spec(tmp_path / "s.yaml", _two_workers("two", store_uri)))]) == 0
    assert json.loads(capsys.readouterr().out)["execution"]["workers_per_trial"] == 2


@pytest.mark.parametrize(
    ("execution", "trial", "message"),
    [
        ({"workers_per_trial": 3}, {}, "execution.workers_per_trial 3 does not divide the global batch "
                                        "(trial.batch_size 16)"),
        ({"workers_per_trial": 0}, {}, "execution.workers_per_trial\n  Input should be greater than or equal to 1"),
        ({"workers_per_trial": 2}, {"workers": 2}, "trial.workers is set by the sweep (execution.workers_per_trial)"),
        ({"workers_per_trial": 5}, {"batch_size": 32}, "does not divide the global batch (trial.batch_size 32)"),
    ],
)
def test_bad_worker_counts_are_refused_by_the_spec(store_uri: str, execution: dict, trial: dict,
                                                  message: str) -> None:
    spec = make_spec("bad", store_uri)
    spec["execution"] = {**spec["execution"], **execution}
    spec["trial"] = {**spec["trial"], **trial}
    with pytest.raises(ValidationError) as info:
        load_spec(spec)
    assert message in str(info.value)


def test_capacity_check_names_the_field_and_what_the_cluster_has(store_uri: str) -> None:
    spec = load_spec(make_spec("big", store_uri, execution={"workers_per_trial": 4, "cpus_per_trial": 2}))
    check_capacity(spec, cluster_cpus=8)  # fits exactly
    with pytest.raises(ValueError, match=r"^execution.workers_per_trial 4 needs 8 CPUs \(2 CPUs per worker\); the "
                                         r"cluster has 6 CPUs: at most 3 workers per trial at these resources$"):
        check_capacity(spec, cluster_cpus=6)
    gpu = load_spec(make_spec("gpu", store_uri, execution={"workers_per_trial": 2, "gpus_per_trial": 1}))
    with pytest.raises(ValueError, match=r"needs 2 CPUs and 2 GPUs .* the cluster has 64 CPUs and 1 GPUs: at most 1"):
        check_capacity(gpu, cluster_cpus=64, cluster_gpus=1)


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    import ray

    ray.init(address="local", include_dashboard=False, num_cpus=2, log_to_driver=False)
    yield
    ray.shutdown()


def _trial_runs(uri: str, experiment: str) -> list:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], "tags.`scalesweep.kind` = 'trial'")


def _kill_rank_one_after_first_checkpoint(workdir: Path, killed: list[int]) -> None:
    """SIGKILL the rank-1 actor's process once the trial has written its first checkpoint."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if any(workdir.glob("checkpoints/*/attempt-*/latest")):
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    title = cmdline.read_bytes()
                except OSError:
                    continue
                if title.startswith(b"ray::_Rank.run"):  # Ray titles a worker by the actor method it runs
                    pid = int(cmdline.parent.name)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
        time.sleep(0.2)


# One 2-worker sweep for what were two: a plain one (15 s in the full run at d56d647) checked the run's workers and
# both ranks' communication, which this one checks too, after its restart. The plain path of 2-rank trials is also
# trained in tests/sweeper/transfer/test_transfer_run.py (a transfer's 2-rank runs, each rank's traffic logged).
@pytest.mark.integration
def test_a_two_worker_sweep_with_a_killed_rank_restarts_it_resumes_and_logs_one_run_with_comm_metrics(
        ray_local: None, store_uri: str, tmp_path: Path) -> None:
    workdir = tmp_path / "wd"
    killed: list[int] = []
    spec = _two_workers("killed-rank", store_uri, horizon=48, eval_steps=[16, 32, 48])
    killer = threading.Thread(target=_kill_rank_one_after_first_checkpoint, args=(workdir, killed), daemon=True)
    killer.start()
    result = run_sweep(load_spec(spec), workdir=workdir)
    killer.join(timeout=5)

    assert killed, "rank 1 was never found to kill"
    assert result.state == "SUCCEEDED" and result.counts["attempts"] == 1  # restarted inside the trial, one attempt
    assert result.counts["SUCCEEDED"] == 1
    runs = _trial_runs(store_uri, "killed-rank")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"  # rank 0 logs the one run; rank 1 logs nothing
    assert runs[0].data.params["workers"] == "2"
    metrics = runs[0].data.metrics
    for rank in (0, 1):
        # FSDP2 all-gathers every block twice (forward, backward) and reduce-scatters its gradients each step
        assert metrics[f"comm_bytes_per_step_rank{rank}"] > 1e5
        assert 0 < metrics[f"comm_time_s_per_step_rank{rank}"] < metrics[f"step_time_s_rank{rank}"]
    assert metrics["comm/mean_bytes_per_step"] > 0  # the sharded optimizer's own all-gathers (refresh steps)
    client = MlflowClient(store_uri)
    run_id = runs[0].info.run_id
    assert runs[0].data.tags["scalesweep.rank_restarts"] == "1" and "scalesweep.error" not in runs[0].data.tags
    assert runs[0].data.tags["scalesweep.status"] == "SUCCEEDED"
    resumed = client.get_metric_history(run_id, "resumed_from_step")
    assert [m.value for m in resumed] and all(m.value in (16.0, 32.0) for m in resumed)
    for key in ("fd", "val_loss", "loss", "comm_bytes_per_step_rank1"):
        steps = [m.step for m in client.get_metric_history(run_id, key)]
        assert len(steps) == len(set(steps)), (key, steps)  # nothing logged twice
    assert sorted(m.step for m in client.get_metric_history(run_id, "fd")) == [16, 32, 48]


@pytest.mark.integration
def test_a_command_trainer_runs_torchrun_on_the_workers_ray_reserved(ray_local: None, store_uri: str,
                                                                     tmp_path: Path) -> None:
    import sys

    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "{workers}",
               "--master-addr", "{master_addr}", "--master-port", "{master_port}",
               str(REPO / "examples" / "torchrun_trial.py"), "{config_file}"]
    spec = _two_workers("torchrun", store_uri, backend={"name": "command", "command": command, "poll_s": 0.1})
    result = run_sweep(load_spec(spec), workdir=tmp_path / "wd")
    assert result.state == "SUCCEEDED" and result.counts["SUCCEEDED"] == 1
    runs = _trial_runs(store_uri, "torchrun")
    assert len(runs) == 1
    run = runs[0]
    assert run.data.params["command"].count("--nproc-per-node 2 ") == 1  # {workers} filled in
    assert "{master_port}" not in run.data.params["command"]
    # both ranks trained: rank 1's communication reached rank 0's report
    assert run.data.metrics["comm_bytes_per_step_rank1"] > 1e5


def test_a_trial_that_no_cluster_can_place_is_said_with_its_figures() -> None:
    """Issue 64, N3 at run time: what the driver checks against the live nodes before Tune holds a trial."""
    from sweeper.search._tune_stage import _unplaceable

    two = [{"CPU": 2.0}, {"CPU": 2.0}]
    assert _unplaceable(two, 4, 1.0, 0.0, one_node=False) is None  # packed where it fits, spread where it must
    assert _unplaceable(two, 4, 1.0, 0.0, one_node=True) == ("one trial needs 4 CPUs on one node; the largest node "
                                                             "has 2")
    assert _unplaceable(two, 2, 3.0, 0.0, one_node=False) == ("one trial needs 6 CPUs (3 per worker); the cluster "
                                                              "has 4 in all, 2 on its largest node")
    assert _unplaceable(two, 2, 1.0, 1.0, one_node=False) == ("one trial needs 2 GPUs (1 per worker); the cluster "
                                                              "has 0 in all, 0 on its largest node")

