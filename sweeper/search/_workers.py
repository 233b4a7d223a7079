"""A trial on N workers: the Tune trial's placement group (N bundles, packed) and the ranks that run in it.

Tune reserves the whole group before the trial starts (`trial_resources`: one bundle per worker, `PACK`: on one node
where it fits, so no rank waits for a machine and nothing else is oversubscribed), each trial its own trial config's
worker count (`resources_by_config`: a transfer's rungs may run on different counts). The trainable itself runs in
bundle 0 and is rank 0; ranks 1..N-1 are Ray actors pinned to bundles 1..N-1 (`_Rank`). They meet through
torch.distributed's TCP rendezvous at rank 0's node and a free port (gloo on CPU, NCCL on CUDA). Rank 0 holds the
trial's one MLflow run and reports to Tune, exactly as a one-worker trial does.

Lost ranks: when any rank's process dies (or its node), rank 0's next collective fails; the trainable then kills
the other ranks, starts a fresh set in the same bundles and runs the trial again in the same MLflow run, which
resumes from the last checkpoint the ranks wrote through torch.distributed.checkpoint (`trials._distributed`), at
most `MAX_RANK_RESTARTS` times. A stop from Tune, or an error on rank 0 itself, ends every rank (actors killed);
actors are owned by the trainable, so Ray ends them too if the trainable's process dies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from trials.core.proctree import free_port
from trials.record import TRIAL_TAG

from ..specs import ExecutionSpec

__all__ = [
    "MAX_RANK_RESTARTS",
    "RANK_RESTARTS",
    "init_ranks",
    "launch_placeholders",
    "rank_bundles",
    "resources_by_config",
    "run_on_workers",
    "trial_resources",
]

# Restarts of a trial's rank group after a lost rank: each resumes from the last checkpoint, so a restart costs at
# most one eval interval of training. Three covers a flaky node without looping forever on a broken one.
MAX_RANK_RESTARTS = 3
# Tag on a trial's run that finished after restarting its ranks: how many restarts it took.
RANK_RESTARTS = TRIAL_TAG.RANK_RESTARTS


def rank_bundles(execution: ExecutionSpec, workers: int | None = None) -> list[dict[str, float]]:
    """One bundle per worker (`workers`, default execution.workers_per_trial), each `cpus_per_trial` CPUs (and
    `gpus_per_trial` GPUs)."""
    bundle = {"CPU": execution.cpus_per_trial}
    if execution.gpus_per_trial > 0:
        bundle["GPU"] = execution.gpus_per_trial
    return [dict(bundle) for _ in range(workers or execution.workers_per_trial)]


def trial_resources(execution: ExecutionSpec, one_node: bool = False, workers: int | None = None) -> Any:
    """What `tune.with_resources` reserves for a trial on `workers` ranks (default execution.workers_per_trial): a
    plain request for one worker, else a placement group of one bundle per worker (the trainable takes bundle 0),
    packed: on one node where it fits (`PACK`), or only on one node (`STRICT_PACK`, `one_node`: a command
    trainer's `torchrun --nproc-per-node` starts every rank on the trainable's node, so bundles elsewhere would
    leave that node oversubscribed)."""
    if (workers or execution.workers_per_trial) == 1:
        return {"cpu": execution.cpus_per_trial, "gpu": execution.gpus_per_trial}
    from ray import tune

    return tune.PlacementGroupFactory(rank_bundles(execution, workers),
                                      strategy="STRICT_PACK" if one_node else "PACK")


def resources_by_config(execution: ExecutionSpec, one_node: bool = False) -> Callable[[dict[str, Any]], Any]:
    """The per-trial form `tune.with_resources` takes (a callable of the trial's config): each trial reserves its
    own trial config's `workers` (1 when absent: the sweep writes it only above 1), so trials at rungs of
    different worker counts (a sweep's `workers_by_rung`) each get their own placement group. A config without
    the driver's job (none is expected) reserves execution.workers_per_trial."""
    from ray import tune
    from ray.tune.execution.placement_groups import resource_dict_to_pg_factory

    def resources(config: dict[str, Any]) -> Any:
        job = config.get("job")
        workers = int(job["trial"].get("workers", 1)) if isinstance(job, dict) and "trial" in job else None
        request = trial_resources(execution, one_node, workers)
        # Ray 2.60's with_resources documents a callable as returning a PlacementGroupFactory: the one-worker
        # request as the same factory with_resources makes of a plain request
        return request if isinstance(request, tune.PlacementGroupFactory) else resource_dict_to_pg_factory(request)

    return resources


def launch_placeholders(command: dict[str, Any], trial: dict[str, Any]) -> dict[str, Any]:
    """A command backend with `{workers}`, `{master_addr}` and `{master_port}` filled in (the trial's workers and a
    free port on this node, where the trial's placement group sits), the rest of its placeholders left to
    `trials.run_command_trial`; and OMP_NUM_THREADS set to each worker's CPUs unless the command sets it (torchrun
    would set 1)."""
    import ray

    workers = int(trial.get("workers", 1))
    values = {
        "{workers}": str(workers),
        "{master_addr}": ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1",
        "{master_port}": str(free_port()),
    }
    argv = []
    for arg in command["command"]:
        for token, value in values.items():
            arg = arg.replace(token, value)
        argv.append(arg)
    env = {"OMP_NUM_THREADS": str(int(trial.get("threads", 1))), **dict(command.get("env") or {})}
    return {**command, "command": argv, "env": env}


def _rank_actor() -> Any:
    import ray

    @ray.remote
    class _Rank:
        """One rank above 0 of a multi-worker trial: joins the group and trains; rank 0 logs."""

        def run(self, trial: dict[str, Any], rank: int, world: int, addr: str, port: int) -> None:
            import torch

            from trials import run_trial

            torch.set_num_threads(int(trial.get("threads", 1)))
            init_ranks(rank, world, addr, port, device=_device(trial))
            try:
                run_trial(trial)
            finally:
                _leave_group()

    return _Rank


def _device(trial: dict[str, Any]) -> str:
    import torch

    device = trial.get("device", "cpu")
    return "cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu"


def _leave_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        with contextlib.suppress(Exception):  # a group whose peer died may refuse a clean shutdown
            dist.destroy_process_group()


def init_ranks(rank: int, world: int, master_addr: str, master_port: int, device: str = "cpu",
               timeout_s: float = 1800.0) -> None:
    """Join the trial's process group over TCP: gloo on CPU, NCCL on CUDA (each rank on the GPU Ray gave it). The
    timeout bounds how long ranks wait in a collective, rank 0's FD evaluation included."""
    import datetime

    import torch
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)  # Ray sets CUDA_VISIBLE_DEVICES to the bundle's GPU
    dist.init_process_group(backend, init_method=f"tcp://{master_addr}:{master_port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def run_on_workers(trial: dict[str, Any], run_rank0: Callable[[dict[str, Any]], Any],
                   restarts: int = MAX_RANK_RESTARTS) -> Any:
    """Run a `trial["workers"]`-rank trial in the current Tune trial's placement group: ranks 1..N-1 as actors in
    bundles 1..N-1, rank 0 here (`run_rank0(trial)` returns the trial's result); restart the group after a lost
    rank (see the module docstring)."""
    import ray
    from ray.util.placement_group import get_current_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    world = int(trial["workers"])
    group = get_current_placement_group()
    if group is None:
        raise RuntimeError(f"a {world}-worker trial runs in a placement group of {world} bundles "
                           "(execution.workers_per_trial); this trial has none")
    bundles = group.bundle_specs
    rank_cls = _rank_actor()
    addr = ray.util.get_node_ip_address()
    for attempt in range(restarts + 1):
        port = free_port()
        actors = [
            rank_cls.options(
                num_cpus=bundles[r].get("CPU", 0), num_gpus=bundles[r].get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=r),
            ).remote()
            for r in range(1, world)
        ]
        runs = [actor.run.remote(trial, r, world, addr, port) for r, actor in enumerate(actors, start=1)]
        try:
            init_ranks(0, world, addr, port, device=_device(trial))
            result = run_rank0(trial)
            ray.get(runs)
            if attempt:
                _record_restarts(trial, attempt)
            return result
        except SystemExit:
            raise  # a stop from Tune: the finally below ends every rank
        except Exception:
            lost = _lost_rank(runs)
            if lost is None or attempt == restarts or not trial.get("checkpoint_dir"):
                raise  # rank 0's own error (the others are stuck in a collective), or out of restarts
        finally:
            _leave_group()
            for actor in actors:
                ray.kill(actor, no_restart=True)
    raise AssertionError("unreachable")  # the loop returns or raises


