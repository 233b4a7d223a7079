"""The measurement behind `trials.steptime.interleaved_step_times` (torch, the model, the data).

On N workers (`TrialConfig.workers` > 1) the same measurement runs on N gloo ranks, each a process of its own with
the trial's threads (1 for the thread clock), each arm wrapped and optimized as the N-rank trial is
(`trials._distributed.shard_model`, `ShardedPeriodicRowMuon` through `build_optimizer`, the EMA shard by shard, the
loss all-reduced), every rank on its slice of the same global batches. Each round every rank's phase costs are
gathered and the slowest rank's stand for the round (a synchronous step ends when its last rank does); every
rank's cost is kept beside it. The CPU clock is then the rank's process CPU time: gloo does a collective's copies,
reductions and socket work on threads of its own, which the calling thread's clock would not see, and waiting on
a peer costs no CPU on either.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import multiprocessing
import os
import queue
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ._config import TrialConfig
from ._distributed import CommMeter, local_tensors, shard_model
from ._parts import Conditioner, TextToImage, dataset_of, encode
from ._run import _resolve_device, _slice
from ._timing import (
    CLOCKS,
    PHASES,
    StepTimes,
    StepTimingConfig,
    balanced_rounds,
    block_order,
    check_block_steps,
    refresh_period,
)
from .core.errors import TrialError
from .core.proctree import die_with_parent, free_port
from .data import stream_generator
from .flow import flow_loss
from .models import build_model
from .optim import HybridOptimizer, OptimizerConfig, RedundantNewtonSchulz, build_optimizer

__all__ = ["interleaved_step_times"]


@dataclass
class _Arm:
    """One arm's model, optimizer, EMA copy and noise stream."""

    cfg: TrialConfig
    module: TextToImage
    optimizer: HybridOptimizer
    ema: TextToImage | None
    params: list[Tensor]
    ema_params: list[Tensor]
    noise_gen: torch.Generator
    steps: int = 0
    world: int = 1  # ranks; above 1 the module is FSDP2-sharded and the EMA below is kept shard by shard
    ema_src: list[Tensor] | None = None  # on N ranks: the parameters' local shards the EMA follows


def _build_arm(cfg: TrialConfig, cond: Conditioner, channels: int, device: torch.device,
               ranks: tuple[int, int] | None = None) -> _Arm:
    """The arm as `trials._run._build` builds a trial's model and optimizer (the same seed: the same weights); on
    `ranks` (rank, world), FSDP2-sharded with the sharded optimizer and EMA as the N-rank trial has them."""
    torch.manual_seed(cfg.seed)
    denoiser = build_model(cfg.rung, image_size=cfg.data.image_size, in_channels=channels,
                           context_dim=cond.context_dim, pooled_dim=cond.pooled_dim)
    text = copy.deepcopy(cond.learned) if cond.learned is not None else None  # each arm trains its own
    module = TextToImage(denoiser, text).to(device)
    if ranks is not None:
        shard_model(denoiser, text)
    optimizer = build_optimizer(module, cfg.optimizer, block_prefixes=("denoiser.blocks",))
    params: list[Tensor] = list(module.parameters())
    # One process streams its noise as the trial does; on N ranks each rank its own (rank 0's is the one-process one)
    noise = "noise" if ranks is None or ranks[0] == 0 else f"noise-{ranks[0]}"
    if ranks is not None:
        ema_shards = [p.detach().clone() for p in params] if cfg.eval.ema_decay is not None else []
        return _Arm(cfg=cfg, module=module, optimizer=optimizer, ema=None, params=params,
                    ema_params=local_tensors(ema_shards), noise_gen=stream_generator(cfg.seed, noise),
                    world=ranks[1], ema_src=local_tensors(params))
    ema = copy.deepcopy(module).requires_grad_(False).eval() if cfg.eval.ema_decay is not None else None
    return _Arm(cfg=cfg, module=module, optimizer=optimizer, ema=ema, params=params,
                ema_params=list(ema.parameters()) if ema is not None else [],
                noise_gen=stream_generator(cfg.seed, noise))


def _clocks() -> tuple[int, int]:
    return time.thread_time_ns(), time.perf_counter_ns()


def _rank_clocks() -> tuple[int, int]:
    """On N ranks: the process's CPU time (the compute thread and gloo's threads; see the module docstring)."""
    return time.process_time_ns(), time.perf_counter_ns()


