"""Headroom on the scenes set: Muon at every rung of a CPU ladder, several seeds, under a stated compute rule.

    python benchmarks/headroom.py run   [--out DIR] [--rungs R,R,...] [--seeds 0,1,2] [--base-steps 1000]
                                        [--steps-exponent 0] [--threads 1] [--smoke]
    python benchmarks/headroom.py table [--out DIR]

`run` trains one trial per (rung, seed) and writes each result as `<out>/<rung>-seed<seed>.json` (its config, the
TrialResult, the compute rule and the machine), skipping those already written, so a killed study resumes where it
stopped; two processes on disjoint rungs or seeds fill two cores. `table` derives the study's tables from those
files alone (`headroom_tables`, which `make rederive` checks the printed tables against): per rung the mean and 95 %
t interval over seeds of validation loss, FD on `fd_scenes_cnn`, its FD-infinity and the alignment shares at the
last eval step; each rung against the one below, paired over seeds; and L(N) = E + A*N^-alpha per metric fitted
on every rung but the largest, which it predicts.

The compute rule: steps = base_steps * (N / N_reference) ** steps_exponent, rounded up to a multiple of 10, N the
rung's Muon-group (block 2-D) parameters and the reference the ladder's smallest rung. The study's is the default:
1,000 steps at every rung (exponent 0: every model sees the same 32,000 images). It is chosen for cost: the ladder
study that follows trains every arm over this ladder within about ten hours of this 2-core machine, and cpu-l's step
(1.24 s on one thread) with its evaluations is most of it. A rule that gave small rungs fewer steps would stop them
before they learn: cpu-xs is still at a validation loss of 0.75 after 300 steps and reaches 0.044 by 545. Full
evaluations run at 1/2, 3/4 and the end of each horizon.

Everything else is one fixed trial: the scenes set at 32 x 32 with patch 4 (64 image tokens), default options,
batch 32, Muon at its default lr, the learned text encoder (MiniLM encodes each distinct caption once and keeps it,
and nearly every scenes caption is new: its cache would grow by about 75 kB a caption), 1024 FD samples with
FD-infinity, the default scenes-cnn feature network.

`--smoke` runs two rungs, one seed, 40 steps, with a feature network trained briefly on 1024 images: a check that
the script works (about a minute), not a measurement.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "studies" / "headroom" / "records"
DEFAULT_RUNGS = "cpu-xs1,cpu-xs,cpu-s,cpu-m,cpu-l"
# Full evaluations at these fractions of each trial's horizon: the end decides, the two before it show whether the
# run still improves (the steps to plateau).
EVAL_FRACTIONS = (1 / 2, 3 / 4, 1.0)


@functools.cache
def block_parameters(rung: str) -> int:
    from trials.models import build_model, count_parameters

    return count_parameters(build_model(rung, device="meta")).block_matrix


def rung_steps(rungs: list[str], base_steps: int, exponent: float, reference: str | None = None) -> dict[str, int]:
    """The compute rule: steps = base_steps * (N / N_reference) ** exponent, in multiples of 10; the reference is
    the smallest rung of the default ladder, whichever rungs one process runs."""
    n_ref = block_parameters(reference or DEFAULT_RUNGS.split(",")[0])
    return {r: int(math.ceil(base_steps * (block_parameters(r) / n_ref) ** exponent / 10) * 10) for r in rungs}


def trial_config(rung: str, seed: int, steps: int, threads: int, smoke: bool) -> dict[str, Any]:
    evaluation: dict[str, Any] = {"extractor": "scenes-cnn", "fd_samples": 1024, "fd_infinity": True,
                                  "track_points": 0}
    if smoke:
        evaluation = {"extractor": "scenes-cnn", "fd_samples": 64, "reference_samples": 256, "track_points": 0,
                      "sample_steps": 4, "val_samples": 32, "fd_bias": False,
                      "extractor_options": {"training_images": 1024, "training": {"epochs": 1}}}
    return {"rung": rung, "seed": seed, "steps": steps, "batch_size": 32, "threads": threads,
            "eval_steps": sorted({max(1, round(steps * f)) for f in EVAL_FRACTIONS}),
            "optimizer": {"name": "muon"}, "text_encoder": "learned", "text_max_length": 34, "patch": 4,
            "data": {"name": "scenes", "image_size": 32}, "eval": evaluation}


def _machine() -> dict[str, Any]:
    import torch

    return {"platform": platform.platform(), "processor": platform.processor(), "torch": torch.__version__,
            "bf16": bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()), "cpus": __import__("os").cpu_count()}


def run(args: argparse.Namespace) -> int:
    import torch

    from trials import run_trial

    rungs = args.rungs.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = rung_steps(rungs, args.base_steps, args.steps_exponent)
    if args.smoke:
        rungs, seeds, steps = rungs[:2], seeds[:1], {r: 40 for r in rungs[:2]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(args.threads)
    rule = {"base_steps": args.base_steps, "steps_exponent": args.steps_exponent,
            "reference_rung": DEFAULT_RUNGS.split(",")[0], "smoke": args.smoke}
    for seed in seeds:  # seed-major: a partial study already holds every rung at its first seeds
        for rung in rungs:
            path = out / f"{rung}-seed{seed}.json"
            if path.exists():
                continue
            config = trial_config(rung, seed, steps[rung], args.threads, args.smoke)
            start = time.time()
            result = run_trial(config)
            record = {"rung": rung, "seed": seed, "block_parameters": block_parameters(rung), "rule": rule,
                      "config": config, "result": result.to_dict(), "machine": _machine(),
                      "wall_s": time.time() - start}
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=1, default=str))
            tmp.replace(path)
            last = max(result.val_loss, default=0)
            print(f"{rung} seed {seed}: {steps[rung]} steps, val_loss {result.val_loss.get(last)}, "
                  f"FD {result.fd.get(last)}, alignment {result.alignment.get(last, {}).get('alignment')}, "
                  f"{time.time() - start:.0f} s", flush=True)
    return 0


def _last(record: dict[str, Any], where: str) -> float | None:
    result = record["result"]
    steps = sorted(result["val_loss"], key=int)
    if not steps:
        return None
    step = steps[-1]
    if where.startswith("alignment"):
        return (result.get("alignment") or {}).get(step, {}).get(where)
    return (result.get(where) or {}).get(step)


def _records(where: Path | list[Path]) -> list[dict[str, Any]]:
    """The records of a folder (every `*.json`), or exactly the files listed."""
    files = sorted(where.glob("*.json")) if isinstance(where, Path) else where
    return [json.loads(p.read_text()) for p in files]


# ----------------------------------------------------------------------------------------------------------
# The printed tables: every cell is (its values at full precision, its text), so `make rederive`
# (benchmarks/rederive.py) compares a page's figures with these at the page's printed digits.

Cell = tuple[tuple[float, ...], str]
# What each rung is judged on, lower is better: (name printed, where in the result, digits, sign). Alignment is a
# share that grows with quality, so its error (1 - alignment) is what the fit takes; the tables print the share.
JUDGED = (("val loss", "val_loss", 4), ("FD", "fd", 1), ("alignment", "alignment", 3))
FITTED = (("val loss", "val_loss", 4, False), ("FD", "fd", 1, False), ("FD-infinity", "fd_infinity", 1, False),
          ("1 − alignment", "alignment", 3, True))


def _interval_cell(values: list[float], digits: int, signed: bool = False) -> Cell:
    from scaling.stats import t_interval

    p = t_interval(values)
    sign = "+" if signed else ""
    if p.interval is None:
        return (p.mean,), f"{p.mean:{sign}.{digits}f} (one run)"
    lo, hi = p.interval
    return (p.mean, lo, hi), f"{p.mean:{sign}.{digits}f} [{lo:{sign}.{digits}f}, {hi:{sign}.{digits}f}]"


def _by_rung(records: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """rung -> seed -> record, rungs smallest first."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in sorted(records, key=lambda r: (r["block_parameters"], r["seed"])):
        out.setdefault(r["rung"], {})[int(r["seed"])] = r
    return out


