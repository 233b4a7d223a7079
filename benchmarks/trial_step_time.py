"""End-to-end training step time at each CPU rung, with each implementation of the row-norm step, paired by round.

Arms, each the real trial (forward, backward, optimizer, EMA; 16x16 images, one thread) for `--warmup + --steps`
steps, timed over the last `--steps` by the trial's own effective-time clock (evaluation excluded):
- `periodic`: K=3, gamma=0.15 as the trials run it (`rownorm_kernel="auto"`: the compiled kernel where it builds);
- `periodic, streamed`: the same arm with the row-norm step in torch operations, chunk by chunk (`"streamed"`);
- `periodic, unfused`: the same arm with the whole-matrix row-norm step both replaced (`"unfused"`);
- `muon`, `adamw`: the baselines.

This is the transfer's own timing stage (`measure_step_time_runs`): rounds over every rung and arm, one trial at a
time, the arms' order rotated each round, so round i of two arms is a pair. Each ratio is the geometric mean of the
per-round ratios with a 95 % Student-t interval and n (rounds). Defaults are the evidence profile's timing
(batch 16, 5 warm-up and 20 timed steps); `--rounds` more than its 3 narrow the intervals.

    python benchmarks/trial_step_time.py [--rungs cpu-xs,cpu-s,cpu-m,cpu-l] [--rounds 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

# The transfer's timing stage and its paired ratio: the same code that times a transfer's arms.
from scaling.rungs import step_time_ratio
from sweeper.transfer import TimingSpec
from sweeper.transfer._timing import measure_step_time_runs

ARMS: dict[str, dict[str, Any]] = {
    "periodic": {"name": "periodic", "refresh_every": 3, "gamma": 0.15},
    "periodic, streamed": {"name": "periodic", "refresh_every": 3, "gamma": 0.15, "rownorm_kernel": "streamed"},
    "periodic, unfused": {"name": "periodic", "refresh_every": 3, "gamma": 0.15, "rownorm_kernel": "unfused"},
    "muon": {"name": "muon"},
    "adamw": {"name": "adamw"},
}
# The evidence profile's trial (batch 16, the default frozen text encoder); its evaluation is replaced by the
# timing stage's tiny one, outside the timed window anyway.
TRIAL: dict[str, Any] = {"batch_size": 16}


def time_rungs(rungs: Sequence[str], arms: Mapping[str, Mapping[str, Any]], timing: TimingSpec,
               trial: Mapping[str, Any] = TRIAL) -> dict[str, dict[str, list[float]]]:
    """Rung -> arm -> seconds per training step of each round."""
    rows = [(rung, arm, dict(optimizer)) for rung in rungs for arm, optimizer in arms.items()]
    return measure_step_time_runs(trial, rows, timing, threads=1)


def ratio_text(ratio: Mapping[str, Any] | None) -> str:
    if ratio is None:
        return "-"
    if ratio.get("lo") is None:
        return f"{ratio['mean']:.3f} (one run)"
    return f"{ratio['mean']:.3f} [{ratio['lo']:.3f}, {ratio['hi']:.3f}], n={ratio['n']}"


def print_table(runs: Mapping[str, Mapping[str, Sequence[float]]]) -> None:
    print("\nms per training step, median over rounds; ratios paired by round (geometric mean, 95 % interval, n):")
    print("| rung | periodic | periodic, streamed | periodic, unfused | muon | adamw | periodic / unfused "
          "(after / before) | periodic / streamed | periodic / muon | unfused / muon | periodic / adamw |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rung, per in runs.items():
        ms = " | ".join(f"{statistics.median(per[arm]) * 1e3:.1f}" if arm in per else "-" for arm in ARMS)
        pairs = [("periodic", "periodic, unfused"), ("periodic", "periodic, streamed"), ("periodic", "muon"),
                 ("periodic, unfused", "muon"), ("periodic", "adamw")]
        ratios = " | ".join(ratio_text(step_time_ratio(per, a, b)) for a, b in pairs)
        print(f"| {rung} | {ms} | {ratios} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rungs", default="cpu-xs,cpu-s,cpu-m,cpu-l")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from optimizer_step import cpu_features  # benchmarks/ is on sys.path when this script runs

    print(f"CPU: {cpu_features()}")
    print(f"torch {torch.__version__}, 1 thread; {args.rounds} rounds x ({args.warmup} warm-up + {args.steps} timed "
          f"steps) per arm and rung, batch {TRIAL['batch_size']}")
    start = time.perf_counter()
    runs = time_rungs(args.rungs.split(","), ARMS, TimingSpec(steps=args.steps, warmup=args.warmup,
                                                              repeats=args.rounds))
    print_table(runs)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
