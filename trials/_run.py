"""One trial: train an MMDiT with one optimizer arm, score FD and validation loss on EMA weights at checkpoints.

Effective training time is the wall clock of the training step alone: forward (including a learned text encoder),
loss, backward, gradient clipping, the optimizer step and the EMA update. Drawing the batch, looking up the frozen
text encoder's cached embeddings, evaluation and checkpoint I/O are excluded. It is cumulative at each eval step.
"""

from __future__ import annotations

import contextlib
import copy
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ._checkpoint import Checkpoint
from ._config import TrialConfig, TrialResult
from ._distributed import (
    CommMeter,
    broadcast_flag,
    current_ranks,
    full_weights,
    gather_rank_metrics,
    load_weights,
    local_tensors,
    shard_model,
)
from ._parts import Conditioner, TextToImage, dataset_of, encode, extractor_of, reference_stats
from .core.errors import TrialError
from .data import ImageTextDataset, stream_generator, stream_seed
from .flow import flow_loss, sample_euler, validation_loss
from .metrics import (
    FeatureError,
    FeatureExtractor,
    FeatureStats,
    ScenesCNNExtractor,
    feature_statistics,
    frechet_distance_from_stats,
    frechet_distance_infinity,
    scene_alignment,
)
from .models import build_model, count_parameters
from .optim import build_optimizer, update_stats
from .record import METRIC, TRIAL_TAG, RunRecorder, trial_run

__all__ = ["metric_floor", "run_trial", "summarise_quality"]

ProgressFn = Callable[[dict[str, Any]], None]

# Logged when a run resumes from a checkpoint (the value and step: the step it resumed after), once per resume.
RESUMED_FROM_STEP = "resumed_from_step"


def metric_floor(config: TrialConfig | Mapping[str, Any], redraws: int = 5) -> list[float]:
    """FD of real images (never trained on) against the fixed reference statistics, over `redraws` independent
    draws of `eval.fd_samples` images: the best FD a perfect model could score, and the metric's own noise."""
    cfg = config if isinstance(config, TrialConfig) else TrialConfig.model_validate(dict(config))
    dataset = dataset_of(cfg)
    extractor = extractor_of(cfg, dataset)
    reference = reference_stats(cfg, dataset, extractor)
    values = []
    for i in range(redraws):
        real = dataset.sample(cfg.eval.fd_samples, stream_generator(cfg.data.seed, f"floor-{i}"))
        values.append(frechet_distance_from_stats(feature_statistics(extractor.extract(real.images)), reference))
    return values