def _values(mine: dict[int, dict[str, Any]], where: str, seeds: list[int] | None = None) -> list[float]:
    picked = [mine[s] for s in (seeds if seeds is not None else sorted(mine))]
    return [v for v in (_last(r, where) for r in picked) if v is not None]


Table = tuple[tuple[str, ...], tuple[str, ...], dict[tuple[str, ...], dict[str, Cell]]]


def headroom_tables(records: Path | list[Path], n_boot: int = 500) -> dict[str, Table]:
    """The study's tables from its records alone, each (key columns, value columns, rows): `rungs` (mean and 95 %
    t interval over seeds at the last eval step), `attributes` (alignment per attribute), `steps` (each rung against
    the one below, paired over the seeds both hold) and `fits` (L(N) = E + A*N^-alpha per metric with the largest
    rung held out). `records` is the records' folder or the list of their files; `n_boot` the fits' bootstrap
    replicates."""
    by_rung = _by_rung(_records(records))
    rung_cols = ("Muon group", "steps", "seeds", "val loss", "FD (scenes-cnn, 1024)", "FD-infinity",
                 "alignment (all correct)")
    rungs: dict[tuple[str, ...], dict[str, Cell]] = {}
    attrs = ("count", "position", "kind", "colour", "size", "relation")
    attributes: dict[tuple[str, ...], dict[str, Cell]] = {}
    for rung, mine in by_rung.items():
        first = next(iter(mine.values()))
        row: dict[str, Cell] = {"Muon group": ((first["block_parameters"],), str(first["block_parameters"])),
                                "steps": ((first["config"]["steps"],), str(first["config"]["steps"])),
                                "seeds": ((len(mine),), str(len(mine)))}
        for column, where, digits in (("val loss", "val_loss", 4), ("FD (scenes-cnn, 1024)", "fd", 1),
                                      ("FD-infinity", "fd_infinity", 1), ("alignment (all correct)", "alignment", 3)):
            values = _values(mine, where)
            if values:
                row[column] = _interval_cell(values, digits)
        rungs[(rung,)] = row
        attributes[(rung,)] = {a: _interval_cell(v, 3) for a in attrs if (v := _values(mine, f"alignment.{a}"))}
    steps = _steps_table(by_rung)
    fits = _fits_table(by_rung, n_boot)
    return {"rungs": (("rung",), rung_cols, rungs), "attributes": (("rung",), attrs, attributes),
            "steps": (("rung", "below"), (*(f"{n} Δ" for n, _, _ in JUDGED), "n", "better beyond the spread"),
                      steps),
            "fits": (("metric",), FIT_COLUMNS, fits)}