def _step(arm: _Arm, cond: Conditioner, images: Tensor, captions: list[str],
          cached: tuple[Tensor, Tensor] | None, sync: Callable[[], None],
          clocks: Callable[[], tuple[int, int]] = _clocks) -> tuple[tuple[int, int], ...]:
    """One training step of `arm` (as the trial's `_train_step`), with both clocks read at the phase bounds."""
    cfg, module, optimizer = arm.cfg, arm.module, arm.optimizer
    sync()
    t0 = clocks()
    optimizer.zero_grad()
    context, pooled = encode(module, cond, captions, cached)
    loss = flow_loss(module.denoiser, images, context, pooled, arm.noise_gen, cond_dropout=cfg.cond_dropout)
    seen = loss.detach()
    if arm.world > 1:  # the trial's global mean, which every rank's divergence check reads
        seen = seen.clone()
        torch.distributed.all_reduce(seen)
        seen /= arm.world
    bool(torch.isfinite(seen))  # the trial's check (a device sync); a diverged arm is still timed
    loss.backward()
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(arm.params, cfg.grad_clip)
    sync()
    t1 = clocks()
    arm.steps += 1
    optimizer.set_lr_scale(min(1.0, arm.steps / cfg.warmup_steps) if cfg.warmup_steps else 1.0)
    optimizer.step()
    sync()
    t2 = clocks()
    d = min(cfg.eval.ema_decay or 0.0, (1 + arm.steps) / (10 + arm.steps))  # the trial's warm-up rule
    if arm.ema is not None:
        torch._foreach_lerp_(arm.ema_params, [p.detach() for p in arm.params], 1.0 - d)
    elif arm.ema_src is not None and arm.ema_params:  # shard by shard: elementwise, no communication
        with torch.no_grad():
            torch._foreach_lerp_(arm.ema_params, arm.ema_src, 1.0 - d)
    seen.item()
    sync()
    t3 = clocks()
    return t0, t1, t2, t3


def _trial_config(trial: TrialConfig | Mapping[str, Any], optimizer: OptimizerConfig | Mapping[str, Any],
                  ) -> TrialConfig:
    """The trial config with this arm's optimizer, validated as a whole (so a CPU rung's aux-lr default applies
    to every arm as it does in training)."""
    base = trial.model_dump() if isinstance(trial, TrialConfig) else dict(trial)
    opt = optimizer.model_dump() if isinstance(optimizer, OptimizerConfig) else dict(optimizer)
    base = {k: v for k, v in base.items() if k not in ("tracking", "checkpoint_dir")}
    return TrialConfig.model_validate({**base, "optimizer": opt})


def _check_reference(labels: tuple[str, ...], reference: str | None) -> str:
    if not labels:
        raise ValueError("arms must name at least one arm (label -> optimizer config)")
    if reference is not None and reference not in labels:
        raise ValueError(f"reference {reference!r} is not an arm; allowed: {list(labels)}")
    return labels[0] if reference is None else reference


def _check_timing(spec: StepTimingConfig, cfg: TrialConfig, device: torch.device) -> int:
    """The local batch each arm steps on; refuses a timing that cannot measure what it says (ValueError naming the
    field and what is allowed)."""
    if cfg.workers > 1 and spec.local_batch is not None:
        raise ValueError(f"timing.local_batch is the one-process stand-in for a rank's batch; on workers={cfg.workers} "
                         f"each rank trains batch_size / {cfg.workers} = {cfg.batch_size // cfg.workers} itself. "
                         f"Allowed: unset (None) with workers > 1")
    local_batch = spec.local_batch if spec.local_batch is not None else cfg.batch_size // cfg.workers
    if local_batch > cfg.batch_size:
        raise ValueError(f"timing.local_batch must be between 1 and the trial's batch_size ({cfg.batch_size}), got "
                         f"{local_batch}")
    if spec.clock == "thread" and (cfg.threads != 1 or device.type != "cpu"):
        raise ValueError(f"timing.clock 'thread' needs threads=1 on a CPU (torch's other threads and an "
                         f"accelerator's work are not on the calling thread's clock); got threads={cfg.threads}, "
                         f"device={device.type}. Allowed: clock 'wall', or threads=1 on the CPU")
    if cfg.workers > 1 and device.type == "cuda" and torch.cuda.device_count() < cfg.workers \
            and not _in_group(cfg.workers):
        raise ValueError(f"workers={cfg.workers} on CUDA times one rank per GPU; this host has "
                         f"{torch.cuda.device_count()}. Allowed: workers up to {torch.cuda.device_count()}, or "
                         "device 'cpu' (gloo ranks)")
    return local_batch


