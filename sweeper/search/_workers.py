"""A trial on N workers: the Tune trial's placement group (N bundles, packed) and the ranks that run in it.

Tune reserves the whole group before the trial starts (`trial_resources`: one bundle per worker, `PACK`: on one node
where it fits, so no rank waits for a machine and nothing else is oversubscribed), each trial its own trial config's
worker count (`resources_by_config`: a transfer's rungs may run on different counts). The trainable itself runs in
bundle 0 and is rank 0; ranks 1..N-1 are Ray actors pinned to bundles 1..N-1 (`_Rank`). They meet through a TCP
store that rank 0 opens at its node on a free port (gloo on CPU, NCCL on CUDA). Rank 0 holds the trial's one MLflow
run and reports to Tune, exactly as a one-worker trial does.

Nothing waits without a limit (issue 64). Rank 0 waits for the others to reach the store in short rounds, watching
their actors: a rank that dies before it joins ends the wait at once (a lost rank, restarted below), and one that
never joins ends it at `execution.rendezvous_timeout_s`, which also bounds every collective (the process group's
timeout). While the trial trains, every rank beats in the store (`trials.ranks.start_heartbeat`: its step
and the collective it waits in) and a watchdog beside rank 0 (`_Watchdog`) ends the trial when a rank sends no beat,
or every rank has waited in a collective, for `execution.stall_timeout_s`: all ranks are killed and the trial fails
with a reason naming the rank and what it waited for, to be retried under the spec's retry policy.

Lost ranks: when any rank's process dies (or its node), rank 0's next collective fails; the trainable then kills
the other ranks, starts a fresh set in the same bundles and runs the trial again in the same MLflow run, which
resumes from the last checkpoint the ranks wrote through torch.distributed.checkpoint (`trials._distributed`), at
most `MAX_RANK_RESTARTS` times. A stop from Tune, or an error on rank 0 itself, ends every rank (actors killed);
actors are owned by the trainable, so Ray ends them too if the trainable's process dies.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trials import TrialError
from trials.core.proctree import free_port
from trials.record import TRIAL_TAG

from ..specs import ExecutionSpec

__all__ = [
    "DEFAULT_RENDEZVOUS_S",
    "MAX_RANK_RESTARTS",
    "MIN_STALL_S",
    "RANK_RESTARTS",
    "STALL_STEPS",
    "TrialLimits",
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
# Tag on a trial's run: how many times its ranks were restarted so far (the ledger reads it back).
RANK_RESTARTS = TRIAL_TAG.RANK_RESTARTS

# The defaults of execution.rendezvous_timeout_s and stall_timeout_s. Ranks start in seconds (a Ray actor, torch's
# import), so five minutes to meet is generous and still ends a broken start well before the 30 minutes torch
# waits by default. A stall is judged against the trial's own measured step: 20 steps without a beat or a finished
# collective, and never under two minutes (a checkpoint save or a slow first step is not a stall).
DEFAULT_RENDEZVOUS_S = 300.0
MIN_STALL_S = 120.0
STALL_STEPS = 20


@dataclass(frozen=True)
class TrialLimits:
    """How long a multi-worker trial's ranks may wait: to meet (and in any one collective), and without progress.
    None: the defaults above (the stall timeout then follows the trial's measured step time)."""

    rendezvous_timeout_s: float | None = None
    stall_timeout_s: float | None = None

    @classmethod
    def of(cls, limits: Mapping[str, Any] | None) -> TrialLimits:
        return cls(**{k: v for k, v in (limits or {}).items() if k in ("rendezvous_timeout_s", "stall_timeout_s")})

    @property
    def rendezvous_s(self) -> float:
        if self.rendezvous_timeout_s is not None:
            return float(self.rendezvous_timeout_s)
        # never shorter than an explicit stall timeout: a collective is judged stalled by the watchdog first
        return max(DEFAULT_RENDEZVOUS_S, float(self.stall_timeout_s or 0.0))

    def stall_s(self, step_s: float | None) -> float:
        """The stall timeout: the spec's, else max(MIN_STALL_S, STALL_STEPS x the slowest rank's mean step)."""
        if self.stall_timeout_s is not None:
            return float(self.stall_timeout_s)
        return max(MIN_STALL_S, STALL_STEPS * (step_s or 0.0))


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

        def run(self, trial: dict[str, Any], rank: int, world: int, addr: str, port: int,
                limits: TrialLimits) -> None:
            import torch

            from trials import run_trial

            torch.set_num_threads(int(trial.get("threads", 1)))
            beating = init_ranks(rank, world, addr, port, device=_device(trial), timeout_s=limits.rendezvous_s,
                                 stall_s=limits.stall_s(None))
            try:
                run_trial(trial)
            finally:
                beating.set()
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
               timeout_s: float = DEFAULT_RENDEZVOUS_S, stall_s: float = MIN_STALL_S,
               joined: Callable[[Any], None] | None = None) -> threading.Event:
    """Join the trial's process group through its TCP store at rank 0 (rank 0 opens it): gloo on CPU, NCCL on CUDA
    (each rank on the GPU Ray gave it). `timeout_s` bounds the rendezvous and every collective; rank 0 waits for
    the others with `joined(store)` (which raises when one is lost or late). Starts this rank's heartbeat; returns
    the event that stops it."""
    import datetime

    import torch
    import torch.distributed as dist

    from trials.ranks import JOINED_KEY, start_heartbeat, trial_store, watch_evaluations

    backend = "nccl" if device == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)  # Ray sets CUDA_VISIBLE_DEVICES to the bundle's GPU
    store = trial_store(master_addr, master_port, timeout_s, master=rank == 0)
    store.set(JOINED_KEY.format(rank=rank), "1")
    if joined is not None:
        joined(store)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    watch_evaluations(trial_store(master_addr, master_port, timeout_s), stall_s)
    return start_heartbeat(master_addr, master_port, rank, timeout_s)