def _sample_grid(images: Tensor, path: Path, columns: int = 8) -> None:
    """Save up to 64 images as one PNG grid (for a glance at each checkpoint in the MLflow UI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.image

    imgs = ((images[: columns * columns].clamp(-1, 1) + 1) / 2).permute(0, 2, 3, 1).cpu().numpy()  # (N, H, W, 3)
    n, h, w, c = imgs.shape
    rows = math.ceil(n / columns)
    grid = np.ones((rows * (h + 1) + 1, columns * (w + 1) + 1, c), dtype=np.float32)
    for i in range(n):
        r, k = divmod(i, columns)
        grid[1 + r * (h + 1) : 1 + r * (h + 1) + h, 1 + k * (w + 1) : 1 + k * (w + 1) + w] = imgs[i]
    scale = max(1, 256 // grid.shape[1])
    grid = grid.repeat(scale, axis=0).repeat(scale, axis=1)
    matplotlib.image.imsave(path, grid)


def _resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise TrialError("device 'cuda' requested but torch.cuda.is_available() is False; allowed here: cpu, auto")
    return torch.device(name)


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bf16 natively: CUDA with bf16 support, or a CPU with AMX or AVX512-BF16 (oneDNN's
    own test). Elsewhere bf16 is emulated through fp32 and runs slower than fp32 itself."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return device.type == "cpu" and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def check_precision(cfg: TrialConfig, device: torch.device) -> None:
    """Refuse `precision: bf16` on a device without native bf16, before anything is built."""
    if cfg.precision == "bf16" and not native_bf16(device):
        raise TrialError(
            f"precision 'bf16' needs native bf16 ({device.type}: "
            + ("torch.cuda.is_bf16_supported() is False" if device.type == "cuda"
               else "no AMX or AVX512-BF16, torch.ops.mkldnn._is_mkldnn_bf16_supported() is False")
            + "); emulated bf16 is slower than fp32 there. allowed here: precision 'fp32'"
        )


def autocast(cfg: TrialConfig, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast for the training step's forward and backward (`precision: bf16`), else nothing. Autocast
    computes matmuls in bf16 from the fp32 master weights; gradients land in fp32 on the fp32 parameters."""
    if cfg.precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def run_trial(
    config: TrialConfig | Mapping[str, Any],
    *,
    progress: ProgressFn | None = None,
    show_progress: bool = False,
) -> TrialResult:
    """Train one run and score it; returns FD per eval step, the objective (mean eval FD) and timings.

    `config` is a `TrialConfig` or a plain mapping of it (validated strictly). `progress` is called after every
    eval step with that step's record and `fd_track_so_far` (step -> tracking FD at every tracking point so far,
    what a sweep's live steps-to-target score reads); the sweeper reports it to Ray Tune; raising from it stops the
    run.
    A diverged run (non-finite loss) stops early with status "DIVERGED". With `checkpoint_dir`, a checkpoint is
    written at every eval step and a later call with the same config resumes from it.
    """
    cfg = config if isinstance(config, TrialConfig) else TrialConfig.model_validate(dict(config))
    wall_start = time.perf_counter()
    torch.set_num_threads(cfg.threads)
    trial = _build(cfg)
    result = _new_result(trial)
    checkpoint = Checkpoint(cfg, trial.shard)
    checkpoint.restore(trial, result)
    params = cfg.model_dump(exclude={"tracking", "checkpoint_dir"})
    lead = trial.shard is None or trial.shard.rank == 0  # the rank that logs the run and reports progress
    meter = trial.shard.meter.installed() if trial.shard is not None else contextlib.nullcontext()
    with meter, trial_run(cfg.tracking if lead else None, params=params, tags=_run_tags(trial, result)) as run:
        if run.tracked:
            result.run_id = run.run_id
            if trial.step > 0:  # resumed: what the interrupted attempt logged after its checkpoint stays once
                run = _OnceRecorder(run, cfg.tracking)  # type: ignore[assignment]
                run.log_metrics({RESUMED_FROM_STEP: float(trial.step)}, trial.step)
        with _progress_bar(cfg, trial.step, show_progress and lead) as bar:
            _train(trial, result, run, checkpoint, bar, progress if lead else None)
        _summarise(result, trial.effective, trial.optimizer)
        result.wall_time_s = time.perf_counter() - wall_start
        run.finish(result)
    return result


class _OnceRecorder:
    """A resumed run's recorder: drops metric points at steps the run already holds for that key (the interrupted
    attempt logged them after its last checkpoint; the resumed one trains those steps again)."""

    def __init__(self, run: RunRecorder, tracking: Any) -> None:
        from mlflow import MlflowClient

        self._run = run
        client = MlflowClient(tracking_uri=tracking.tracking_uri)
        keys = client.get_run(run.run_id).data.metrics
        self._logged = {k: {m.step for m in client.get_metric_history(run.run_id, k)} for k in keys}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._run, name)

    def _fresh(self, step: int, metrics: Mapping[str, float]) -> dict[str, float]:
        return {k: v for k, v in metrics.items() if step not in self._logged.get(k, ())}

    def defer(self, step: int, metrics: Mapping[str, float]) -> None:
        fresh = self._fresh(step, metrics)
        if fresh:
            self._run.defer(step, fresh)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        fresh = self._fresh(step, metrics)
        if fresh:
            self._run.log_metrics(fresh, step)


