"""The torch-free half of `trials.steptime`: the timing options, the block order, the paired ratio and the result
type (a spec can validate timing options and an analysis can read results without loading torch)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from .optim import OptimizerConfig

__all__ = [
    "CLOCKS",
    "ORDERS",
    "PHASES",
    "BlockSteps",
    "LocalBatch",
    "MaxRounds",
    "PairedRatio",
    "StepTimes",
    "StepTimingConfig",
    "TargetHalfwidth",
    "TimedRounds",
    "TimingClock",
    "WarmupRounds",
    "balanced_rounds",
    "block_order",
    "check_block_steps",
    "paired_ratio",
    "refresh_period",
]

# What each step's time is split into (trials.steptime's docstring); a step's cost is their sum.
PHASES: tuple[str, ...] = ("forward_backward", "optimizer", "other")
CLOCKS: tuple[str, ...] = ("thread", "wall")
ORDERS: tuple[str, ...] = ("rotate", "cyclic", "alternate")


# Each interleaved-timing option's bounds and meaning, said once: `StepTimingConfig` below and the transfer spec's
# `timing:` section (`sweeper.transfer.TimingSpec`, which hands these options on to it) both declare their fields with
# these types, each with its own default (and the transfer a tighter cap on `rounds`).
LocalBatch = Annotated[int | None, Field(
    ge=1, le=65_536,
    description="The per-rank view: forward/backward at this batch (1 to the training batch), the optimizer on whole "
    "matrices, as each rank of an FSDP2 run with that local batch; None = the training batch.",
)]
TimingClock = Annotated[Literal["thread", "wall"], Field(
    description="The clock the ratios use: thread (thread-CPU time: needs 1 thread per trial on a CPU; waiting on "
    "other processes' work is not in it) or wall; both are recorded.",
)]
BlockSteps = Annotated[int | None, Field(
    ge=1, le=1_000,
    description="Steps per block: a whole number of every arm's refresh period (K for periodic, 1 for the other "
    "arms); None = their least common multiple (3 with periodic K=3; 1 for Muon alone).",
)]
WarmupRounds = Annotated[int, Field(
    ge=0, le=100, description="Untimed rounds first (allocator, caches, compiled kernels, the first Newton-Schulz).",
)]
TimedRounds = Annotated[int, Field(
    ge=2, le=10_000,
    description="Timed rounds (at least 2 for an interval), rounded up to whole rotations of the arms (order "
    "'rotate': a multiple of the arm count); with target_halfwidth, the fewest rounds before the interval may stop "
    "the measurement. 9-20 rounds held the ratio's interval within +-2 % at the CPU rungs on thread-CPU time.",
)]
TargetHalfwidth = Annotated[float | None, Field(
    gt=0, lt=1,
    description="Add rounds until every ratio's interval is within ratio x (1 +- this), e.g. 0.02, or max_rounds; "
    "None = exactly `rounds` rounds.",
)]
MaxRounds = Annotated[int, Field(
    ge=2, le=10_000, description="Most rounds with target_halfwidth (a hard cap, whole rotations or not).",
)]


class StepTimingConfig(BaseModel):
    """How `interleaved_step_times` measures (strict: unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    local_batch: LocalBatch = None
    clock: TimingClock = "thread"
    block_steps: BlockSteps = None
    warmup_rounds: WarmupRounds = 2
    rounds: TimedRounds = 10
    target_halfwidth: TargetHalfwidth = None
    max_rounds: MaxRounds = 200
    order: Literal["rotate", "cyclic", "alternate"] = Field(
        "rotate", description="rotate: the order shifted by one arm each round (A B C, B C A, ...), each arm in each "
        "place equally often; cyclic: the same order every round (A B A B ...); alternate: reversed every other "
        "round (A B C, C B A, ...).",
    )
    level: float = Field(0.95, gt=0.5, lt=1, description="Confidence level of the intervals.")


# ----------------------------------------------------------------------------------------------------------
# Pure pieces: periods, the block order, the paired ratio


def refresh_period(optimizer: OptimizerConfig | Mapping[str, Any]) -> int:
    """Steps in one period of the arm's step pattern: K for periodic, 1 for every other arm (validates the config,
    which loads torch)."""
    from .optim import OptimizerConfig

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
    # On N ranks (`workers` > 1): every rank's seconds per step, round by round (`rank_steps[arm][clock]`: one list
    # of N per round; `costs` holds the slowest rank's phases, which set a synchronous step's pace), the bytes each
    # rank sent per step (the most of any rank, round by round), and what the CPU clock read: "process" (the
    # rank's process, its compute thread and gloo's communication threads) rather than "thread".
    workers: int = 1
    cpu_clock: str = "thread"
    rank_steps: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    comm_bytes: dict[str, list[float]] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return len(self.blocks)

    def step(self, arm: str, clock: str | None = None) -> list[float]:
        """Seconds per step of `arm`, round by round (the sum of the phases)."""
        phases = self.costs[arm][clock or self.clock]
        return [sum(values) for values in zip(*(phases[p] for p in PHASES), strict=True)]

    def rounds_by_arm(self, clock: str | None = None) -> dict[str, list[float]]:
        """Arm -> seconds per step of each round, paired by index: the shape `scaling.step_time_ratio` and
        `scaling.median_step_times` read for one rung."""
        return {arm: self.step(arm, clock) for arm in self.arms}

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
            "seconds": self.seconds, "arms": arms, **self._ranks_summary(),
        }

    def _ranks_summary(self) -> dict[str, Any]:
        """On N ranks: the worker count, the CPU clock's reading, and per arm each rank's median step cost (both
        clocks) and the bytes per rank per step; nothing on one worker (documents of earlier timings unchanged)."""
        if self.workers == 1:
            return {}
        ranks = {arm: {clock: [statistics.median(r[i] for r in per) for i in range(self.workers)]
                       for clock, per in self.rank_steps[arm].items()} for arm in self.arms}
        return {"workers": self.workers, "cpu_clock": self.cpu_clock, "rank_step_s": ranks,
                "comm_bytes_per_step": {arm: statistics.median(b) for arm, b in self.comm_bytes.items()}}