def _round_batches(dataset: Any, cond: Conditioner, data_gen: torch.Generator, block_steps: int, local_batch: int,
                   batch_size: int, ranks: tuple[int, int] | None, device: torch.device) -> list[tuple[Any, ...]]:
    """A round's batches (and cached frozen embeddings), drawn before any clock runs: every arm trains on them; on N
    ranks the global batch is drawn whole on every rank and each keeps its slice, as the trial does."""
    batches = []
    for _ in range(block_steps):
        batch = dataset.sample(local_batch if ranks is None else batch_size, data_gen)
        if ranks is not None:
            batch = _slice(batch, ranks[0] * local_batch, (ranks[0] + 1) * local_batch)
        batch = batch.to(device)
        batches.append((batch.images, batch.captions, cond.frozen_embeddings(batch.captions)))
    return batches


def _enough_rounds(result: StepTimes, spec: StepTimingConfig, balanced: int) -> bool:
    """Whether to stop after this timed round (setting `result.stopped` when a target or the cap stops it)."""
    n = result.rounds
    if n % balanced and n < spec.max_rounds:  # only whole rotations: every arm in every place alike
        return False
    if spec.target_halfwidth is None:
        return n >= spec.rounds
    if n >= spec.rounds and all(result.ratio(a).halfwidth <= spec.target_halfwidth
                                for a in result.arms if a != result.reference):
        result.stopped = "target"
        return True
    if n >= spec.max_rounds:
        result.stopped = "max_rounds"
        return True
    return False


def _empty_result(spec: StepTimingConfig, cfg: TrialConfig, labels: tuple[str, ...], reference: str,
                  local_batch: int, block_steps: int, periods: dict[str, int], redundant: tuple[str, ...],
                  ranks: tuple[int, int] | None) -> StepTimes:
    """The result before its first round: its settings, and an empty list per arm, clock and phase."""
    return StepTimes(
        arms=labels, reference=reference, clock=spec.clock, level=spec.level, rung=cfg.rung,
        batch_size=cfg.batch_size, local_batch=local_batch, block_steps=block_steps, periods=periods,
        threads=cfg.threads, warmup_rounds=spec.warmup_rounds,
        costs={a: {c: {p: [] for p in PHASES} for c in CLOCKS} for a in labels},
        redundant={a: {c: [] for c in CLOCKS} for a in redundant},
        load_before=os.getloadavg(),
        workers=cfg.workers, cpu_clock="thread" if ranks is None else "process",
        rank_steps={a: {c: [] for c in CLOCKS} for a in labels} if ranks is not None else {},
        comm_bytes={a: [] for a in labels} if ranks is not None else {},
    )