@dataclass
class _Trial:
    """What one trial trains and scores with, built once by `_build`, and the counters a checkpoint carries:
    `step` (the last step trained) and `effective` (training time so far, seconds)."""

    cfg: TrialConfig
    sync: Callable[[], None]
    dataset: ImageTextDataset
    cond: Conditioner
    module: TextToImage
    ema: TextToImage | None
    optimizer: Any
    parameters: int
    extractor: FeatureExtractor
    reference: FeatureStats
    validation: Any
    fd_batch: Any
    fd_noise: Tensor
    train_gen: torch.Generator
    noise_gen: torch.Generator
    track_samples: int
    step: int = 0
    effective: float = 0.0
    params: list[Tensor] = field(default_factory=list)
    ema_params: list[Tensor] = field(default_factory=list)
    shard: _Shard | None = None  # a multi-worker trial's rank (trials._distributed)

    @property
    def scored(self) -> TextToImage:
        """The weights evaluations score: the EMA average, or the raw weights without one (on a multi-worker
        trial, the unsharded copy rank 0 evaluates, filled by `_Shard.gather` first)."""
        if self.shard is not None:
            return self.shard.eval_module
        return self.ema if self.ema is not None else self.module

    @property
    def eval_steps(self) -> list[int]:
        return self.cfg.resolved_eval_steps

    @property
    def track_steps(self) -> set[int]:
        return set(self.cfg.resolved_track_steps)

    @property
    def track_from_full(self) -> bool:
        """Where tracking asks for a subset of what the full evaluation computes anyway (no more images, the same
        first captions and noise, as many sampler steps), a tracking point at an eval step is the FD of the first
        `track_samples` of the full evaluation's features instead of sampling those images a second time."""
        return self.track_samples <= self.cfg.eval.fd_samples and (
            self.cfg.eval.track_sample_steps == self.cfg.eval.sample_steps)


@dataclass
class _Shard:
    """This rank of a multi-worker trial: its place, the unsharded copy rank 0 evaluates, its shards of the EMA
    and the parameters as local tensors (the EMA update needs no communication), and its communication meter."""

    rank: int
    world: int
    eval_module: TextToImage
    meter: CommMeter
    ema_shards: list[Tensor]  # DTensors (checkpointed as such)
    ema_local: list[Tensor]
    param_local: list[Tensor]
    optimizer_comm_bytes: float = 0.0

    def gather(self, trial: _Trial) -> None:
        """Every rank all-gathers the scored weights (EMA, else raw); rank 0 loads them into its copy."""
        weights = full_weights(self.ema_shards if trial.cfg.eval.ema_decay is not None else trial.params)
        if self.rank == 0:
            load_weights(self.eval_module, weights)


