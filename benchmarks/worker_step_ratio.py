"""The transfer's per-step ratio on 2 workers against 1: what its timing stage measures when a rung runs on N ranks.

At each rung, at the study's training settings (`step_ratio.py`'s: the evidence profile's global batch 16, 16x16
images, MiniLM text, EMA, clipping), `trials.steptime.interleaved_step_times` twice:

- **1 worker**: one process, Muon and periodic (K=3, gamma=0.15) side by side, thread-CPU clock (the transfer's timing
  before N-worker rungs);
- **2 workers**: 2 gloo ranks (1 thread each), each arm FSDP2-wrapped per MMDiT block with `ShardedPeriodicRowMuon`
  as the 2-worker trial trains it, every rank on its 8 of the 16 samples; Muon and periodic with Newton-Schulz
  replicated (every rank on every matrix) and distributed (once per matrix on an owner rank). Each round's cost is
  the slower rank's, on each rank's process CPU clock (gloo's threads do the communication's copies), wall beside it.

Printed per rung and worker count: each arm's ms per step, its optimizer share, the ratio to Muon (replicated) with
its 95 % Student-t interval on the per-round paired log ratios, the wall-clock ratio, and on 2 ranks the bytes each
rank sent per step (FSDP2's gathers and reduce-scatters, the optimizer's collectives, the loss all-reduce).

Then, per rung, the **scaling** of the whole step at the same global batch, on wall clock (what a run waits for):
the 2-worker step (2 ranks x 1 thread) against 1 worker at 1 thread and against 1 worker at 2 threads (the same
total threads; a third timing run, on wall clock, since the thread clock cannot see a second thread's work). These
runs are not paired round by round, so each ratio is the ratio of geometric means with a Welch 95 % interval on the
rounds' log step times (n = rounds of each). Targets (issue 52): 2 workers <= 0.6 x 1 worker at 1 thread, and not
slower than 1 worker at 2 threads.

    python benchmarks/worker_step_ratio.py [--rungs cpu-s,cpu-m] [--rounds 8] [--no-scaling]
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from trials.optim import fast_ns_dtype
from trials.steptime import StepTimes, interleaved_step_times

TRIAL = {"batch_size": 16, "warmup_steps": 20, "threads": 1}  # step_ratio.py's: the evidence profile's settings
MUON = {"name": "muon"}
PERIODIC = {"name": "periodic", "refresh_every": 3, "gamma": 0.15}  # the paper's pair
ONE: dict[str, dict[str, Any]] = {"muon": MUON, "periodic": PERIODIC}
TWO: dict[str, dict[str, Any]] = {
    "muon": MUON, "periodic": PERIODIC, "muon distributed": {**MUON, "ns_placement": "distributed"},
    "periodic distributed": {**PERIODIC, "ns_placement": "distributed"},
}


def lines(res: StepTimes) -> list[str]:
    out = []
    sent = res.summary().get("comm_bytes_per_step", {})
    for arm in res.arms:
        step = statistics.median(res.step(arm))
        ratio = "" if arm == res.reference else (
            f"{(r := res.ratio(arm)).mean:.3f} [{r.lo:.3f}, {r.hi:.3f}] | {res.ratio(arm, clock='wall').mean:.3f}")
        comm = f" | {sent[arm] / 1e6:.2f}" if arm in sent else ""
        out.append(f"| {res.workers} | {arm} | {1e3 * step:.1f} | {100 * res.optimizer_share(arm):.1f} % | "
                   f"{ratio or '1 | 1'}{comm} |")
    return out


def unpaired_ratio(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Geometric mean of `a` over that of `b`, with a Welch 95 % interval on the log values (rounds not paired)."""
    from scaling.stats import t_quantile

    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1)) if va + vb > 0 else len(la) + len(lb) - 2
    mean, half = statistics.fmean(la) - statistics.fmean(lb), t_quantile(0.95, df) * math.sqrt(va + vb)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def scaling_lines(one: StepTimes, two_threads: StepTimes, two: StepTimes) -> list[str]:
    """Per arm: wall ms per step at 1 worker x 1 thread, 1 worker x 2 threads and 2 workers x 1 thread, and the
    2-worker step's ratios to both (geometric means, Welch 95 %)."""
    out = []
    for arm in two.arms:
        base = arm.removesuffix(" distributed")
        w1, w1t2, w2 = one.step(base, "wall"), two_threads.step(base, "wall"), two.step(arm, "wall")
        r1, r2 = unpaired_ratio(w2, w1), unpaired_ratio(w2, w1t2)
        out.append(f"| {arm} | {1e3 * statistics.median(w1):.1f} | {1e3 * statistics.median(w1t2):.1f} | "
                   f"{1e3 * statistics.median(w2):.1f} | {r1[0]:.3f} [{r1[1]:.3f}, {r1[2]:.3f}] | "
                   f"{r2[0]:.3f} [{r2[1]:.3f}, {r2[2]:.3f}] |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rungs", default="cpu-s,cpu-m")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds (whole rotations of the arms)")
    parser.add_argument("--no-scaling", action="store_true",
                        help="skip the 1-worker run at 2 threads and the scaling table")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from optimizer_step import cpu_features

    print(f"machine: {cpu_features()}; {os.cpu_count()} cores; torch {torch.__version__}; NS dtype "
          f"{fast_ns_dtype('cpu')}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; load "
          f"{os.getloadavg()[0]:.1f}")
    timing = {"rounds": args.rounds, "warmup_rounds": 2}
    for rung in args.rungs.split(","):
        print(f"\n{rung}, global batch {TRIAL['batch_size']}\n")
        print("| workers | arm | ms / step (CPU clock) | optimizer share | / Muon (replicated), 95 % t | wall ratio | "
              "MB sent / rank / step |\n|---|---|---|---|---|---|---|")
        measured: dict[int, StepTimes] = {}
        for workers, arms in ((1, ONE), (2, TWO)):
            start = time.perf_counter()
            res = interleaved_step_times({**TRIAL, "rung": rung, "workers": workers}, arms, timing, reference="muon")
            measured[workers] = res
            print("\n".join(lines(res)), flush=True)
            print(f"  [{workers} worker(s): {res.rounds} rounds, CPU clock {res.cpu_clock}, "
                  f"{time.perf_counter() - start:.0f} s, load {res.load_before[0]:.1f}->{res.load_after[0]:.1f}]"  # type: ignore[index]
                  , flush=True)
        if args.no_scaling:
            continue
        start = time.perf_counter()
        threads2 = interleaved_step_times({**TRIAL, "rung": rung, "threads": 2}, ONE, {**timing, "clock": "wall"},
                                          reference="muon")
        print(f"\n{rung}, the whole step at global batch {TRIAL['batch_size']} on wall clock (median ms; ratios: "
              "geometric means, Welch 95 %, rounds not paired; targets: <= 0.6 and <= 1)\n")
        print("| arm on 2 workers | 1 worker, 1 thread | 1 worker, 2 threads | 2 workers x 1 thread | "
              "2 workers / 1 worker at 1 thread | 2 workers / 1 worker at 2 threads |\n|---|---|---|---|---|---|")
        print("\n".join(scaling_lines(measured[1], threads2, measured[2])), flush=True)
        print(f"  [1 worker at 2 threads: {threads2.rounds} rounds, {time.perf_counter() - start:.0f} s, load "
              f"{threads2.load_before[0]:.1f}->{threads2.load_after[0]:.1f}]", flush=True)  # type: ignore[index]


if __name__ == "__main__":
    main()