def interleaved_step_times(
    trial: TrialConfig | Mapping[str, Any],
    arms: Mapping[str, OptimizerConfig | Mapping[str, Any]],
    timing: StepTimingConfig | Mapping[str, Any] | None = None,
    *,
    reference: str | None = None,
    progress: Callable[[StepTimes], None] | None = None,
) -> StepTimes:
    """Per-step cost of each arm of `arms` (label -> optimizer config; two labels may name the same optimizer, the
    negative control) at `trial`'s rung, batch, data, text encoder and threads, measured as `trials.steptime`
    describes. `reference` (default: the first arm) is the denominator of the ratios. `progress` is called after every
    timed round with the result so far.

    With `trial.workers` N > 1 the step is the N-rank trial's (see this module's docstring): inside a process group of
    N ranks every rank calls this and gets the same result; elsewhere it starts N local gloo ranks itself (NCCL on
    CUDA, one GPU each) and returns rank 0's result.

    Refused with ValueError naming the field: `timing.local_batch` above the trial's batch_size (or set at all on N
    ranks, where each rank's batch is batch_size / N), `timing.block_steps` not a whole number of every arm's refresh
    period, `timing.clock` "thread" with more than one thread or on an accelerator, an unknown `reference`, fewer
    than one arm.
    """
    spec = timing if isinstance(timing, StepTimingConfig) else StepTimingConfig.model_validate(dict(timing or {}))
    labels = tuple(arms)
    reference = _check_reference(labels, reference)
    configs = {label: _trial_config(trial, opt) for label, opt in arms.items()}
    cfg = configs[reference]
    periods = {label: refresh_period(c.optimizer) for label, c in configs.items()}
    block_steps = check_block_steps(spec.block_steps, periods)
    device = _resolve_device(cfg.device)
    local_batch = _check_timing(spec, cfg, device)
    if cfg.workers > 1 and not _in_group(cfg.workers):
        return _on_local_ranks(cfg.workers, trial, arms, spec, reference, progress, device.type)
    ranks = (torch.distributed.get_rank(), cfg.workers) if cfg.workers > 1 else None

    torch.set_num_threads(cfg.threads)
    dataset = dataset_of(cfg)
    cond = Conditioner(cfg, dataset, device)
    built = {label: _build_arm(c, cond, dataset.channels, device, ranks) for label, c in configs.items()}
    sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    data_gen = stream_generator(cfg.seed, "train")
    clocks = _clocks if ranks is None else _rank_clocks
    meter = CommMeter(world=ranks[1]) if ranks is not None else None

    redundant = tuple(a for a in labels if isinstance(built[a].optimizer.matrix, RedundantNewtonSchulz))
    result = _empty_result(spec, cfg, labels, reference, local_batch, block_steps, periods, redundant, ranks)
    start = time.perf_counter()
    thread_total = process_total = 0
    round_index = 0
    balanced = balanced_rounds(len(labels), spec.order)
    with meter.installed() if meter is not None else contextlib.nullcontext():
        while True:
            timed = round_index >= spec.warmup_rounds
            order = block_order(labels, 1, spec.order, start=round_index)[0]
            batches = _round_batches(dataset, cond, data_gen, block_steps, local_batch, cfg.batch_size, ranks, device)
            gc.collect()
            gc.disable()  # a collection inside a block would land on one arm; autograd's graphs are freed by refcount
            try:
                process0, thread0 = time.process_time_ns(), time.thread_time_ns()
                blocks = {label: _run_block(built[label], cond, batches, sync, clocks, meter) for label in order}
                if timed:
                    thread_total += time.thread_time_ns() - thread0
                    process_total += time.process_time_ns() - process0
            finally:
                gc.enable()
            round_index += 1
            if not timed:
                continue
            _record(result, blocks, ranks)
            result.blocks.append(order)
            result.seconds = time.perf_counter() - start
            result.thread_coverage = thread_total / process_total if process_total else None
            if progress is not None:
                progress(result)
            # Every rank holds the same gathered costs, so every rank takes the same decision.
            if _enough_rounds(result, spec, balanced):
                break
    result.load_after = os.getloadavg()
    return result


@dataclass
class _Block:
    """One arm's block: seconds per step by clock and phase, its redundant work per step (the positive control)
    by clock, and the bytes this rank sent per step."""

    costs: dict[str, dict[str, float]]
    redundant: dict[str, float] | None
    comm_bytes: float


def _run_block(arm: _Arm, cond: Conditioner, batches: list[tuple[Tensor, list[str], Any]],
               sync: Callable[[], None], clocks: Callable[[], tuple[int, int]], meter: CommMeter | None) -> _Block:
    """`block_steps` steps of one arm on the round's batches, with their per-step phase costs."""
    sums = {c: dict.fromkeys(PHASES, 0) for c in CLOCKS}
    control = arm.optimizer.matrix if isinstance(arm.optimizer.matrix, RedundantNewtonSchulz) else None
    extra0 = (control.redundant_thread_s, control.redundant_wall_s) if control is not None else (0.0, 0.0)
    bytes0 = meter.bytes_sent if meter is not None else 0.0
    for images, captions, cached in batches:
        with meter.counting() if meter is not None else contextlib.nullcontext():
            t0, t1, t2, t3 = _step(arm, cond, images, captions, cached, sync, clocks)
        for i, clock in enumerate(CLOCKS):
            sums[clock]["forward_backward"] += t1[i] - t0[i]
            sums[clock]["optimizer"] += t2[i] - t1[i]
            sums[clock]["other"] += t3[i] - t2[i]
    steps = len(batches)
    redundant = None
    if control is not None:
        redundant = {"thread": (control.redundant_thread_s - extra0[0]) / steps,
                     "wall": (control.redundant_wall_s - extra0[1]) / steps}
    return _Block(costs={c: {p: sums[c][p] / 1e9 / steps for p in PHASES} for c in CLOCKS}, redundant=redundant,
                  comm_bytes=((meter.bytes_sent if meter is not None else 0.0) - bytes0) / steps)


