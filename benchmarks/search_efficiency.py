"""Search efficiency and service overhead of the sweeper: TPE (+ASHA) against the full K x gamma grid.

Two phases, both explicit about what is measured and what is replayed:

1. Measure (real): the paper's default 12-point grid (K in {2,3,4} x gamma in {0.10,0.15,0.25,0.35}) runs once
   through `sweeper.run_sweep` (local Ray, MLflow in a SQLite file, built-in trainer) on one rung and horizon. It
   records each point's FD at every eval step and the objective, and measures the service overhead:
   - scheduling: Ray slot-seconds not spent inside trials, (concurrency x fit wall - sum of trial walls) / trial
     compute, which also counts the tail where fewer trials than slots remain;
   - MLflow logging inside a trial: one trial of the same config timed with and without tracking (after a warm-up)
     in this process; the difference is the logging cost per trial;
   - fixed costs (store creation, Ray start) are reported separately: they do not grow with the grid.
   The table goes to a JSON file and is reused by later runs (`--table`), so phase 2 never retrains.

2. Replay (simulated on the measured table): for each of `--search-seeds` sampler seeds, the sweeper's own
   `Planner` (the same Optuna samplers the sweeps use) proposes points one at a time; a point "costs" the training
   steps it would have run, looked up from the table instead of retrained. With ASHA (reduction factor 2, grace one
   eval step, rungs at the first two eval steps, Ray's rule: stop when the running objective is worse than the
   (1 - 1/rf) quantile of those recorded at the rung) a stopped point costs only the steps to its stopping eval.
   Score: training steps spent until the first completed point whose objective is within 2% of the grid's best.
   The full grid costs 12 x horizon steps; a grid run in random order, until its first such point, is shown too.

    python benchmarks/search_efficiency.py                    # measure (once, ~5 min here) then replay
    python benchmarks/search_efficiency.py --table FILE       # replay a measured table only
    python benchmarks/search_efficiency.py --quick            # a 2x2 grid at 60 steps: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# The measured trial: the default grid on the smallest rung at a CPU-sized horizon (the default 1800 steps would
# take about 30 minutes per grid here); shapes-cnn features, since pixel FD separates runs only weakly.
BENCH_TRIAL: dict[str, Any] = {
    "batch_size": 32,
    "warmup_steps": 20,
    "log_every": 25,
    "text_encoder": "learned",
    "eval": {"extractor": "shapes-cnn", "fd_samples": 256, "reference_samples": 1024, "sample_steps": 10,
             "val_samples": 64},
}


def measure(out: Path, *, quick: bool, horizon: int, concurrency: int) -> dict[str, Any]:
    """Run the grid once through the sweeper and time a trial with and without MLflow logging."""
    from sweeper import run_sweep

    workdir = out.parent / f"{out.stem}-work"
    uri = f"sqlite:///{out.parent / (out.stem + '-mlflow.db')}"
    space = {"K": [2, 3], "gamma": [0.15, 0.25]} if quick else {"K": [2, 3, 4], "gamma": [0.10, 0.15, 0.25, 0.35]}
    spec = {
        "name": f"bench-{int(time.time())}",
        "horizon": horizon,
        "search": {"method": "grid", "space": space},
        "baselines": [],
        "execution": {"concurrency": concurrency, "cpus_per_trial": 1},
        "trial": BENCH_TRIAL,
        "tracking": {"tracking_uri": uri, "experiment": "search-efficiency"},
    }
    result = run_sweep(spec, workdir=workdir / spec["name"], show_progress=True)
    if result.state != "SUCCEEDED":
        raise SystemExit(f"the measured sweep ended {result.state}")
    logging_probe = probe_logging(spec, uri)
    wall = [t.wall_time_s for t in result.trials if t.wall_time_s]
    timings = dict(result.timings)
    trial_sum = sum(wall)
    compute = trial_sum - logging_probe["logging_s"] * len(wall)
    sched = concurrency * timings["fit_wall_s"] - trial_sum
    table = {
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs, {platform.processor() or platform.machine()})",
        "horizon": horizon,
        "eval_steps": result.eval_steps,
        "concurrency": concurrency,
        "trial": BENCH_TRIAL,
        "points": {p.point_key: {"params": p.params, "objective": p.objective, "fd": p.fd_mean} for p in result.points},
        "overhead": {
            "trials": len(wall),
            "trial_wall_s_sum": trial_sum,
            "trial_wall_s_mean": statistics.fmean(wall),
            "fit_wall_s": timings["fit_wall_s"],
            "scheduling_s": sched,
            "scheduling_fraction": sched / compute,
            "logging_s_per_trial": logging_probe["logging_s"],
            "logging_fraction": logging_probe["logging_s"] * len(wall) / compute,
            "total_fraction": (sched + logging_probe["logging_s"] * len(wall)) / compute,
            "fixed_s": {"store_init_s": timings.get("store_init_s"), "ray_init_s": timings.get("ray_init_s"),
                        "sweep_wall_s": timings.get("sweep_wall_s")},
            "probe": logging_probe,
        },
    }
    out.write_text(json.dumps(table, indent=2))
    return table


def probe_logging(spec: dict[str, Any], uri: str) -> dict[str, float]:
    """Seconds of MLflow work inside one tracked trial, timed where it happens: every RunLogger call (params,
    metrics, tags, artifacts, finish) and the sample-grid rendering done only for MLflow. (An A/B timing of the
    whole trial with and without tracking drowns a second or two in the noise of a shared machine.)"""
    import functools

    import torch

    import trials._run as run_module
    from trials import run_trial
    from trials._tracking import RunLogger  # timed where it works: the trials' MLflow writer itself

    torch.set_num_threads(1)
    cfg = {**spec["trial"], "rung": "cpu-xs", "steps": spec["horizon"], "optimizer": {"name": "periodic"},
           "tracking": {"tracking_uri": uri, "experiment": "search-efficiency-probe"}}
    run_trial(cfg)  # warm-up: imports, dataset, feature network
    spent = [0.0]

    def timed(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t0
        return wrapper

    names = ("__init__", "log_params", "set_tags", "log_metrics", "log_artifact", "log_dict", "finish")
    saved = {n: getattr(RunLogger, n) for n in names}
    saved_grid = run_module._sample_grid
    try:
        for n in names:
            setattr(RunLogger, n, timed(saved[n]))
        run_module._sample_grid = timed(saved_grid)
        t0 = time.perf_counter()
        run_trial(cfg)
        total = time.perf_counter() - t0
    finally:
        for n in names:
            setattr(RunLogger, n, saved[n])
        run_module._sample_grid = saved_grid
    return {"trial_s": total, "logging_s": spent[0]}


# -- replay -------------------------------------------------------------------------------------------------------


def _spec(table: dict[str, Any], method: str, seed: int, asha: bool) -> Any:
    from sweeper import SweepSpec

    params = [p["params"] for p in table["points"].values()]
    space = {name: sorted({p[name] for p in params}) for name in params[0]}
    search: dict[str, Any] = {"method": method, "space": space, "sampler_seed": seed}
    if method != "grid":
        search["budget"] = len(table["points"])
    return SweepSpec.model_validate({
        "name": "replay", "horizon": table["horizon"], "eval_steps": table["eval_steps"], "search": search,
        "baselines": [], "trial": {"text_encoder": "learned", "eval": {"extractor": "pixels"}},
        "early_stopping": {"method": "asha" if asha else "none"},
    })


def replay(table: dict[str, Any], method: str, seed: int, *, asha: bool, tolerance: float = 0.02) -> dict[str, Any]:
    """One simulated search: steps until the first completed point within `tolerance` of the grid's best."""
    from sweeper.search import FINISHED, Planner
    from sweeper.specs import format_params

    points = table["points"]
    steps = table["eval_steps"]
    horizon = table["horizon"]
    best = min(p["objective"] for p in points.values())
    planner = Planner(_spec(table, method, seed, asha))
    rf, milestones = 2.0, [1, 2][: max(0, len(steps) - 1)]
    recorded: dict[int, list[float]] = {m: [] for m in milestones}
    spent, evaluated = 0, 0
    while True:
        req = planner.next()
        if req is None or req == FINISHED:
            return {"steps": spent, "found": False, "points": evaluated}
        evaluated += 1
        entry = points[format_params(req.params)]
        fd = {int(k): v for k, v in entry["fd"].items()}
        running = {i + 1: statistics.fmean(fd[s] for s in steps[: i + 1]) for i in range(len(steps))}
        stopped_at = None
        if asha:
            for m in milestones:  # ASHA with one bracket, as SweepASHA runs it, trials one at a time
                prior = recorded[m]
                cutoff = np.percentile(prior, (1 - 1 / rf) * 100) if prior else None  # on -objective: lower better
                reward = -running[m]
                prior.append(reward)
                if cutoff is not None and reward < cutoff:
                    stopped_at = m
                    break
        if stopped_at is not None:
            spent += steps[stopped_at - 1]
            planner.complete(req, "PRUNED", running_objective={i: running[i] for i in range(1, stopped_at + 1)})
            continue
        spent += horizon
        planner.complete(req, "SUCCEEDED", objective=entry["objective"])
        if entry["objective"] <= best * (1 + tolerance):
            return {"steps": spent, "found": True, "points": evaluated}