def _wait_for_ranks(store: Any, world: int, runs: list[Any], timeout_s: float) -> None:
    """Rank 0's side of the rendezvous: wait until every rank has reached the store, in short rounds; a rank whose
    actor ended first (died, or failed to start) raises at once, one missing at `timeout_s` raises naming it."""
    import ray

    from trials.ranks import JOINED_KEY

    deadline = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(1, world) if not store.check([JOINED_KEY.format(rank=r)])]
        if not missing:
            return
        done, _ = ray.wait(runs, num_returns=1, timeout=0.5)
        if done:
            rank = runs.index(done[0]) + 1
            ray.get(done[0])  # raises the rank's error (a RayActorError when its process died: a lost rank)
            raise TrialError(f"rank {rank} ended before joining the trial's process group")
        if time.monotonic() > deadline:
            raise TrialError(f"rank(s) {missing} did not join the trial's process group within {timeout_s:g} s "
                             "(execution.rendezvous_timeout_s): waited in the rendezvous at rank 0")


class _Watchdog:
    """Beside rank 0: reads every rank's beat each second and ends the trial when one sends none, or every rank has
    waited in a collective, for the stall timeout (`TrialLimits.stall_s`). Ending kills the ranks above 0 (their
    actors, and their processes where they run on this node, which a stopped process needs), which breaks rank 0
    out of its collective; `reason` then says what happened."""

    def __init__(self, addr: str, port: int, world: int, limits: TrialLimits, actors: list[Any]) -> None:
        self.addr, self.port, self.world, self.limits, self.actors = addr, port, world, limits, actors
        self.reason: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="scalesweep-stall-watchdog", daemon=True)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        from trials.ranks import BEACON, read_beat, trial_store

        try:
            store = trial_store(self.addr, self.port, self.limits.rendezvous_s)
        except Exception:  # the store went with rank 0's group: nothing to watch
            return
        seen: dict[int, tuple[int, float]] = {}  # rank -> (its last beat count, when it changed, this clock)
        beats: dict[int, dict[str, Any]] = {}
        while not self._stop.wait(1.0):
            now = time.monotonic()
            for rank in range(self.world):
                with contextlib.suppress(Exception):
                    beat = BEACON.state(0) if rank == 0 else read_beat(store, rank)
                    if beat is not None:
                        beats[rank] = beat
                count = beats.get(rank, {}).get("beats", -1) if rank else int(now)  # rank 0 is this process
                if rank not in seen or seen[rank][0] != count:
                    seen[rank] = (count, now)
            stall = self.limits.stall_s(max((b.get("step_s") or 0.0 for b in beats.values()), default=None))
            self.reason = _stalled(beats, {r: now - t for r, (_, t) in seen.items()}, stall)
            if self.reason:
                self._end()
                return

    def _end(self) -> None:
        import ray

        host = socket.gethostname()
        for actor in self.actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        for beat in self._beats_here(host):
            with contextlib.suppress(OSError):
                os.kill(int(beat["pid"]), signal.SIGKILL)  # a stopped (SIGSTOP) process never hears ray.kill

    def _beats_here(self, host: str) -> list[dict[str, Any]]:
        from trials.ranks import read_beat, trial_store

        with contextlib.suppress(Exception):
            store = trial_store(self.addr, self.port, 5.0)
            beats = [read_beat(store, r) for r in range(1, self.world)]
            return [b for b in beats if b and b.get("host") == host and int(b.get("pid", 0)) != os.getpid()]
        return []


