"""Training step time in bf16 autocast against fp32 at each CPU rung (`TrialConfig.precision`), paired by round.

Each arm is the built-in trial (forward, backward, optimizer, EMA; 16x16 images, batch 16, periodic K=3, one
thread) for `--warmup + --steps` steps, timed over the last `--steps` by the trial's own effective-time clock,
with evaluation shrunk to nothing (as the transfer's timing stage does). Rounds alternate which precision runs
first, so round i of the two is a pair; the ratio bf16/fp32 is the geometric mean of the per-round ratios.
Newton-Schulz runs in the optimizer's own `ns_dtype` in both arms (auto: bf16 on a CPU with native bf16), so the
difference is the forward and backward alone. bf16 is refused on a CPU without AMX or AVX512-BF16.

    python benchmarks/precision.py [--rungs cpu-xs,cpu-s,cpu-m,cpu-l] [--rounds 3] [--steps 20] [--threads 1]
    python benchmarks/precision.py --fd-seeds 0,1   # the quality cost instead: the default trial in both precisions

`--fd-seeds` runs the default trial (TrialConfig's defaults: cpu-xs, 1800 steps, periodic K=3) once per seed and
precision, the same seed in both (same initial weights, batches and noise), and prints each seed's objective (mean
FD at the three eval steps) and the paired difference bf16 - fp32.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import warnings
from typing import Any

import torch

from trials import run_trial
from trials._run import native_bf16

PRECISIONS = ("fp32", "bf16")


def step_time(rung: str, precision: str, warmup: int, steps: int, threads: int) -> float:
    """Seconds per training step of one short trial."""
    cfg: dict[str, Any] = {
        "rung": rung, "precision": precision, "batch_size": 16, "seed": 0, "threads": threads,
        "optimizer": {"name": "periodic", "refresh_every": 3, "gamma": 0.15},
        "steps": warmup + steps, "eval_steps": [warmup, warmup + steps],
        "eval": {"extractor": "pixels", "extractor_options": {"size": 4}, "fd_samples": 16, "reference_samples": 16,
                 "sample_steps": 1, "val_samples": 1, "track_points": 0},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 16 samples give a singular covariance: that FD is never read
        clock = run_trial(cfg).effective_time_s
    return (clock[warmup + steps] - clock[warmup]) / steps


def fd_gap(seeds: list[int], threads: int) -> None:
    """Each seed's objective in fp32 and bf16 at the default trial, and the paired differences."""
    print(f"{'seed':>4} {'fp32 objective':>15} {'bf16 objective':>15} {'bf16 - fp32':>12}")
    gaps = []
    for seed in seeds:
        objective = {p: run_trial({"seed": seed, "precision": p, "threads": threads}).objective for p in PRECISIONS}
        gaps.append(objective["bf16"] - objective["fp32"])
        print(f"{seed:4d} {objective['fp32']:15.2f} {objective['bf16']:15.2f} {gaps[-1]:12.2f}", flush=True)
    spread = f", std {statistics.stdev(gaps):.2f}" if len(gaps) > 1 else ""
    print(f"mean paired gap bf16 - fp32: {statistics.fmean(gaps):.2f} over {len(gaps)} seeds{spread}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rungs", default="cpu-xs,cpu-s,cpu-m,cpu-l")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fd-seeds", default="", help="comma-separated seeds: measure the FD gap instead")
    args = parser.parse_args()
    cpu = torch.device("cpu")
    flags = open("/proc/cpuinfo").read() if platform.system() == "Linux" else ""
    print(f"CPU: {platform.processor() or platform.machine()}; amx_bf16: {'amx_bf16' in flags}, avx512_bf16: "
          f"{'avx512_bf16' in flags}; oneDNN native bf16: {native_bf16(cpu)}; torch {torch.__version__}, "
          f"{args.threads} thread(s)")
    if not native_bf16(cpu):
        raise SystemExit("this CPU has no native bf16: precision 'bf16' is refused here")
    if args.fd_seeds:
        fd_gap([int(x) for x in args.fd_seeds.split(",")], args.threads)
        return
    times: dict[str, dict[str, list[float]]] = {}
    for round_ in range(args.rounds):
        for rung in args.rungs.split(","):
            order = PRECISIONS if round_ % 2 == 0 else PRECISIONS[::-1]
            for precision in order:
                seconds = step_time(rung, precision, args.warmup, args.steps, args.threads)
                times.setdefault(rung, {}).setdefault(precision, []).append(seconds)
    print(f"\nms per training step, median of {args.rounds} rounds; bf16/fp32 geometric mean of paired rounds "
          "(min, max):")
    print(f"{'rung':8} {'fp32 ms':>9} {'bf16 ms':>9}  bf16/fp32")
    for rung, by in times.items():
        ratios = [b / f for f, b in zip(by["fp32"], by["bf16"], strict=True)]
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        print(f"{rung:8} {statistics.median(by['fp32']) * 1e3:9.1f} {statistics.median(by['bf16']) * 1e3:9.1f}  "
              f"{geo:.3f} ({min(ratios):.3f}, {max(ratios):.3f})")


if __name__ == "__main__":
    main()
