"""Per-step cost of several optimizer arms, measured inside one process, interleaved, on the same data.

The transfer's first timing stage ran each arm in a short run of its own (5 warm-up and 20 timed steps, wall clock)
one after another: on a shared 2-core machine the per-round log SD of a ratio was 0.35, and a 20-step window from
step 0 holds 7 refreshes of a K=3 arm, not 20/3. This module measures instead:

- **one process, every arm built side by side** at the rung's training shapes, each from the trial's own seed (the
  same initial weights), each with its own noise stream from that seed (the same noise at the same step);
- **short blocks, interleaved**: round r runs a block of `block_steps` steps of each arm in turn, every arm on the
  same batches, the order rotated by one arm each round (`order="rotate"`: A B C, B C A, C A B, ...) so each arm
  takes each place in a round equally often. The first block after a round's batches are drawn runs on caches the
  draw and a garbage collection have just emptied: with the same order every round (`"cyclic"`, A B A B ...) the
  first arm paid for it, 2.5 % of a step at cpu-xs (a second, identical Muon arm in the last place measured 0.975
  [0.958, 0.993] of the first, 19 rounds). With "rotate" the measurement stops only after whole rotations;
  `"alternate"` (A B C, C B A, ...) is the third choice;
- **whole refresh periods**: a block holds a whole number of every arm's refresh period (K steps for periodic),
  so each block holds exactly block_steps / K refreshes whatever its phase; other lengths are refused;
- **thread-CPU time** (`time.thread_time`, CLOCK_THREAD_CPUTIME_ID) as the clock, wall time beside it. With
  `threads=1` (the study's setting, `torch.set_num_threads(1)`) torch's intra-op work and the CPU autograd engine
  run on the calling thread, so its CPU time is the step's whole cost and time spent waiting on other processes'
  work is not in it. With more threads the thread clock would miss the pool's work, so it is refused there;
  `thread_coverage` (thread CPU / process CPU over the timed blocks) shows what the clock saw;
- **phases timed apart**: forward + loss + backward + gradient clipping (`forward_backward`), the optimizer step
  (`optimizer`: both groups, Muon's matrices and the AdamW rest), and the EMA update and loss read-out (`other`),
  so Muon's optimizer share of the step is reported;
- **the per-rank view** (`local_batch`): forward/backward at that batch while the optimizer updates whole matrices,
  as every rank of an FSDP2 run does with its local batch (communication not included);
- **ratios paired by round**: per arm, the geometric mean of the per-round log ratios to the reference arm with a
  Student-t interval, and beside it the median with its distribution-free (sign-test) interval; with
  `target_halfwidth` rounds are added until every interval is within that (e.g. +-2 %) or `max_rounds` is reached.

The step mirrors the trial's training step (`trials._run._train_step`: zero_grad, text encoding, flow loss, the
finiteness check, backward, clipping, the lr warm-up scale, the optimizer step, the EMA update, `loss.item()`).
Drawing batches and looking up cached frozen text embeddings happen outside the clocks, as in the trial.
"""

from __future__ import annotations

import copy
import gc
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from ._config import TrialConfig
from ._run import _Conditioner, _dataset, _encode, _resolve_device, _TextToImage
from .data import stream_generator
from .flow import flow_loss
from .models import build_model
from .optim import HybridOptimizer, OptimizerConfig, RedundantNewtonSchulz, build_optimizer

__all__ = [
    "CLOCKS",
    "ORDERS",
    "PHASES",
    "PairedRatio",
    "StepTimes",
    "StepTimingConfig",
    "balanced_rounds",
    "block_order",
    "check_block_steps",
    "interleaved_step_times",
    "paired_ratio",
    "refresh_period",
]

# What each step's time is split into (see the module docstring); a step's cost is their sum.
PHASES: tuple[str, ...] = ("forward_backward", "optimizer", "other")
CLOCKS: tuple[str, ...] = ("thread", "wall")
ORDERS: tuple[str, ...] = ("rotate", "cyclic", "alternate")