def _steps_table(by_rung: dict[str, dict[int, dict[str, Any]]]) -> dict[tuple[str, ...], dict[str, Cell]]:
    """Each rung minus the one below, paired over their common seeds. A rung is better beyond the spread on a metric
    when the paired interval excludes zero on the better side and the mean gap exceeds both rungs' seed SDs."""
    from scaling.stats import t_interval

    out: dict[tuple[str, ...], dict[str, Cell]] = {}
    names = list(by_rung)
    for below, rung in itertools.pairwise(names):
        seeds = sorted(set(by_rung[rung]) & set(by_rung[below]))
        row: dict[str, Cell] = {"n": ((len(seeds),), str(len(seeds)))}
        better = []
        for name, where, digits in JUDGED:
            a, b = _values(by_rung[rung], where, seeds), _values(by_rung[below], where, seeds)
            if len(a) != len(seeds) or len(b) != len(seeds) or not seeds:
                continue
            diff = [x - y for x, y in zip(a, b, strict=True)]
            row[f"{name} Δ"] = _interval_cell(diff, digits, signed=True)
            p = t_interval(diff)
            gain = -p.mean if where != "alignment" else p.mean  # positive when the larger rung is better
            spread = max(statistics.stdev(x) if len(x) > 1 else math.inf for x in (a, b))
            excludes = p.interval is not None and (p.interval[1] < 0 if where != "alignment" else p.interval[0] > 0)
            if excludes and gain > spread:
                better.append(name)
        verdict = ", ".join(better) if better else "none"
        row["better beyond the spread"] = ((), verdict)
        out[(rung, below)] = row
    return out