def _build(cfg: TrialConfig) -> _Trial:
    """Data, text conditioning, model, optimizer, EMA copy and the fixed evaluation inputs; refuses an
    FD-infinity request the sample count cannot serve before any training."""
    device = _resolve_device(cfg.device)
    check_precision(cfg, device)
    dataset = dataset_of(cfg)
    cond = Conditioner(cfg, dataset, device)
    torch.manual_seed(cfg.seed)  # model init is a function of the seed
    denoiser = build_model(cfg.rung, image_size=cfg.data.image_size, patch=cfg.resolved_patch,
                           in_channels=dataset.channels, context_dim=cond.context_dim, pooled_dim=cond.pooled_dim)
    module = TextToImage(denoiser, cond.learned).to(device)
    place = current_ranks(cfg.workers)
    shard = None
    if place is not None:
        if cfg.optimizer.name == "rownorm":
            raise TrialError("optimizer 'rownorm' has no sharded form; on workers > 1 allowed: adamw, muon, periodic")
        eval_module = copy.deepcopy(module).requires_grad_(False).eval()
        shard_model(denoiser, cond.learned)
    optimizer = build_optimizer(module, cfg.optimizer, block_prefixes=("denoiser.blocks",))
    ema = None
    if place is None and cfg.eval.ema_decay is not None:
        ema = copy.deepcopy(module).requires_grad_(False).eval()
    if place is not None:  # the EMA kept shard by shard instead (`_Shard`)
        params = list(module.parameters())
        ema_shards = [p.detach().clone() for p in params]
        shard = _Shard(rank=place[0], world=place[1], eval_module=eval_module,
                       meter=CommMeter(world=place[1]), ema_shards=ema_shards,
                       ema_local=local_tensors(ema_shards), param_local=local_tensors(params))

    extractor = extractor_of(cfg, dataset)
    reference = reference_stats(cfg, dataset, extractor)
    if cfg.eval.fd_infinity and cfg.eval.fd_samples <= 2 * reference.dim:
        raise FeatureError(f"eval.fd_infinity: FD-infinity needs subsets of at least 2d = {2 * reference.dim} "
                           f"samples (d = {reference.dim} {extractor.metric_name} features); eval.fd_samples is "
                           f"{cfg.eval.fd_samples}. Use more samples, or plain FD at a fixed sample count")
    # Common random numbers: every trial of a study samples the same captions from the same noise, so FD
    # differences between arms are not sampling noise.
    fd_batch = dataset.sample(cfg.eval.fd_samples, stream_generator(cfg.data.seed, "fd-captions"))
    fd_noise = torch.randn(
        (cfg.eval.fd_samples, dataset.channels, cfg.data.image_size, cfg.data.image_size),
        generator=stream_generator(cfg.data.seed, "fd-noise"),
    )
    return _Trial(
        cfg=cfg,
        sync=torch.cuda.synchronize if device.type == "cuda" else (lambda: None),
        dataset=dataset, cond=cond, module=module, ema=ema, optimizer=optimizer,
        parameters=count_parameters(denoiser).total,
        extractor=extractor, reference=reference,
        validation=dataset.validation_set(cfg.eval.val_samples).to(device), fd_batch=fd_batch, fd_noise=fd_noise,
        train_gen=stream_generator(cfg.data_order_seed, "train"),
        # one noise stream per rank (rank 0's is the one-process trial's): each rank noises its own slice
        noise_gen=stream_generator(cfg.data_order_seed,
                                   "noise" if shard is None or shard.rank == 0 else f"noise-{shard.rank}"),
        track_samples=min(cfg.eval.track_samples, cfg.eval.fd_samples) if cfg.resolved_track_steps else 0,
        params=list(module.parameters()), ema_params=list(ema.parameters()) if ema is not None else [],
        shard=shard,
    )


def _new_result(trial: _Trial) -> TrialResult:
    cfg = trial.cfg
    return TrialResult(
        status="SUCCEEDED",
        metric_name=trial.extractor.metric_name,
        fd_samples=cfg.eval.fd_samples,
        parameters=trial.parameters,
        muon_parameters=trial.optimizer.routing.muon_numel,
        track_samples=trial.track_samples,
        track_sample_steps=cfg.eval.track_sample_steps if cfg.resolved_track_steps else 0,
    )


def _run_tags(trial: _Trial, result: TrialResult) -> dict[str, str]:
    """What the run's FD numbers are and what was trained (MLflow tags)."""
    cfg = trial.cfg
    return {
        TRIAL_TAG.FD_EXTRACTOR: trial.extractor.name,
        TRIAL_TAG.FD_METRIC_NAME: trial.extractor.metric_name,
        TRIAL_TAG.FD_SAMPLES: str(cfg.eval.fd_samples),
        TRIAL_TAG.FD_REFERENCE_SAMPLES: str(cfg.eval.reference_samples),
        TRIAL_TAG.FD_WEIGHTS: "ema" if cfg.eval.ema_decay is not None else "raw",
        TRIAL_TAG.FD_TRACK_SAMPLES: str(result.track_samples),
        TRIAL_TAG.FD_TRACK_SAMPLE_STEPS: str(result.track_sample_steps),
        TRIAL_TAG.NS_DTYPE: str(trial.optimizer.ns_dtype).removeprefix("torch."),
        TRIAL_TAG.PARAMETERS: str(result.parameters),
        TRIAL_TAG.MUON_PARAMETERS: str(result.muon_parameters),
    }


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def set_postfix(self, **values: str) -> None:
        pass


@contextlib.contextmanager
def _progress_bar(cfg: TrialConfig, start: int, show: bool) -> Iterator[Any]:
    """A tqdm bar over the training steps, or one that draws nothing."""
    if not show:
        yield _NoBar()
        return
    from tqdm import tqdm

    bar = tqdm(total=cfg.steps, initial=start, desc=f"{cfg.rung} {cfg.optimizer.name}", unit="step")
    try:
        yield bar
    finally:
        bar.close()