class StepTimingConfig(BaseModel):
    """How `interleaved_step_times` measures (strict: unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    local_batch: int | None = Field(
        None, ge=1, le=65_536,
        description="Per-rank view: forward/backward at this batch (1 to the trial's batch_size), the optimizer on "
        "whole matrices, as each rank of an FSDP2 run; None = the trial's batch_size.",
    )
    clock: Literal["thread", "wall"] = Field(
        "thread", description="Clock the ratios use: thread-CPU time (needs threads=1, a CPU device) or wall time; "
        "both are recorded.",
    )
    block_steps: int | None = Field(
        None, ge=1, le=1_000,
        description="Steps per block: a whole number of every arm's refresh period; None = the least common "
        "multiple of the periods (3 with periodic K=3; 1 for Muon alone).",
    )
    warmup_rounds: int = Field(
        2, ge=0, le=100, description="Untimed rounds first (allocator, caches, compiled kernels, the first NS5).")
    rounds: int = Field(
        10, ge=2, le=10_000, description="Timed rounds (at least 2 for an interval), rounded up to whole rotations "
        "(order 'rotate': a multiple of the arm count); with target_halfwidth, the fewest rounds before the "
        "interval may stop the measurement.",
    )
    target_halfwidth: float | None = Field(
        None, gt=0, lt=1,
        description="Add rounds until every ratio's interval is within ratio x (1 +- this), e.g. 0.02; None = "
        "exactly `rounds` rounds.",
    )
    max_rounds: int = Field(
        200, ge=2, le=10_000, description="Most rounds with target_halfwidth (a hard cap, whole rotations or not).")
    order: Literal["rotate", "cyclic", "alternate"] = Field(
        "rotate", description="rotate: the order shifted by one arm each round (A B C, B C A, ...), each arm in each "
        "place equally often; cyclic: the same order every round (A B A B ...); alternate: reversed every other "
        "round (A B C, C B A, ...).",
    )
    level: float = Field(0.95, gt=0.5, lt=1, description="Confidence level of the intervals.")


# ----------------------------------------------------------------------------------------------------------
# Pure pieces: periods, the block order, the paired ratio


def refresh_period(optimizer: OptimizerConfig | Mapping[str, Any]) -> int:
    """Steps in one period of the arm's step pattern: K for periodic, 1 for every other arm."""
    cfg = optimizer if isinstance(optimizer, OptimizerConfig) else OptimizerConfig.model_validate(dict(optimizer))
    return cfg.refresh_every if cfg.name == "periodic" else 1


def check_block_steps(block_steps: int | None, periods: Mapping[str, int]) -> int:
    """The block length to use: `block_steps`, or the least common multiple of the arms' `periods` when None. A
    length that is not a whole number of every period raises ValueError naming the field and the allowed values."""
    lcm = math.lcm(*periods.values()) if periods else 1
    if block_steps is None:
        return lcm
    if isinstance(block_steps, bool) or not isinstance(block_steps, int) or block_steps < 1 or block_steps % lcm:
        named = ", ".join(f"{arm}: {k}" for arm, k in periods.items())
        raise ValueError(
            f"block_steps must be a whole number of every arm's refresh period ({named}): a multiple of {lcm} "
            f"({lcm}, {2 * lcm}, {3 * lcm}, ...), got {block_steps!r}"
        )
    return block_steps


def block_order(arms: Sequence[str], rounds: int, order: str = "rotate", start: int = 0) -> list[list[str]]:
    """The arms' blocks, round by round, from round `start`: shifted by one arm each round ("rotate"), the same
    every round ("cyclic"), or reversed in every odd round ("alternate")."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {list(ORDERS)}, got {order!r}")
    out = []
    for r in range(start, start + rounds):
        if order == "rotate":
            shift = r % len(arms) if arms else 0
            out.append(list(arms[shift:]) + list(arms[:shift]))
        else:
            out.append(list(arms) if order == "cyclic" or r % 2 == 0 else list(reversed(arms)))
    return out


def balanced_rounds(arms: int, order: str) -> int:
    """Rounds after which every arm has taken each place equally often: the arm count ("rotate"), 2 ("alternate",
    each pair of rounds mirrored) or 1 ("cyclic", never)."""
    return max(1, arms) if order == "rotate" else 2 if order == "alternate" else 1


@dataclass(frozen=True)
class PairedRatio:
    """`ours` / `base` per-step cost from rounds paired by round.

    `mean` is the geometric mean of the per-round ratios, `lo`-`hi` its Student-t interval on the log ratios;
    `median` is the median ratio and `median_lo`-`median_hi` its distribution-free interval (order statistics of
    the log ratios by the sign test; None below 6 rounds at 95 %, where no such interval reaches the level).
    `log_sd` is the per-round SD of the log ratios."""

    mean: float
    lo: float
    hi: float
    n: int
    log_sd: float
    median: float
    median_lo: float | None
    median_hi: float | None
    level: float

    @property
    def halfwidth(self) -> float:
        """The interval's larger side as a fraction of the ratio: within +-`halfwidth`."""
        return max(self.hi / self.mean - 1.0, 1.0 - self.lo / self.mean)

    def as_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n, "log_sd": self.log_sd,
                "median": self.median, "median_lo": self.median_lo, "median_hi": self.median_hi,
                "level": self.level, "halfwidth": self.halfwidth}


def _sign_test_rank(n: int, level: float) -> int | None:
    """The largest k with P(Binomial(n, 1/2) <= k - 1) <= (1 - level) / 2: the interval [x_(k), x_(n-k+1)] of the
    ordered sample covers the median with probability >= level. None when even k = 1 does not reach it."""
    alpha = (1.0 - level) / 2.0
    k, tail = 0, 0.0
    while True:
        tail += math.comb(n, k) / 2.0**n  # P(B <= k)
        if tail > alpha:
            return k if k >= 1 else None
        k += 1


