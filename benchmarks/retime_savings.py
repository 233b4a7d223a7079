"""The evidence profile's time savings recomputed with per-step times measured again
(that run's savings table, docs/history.md).

A time saving is 1 - (steps-to-target ratio) x (per-step time ratio). The first factor is the optimizer's: the
compiled and the streamed row-norm steps compute the same update as the one they replaced (tests/trials/
test_optim.py, test_streamed_step_equals_the_unfused_one), so the steps to target of the 2026-12-02 evidence run
stand. The second is the machine's: this script re-runs the transfer's timing stage (the same code, settings and
rungs: `measure_step_time_runs`, batch 16, 5 warm-up and 20 timed steps, rounds with the arms' order rotated), with
the periodic arm as the trials run it now (the compiled kernel), streamed, and unfused (before) in the same rounds,
and combines each with the stored steps ratios by the transfer's own formula (`_time_saving`: the sum of two
paired-log means, Welch-Satterthwaite df).

The stored steps ratios are given as that table printed them (geometric mean, 95 % Student-t interval, n seeds).
The formula uses the seeds' log ratios only through their mean, standard deviation and n, which the interval
determines: mean = the midpoint of the interval's logs, sd = half its log width / t(0.975, n - 1) x sqrt(n). So
the savings below equal what the transfer would print from its stored seeds, up to the rounding of the printed
interval (three digits).

    python benchmarks/retime_savings.py [--rounds 3] [--steps 20] [--rungs cpu-xs,cpu-s,cpu-m[,cpu-l]]
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from scipy import stats

from scaling.rungs import _time_saving, step_time_ratio
from sweeper.transfer import TimingSpec

# The evidence profile's run of 2026-12-02 (docs/history.md, "Superseded: the README's study tables of
# 2026-12-02/03"): periodic's steps-to-target ratio against each baseline, (geometric mean, 95 % low, 95 % high,
# n seeds).
STEPS_TO_TARGET: dict[tuple[str, str], tuple[float, float, float, int]] = {
    ("cpu-xs", "muon"): (1.22, 1.06, 1.40, 3),
    ("cpu-xs", "adamw"): (0.605, 0.473, 0.774, 2),
    ("cpu-s", "muon"): (1.15, 0.819, 1.62, 3),
    ("cpu-s", "adamw"): (0.673, 0.402, 1.13, 2),
    ("cpu-m", "muon"): (1.27, 1.10, 1.48, 3),
    ("cpu-m", "adamw"): (0.603, 0.526, 0.691, 3),
}
# What that run printed beside them: the per-step ratio from its own timing stage (3 rounds, the unfused row-norm
# step), (mean, low, high), and the time saving in %. Used to check the reconstruction below: recomputed from
# these printed intervals, the savings must come out as printed.
PUBLISHED: dict[tuple[str, str], tuple[tuple[float, float, float], str]] = {
    ("cpu-xs", "muon"): ((0.824, 0.658, 1.03), "-0.5 % [-20.9, +16.5]"),
    ("cpu-xs", "adamw"): ((1.13, 0.542, 2.37), "+31.5 % [-41.5, +66.8]"),
    ("cpu-s", "muon"): ((0.958, 0.689, 1.33), "-10.4 % [-50.0, +18.7]"),
    ("cpu-s", "adamw"): ((1.16, 0.758, 1.78), "+21.9 % [-13.5, +46.2]"),
    ("cpu-m", "muon"): ((0.792, 0.663, 0.947), "-0.9 % [-17.4, +13.3]"),
    ("cpu-m", "adamw"): ((1.11, 0.899, 1.38), "+32.9 % [+20.1, +43.7]"),
}
TIMING_ROUNDS_2026_12_02 = 3


def seed_logs(mean: float, lo: float, hi: float, n: int) -> list[float]:
    """n log ratios with the mean and sample sd that the printed interval implies (see the module docstring)."""
    centre = (math.log(lo) + math.log(hi)) / 2
    sd = (math.log(hi) - math.log(lo)) / 2 / float(stats.t.ppf(0.975, n - 1)) * math.sqrt(n)
    if n == 2:
        return [centre - sd / math.sqrt(2), centre + sd / math.sqrt(2)]
    # n = 3: centre - sd, centre, centre + sd has sample sd exactly sd.
    return [centre - sd, centre, centre + sd]


def interval(r: dict | None, digits: str = ".3g") -> str:
    if not r:
        return "-"
    if r.get("lo") is None:
        return f"{r['mean']:{digits}} (one run)"
    return f"{r['mean']:{digits}} [{r['lo']:{digits}}, {r['hi']:{digits}}], n={r['n']}"


def saving_text(s: dict) -> str:
    if s.get("lo") is None:
        return f"{s['mean']:+.1f} % (one run)"
    return f"{s['mean']:+.1f} % [{s['lo']:+.1f}, {s['hi']:+.1f}], n={s['n']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds (the evidence profile's 3)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rungs", default="cpu-xs,cpu-s,cpu-m",
                        help="rungs to time (the savings need cpu-xs, cpu-s and cpu-m; add cpu-l for the step-time "
                             "table alone)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from optimizer_step import cpu_features  # benchmarks/ is on sys.path when a script in it runs
    from trial_step_time import ARMS, print_table, time_rungs

    print("Reconstruction check: the 2026-12-02 savings recomputed from that run's printed intervals alone:")
    for (rung, base), (mean, lo, hi, n) in STEPS_TO_TARGET.items():
        (t_mean, t_lo, t_hi), printed = PUBLISHED[(rung, base)]
        timing = {"log_ratios": seed_logs(t_mean, t_lo, t_hi, TIMING_ROUNDS_2026_12_02)}
        recomputed = _time_saving(seed_logs(mean, lo, hi, n), timing, t_mean)
        print(f"  {rung} vs {base}: printed {printed}, recomputed {saving_text(recomputed)}")

    print(f"\nCPU: {cpu_features()}")
    rungs = args.rungs.split(",")
    start = time.perf_counter()
    runs = time_rungs(rungs, ARMS, TimingSpec(steps=args.steps, warmup=args.warmup, repeats=args.rounds))
    print_table(runs)
    print(f"\ntiming: {time.perf_counter() - start:.0f} s; {args.rounds} rounds of {args.warmup} + {args.steps} steps")

    print("\nSavings of periodic (K=3, gamma=0.15) with the stored steps-to-target ratios and the per-step ratios "
          "measured above; 95 % intervals carry the seeds' and the timing rounds' spread:")
    print("| rung | vs | steps-to-target ratio (2026-12-02) | per-step ratio, before (unfused) | time saving, before "
          "| per-step ratio, now | time saving, now | 2026-12-02 per-step ratio, saving |")
    print("|---|---|---|---|---|---|---|---|")
    for (rung, base), (mean, lo, hi, n) in STEPS_TO_TARGET.items():
        logs = seed_logs(mean, lo, hi, n)
        cells = []
        for arm in ("periodic, unfused", "periodic"):
            timing = step_time_ratio(runs.get(rung, {}), arm, base)
            if timing is None:
                cells += ["-", "-"]
                continue
            cells += [interval(timing), saving_text(_time_saving(logs, timing, timing["mean"]))]
        label = "Muon" if base == "muon" else "AdamW"
        print(f"| {rung} | {label} | {mean:.3g} [{lo:.3g}, {hi:.3g}], n={n} | {' | '.join(cells)} "
              f"| {PUBLISHED[(rung, base)][0][0]:.3g} [{PUBLISHED[(rung, base)][0][1]:.3g}, "
              f"{PUBLISHED[(rung, base)][0][2]:.3g}], {PUBLISHED[(rung, base)][1]} |")


if __name__ == "__main__":
    main()