def _stalled(beats: Mapping[int, Mapping[str, Any]], silent_s: Mapping[int, float], stall_s: float) -> str | None:
    """Why the group is stalled, naming the rank and what it waited for; None while it progresses: every rank beats
    within `stall_s` and at least one is computing or has been in its collective for less than `stall_s`."""
    def doing(rank: int) -> str:
        beat = beats.get(rank) or {}
        where = f"in {beat['op']} for {beat['op_for_s']:.0f} s" if beat.get("op") else "computing"
        return f"rank {rank} at step {beat.get('step', 0)}, {where}"

    for rank, silent in sorted(silent_s.items()):
        if rank and silent > stall_s:
            others = "; ".join(doing(r) for r in sorted(beats) if r != rank)
            return (f"stalled: rank {rank} sent no heartbeat for {silent:.0f} s (execution.stall_timeout_s "
                    f"{stall_s:g} s; stopped or hung; last seen: {doing(rank)}); {others}")
    if len(beats) == len(silent_s) and all(b.get("op") and b["op_for_s"] > stall_s for b in beats.values()):
        return (f"stalled: every rank waited in a collective for over {stall_s:g} s (execution.stall_timeout_s): "
                + "; ".join(doing(r) for r in sorted(beats)))
    return None


def run_on_workers(trial: dict[str, Any], run_rank0: Callable[[dict[str, Any]], Any],
                   restarts: int = MAX_RANK_RESTARTS, limits: TrialLimits | None = None) -> Any:
    """Run a `trial["workers"]`-rank trial in the current Tune trial's placement group: ranks 1..N-1 as actors in
    bundles 1..N-1, rank 0 here (`run_rank0(trial)` returns the trial's result); restart the group after a lost
    rank, end it after a stall (see the module docstring)."""
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
    limits = limits or TrialLimits()
    for attempt in range(restarts + 1):
        port = free_port()
        actors = [
            rank_cls.options(
                num_cpus=bundles[r].get("CPU", 0), num_gpus=bundles[r].get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=r),
            ).remote()
            for r in range(1, world)
        ]
        runs = [actor.run.remote(trial, r, world, addr, port, limits) for r, actor in enumerate(actors, start=1)]
        beating: threading.Event | None = None
        watchdog = _Watchdog(addr, port, world, limits, actors)
        try:
            beating = init_ranks(0, world, addr, port, device=_device(trial), timeout_s=limits.rendezvous_s,
                                 stall_s=limits.stall_s(None),
                                 joined=functools.partial(_wait_for_ranks, world=world, runs=runs,
                                                            timeout_s=limits.rendezvous_s))
            with watchdog:
                result = run_rank0(trial)
                ray.get(runs)
            if attempt:
                _record_restarts(trial, attempt)
            return result
        except SystemExit:
            raise  # a stop from Tune: the finally below ends every rank
        except Exception as exc:
            if watchdog.reason:  # ended by the watchdog: a failed attempt, retried under the spec's retry policy
                _record_error(trial, watchdog.reason)
                raise TrialError(watchdog.reason) from exc
            lost = _lost_rank(runs)
            if lost is None or attempt == restarts or not trial.get("checkpoint_dir"):
                raise  # rank 0's own error (the others are stuck in a collective), or out of restarts
            _mark_restarting(trial, attempt + 1)
        finally:
            if beating is not None:
                beating.set()
            _leave_group()
            for actor in actors:
                ray.kill(actor, no_restart=True)
    raise AssertionError("unreachable")  # the loop returns or raises


def _mark_restarting(trial: dict[str, Any], restarts: int) -> None:
    """While the group restarts: the run reads RUNNING (rank 0 closed it FAILED with the lost rank's error when its
    collective broke) with the restarts so far, so the trial never reads FAILED meanwhile, and a cancel during the
    restart closes it CANCELLED like any running trial (issue 64, N9)."""
    from trials.record import RUNNING, TAG

    _tag_run(trial, {TAG.STATUS: RUNNING, RANK_RESTARTS: str(restarts)}, reopen=True, drop_error=True)


def _record_restarts(trial: dict[str, Any], restarts: int) -> None:
    """On the trial's run after it finished on a restarted group: how many restarts it took, and no longer the
    lost rank's error, which closing the interrupted group left in `scalesweep.error`."""
    _tag_run(trial, {RANK_RESTARTS: str(restarts)}, drop_error=True)


def _record_error(trial: dict[str, Any], reason: str) -> None:
    """The watchdog's reason as the run's error, in place of the broken collective's that rank 0 closed it with."""
    from trials.record import TAG

    _tag_run(trial, {TAG.ERROR: reason[:500]})


def _tag_run(trial: dict[str, Any], tags: Mapping[str, str], *, reopen: bool = False,
             drop_error: bool = False) -> None:
    """Set `tags` on the trial's run (`reopen`: its MLflow status back to RUNNING first; `drop_error`: without its
    `scalesweep.error`). Bookkeeping only: it never fails the trial (the raised error, the resumed run and the
    driver's close say the same)."""
    tracking = trial.get("tracking") or {}
    if not tracking.get("run_id"):
        return
    with contextlib.suppress(Exception):
        from mlflow import MlflowClient

        from trials.record import TAG

        client, run_id = MlflowClient(tracking_uri=tracking["tracking_uri"]), tracking["run_id"]
        if reopen:
            client.update_run(run_id, status="RUNNING")
        for name, value in tags.items():
            client.set_tag(run_id, name, value)
        if drop_error and TAG.ERROR in client.get_run(run_id).data.tags:
            client.delete_tag(run_id, TAG.ERROR)


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