def paired_ratio(ours: Sequence[float], base: Sequence[float], level: float = 0.95) -> PairedRatio:
    """`ours` / `base` from per-round costs paired by index (at least 2 rounds, all costs > 0)."""
    from scipy import stats

    if len(ours) != len(base) or len(ours) < 2:
        raise ValueError(f"paired_ratio needs two equally long series of at least 2 rounds, got {len(ours)} and "
                         f"{len(base)}")
    if min(ours) <= 0 or min(base) <= 0:
        raise ValueError("paired_ratio needs positive costs")
    logs = [math.log(a / b) for a, b in zip(ours, base, strict=True)]
    n = len(logs)
    mean = statistics.fmean(logs)
    sd = statistics.stdev(logs)
    half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    ordered = sorted(logs)
    k = _sign_test_rank(n, level)
    return PairedRatio(
        mean=math.exp(mean), lo=math.exp(mean - half), hi=math.exp(mean + half), n=n, log_sd=sd,
        median=math.exp(statistics.median(logs)),
        median_lo=math.exp(ordered[k - 1]) if k else None, median_hi=math.exp(ordered[n - k]) if k else None,
        level=level,
    )


# ----------------------------------------------------------------------------------------------------------
# The measurement


@dataclass
class StepTimes:
    """What `interleaved_step_times` measured.

    `costs[arm][clock][phase]` is a list with one value per timed round: seconds per step of that phase, the
    block's total divided by `block_steps`; `redundant[arm][clock]` likewise for the positive control's discarded
    work (inside its optimizer phase), for arms that do some. `blocks` is the order the timed blocks ran in, round
    by round.
    """

    arms: tuple[str, ...]
    reference: str
    clock: str
    level: float
    rung: str
    batch_size: int
    local_batch: int
    block_steps: int
    periods: dict[str, int]
    threads: int
    warmup_rounds: int
    costs: dict[str, dict[str, dict[str, list[float]]]]
    redundant: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    blocks: list[list[str]] = field(default_factory=list)
    thread_coverage: float | None = None
    load_before: tuple[float, float, float] | None = None
    load_after: tuple[float, float, float] | None = None
    stopped: str = "rounds"
    seconds: float = 0.0

    @property
    def rounds(self) -> int:
        return len(self.blocks)

    def step(self, arm: str, clock: str | None = None) -> list[float]:
        """Seconds per step of `arm`, round by round (the sum of the phases)."""
        phases = self.costs[arm][clock or self.clock]
        return [sum(values) for values in zip(*(phases[p] for p in PHASES), strict=True)]

    def ratio(self, arm: str, reference: str | None = None, clock: str | None = None) -> PairedRatio:
        """`arm` / reference per-step cost, paired by round."""
        return paired_ratio(self.step(arm, clock), self.step(reference or self.reference, clock), self.level)

    def optimizer_share(self, arm: str, clock: str | None = None) -> float:
        """The optimizer's share of `arm`'s step: the median over rounds of optimizer / step."""
        opt = self.costs[arm][clock or self.clock]["optimizer"]
        return statistics.median(o / s for o, s in zip(opt, self.step(arm, clock), strict=True))

    def expected_ratio(self, arm: str, reference: str | None = None, clock: str | None = None) -> float | None:
        """What `arm` / reference should measure if `arm` is the reference plus its redundant work: the median over
        rounds of (reference step + arm's redundant work per step) / reference step. None for an arm without
        redundant work."""
        if arm not in self.redundant:
            return None
        extra, ref = self.redundant[arm][clock or self.clock], self.step(reference or self.reference, clock)
        return statistics.median((r + e) / r for r, e in zip(ref, extra, strict=True))

    def summary(self) -> dict[str, Any]:
        """A JSON-able digest: per arm the median cost per step and per phase, the optimizer share, the ratio to
        the reference (both clocks), and the settings."""
        arms: dict[str, Any] = {}
        for arm in self.arms:
            per: dict[str, Any] = {}
            for clock in CLOCKS:
                per[clock] = {
                    "step_s": statistics.median(self.step(arm, clock)),
                    **{f"{p}_s": statistics.median(self.costs[arm][clock][p]) for p in PHASES},
                    "optimizer_share": self.optimizer_share(arm, clock),
                }
                if arm != self.reference:
                    per[clock]["ratio"] = self.ratio(arm, clock=clock).as_dict()
                expected = self.expected_ratio(arm, clock=clock)
                if expected is not None:
                    per[clock]["expected_ratio"] = expected
            arms[arm] = per
        return {
            "rung": self.rung, "batch_size": self.batch_size, "local_batch": self.local_batch,
            "block_steps": self.block_steps, "periods": self.periods, "rounds": self.rounds, "clock": self.clock,
            "reference": self.reference, "threads": self.threads, "thread_coverage": self.thread_coverage,
            "load_before": self.load_before, "load_after": self.load_after, "stopped": self.stopped,
            "seconds": self.seconds, "arms": arms,
        }


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
    negative control) at `trial`'s rung, batch, data, text encoder and threads, measured as the module docstring
    says. `reference` (default: the first arm) is the denominator of the ratios. `progress` is called after every
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