FIT_COLUMNS = ("alpha [95 %]", "E [95 %]", "held out", "predicted [95 %]", "observed [95 %]", "prediction", "flags")


def _fits_table(by_rung: dict[str, dict[int, dict[str, Any]]], n_boot: int) -> dict[tuple[str, ...], dict[str, Cell]]:
    """L(N) = E + A*N^-alpha per metric on every rung but the largest (every seed a replicate, seed bootstrap), and
    the held-out rung's observed mean against the fitted curve's interval there: "pass" when inside, "MISS" when
    not. Needs at least 4 rungs (3 fitted)."""
    from scaling.fits import fit_scaling

    names = list(by_rung)
    out: dict[tuple[str, ...], dict[str, Cell]] = {}
    if len(names) < 4:
        return out
    held, fitted = names[-1], names[:-1]
    size = {r: float(next(iter(by_rung[r].values()))["block_parameters"]) for r in names}
    for name, where, digits, error in FITTED:
        sizes: list[float] = []
        values: list[float] = []
        for r in fitted:
            v = [1 - x if error else x for x in _values(by_rung[r], where)]
            sizes += [size[r]] * len(v)
            values += v
        observed = [1 - x if error else x for x in _values(by_rung[held], where)]
        if len({s for s in sizes}) < 3 or not observed or min(values, default=0) <= 0:
            continue
        fit = fit_scaling({"muon": (sizes, values)}, form="E+A*N^-alpha", n_boot=n_boot)
        alpha, (alo, ahi) = fit.params["muon"]["alpha"], fit.intervals["muon"]["alpha"]
        e, (elo, ehi) = fit.params["muon"]["E"], fit.intervals["muon"]["E"]
        point, lo, hi = fit.predict("muon", size[held], allow_extrapolation=True)
        mean = statistics.fmean(observed)
        inside = lo <= mean <= hi
        out[(name,)] = {
            "alpha [95 %]": ((alpha, alo, ahi), f"{alpha:.2f} [{alo:.2f}, {ahi:.2f}]"),
            "E [95 %]": ((e, elo, ehi), f"{e:.{digits}f} [{elo:.{digits}f}, {ehi:.{digits}f}]"),
            "held out": ((), held),
            "predicted [95 %]": ((point, lo, hi), f"{point:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"),
            "observed [95 %]": _interval_cell(observed, digits),
            "prediction": ((), "pass" if inside else "MISS"),
            "flags": ((), ", ".join(sorted(fit.flags)) or "none"),
        }
    return out


def markdown(table: Table) -> list[str]:
    keys, columns, rows = table
    header = [*keys, *columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, cells in rows.items():
        lines.append("| " + " | ".join([*key, *(cells[c][1] if c in cells else "—" for c in columns)]) + " |")
    return lines


TITLES = {"rungs": "Headroom per rung: Muon, mean [95 % t interval] over seeds at the last eval step",
          "attributes": "Alignment per attribute (share of generated images right on it)",
          "steps": "Each rung against the one below, paired over seeds",
          "fits": "L(N) = E + A·N^−α per metric, the largest rung held out"}


def table(args: argparse.Namespace) -> int:
    for name, t in headroom_tables(Path(args.out)).items():
        print(f"## {TITLES[name]}")
        print()
        for line in markdown(t):
            print(line)
        print()
    return 0


# ----------------------------------------------------------------------------------------------------------
# Costs per rung, for budgeting the study that follows: step time at the full batch and at a local batch of 8
# (thread-CPU, Muon and periodic interleaved as benchmarks/step_ratio.py does), Muon's optimizer share, a trial's
# peak memory, and (from the records) the steps to plateau and the evaluations' time.

MUON = {"name": "muon"}
PERIODIC = {"name": "periodic", "refresh_every": 3, "gamma": 0.15}  # the paper's pair
PEAK = """
import json, resource, sys
import torch
from trials import run_trial
torch.set_num_threads(1)
run_trial(json.loads(sys.argv[1]))
print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_rss_mb(config: dict[str, Any]) -> float:
    """Peak resident memory of a fresh process that runs `config` (a short trial with one full evaluation)."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", PEAK, json.dumps(config)], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    kb = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("PEAK_KB"))
    return int(kb) / 1024


