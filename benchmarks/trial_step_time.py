"""End-to-end training step time at each CPU rung: periodic (K=3) / vanilla Muon / AdamW, side by side.

Each arm trains `--steps` steps of the real trial (forward, backward, optimizer, EMA; batch 32, 16x16, one thread)
and the effective training time per step is read from the trial result (evaluation excluded). Arms are
interleaved per rung, so machine noise hits them alike.

    python benchmarks/trial_step_time.py [--rungs cpu-xs,cpu-s,cpu-m,cpu-l] [--steps 60]
"""

from __future__ import annotations

import argparse

import torch

from trials import run_trial

ARMS = ("periodic", "muon", "adamw")


def step_time(rung: str, arm: str, steps: int) -> tuple[float, float]:
    result = run_trial(
        {
            "rung": rung,
            "steps": steps,
            "eval_steps": [steps],
            "optimizer": {"name": arm},
            "text_encoder": "learned",  # the frozen encoder's cached lookup is excluded from step time anyway
            "eval": {"extractor": "pixels", "fd_samples": 16, "reference_samples": 16, "sample_steps": 1},
        }
    )
    return result.mean_step_time_s, result.optimizer_time_s / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rungs", default="cpu-xs,cpu-s,cpu-m,cpu-l")
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    print("| rung | periodic ms/step | muon ms/step | adamw ms/step | periodic/muon | periodic/adamw "
          "| optimizer ms/step (periodic, muon, adamw) |")
    print("|---|---|---|---|---|---|---|")
    for rung in args.rungs.split(","):
        times = {arm: step_time(rung, arm, args.steps) for arm in ARMS}
        p, m, a = (times[arm][0] * 1e3 for arm in ARMS)
        opt = ", ".join(f"{times[arm][1] * 1e3:.1f}" for arm in ARMS)
        print(f"| {rung} | {p:.1f} | {m:.1f} | {a:.1f} | {p / m:.3f} | {p / a:.3f} | {opt} |", flush=True)


if __name__ == "__main__":
    main()