def _stretched_updates(step: int, stretch: int | None) -> int:
    """Real updates among steps 1..`step` of a run whose optimizer has this `stretch` (`step` itself without one):
    the steps control `muon_stretched` takes a null step every (stretch + 1)-th step, the one where this count does
    not grow. The warm-up and the EMA read this count, so a stretched run walks Muon's schedules too."""
    return step if stretch is None else step - step // (stretch + 1)


def _train(trial: _Trial, result: TrialResult, run: RunRecorder, checkpoint: Checkpoint, bar: Any,
           progress: ProgressFn | None) -> None:
    """The loop: a train step; the mean train loss every `log_every` steps; a tracking FD at the tracking steps; at
    each eval step the full evaluation, its sample grid, a checkpoint and the caller's `progress`. Stops at the
    first non-finite loss or evaluation, with status DIVERGED."""
    cfg, start = trial.cfg, trial.step
    eval_steps, track_steps = trial.eval_steps, trial.track_steps
    loss_sum, loss_n = 0.0, 0
    stretch = cfg.optimizer.stretch
    for step in range(start + 1, cfg.steps + 1):
        if _stretched_updates(step, stretch) == _stretched_updates(step - 1, stretch):
            trial.step = step  # the steps control's null step: no batch, no noise, no update, no time
        else:
            loss = _train_step(trial, step)
            if loss is None:
                result.status, result.diverged_at = "DIVERGED", step
                break
            loss_sum, loss_n = loss_sum + loss, loss_n + 1
        bar.update(1)
        if step % cfg.log_every == 0 and loss_n:
            run.defer(step, {METRIC.LOSS: loss_sum / loss_n})
            bar.set_postfix(loss=f"{loss_sum / loss_n:.4f}")
            loss_sum, loss_n = 0.0, 0
        if step in track_steps and not (trial.track_from_full and step in eval_steps) and _scores(trial):
            _track_point(trial, result, run, step)
            if step not in eval_steps:
                run.flush()  # the full evaluation flushes its own
        if step in eval_steps:
            evaluated = _evaluate_step(trial, result, step) if _scores(trial) else None
            per_rank = _rank_metrics(trial)
            diverged = evaluated is None if trial.shard is None else broadcast_flag(
                trial.shard.rank == 0 and evaluated is None)
            if diverged:
                result.status, result.diverged_at = "DIVERGED", step
                break
            if evaluated is not None:  # the rank that evaluates (rank 0 of a multi-worker trial)
                metrics, samples = evaluated
                metrics.update(per_rank)
                run.defer(step, metrics)
                run.flush()
                _log_samples(run, samples, step)
                bar.set_postfix(loss=f"{metrics[METRIC.VAL_LOSS]:.4f}", fd=f"{metrics[METRIC.FD]:.2f}")
            checkpoint.save(trial, result, step)
            if progress is not None and evaluated is not None:  # the tracking curve so far: a sweep's live score
                progress({"step": step, "metric_name": trial.extractor.metric_name, **evaluated[0],
                          "fd_track_so_far": dict(result.fd_track)})
        result.steps_done = step
    result.steps_done = max(result.steps_done, start)


def _scores(trial: _Trial) -> bool:
    """Whether this process evaluates: always on one worker; on several, every rank all-gathers the scored weights
    and rank 0 alone evaluates them."""
    if trial.shard is None:
        return True
    trial.shard.gather(trial)
    return trial.shard.rank == 0


def _rank_metrics(trial: _Trial) -> dict[str, float]:
    """A multi-worker trial's per-rank timings and communication, per training step of this attempt (every rank
    takes part; rank 0 logs them): `<name>_rank<r>` for each rank and the slowest rank's under `<name>`, plus the
    matrix optimizer's own bytes by collective (`comm/...`)."""
    shard = trial.shard
    if shard is None:
        return {}
    meter, optimizer = shard.meter, trial.optimizer
    steps = max(1, meter.steps)
    mine = {
        "comm_bytes_per_step": meter.bytes_sent / steps,
        "comm_time_s_per_step": meter.time_s / steps,
        "step_time_s": meter.step_time_s / steps,
        "optimizer_step_time_s": optimizer.total_step_time_s / max(1, optimizer.steps),
    }
    every = gather_rank_metrics(mine)
    out = {f"{k}_rank{r}": v for r, values in enumerate(every) for k, v in values.items()}
    out.update({k: max(values[k] for values in every) for k in mine if k != "step_time_s"})
    if optimizer.comm_stats is not None:
        out.update(optimizer.comm_stats.as_metrics())
    return out