def costs(args: argparse.Namespace) -> int:
    from trials.steptime import interleaved_step_times

    rungs = args.rungs.split(",")
    steps = rung_steps(rungs, args.base_steps, args.steps_exponent)
    path = Path(args.out) / "costs.json"
    doc = json.loads(path.read_text()) if path.exists() else {"machine": _machine(), "rungs": {}}
    for rung in rungs:
        if rung in doc["rungs"]:
            continue
        trial = trial_config(rung, 0, steps[rung], 1, False)
        row: dict[str, Any] = {"block_parameters": block_parameters(rung), "steps": steps[rung]}
        for local in (trial["batch_size"], 8):
            timing = {"local_batch": local, "rounds": args.rounds, "target_halfwidth": args.target,
                      "max_rounds": args.max_rounds, "warmup_rounds": 2}
            start = time.time()
            res = interleaved_step_times(trial, {"muon": MUON, "periodic": PERIODIC}, timing, reference="muon")
            ratio = res.ratio("periodic")
            row[f"local_batch_{local}"] = {
                "muon_step_s": res.step("muon"), "periodic_step_s": res.step("periodic"),
                "muon_optimizer_share": res.optimizer_share("muon"),
                "periodic_over_muon": [ratio.mean, ratio.lo, ratio.hi], "rounds": res.rounds,
                "stopped": res.stopped, "load_before": res.load_before, "load_after": res.load_after}
            print(f"{rung} local batch {local}: Muon {1e3 * statistics.median(res.step('muon')):.1f} ms a step, "
                  f"optimizer share {100 * res.optimizer_share('muon'):.1f} %, periodic / Muon {ratio.mean:.3f} "
                  f"[{ratio.lo:.3f}, {ratio.hi:.3f}], {res.rounds} rounds, {time.time() - start:.0f} s", flush=True)
        short = {**trial, "steps": 10, "eval_steps": [10]}
        row["peak_rss_mb"] = _peak_rss_mb(short)
        print(f"{rung}: peak memory of a trial {row['peak_rss_mb']:.0f} MB", flush=True)
        doc["rungs"][rung] = row
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1))
        tmp.replace(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="train the missing (rung, seed) records")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--rungs", default=DEFAULT_RUNGS)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--base-steps", type=int, default=1000, help="steps at the reference (smallest) rung")
    p.add_argument("--steps-exponent", type=float, default=0.0, help="steps grow as (N / N_reference) ** this")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="2 rungs, 1 seed, 40 steps: does the script work")
    p.set_defaults(func=run)
    p = sub.add_parser("costs", help="per-rung step costs and peak memory, into <out>/costs.json")
    p.add_argument("--out", default=str(DEFAULT_OUT.parent))
    p.add_argument("--rungs", default=DEFAULT_RUNGS)
    p.add_argument("--base-steps", type=int, default=1000)
    p.add_argument("--steps-exponent", type=float, default=0.0)
    p.add_argument("--rounds", type=int, default=6, help="timed rounds at least")
    p.add_argument("--max-rounds", type=int, default=30)
    p.add_argument("--target", type=float, default=0.03, help="half-width every ratio's interval must reach")
    p.set_defaults(func=costs)
    p = sub.add_parser("table", help="the per-rung table from the records")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.set_defaults(func=table)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
