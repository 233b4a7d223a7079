"""Records the tracking-FD curves in `curves.csv`, which the injection simulation (tests/scaling/test_injection.py)
rescales: real training curves of this project's default small trial, so that the simulated arms have the shape,
the noise between evaluations and the seed-to-seed spread a study here sees.

Run once from the repository root (about 10 minutes on 2 cores): `python tests/scaling/data/record_curves.py`.
cpu-xs, 480 steps, batch 16 (the evidence profile's transfer trial), 20 tracking evaluations from 1/6 of the
horizon, Muon and periodic (K=3, gamma=0.15) on seeds 0-3, one thread each.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from trials import run_trial

OUT = Path(__file__).with_name("curves.csv")
ARMS = {"muon": {"name": "muon"}, "periodic": {"name": "periodic", "refresh_every": 3, "gamma": 0.15}}
SEEDS = (0, 1, 2, 3)


def main() -> None:
    rows = []
    for arm, optimizer in ARMS.items():
        for seed in SEEDS:
            result = run_trial({
                "rung": "cpu-xs", "steps": 480, "batch_size": 16, "warmup_steps": 20, "seed": seed,
                "optimizer": optimizer, "log_every": 40,
                "eval": {"fd_samples": 256, "reference_samples": 1024, "sample_steps": 8, "val_samples": 64,
                         "track_points": 20, "track_from": 1 / 6, "track_samples": 256, "track_sample_steps": 8},
            })
            for step in sorted(result.fd_track):
                rows.append((arm, seed, step, round(result.track_effective_time_s[step], 4),
                             round(result.fd_track[step], 4)))
            print(arm, seed, result.status, {s: round(v, 1) for s, v in sorted(result.fd_track.items())},
                  file=sys.stderr, flush=True)
    with OUT.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["arm", "seed", "step", "effective_time_s", "fd_track"])
        writer.writerows(rows)


if __name__ == "__main__":
    main()