def _train_step(trial: _Trial, step: int) -> float | None:
    """One optimizer step (timed as effective training time, see the module docstring); the loss (on a
    multi-worker trial the mean over the global batch, which every rank sees), or None when it is not finite
    (nothing is updated then)."""
    cfg, shard = trial.cfg, trial.shard
    batch = trial.dataset.sample(cfg.batch_size, trial.train_gen)
    if shard is not None:  # the global batch, drawn whole on every rank from the one stream: this rank's slice
        per_rank = cfg.batch_size // shard.world
        batch = _slice(batch, shard.rank * per_rank, (shard.rank + 1) * per_rank)
    batch = batch.to(trial.cond.device)
    cached = trial.cond.frozen_embeddings(batch.captions)
    trial.sync()
    t0 = time.perf_counter()
    counting = shard.meter.counting() if shard is not None else contextlib.nullcontext()
    with counting:
        seen = _forward_backward_step(trial, step, batch, cached)
    trial.sync()
    elapsed = time.perf_counter() - t0
    trial.effective += elapsed
    trial.step = step
    if shard is not None:
        shard.meter.step_time_s += elapsed
    return seen


def _forward_backward_step(trial: _Trial, step: int, batch: Any, cached: tuple[Tensor, Tensor] | None) -> float | None:
    """Forward, backward, clip, optimizer step and EMA: the timed part of `_train_step`."""
    cfg, module, optimizer, shard = trial.cfg, trial.module, trial.optimizer, trial.shard
    optimizer.zero_grad()
    with autocast(cfg, trial.cond.device):  # backward runs in the dtypes autocast chose for the forward
        context, pooled = encode(module, trial.cond, batch.captions, cached)
        loss = flow_loss(module.denoiser, batch.images, context, pooled, trial.noise_gen,
                         cond_dropout=cfg.cond_dropout)
    seen = loss.detach()
    if shard is not None:  # every rank must take the same branch (backward is collective): the global mean decides
        seen = seen.clone()
        torch.distributed.all_reduce(seen)
        seen /= shard.world
    if not torch.isfinite(seen):
        return None
    loss.backward()
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(trial.params, cfg.grad_clip)
    update = _stretched_updates(step, cfg.optimizer.stretch)  # = step but for the steps control's relabelled run
    optimizer.set_lr_scale(min(1.0, update / cfg.warmup_steps) if cfg.warmup_steps else 1.0)
    optimizer.step()
    if cfg.eval.ema_decay is not None:
        # Warm-up (TF's num_updates rule): the effective decay (1+t)/(10+t) stays below `decay` until
        # t ~ 2000 (0.989 at step 800, 0.9926 at 1200), so the average tracks the recent weights early on.
        # Measured at cpu-xs, 1200 steps, 3 seeds: this rule gave objective seed std 5.6-21; the plain
        # running mean up to the full 0.995 window lagged more and had std 28-64 (benchmarks/trial_quality.py).
        d = min(cfg.eval.ema_decay, (1 + update) / (10 + update))
        if shard is not None:  # shard by shard: the EMA is elementwise, so no communication
            with torch.no_grad():
                torch._foreach_lerp_(shard.ema_local, shard.param_local, 1.0 - d)
        else:
            torch._foreach_lerp_(trial.ema_params, [p.detach() for p in trial.params], 1.0 - d)
    return seen.item()


def _slice(batch: Any, start: int, stop: int) -> Any:
    """Samples [start, stop) of a batch (images, captions and labels)."""
    return type(batch)(images=batch.images[start:stop], captions=batch.captions[start:stop],
                       labels={k: v[start:stop] for k, v in batch.labels.items()})