def _record_restarts(trial: dict[str, Any], restarts: int) -> None:
    """On the trial's run after it finished on a restarted group: how many restarts it took (tag RANK_RESTARTS),
    and no longer the lost rank's error, which closing the interrupted group left in `scalesweep.error`."""
    tracking = trial.get("tracking") or {}
    if not tracking.get("run_id"):
        return
    with contextlib.suppress(Exception):  # bookkeeping must never fail a finished trial
        from mlflow import MlflowClient

        from trials.record import TAG

        client = MlflowClient(tracking_uri=tracking["tracking_uri"])
        client.set_tag(tracking["run_id"], RANK_RESTARTS, str(restarts))
        if TAG.ERROR in client.get_run(tracking["run_id"]).data.tags:
            client.delete_tag(tracking["run_id"], TAG.ERROR)


def _lost_rank(runs: list[Any]) -> BaseException | None:
    """The error of a rank whose process or node died (Ray's actor error), waiting briefly for it to surface."""
    import ray
    from ray.exceptions import RayActorError

    done, _ = ray.wait(runs, num_returns=len(runs), timeout=10.0)
    for ref in done:
        try:
            ray.get(ref)
        except RayActorError as exc:
            return exc
        except Exception:  # a rank that failed on its own (its peer died): not the lost one
            continue
    return None
