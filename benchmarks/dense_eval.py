"""What dense tracking evaluation costs: the default trial with and without it, side by side.

Runs the default trial (cpu-xs, 1800 steps, periodic K=3 gamma=0.15, 512 FD samples) twice at the same seed, in two
processes at once (one thread each, as a sweep runs them): once with `eval.track_points` 0 and once with the
default (12 tracking checkpoints from 1/3 of the horizon, 256 images, 8 sampler steps). Prints each run's wall
time, the time in its full and tracking evaluations, and two measures of the added cost:
- the tracking evaluations' own time as a share of the untracked trial's wall time (measured inside the tracked
  run, so it does not depend on what else the machine did between the two runs);
- the ratio of the two wall times (side by side, so both saw the same load; noisier).
It also checks that tracking left the full FD and the objective unchanged.

    python benchmarks/dense_eval.py [--steps 1800] [--track-points 12] [--seed 0] [--set KEY=VALUE] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from scalesweep_cli import apply_override
from trials import run_trial


def _run(cfg: dict[str, Any]) -> dict[str, Any]:
    return run_trial(cfg).to_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="horizon (default: the trial default, 1800)")
    parser.add_argument("--track-points", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()

    base: dict[str, Any] = {"seed": args.seed}
    if args.steps is not None:
        base["steps"] = args.steps
    for item in args.set:
        apply_override(base, item, option="--set")
    plain = json.loads(json.dumps(base))
    plain.setdefault("eval", {})["track_points"] = 0
    dense = json.loads(json.dumps(base))
    dense.setdefault("eval", {})["track_points"] = args.track_points
    with ProcessPoolExecutor(max_workers=2) as pool:
        plain_f, dense_f = pool.submit(_run, plain), pool.submit(_run, dense)
        off, on = plain_f.result(), dense_f.result()

    print(f"cpu: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared: timings noisy)")
    for name, r in (("track_points=0", off), (f"track_points={args.track_points}", on)):
        print(f"{name:>16}: wall {r['wall_time_s']:.1f} s, effective {r['total_effective_time_s']:.1f} s, full evals "
              f"{r['eval_time_s']:.1f} s, tracking evals {r['track_eval_time_s']:.1f} s "
              f"({len(r['fd_track'])} checkpoints, {r['track_samples']} images, {r['track_sample_steps']} steps)")
    share = on["track_eval_time_s"] / off["wall_time_s"]
    ratio = on["wall_time_s"] / off["wall_time_s"]
    print(f"added by tracking: {100 * share:.1f}% of the untracked trial's wall time (tracking evals' own time); "
          f"wall-time ratio side by side {ratio:.3f}")
    same = off["fd"] == on["fd"] and off["objective"] == on["objective"]
    print(f"full FD and objective unchanged by tracking: {same} (objective {off['objective']:.2f} / "
          f"{on['objective']:.2f})")
    curve = sorted((int(k), round(v, 1)) for k, v in on["fd_track"].items())
    print("tracking FD curve (step, FD):", curve)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"off": off, "on": on, "share": share, "ratio": ratio}, handle, indent=1, default=str)


if __name__ == "__main__":
    main()