def _track_point(trial: _Trial, result: TrialResult, run: RunRecorder, step: int) -> None:
    """A tracking FD, before the full evaluation so both see the same weights; NaN (not a divergence) when the
    cheap sampler's output is not finite: the full evaluation decides divergence."""
    t_track = time.perf_counter()
    fd_track = _track(trial.cfg, trial.scored, trial.cond, trial.fd_batch, trial.fd_noise, trial.extractor,
                      trial.reference, result.track_samples)
    result.track_eval_time_s += time.perf_counter() - t_track
    result.fd_track[step] = fd_track
    result.track_effective_time_s[step] = trial.effective
    run.defer(step, {METRIC.FD_TRACK: fd_track, METRIC.TRACK_EFFECTIVE_TIME_S: trial.effective})


def _evaluate_step(trial: _Trial, result: TrialResult, step: int) -> tuple[dict[str, float], Tensor] | None:
    """The full evaluation at an eval step, recorded in `result`: the step's metrics (FD, validation loss, timings,
    update statistics) and its samples; None when the outputs were not finite."""
    t_eval = time.perf_counter()
    record = _evaluate(trial.cfg, trial.scored, trial.cond, trial.validation, trial.fd_batch, trial.fd_noise,
                       trial.extractor, trial.reference, step)
    result.eval_time_s += time.perf_counter() - t_eval
    if record is None:
        return None
    optimizer, effective = trial.optimizer, trial.effective
    samples, features = record.pop("samples"), record.pop("features")
    record.update({
        METRIC.EFFECTIVE_TIME_S: effective,
        METRIC.OPTIMIZER_TIME_S: optimizer.total_step_time_s,
        METRIC.STEP_TIME_S: effective / step,
        METRIC.OPTIMIZER_STEP_TIME_S: optimizer.total_step_time_s / max(1, optimizer.steps),
        METRIC.NS5_CALLS: float(optimizer.ns5_calls),
        METRIC.ROWNORM_CALLS: float(optimizer.rownorm_calls),
    })
    record.update(update_stats(optimizer))  # Muon family: update RMS / spectral norm per kind
    result.fd[step] = record[METRIC.FD]
    result.val_loss[step] = record[METRIC.VAL_LOSS]
    if METRIC.ALIGNMENT in record:
        result.alignment[step] = {k: v for k, v in record.items() if k.split(".")[0] == METRIC.ALIGNMENT}
    result.effective_time_s[step] = effective
    if METRIC.FD_INFINITY in record:
        result.fd_infinity[step] = record[METRIC.FD_INFINITY]
    if trial.track_from_full and step in trial.track_steps:  # the tracking point comes from this evaluation
        fd_track = record[METRIC.FD] if result.track_samples == len(features) else frechet_distance_from_stats(
            feature_statistics(features[: result.track_samples]), trial.reference)
        result.fd_track[step], result.track_effective_time_s[step] = fd_track, effective
        record.update({METRIC.FD_TRACK: fd_track, METRIC.TRACK_EFFECTIVE_TIME_S: effective})
    record[trial.extractor.metric_name] = record[METRIC.FD]
    return record, samples


def _log_samples(run: RunRecorder, samples: Tensor, step: int) -> None:
    """The step's generated images as one PNG grid under the run's `samples/` artifacts (a glance in MLflow's UI)."""
    if not run.tracked:
        return
    with tempfile.TemporaryDirectory() as tmp:
        grid = Path(tmp) / f"step_{step:07d}.png"
        _sample_grid(samples, grid)
        run.log_artifact(str(grid), "samples")