def _record(result: StepTimes, blocks: Mapping[str, _Block], ranks: tuple[int, int] | None) -> None:
    """Append one timed round to `result`: this process's blocks on one worker; on N ranks every rank's, gathered,
    the slowest rank's phases standing for the round (by clock) and every rank's step cost kept beside them."""
    if ranks is None:
        for label, block in blocks.items():
            for clock in CLOCKS:
                for phase in PHASES:
                    result.costs[label][clock][phase].append(block.costs[clock][phase])
            if block.redundant is not None:
                for clock in CLOCKS:
                    result.redundant[label][clock].append(block.redundant[clock])
        return
    every: list[Any] = [None] * ranks[1]
    torch.distributed.all_gather_object(every, {label: (b.costs, b.comm_bytes) for label, b in blocks.items()})
    for label in blocks:
        for clock in CLOCKS:
            totals = [sum(rank[label][0][clock].values()) for rank in every]
            slowest = every[max(range(ranks[1]), key=totals.__getitem__)][label][0][clock]
            for phase in PHASES:
                result.costs[label][clock][phase].append(slowest[phase])
            result.rank_steps[label][clock].append(totals)
        result.comm_bytes[label].append(max(rank[label][1] for rank in every))


def _in_group(workers: int) -> bool:
    """Whether this process is a rank of a `workers`-rank process group (then every rank measures itself)."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() == workers


# How long a spawned timing rank waits in a collective before gloo gives up (a lost peer ends the measurement
# instead of hanging it); a block of the largest CPU rung is well under a minute.
_RANK_TIMEOUT_S = 1800.0


def _on_local_ranks(world: int, trial: TrialConfig | Mapping[str, Any],
                    arms: Mapping[str, OptimizerConfig | Mapping[str, Any]], spec: StepTimingConfig,
                    reference: str, progress: Callable[[StepTimes], None] | None, device: str) -> StepTimes:
    """The measurement on `world` fresh local processes (multiprocessing's spawn), rank 0's result handed back;
    `progress` is called here with rank 0's result after every timed round. A rank that fails or dies ends the
    others and raises TrialError with its traceback."""
    base = trial.model_dump() if isinstance(trial, TrialConfig) else dict(trial)
    plain = {k: v.model_dump() if isinstance(v, OptimizerConfig) else dict(v) for k, v in arms.items()}
    ctx = multiprocessing.get_context("spawn")
    messages = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_local_rank, args=(r, world, port, device, base, plain, spec.model_dump(),
                                                   reference, messages, os.getpid()), daemon=True)
             for r in range(world)]
    for p in procs:
        p.start()
    try:
        while True:
            try:
                kind, *payload = messages.get(timeout=1.0)
            except queue.Empty:
                dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead or all(p.exitcode == 0 for p in procs):
                    raise TrialError(f"timing on {world} ranks: rank {dead[0][0] if dead else 0} ended without a "
                                     f"result (exit code {dead[0][1] if dead else 0})") from None
                continue
            if kind == "progress" and progress is not None:
                progress(payload[0])
            elif kind == "done":
                return payload[0]
            elif kind == "error":
                raise TrialError(f"timing on {world} ranks: rank {payload[0]} failed:\n{payload[1]}")
    finally:
        for p in procs:
            p.join(timeout=30.0)
            if p.is_alive():
                p.kill()
                p.join()


def _local_rank(rank: int, world: int, port: int, device: str, trial: dict[str, Any], arms: dict[str, Any],
                timing: dict[str, Any], reference: str, messages: Any, parent: int) -> None:
    """One spawned timing rank: join the group (gloo on CPU, NCCL on CUDA with GPU `rank`), measure, and on rank 0
    send the progress and the result. It dies with the process that spawned it (a SIGKILLed driver's `daemon`
    children are not ended by multiprocessing, which runs no cleanup then)."""
    import datetime

    die_with_parent(parent)
    dist = torch.distributed
    try:
        torch.set_num_threads(int(trial.get("threads", 1)))
        if device == "cuda":
            torch.cuda.set_device(rank)
        dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                                rank=rank, world_size=world, timeout=datetime.timedelta(seconds=_RANK_TIMEOUT_S))
        try:
            result = interleaved_step_times(
                trial, arms, timing, reference=reference,
                progress=(lambda r: messages.put(("progress", r))) if rank == 0 else None)
        finally:
            dist.destroy_process_group()
        if rank == 0:
            messages.put(("done", result))
    except BaseException:
        messages.put(("error", rank, traceback.format_exc()))
        raise
