"""The measurement behind `trials.steptime.interleaved_step_times` (torch, the model, the data)."""

from __future__ import annotations

import copy
import gc
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ._config import TrialConfig
from ._run import _Conditioner, _dataset, _encode, _resolve_device, _TextToImage
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
from .data import stream_generator
from .flow import flow_loss
from .models import build_model
from .optim import HybridOptimizer, OptimizerConfig, RedundantNewtonSchulz, build_optimizer

__all__ = ["interleaved_step_times"]


@dataclass
class _Arm:
    """One arm's model, optimizer, EMA copy and noise stream."""

    cfg: TrialConfig
    module: _TextToImage
    optimizer: HybridOptimizer
    ema: _TextToImage | None
    params: list[Tensor]
    ema_params: list[Tensor]
    noise_gen: torch.Generator
    steps: int = 0


def _build_arm(cfg: TrialConfig, cond: _Conditioner, channels: int, device: torch.device) -> _Arm:
    """The arm as `trials._run._build` builds a trial's model and optimizer (the same seed: the same weights)."""
    torch.manual_seed(cfg.seed)
    denoiser = build_model(cfg.rung, image_size=cfg.data.image_size, in_channels=channels,
                           context_dim=cond.context_dim, pooled_dim=cond.pooled_dim)
    text = copy.deepcopy(cond.learned) if cond.learned is not None else None  # each arm trains its own
    module = _TextToImage(denoiser, text).to(device)
    optimizer = build_optimizer(module, cfg.optimizer, block_prefixes=("denoiser.blocks",))
    ema = copy.deepcopy(module).requires_grad_(False).eval() if cfg.eval.ema_decay is not None else None
    return _Arm(cfg=cfg, module=module, optimizer=optimizer, ema=ema, params=list(module.parameters()),
                ema_params=list(ema.parameters()) if ema is not None else [],
                noise_gen=stream_generator(cfg.seed, "noise"))


def _clocks() -> tuple[int, int]:
    return time.thread_time_ns(), time.perf_counter_ns()


def _step(arm: _Arm, cond: _Conditioner, images: Tensor, captions: list[str],
          cached: tuple[Tensor, Tensor] | None, sync: Callable[[], None]) -> tuple[tuple[int, int], ...]:
    """One training step of `arm` (as the trial's `_train_step`), with both clocks read at the phase bounds."""
    cfg, module, optimizer = arm.cfg, arm.module, arm.optimizer
    sync()
    t0 = _clocks()
    optimizer.zero_grad()
    context, pooled = _encode(module, cond, captions, cached)
    loss = flow_loss(module.denoiser, images, context, pooled, arm.noise_gen, cond_dropout=cfg.cond_dropout)
    bool(torch.isfinite(loss))  # the trial's check (a device sync); a diverged arm is still timed
    loss.backward()
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(arm.params, cfg.grad_clip)
    sync()
    t1 = _clocks()
    arm.steps += 1
    optimizer.set_lr_scale(min(1.0, arm.steps / cfg.warmup_steps) if cfg.warmup_steps else 1.0)
    optimizer.step()
    sync()
    t2 = _clocks()
    if arm.ema is not None:
        d = min(cfg.eval.ema_decay or 0.0, (1 + arm.steps) / (10 + arm.steps))  # the trial's warm-up rule
        torch._foreach_lerp_(arm.ema_params, [p.detach() for p in arm.params], 1.0 - d)
    loss.item()
    sync()
    t3 = _clocks()
    return t0, t1, t2, t3