@torch.no_grad()
def _evaluate(
    cfg: TrialConfig,
    model: TextToImage,
    cond: Conditioner,
    validation: Any,
    fd_batch: Any,
    fd_noise: Tensor,
    extractor: FeatureExtractor,
    reference: FeatureStats,
    step: int,
) -> dict[str, Any] | None:
    """Validation loss and FD of `model` (EMA weights by default); None when its outputs are not finite."""
    was_training = model.training
    model.eval()
    try:
        context, pooled = encode(model, cond, validation.captions, cond.frozen_embeddings(validation.captions))
        val = validation_loss(
            model.denoiser, validation.images, context, pooled, seed=stream_seed(cfg.data.seed, "val")
        )
        samples = _generate(cfg, model, cond, fd_batch, fd_noise, cfg.eval.fd_samples, cfg.eval.sample_steps)
        if not (math.isfinite(val) and torch.isfinite(samples).all()):
            return None
        features = extractor.extract(samples)
        record: dict[str, Any] = {
            "fd": frechet_distance_from_stats(feature_statistics(features), reference),
            "val_loss": val,
            "samples": samples,
            "features": features,
        }
        if isinstance(extractor, ScenesCNNExtractor):  # what the samples show, read back against their captions
            shares = scene_alignment(extractor.predict_from_features(features), fd_batch.labels)
            record |= {METRIC.alignment(attribute): share for attribute, share in shares.items()}
        # FD-infinity needs subsets of at least 2d samples: asked for explicitly it refuses below that (a clear
        # error); as the default bias estimate it is simply not made there.
        n, dim = features.shape
        if cfg.eval.fd_infinity or (cfg.eval.fd_bias and n > 2 * dim):
            record["fd_infinity"] = frechet_distance_infinity(features, reference, seed=step).fd_infinity
            record["fd_bias"] = record["fd"] - record["fd_infinity"]
        return record
    finally:
        model.train(was_training)


def _generate(cfg: TrialConfig, model: TextToImage, cond: Conditioner, fd_batch: Any, fd_noise: Tensor, n: int,
              steps: int) -> Tensor:
    """The first `n` images of the fixed FD captions and noise, `steps` Euler steps, in eval-batch chunks."""
    chunks = []
    for start in range(0, n, cfg.eval.batch_size):
        stop = min(n, start + cfg.eval.batch_size)
        captions = fd_batch.captions[start:stop]
        ctx, pool = encode(model, cond, captions, cond.frozen_embeddings(captions))
        chunks.append(sample_euler(model.denoiser, ctx, pool, noise=fd_noise[start:stop].to(ctx.device), steps=steps,
                                   guidance_scale=cfg.eval.guidance_scale).cpu())
    return torch.cat(chunks)


@torch.no_grad()
def _track(
    cfg: TrialConfig,
    model: TextToImage,
    cond: Conditioner,
    fd_batch: Any,
    fd_noise: Tensor,
    extractor: FeatureExtractor,
    reference: FeatureStats,
    n: int,
) -> float:
    """Tracking FD: the first `n` of the full evaluation's captions and noise, `eval.track_sample_steps` Euler
    steps. NaN when the samples are not finite."""
    was_training = model.training
    model.eval()
    try:
        samples = _generate(cfg, model, cond, fd_batch, fd_noise, n, cfg.eval.track_sample_steps)
        if not torch.isfinite(samples).all():
            return math.nan
        return frechet_distance_from_stats(feature_statistics(extractor.extract(samples)), reference)
    finally:
        model.train(was_training)


def _summarise(result: TrialResult, effective: float, optimizer: Any) -> None:
    """Totals and counters from the optimizer, then the quality summary."""
    result.total_effective_time_s = effective
    result.optimizer_time_s = optimizer.total_step_time_s
    result.mean_step_time_s = effective / max(1, optimizer.steps)
    result.ns5_calls, result.rownorm_calls = optimizer.ns5_calls, optimizer.rownorm_calls
    result.rownorm_kernel = optimizer.rownorm_kernels_used
    summarise_quality(result)


def summarise_quality(result: TrialResult) -> None:
    """Objective (mean eval FD, the sweep's score), best-seen and endpoint FD, and time to best FD (effective
    training time at the best checkpoint; ties go to the earlier one). Left None for a diverged run."""
    if result.fd and result.status == "SUCCEEDED":
        steps = sorted(result.fd)
        result.objective = float(np.mean([result.fd[s] for s in steps]))
        result.best_step = min(steps, key=lambda s: (result.fd[s], s))
        result.best_fd = result.fd[result.best_step]
        result.endpoint_fd = result.fd[steps[-1]]
        result.time_to_best_s = result.effective_time_s.get(result.best_step)
