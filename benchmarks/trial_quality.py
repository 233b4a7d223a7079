"""Is the metric able to tell the optimizers apart? FD noise, seed spread and the AdamW-vs-Muon gap at defaults.

Runs the default trial (smallest rung, 1800 steps, EMA weights, 512 FD samples on the shapes-cnn features) for
each arm and seed, then reports:
- FD noise of the metric itself: FD of real held-out images (never trained on) against the fixed reference
  statistics, over several independent redraws of `fd_samples` images (mean and std);
- per arm: FD at each eval step, the objective (mean eval FD) as mean and std over seeds, EMA validation loss,
  optimizer and effective training time;
- the gap in objective between AdamW and vanilla Muon divided by the larger seed-to-seed std (target >= 3).

    python benchmarks/trial_quality.py [--seeds 3] [--first-seed 0] [--arms adamw,muon,periodic] [--steps 1800]
                                       [--jobs 1] [--redraws 5] [--set eval.ema_decay=0.998] [--json out.json]

`--set KEY=VALUE` overrides a trial field for every arm; an arm written `muon:lr=0.03;weight_decay=0` overrides
its optimizer fields (values parsed as YAML, as in `scalesweep trial --set`).
"""

from __future__ import annotations

import argparse
import json
import statistics
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from scalesweep_cli import apply_override
from trials import metric_floor, run_trial


def _run(cfg: dict[str, Any]) -> dict[str, Any]:
    return run_trial(cfg).to_dict()


def _arm(spec: str) -> tuple[str, dict[str, Any]]:
    """`muon:lr=0.03;weight_decay=0` -> ("muon", {"name": "muon", "lr": 0.03, "weight_decay": 0})."""
    name, _, rest = spec.partition(":")
    optimizer: dict[str, Any] = {"name": name}
    for item in filter(None, rest.split(";")):
        apply_override(optimizer, item, option=f"--arms {name}:")
    return spec, optimizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0,
                        help="seeds first-seed .. first-seed+seeds-1 (a fresh range checks a choice made on others)")
    parser.add_argument("--arms", default="adamw,muon,periodic")
    parser.add_argument("--steps", type=int, default=None, help="horizon (default: the trial default)")
    parser.add_argument("--rung", default="cpu-xs")
    parser.add_argument("--jobs", type=int, default=1, help="trials in parallel (one thread each)")
    parser.add_argument("--redraws", type=int, default=5, help="0 or 1: skip the metric-noise measurement")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a trial field for every arm, e.g. eval.ema_decay=0.998")
    parser.add_argument("--json", metavar="PATH", help="also write every trial's result (FD per eval step, ...) here")
    args = parser.parse_args()

    base: dict[str, Any] = {"rung": args.rung}
    if args.steps is not None:
        base["steps"] = args.steps
    try:
        for item in args.set:
            apply_override(base, item)
        arm_specs = dict(_arm(spec) for spec in args.arms.split(","))
    except ValueError as exc:
        parser.error(str(exc))
    if args.set:
        print(f"trial overrides: {', '.join(args.set)}", flush=True)
    if args.redraws > 1:
        noise = metric_floor(base, args.redraws)
        print(f"metric noise: real-vs-reference FD over {args.redraws} redraws: "
              f"{statistics.mean(noise):.2f} +- {statistics.stdev(noise):.2f}", flush=True)

    arms = list(arm_specs)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    jobs = [(arm, seed, {**base, "seed": seed, "optimizer": {**base.get("optimizer", {}), **arm_specs[arm]}})
            for arm in arms for seed in seeds]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = dict(zip([(a, s) for a, s, _ in jobs], pool.map(_run, [c for _, _, c in jobs]), strict=True))
    if args.json:
        with open(args.json, "w") as fh:
            rows = [{"arm": a, "seed": s, "overrides": args.set, **results[(a, s)]} for a, s, _ in jobs]
            json.dump(rows, fh, indent=1)
        print(f"results written to {args.json}", flush=True)

    print(f"\n| arm | FD per eval step (seed {seeds[0]}) | objective mean +- std over seeds | EMA val loss (last) "
          "| optimizer s | effective s | objective per seed |\n|---|---|---|---|---|---|---|")
    summary = {}
    for arm in arms:
        runs = [results[(arm, s)] for s in seeds]
        ok = [r for r in runs if r["status"] == "SUCCEEDED"]
        objectives = [r["objective"] for r in ok]
        mean = statistics.mean(objectives) if objectives else float("nan")
        std = statistics.stdev(objectives) if len(objectives) > 1 else float("nan")
        summary[arm] = (mean, std)
        fds = " / ".join(f"{v:.1f}" for _, v in sorted(runs[0]["fd"].items(), key=lambda kv: int(kv[0])))
        last = runs[0]["val_loss"][max(runs[0]["val_loss"], key=int)] if runs[0]["val_loss"] else float("nan")
        opt = statistics.mean(r["optimizer_time_s"] for r in runs)
        eff = statistics.mean(r["total_effective_time_s"] for r in runs)
        per_seed = " / ".join(f"{r['objective']:.1f}" if r["status"] == "SUCCEEDED" else r["status"] for r in runs)
        print(f"| {arm} | {fds} | {mean:.1f} +- {std:.1f} (n={len(ok)}) | {last:.4f} | {opt:.1f} | {eff:.1f} "
              f"| {per_seed} |")
    adamw = next((a for a in arms if arm_specs[a]["name"] == "adamw"), None)
    for muon in (a for a in arms if adamw and arm_specs[a]["name"] == "muon"):
        gap = summary[adamw][0] - summary[muon][0]
        spread = max(summary[adamw][1], summary[muon][1])
        print(f"\n{adamw} - {muon} objective gap {gap:.1f}; larger seed std {spread:.1f}; "
              f"gap / spread = {gap / spread:.2f}")


if __name__ == "__main__":
    main()
