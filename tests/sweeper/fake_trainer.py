"""A fake external trainer for the sweeper's tests: no training, FD from a formula, failures on demand.

FD at step s of a point (K, gamma) on seed q: base * (1 + 0.5 * (H - s) / H), base = 20 + 4 (K - 3)^2 +
200 (gamma - 0.15)^2 + 0.3 q for the periodic arm (so K=3, gamma=0.15 is best), 40 + q for adamw, 18 + q for muon.
Behaviour by environment (point keys like "K=2,gamma=0.25", separated by ";"):
FAKE_SLEEP seconds per eval step; FAKE_FAIL fails always; FAKE_FAIL_ONCE fails on the first attempt (a marker
file in FAKE_MARKERS remembers it); FAKE_NAN reports a NaN FD (diverges) at the first eval step; FAKE_UNDECLARED
also reports FD 0 at step 1, not an eval step (it must not count).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def base_objective(optimizer: str, k: int, gamma: float, seed: int) -> float:
    if optimizer == "adamw":
        return 40.0 + seed
    if optimizer == "muon":
        return 18.0 + seed
    return 20.0 + 4.0 * (k - 3) ** 2 + 200.0 * (gamma - 0.15) ** 2 + 0.3 * seed


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("--optimizer", "--eval-steps", "--progress"):
        parser.add_argument(name, required=True)
    parser.add_argument("--K", type=int, default=3)
    parser.add_argument("--gamma", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, required=True)
    args = parser.parse_args()
    key = f"K={args.K},gamma={args.gamma:g}" if args.optimizer == "periodic" else args.optimizer
    listed = lambda var: key in os.environ.get(var, "").split(";")  # noqa: E731
    if listed("FAKE_FAIL"):
        sys.exit(f"fake failure for {key}")
    if listed("FAKE_FAIL_ONCE"):
        marker = Path(os.environ["FAKE_MARKERS"]) / f"{key}-seed{args.seed}"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            sys.exit(f"fake first-attempt failure for {key}")
    base = base_objective(args.optimizer, args.K, args.gamma, args.seed)
    sleep = float(os.environ.get("FAKE_SLEEP", "0"))
    if listed("FAKE_UNDECLARED"):
        with open(args.progress, "a") as handle:
            handle.write(json.dumps({"step": 1, "fd": 0.0, "effective_time_s": 0.01}) + "\n")
    for i, step in enumerate(int(s) for s in args.eval_steps.split(",")):
        time.sleep(sleep)
        fd = float("nan") if listed("FAKE_NAN") and i == 0 else base * (1 + 0.5 * (args.steps - step) / args.steps)
        line = {"step": step, "fd": fd, "effective_time_s": 0.01 * step, "metric_name": "fd_fake"}
        with open(args.progress, "a") as handle:
            handle.write(json.dumps(line) + "\n")
        if fd != fd:  # a diverged trainer stops
            break


if __name__ == "__main__":
    main()
