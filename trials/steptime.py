"""Per-step cost of several optimizer arms, measured inside one process, interleaved, on the same data.

The transfer's first timing stage ran each arm in a short run of its own (5 warm-up and 20 timed steps, wall clock)
one after another: on a shared 2-core machine the per-round log SD of a ratio was 0.35, and a 20-step window from
step 0 holds 7 refreshes of a K=3 arm, not 20/3. This module measures instead:

- **one process, every arm built side by side** at the rung's training shapes, each from the trial's own seed (the
  same initial weights), each with its own noise stream from that seed (the same noise at the same step);
- **short blocks, interleaved**: round r runs a block of `block_steps` steps of each arm in turn, every arm on the
  same batches, the order rotated by one arm each round (`order="rotate"`: A B C, B C A, C A B, ...) so each arm
  takes each place in a round equally often, and the measurement stops only after whole rotations. With the same
  order every round (`"cyclic"`, A B A B ...) a place became a bias: the first block runs right after the round's
  batches are drawn and a garbage collection, and a second, identical Muon arm in the last place measured 0.975
  [0.958, 0.993] of the first at cpu-xs (19 rounds; docs/benchmarks.md). `"alternate"` (A B C, C B A, ...) is the
  third choice;
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
- **on N workers** (the trial's `workers` N > 1): the N-rank trial's step (FSDP2 per block, the sharded optimizer,
  the EMA shard by shard) on N gloo ranks, the slowest rank's cost per round on each rank's process CPU clock
  (gloo's communication threads included), every rank's cost and the bytes each sent per step beside it
  (`trials._steptime`'s docstring);
- **ratios paired by round**: per arm, the geometric mean of the per-round log ratios to the reference arm with a
  Student-t interval, and beside it the median with its distribution-free (sign-test) interval; with
  `target_halfwidth` rounds are added until every interval is within that (e.g. +-2 %) or `max_rounds` is reached.

The step mirrors the trial's training step (`trials._run._train_step`: zero_grad, text encoding, flow loss, the
finiteness check, backward, clipping, the lr warm-up scale, the optimizer step, the EMA update, `loss.item()`).
Drawing batches and looking up cached frozen text embeddings happen outside the clocks, as in the trial.
"""

# ruff: noqa: F401  (the face re-exports trials._timing's names; __all__ is derived from its __all__)
from __future__ import annotations

from typing import TYPE_CHECKING

from . import _timing
from ._timing import (
    CLOCKS,
    ORDERS,
    PHASES,
    BlockSteps,
    LocalBatch,
    MaxRounds,
    PairedRatio,
    StepTimes,
    StepTimingConfig,
    TargetHalfwidth,
    TimedRounds,
    TimingClock,
    WarmupRounds,
    balanced_rounds,
    block_order,
    check_block_steps,
    paired_ratio,
    refresh_period,
)
from .core.lazy import lazy_attributes

if TYPE_CHECKING:
    from ._steptime import interleaved_step_times

__all__ = sorted([*_timing.__all__, "interleaved_step_times"])

# The measurement loads torch, the model and the data on first use; the options, the ratio and the result type
# above do not (a spec validates timing options, an analysis reads results, without torch).
__getattr__, __dir__ = lazy_attributes(__name__, globals(), {"interleaved_step_times": "trials._steptime"})