def _trial_config(trial: TrialConfig | Mapping[str, Any], optimizer: OptimizerConfig | Mapping[str, Any],
                  ) -> TrialConfig:
    """The trial config with this arm's optimizer, validated as a whole (so a CPU rung's aux-lr default applies
    to every arm as it does in training)."""
    base = trial.model_dump() if isinstance(trial, TrialConfig) else dict(trial)
    opt = optimizer.model_dump() if isinstance(optimizer, OptimizerConfig) else dict(optimizer)
    base = {k: v for k, v in base.items() if k not in ("tracking", "checkpoint_dir")}
    return TrialConfig.model_validate({**base, "optimizer": opt})


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

    Refused with ValueError naming the field: `timing.local_batch` above the trial's batch_size,
    `timing.block_steps` not a whole number of every arm's refresh period, `timing.clock` "thread" with more than
    one thread or on an accelerator, an unknown `reference`, fewer than one arm.
    """
    spec = timing if isinstance(timing, StepTimingConfig) else StepTimingConfig.model_validate(dict(timing or {}))
    if not arms:
        raise ValueError("arms must name at least one arm (label -> optimizer config)")
    labels = tuple(arms)
    reference = labels[0] if reference is None else reference
    if reference not in arms:
        raise ValueError(f"reference {reference!r} is not an arm; allowed: {list(labels)}")
    configs = {label: _trial_config(trial, opt) for label, opt in arms.items()}
    cfg = configs[reference]
    local_batch = spec.local_batch if spec.local_batch is not None else cfg.batch_size
    if local_batch > cfg.batch_size:
        raise ValueError(f"timing.local_batch must be between 1 and the trial's batch_size ({cfg.batch_size}), got "
                         f"{local_batch}")
    periods = {label: refresh_period(c.optimizer) for label, c in configs.items()}
    block_steps = check_block_steps(spec.block_steps, periods)
    device = _resolve_device(cfg.device)
    if spec.clock == "thread" and (cfg.threads != 1 or device.type != "cpu"):
        raise ValueError(f"timing.clock 'thread' needs threads=1 on a CPU (torch's other threads and an "
                         f"accelerator's work are not on the calling thread's clock); got threads={cfg.threads}, "
                         f"device={device.type}. Allowed: clock 'wall', or threads=1 on the CPU")

    torch.set_num_threads(cfg.threads)
    dataset = _dataset(cfg)
    cond = _Conditioner(cfg, dataset, device)
    built = {label: _build_arm(c, cond, dataset.channels, device) for label, c in configs.items()}
    sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    data_gen = stream_generator(cfg.seed, "train")

    result = StepTimes(
        arms=labels, reference=reference, clock=spec.clock, level=spec.level, rung=cfg.rung,
        batch_size=cfg.batch_size, local_batch=local_batch, block_steps=block_steps, periods=periods,
        threads=cfg.threads, warmup_rounds=spec.warmup_rounds,
        costs={a: {c: {p: [] for p in PHASES} for c in CLOCKS} for a in labels},
        redundant={a: {c: [] for c in CLOCKS} for a in labels
                   if isinstance(built[a].optimizer.matrix, RedundantNewtonSchulz)},
        load_before=os.getloadavg(),
    )
    start = time.perf_counter()
    thread_total = process_total = 0
    round_index = 0
    balanced = balanced_rounds(len(labels), spec.order)
    while True:
        timed = round_index >= spec.warmup_rounds
        order = block_order(labels, 1, spec.order, start=round_index)[0]
        # The round's batches (and cached frozen embeddings), drawn before any clock runs: every arm trains on them.
        batches = []
        for _ in range(block_steps):
            batch = dataset.sample(local_batch, data_gen).to(device)
            batches.append((batch.images, batch.captions, cond.frozen_embeddings(batch.captions)))
        gc.collect()
        gc.disable()  # a collection inside a block would land on one arm; autograd's graphs are freed by refcount
        try:
            process0, thread0 = time.process_time_ns(), time.thread_time_ns()
            for label in order:
                _run_block(built[label], cond, batches, sync, result, label, timed)
            if timed:
                thread_total += time.thread_time_ns() - thread0
                process_total += time.process_time_ns() - process0
        finally:
            gc.enable()
        round_index += 1
        if not timed:
            continue
        result.blocks.append(order)
        result.seconds = time.perf_counter() - start
        result.thread_coverage = thread_total / process_total if process_total else None
        if progress is not None:
            progress(result)
        n = result.rounds
        if n % balanced and n < spec.max_rounds:  # only whole rotations: every arm in every place alike
            continue
        if spec.target_halfwidth is None:
            if n >= spec.rounds:
                break
            continue
        if n >= spec.rounds and all(result.ratio(a).halfwidth <= spec.target_halfwidth
                                    for a in labels if a != reference):
            result.stopped = "target"
            break
        if n >= spec.max_rounds:
            result.stopped = "max_rounds"
            break
    result.load_after = os.getloadavg()
    return result


def _run_block(arm: _Arm, cond: _Conditioner, batches: list[tuple[Tensor, list[str], Any]],
               sync: Callable[[], None], result: StepTimes, label: str, timed: bool) -> None:
    """`block_steps` steps of one arm on the round's batches; when `timed`, its per-step phase costs (and
    redundant work) are appended to `result`."""
    sums = {c: dict.fromkeys(PHASES, 0) for c in CLOCKS}
    control = arm.optimizer.matrix if isinstance(arm.optimizer.matrix, RedundantNewtonSchulz) else None
    extra0 = (control.redundant_thread_s, control.redundant_wall_s) if control is not None else (0.0, 0.0)
    for images, captions, cached in batches:
        t0, t1, t2, t3 = _step(arm, cond, images, captions, cached, sync)
        for i, clock in enumerate(CLOCKS):
            sums[clock]["forward_backward"] += t1[i] - t0[i]
            sums[clock]["optimizer"] += t2[i] - t1[i]
            sums[clock]["other"] += t3[i] - t2[i]
    if not timed:
        return
    steps = len(batches)
    for clock in CLOCKS:
        for phase in PHASES:
            result.costs[label][clock][phase].append(sums[clock][phase] / 1e9 / steps)
    if control is not None:
        result.redundant[label]["thread"].append((control.redundant_thread_s - extra0[0]) / steps)
        result.redundant[label]["wall"].append((control.redundant_wall_s - extra0[1]) / steps)
