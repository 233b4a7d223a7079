"""Per-step cost ratio periodic (K=3, gamma=0.15) / vanilla Muon at every CPU rung, to +-2 %, with its controls.

Everything goes through `trials.steptime.interleaved_step_times` (one process, arms interleaved in 3-step blocks:
whole refresh periods of K=3, the same batches for every arm in a round, thread-CPU clock with wall beside it,
one torch thread: the study's setting). At each rung, at the study's training settings (the evidence profile's
batch 16, 16x16 images, MiniLM text, EMA, clipping):

- the **full step** (local batch 16): Muon (the reference), periodic, the **positive control** `muon_extra_ns`
  (Muon plus one discarded Newton-Schulz per matrix per step: identical updates, a known extra cost) and the
  **negative control** (a second, identical Muon arm), rounds added until every ratio's 95 % Student-t interval is
  within +-2 % (or `--max-rounds`);
- the **per-rank view** at local batches 8 and 4 (forward/backward at that batch, the optimizer on whole matrices,
  as every rank of the paper's FSDP2 run does with its local batch of 16): Muon and periodic, the same rule.

Printed: Muon's optimizer share of the step beside the paper's (44 % at 15B per rank), each ratio with its t
interval and the sign-test interval of the median, the wall-clock ratio beside it, the load average before and
after each measurement, and what the positive control should measure (Muon's step plus the redundant work's own
thread-CPU time). `--out` also writes every round's per-arm phase costs as CSV (the raw records).

    python benchmarks/step_ratio.py [--rungs cpu-xs,cpu-s,cpu-m,cpu-l] [--target 0.02] [--max-rounds 60]
                                    [--out benchmarks/results/step_ratio]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from trials.optim import fast_ns_dtype
from trials.steptime import CLOCKS, PHASES, PairedRatio, StepTimes, interleaved_step_times

# The evidence profile's trial settings (examples/sweep-evidence.yaml) at every rung; the rest are TrialConfig's
# defaults (MiniLM text, EMA 0.995, clipping at 1, 16x16 shapes).
TRIAL = {"batch_size": 16, "warmup_steps": 20, "threads": 1}
MUON = {"name": "muon"}
PERIODIC = {"name": "periodic", "refresh_every": 3, "gamma": 0.15}  # the paper's pair
FULL_ARMS = {"muon": MUON, "periodic": PERIODIC, "positive": {"name": "muon_extra_ns"}, "negative": MUON}
RANK_ARMS = {"muon": MUON, "periodic": PERIODIC}
PAPER_SHARE = 0.44  # Muon's optimizer share of a step at 15B, per rank (local batch 16), as the issue quotes it
PAPER_RATIO = 0.766  # periodic / Muon per step at 15B, likewise


def cpu_line() -> str:
    """CPU model, the bf16 flags from /proc/cpuinfo, cores, and what torch resolves Newton-Schulz to."""
    sys.path.insert(0, str(Path(__file__).parent))
    from optimizer_step import cpu_features

    return f"{cpu_features()}; {os.cpu_count()} cores; torch {torch.__version__}; NS dtype {fast_ns_dtype('cpu')}"


def ratio_text(r: PairedRatio) -> str:
    return f"{r.mean:.3f} [{r.lo:.3f}, {r.hi:.3f}] ±{100 * r.halfwidth:.1f} %"


def median_text(r: PairedRatio) -> str:
    if r.median_lo is None or r.median_hi is None:
        return f"{r.median:.3f}"
    return f"{r.median:.3f} [{r.median_lo:.3f}, {r.median_hi:.3f}]"


def load_text(res: StepTimes) -> str:
    before, after = res.load_before or (0, 0, 0), res.load_after or (0, 0, 0)
    return f"{before[0]:.1f}→{after[0]:.1f}"


def measure(rung: str, arms: dict, local_batch: int, args: argparse.Namespace) -> StepTimes:
    timing = {"local_batch": local_batch, "rounds": args.min_rounds, "target_halfwidth": args.target,
              "max_rounds": args.max_rounds, "warmup_rounds": 2}
    start = time.perf_counter()
    res = interleaved_step_times({**TRIAL, "rung": rung}, arms, timing, reference="muon")
    print(f"  [{rung} local batch {local_batch}: {res.rounds} rounds, stopped by {res.stopped}, "
          f"{time.perf_counter() - start:.0f} s, thread coverage {res.thread_coverage:.4f}]", flush=True)
    return res


def write_rows(writer: Any, res: StepTimes) -> None:
    for i in range(res.rounds):
        for arm in res.arms:
            for clock in CLOCKS:
                extra = res.redundant.get(arm, {}).get(clock)
                writer.writerow([res.rung, res.local_batch, i, res.blocks[i].index(arm), arm, clock,
                                 *(f"{res.costs[arm][clock][p][i]:.7f}" for p in PHASES),
                                 f"{extra[i]:.7f}" if extra else ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rungs", default="cpu-xs,cpu-s,cpu-m,cpu-l")
    parser.add_argument("--local-batches", default="8,4", help="per-rank views besides the full batch of 16")
    parser.add_argument("--target", type=float, default=0.02, help="half-width every interval must reach")
    parser.add_argument("--min-rounds", type=int, default=8)
    parser.add_argument("--max-rounds", type=int, default=60)
    parser.add_argument("--out", default=None, help="path stem: writes STEM.txt (this output) and STEM.csv (rounds)")
    args = parser.parse_args()
    lines: list[str] = []

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    torch.set_num_threads(1)
    say(f"# python benchmarks/step_ratio.py {' '.join(sys.argv[1:])}")
    say(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; host {platform.node()}")
    say(f"CPU: {cpu_line()}")
    say(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    say("clock: thread-CPU time (time.thread_time), torch.set_num_threads(1); wall time beside it")
    say(f"trial: {TRIAL} + TrialConfig defaults (MiniLM, EMA, clip 1); blocks of 3 steps (K=3), 2 warm-up rounds; "
        f"rounds until every 95 % t interval is within ±{100 * args.target:g} % (at least {args.min_rounds}, at most "
        f"{args.max_rounds})")
    say()
    full: dict[str, StepTimes] = {}
    rank: dict[tuple[str, int], StepTimes] = {}
    started = time.perf_counter()
    for rung in args.rungs.split(","):
        full[rung] = measure(rung, FULL_ARMS, TRIAL["batch_size"], args)
        for lb in (int(x) for x in args.local_batches.split(",") if x):
            rank[(rung, lb)] = measure(rung, RANK_ARMS, lb, args)
    say()
    say("## periodic (K=3, γ=0.15) / Muon per step, full batch 16, and the controls through the same timing")
    say()
    say("| rung | rounds | Muon ms / step (thread) | Muon optimizer share (paper 44 % at 15B) | periodic / Muon "
        "(t, 95 %) | median [sign-test 95 %] | wall clock | positive control (Muon + NS5) | its expected ratio "
        "| negative control (Muon again) | load 1-min |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    for rung, res in full.items():
        muon_ms = 1e3 * sorted(res.step("muon"))[res.rounds // 2]
        say(f"| {rung} | {res.rounds} ({res.stopped}) | {muon_ms:.1f} | {100 * res.optimizer_share('muon'):.1f} % "
            f"| {ratio_text(res.ratio('periodic'))} | {median_text(res.ratio('periodic'))} "
            f"| {res.ratio('periodic', clock='wall').mean:.3f} | {ratio_text(res.ratio('positive'))} "
            f"| {res.expected_ratio('positive'):.3f} | {ratio_text(res.ratio('negative'))} | {load_text(res)} |")
    say()
    say(f"## The per-rank view: forward/backward at the local batch, the optimizer on whole matrices "
        f"(paper at 15B, local batch 16: share {100 * PAPER_SHARE:.0f} %, periodic / Muon {PAPER_RATIO})")
    say()
    say("| rung | local batch | rounds | Muon ms / step | Muon optimizer share | periodic / Muon (t, 95 %) "
        "| median [sign-test 95 %] | wall clock | load 1-min |")
    say("|---|---|---|---|---|---|---|---|---|")
    for rung, res in full.items():
        views = [res] + [v for (r, _), v in rank.items() if r == rung]
        for v in views:
            muon_ms = 1e3 * sorted(v.step("muon"))[v.rounds // 2]
            say(f"| {rung} | {v.local_batch} | {v.rounds} ({v.stopped}) | {muon_ms:.1f} "
                f"| {100 * v.optimizer_share('muon'):.1f} % | {ratio_text(v.ratio('periodic'))} "
                f"| {median_text(v.ratio('periodic'))} | {v.ratio('periodic', clock='wall').mean:.3f} "
                f"| {load_text(v)} |")
    say()
    say(f"total: {time.perf_counter() - started:.0f} s; load average at end: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out:
        stem = Path(args.out)
        stem.parent.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        with stem.with_suffix(".csv").open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["rung", "local_batch", "round", "position", "arm", "clock",
                             *(f"{p}_s" for p in PHASES), "redundant_s"])
            for res in [*full.values(), *rank.values()]:
                write_rows(writer, res)


if __name__ == "__main__":
    main()