def report(table: dict[str, Any], search_seeds: int) -> None:
    horizon, n = table["horizon"], len(table["points"])
    grid_steps = n * horizon
    best = min(p["objective"] for p in table["points"].values())
    near = sorted(k for k, p in table["points"].items() if p["objective"] <= best * 1.02)
    print(f"\ntable: {n} points measured {table['measured']} on {table['machine']}; horizon {horizon}, "
          f"eval steps {table['eval_steps']}")
    for key, p in sorted(table["points"].items(), key=lambda kv: kv[1]["objective"]):
        print(f"  {key:<18} objective {p['objective']:8.3f}" + ("   (within 2% of best)" if key in near else ""))
    print(f"{len(near)} of {n} points are within 2% of the best ({best:.3f})")
    ov = table.get("overhead")
    if ov:
        print(f"\nservice overhead on {ov['trials']} trials (mean trial wall {ov['trial_wall_s_mean']:.1f} s, "
              f"concurrency {table['concurrency']}):")
        print(f"  Ray scheduling {ov['scheduling_s']:.1f} s = {ov['scheduling_fraction']:.1%} of trial compute; "
              f"MLflow logging {ov['logging_s_per_trial']:.2f} s per trial = {ov['logging_fraction']:.1%}; "
              f"total {ov['total_fraction']:.1%}")
        fixed = ov["fixed_s"]
        print(f"  fixed per sweep: store {fixed['store_init_s']:.1f} s, Ray start {fixed['ray_init_s']:.1f} s; "
              f"sweep wall {fixed['sweep_wall_s']:.0f} s")
    rng = np.random.default_rng(0)
    order_costs = []
    for _ in range(2000):  # a grid in random order, stopped at its first near-best point
        order = rng.permutation(list(table["points"]))
        hit = next(i for i, k in enumerate(order) if k in near)
        order_costs.append((hit + 1) * horizon)
    print(f"\nsteps to a point within 2% of the grid's best, mean over {search_seeds} search seeds "
          f"(full grid: {grid_steps} steps = 1.00):")
    print(f"  {'grid, random order, stop at first hit':<40} {statistics.fmean(order_costs):8.0f}  "
          f"{statistics.fmean(order_costs) / grid_steps:5.2f}")
    for method, asha in (("random", False), ("tpe", False), ("random", True), ("tpe", True)):
        runs = [replay(table, method, seed, asha=asha) for seed in range(search_seeds)]
        spent = [r["steps"] for r in runs]
        found = sum(r["found"] for r in runs)
        label = f"{method}{' + ASHA' if asha else ''}"
        print(f"  {label:<40} {statistics.fmean(spent):8.0f}  {statistics.fmean(spent) / grid_steps:5.2f}"
              f"   (sd {statistics.pstdev(spent):.0f}; found in {found}/{len(runs)}; "
              f"mean points tried {statistics.fmean(r['points'] for r in runs):.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", type=Path, help="a measured table to replay (default: measure one)")
    parser.add_argument("--out", type=Path, default=REPO / "out" / "bench" / "search_efficiency_table.json")
    parser.add_argument("--horizon", type=int, default=300, help="steps per trial in the measured grid")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--search-seeds", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="a 2x2 grid at 60 steps, 20 search seeds")
    args = parser.parse_args()
    if args.quick:
        args.horizon, args.search_seeds = 60, 20
        args.out = args.out.with_name("search_efficiency_quick.json")
    if args.table is not None:
        table = json.loads(args.table.read_text())
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table = measure(args.out, quick=args.quick, horizon=args.horizon, concurrency=args.concurrency)
        print(f"table written to {args.out}")
    report(table, args.search_seeds)


if __name__ == "__main__":
    main()
