"""Headroom on the scenes set: Muon at every CPU rung, several seeds, steps growing with size (issue 62, item 3).

    python benchmarks/headroom.py run   [--out DIR] [--rungs R,R,...] [--seeds 0,1,2] [--base-steps 600]
                                        [--steps-exponent 0.5] [--threads 1] [--smoke]
    python benchmarks/headroom.py table [--out DIR]

`run` trains one trial per (rung, seed) and writes each result as `<out>/<rung>-seed<seed>.json` (its config, the
TrialResult, the compute rule and the machine), skipping those already written, so a killed study resumes where it
stopped. `table` re-derives the per-rung table (mean and seed spread of validation loss, FD on `fd_scenes_cnn`, its
FD-infinity and the alignment shares at the last eval step) from those files alone.

The compute rule: steps = base_steps * (N / N_smallest) ** steps_exponent, rounded up to a multiple of 10, N the
rung's Muon-group (block 2-D) parameters, so larger rungs get more steps (at exponent 0.5 the largest of the six
rungs trains 13.7x the smallest's steps: 600 -> 8,250). Everything else is one fixed trial: the scenes set at 32 x 32
with patch 4 (64 image tokens), default options, batch 32, Muon at its default lr, the learned text encoder (MiniLM
encodes each distinct caption once and keeps it, and nearly every scenes caption is new: its cache would grow by
about 75 kB a caption), 1024 FD samples with FD-infinity, the default scenes-cnn feature network.

`--smoke` runs two rungs, one seed, 40 steps, with a feature network trained briefly on 1024 images: a check that
the script works (about a minute), not a measurement.
"""

from __future__ import annotations

import argparse
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
DEFAULT_RUNGS = "cpu-3xs,cpu-2xs,cpu-xs,cpu-s,cpu-m,cpu-l"
# Read from every record at its last eval step: (column, where in the result, how many decimals).
COLUMNS = (("val_loss", "val_loss", 4), ("fd_scenes_cnn", "fd", 1), ("fd_infinity", "fd_infinity", 1),
           ("alignment", "alignment", 3), ("alignment.count", "alignment.count", 3),
           ("alignment.position", "alignment.position", 3), ("alignment.kind", "alignment.kind", 3),
           ("alignment.colour", "alignment.colour", 3), ("alignment.size", "alignment.size", 3),
           ("alignment.relation", "alignment.relation", 3))


def block_parameters(rung: str) -> int:
    from trials.models import build_model, count_parameters

    return count_parameters(build_model(rung, device="meta")).block_matrix


def rung_steps(rungs: list[str], base_steps: int, exponent: float) -> dict[str, int]:
    """The compute rule: steps grow as (N / N_smallest) ** exponent, in multiples of 10."""
    sizes = {r: block_parameters(r) for r in rungs}
    smallest = min(sizes.values())
    return {r: int(math.ceil(base_steps * (n / smallest) ** exponent / 10) * 10) for r, n in sizes.items()}


def trial_config(rung: str, seed: int, steps: int, threads: int, smoke: bool) -> dict[str, Any]:
    evaluation: dict[str, Any] = {"extractor": "scenes-cnn", "fd_samples": 1024, "fd_infinity": True,
                                  "track_points": 0}
    if smoke:
        evaluation = {"extractor": "scenes-cnn", "fd_samples": 64, "reference_samples": 256, "track_points": 0,
                      "sample_steps": 4, "val_samples": 32, "fd_bias": False,
                      "extractor_options": {"training_images": 1024, "training": {"epochs": 1}}}
    return {"rung": rung, "seed": seed, "steps": steps, "batch_size": 32, "threads": threads,
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
    rule = {"base_steps": args.base_steps, "steps_exponent": args.steps_exponent, "smoke": args.smoke}
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


def derive_table(folder: Path) -> list[dict[str, Any]]:
    """One row per rung (smallest first): seeds, steps, and mean / sample SD per column over the seeds."""
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    rows = []
    for rung in sorted({r["rung"] for r in records}, key=lambda r: block_parameters(r)):
        mine = [r for r in records if r["rung"] == rung]
        row: dict[str, Any] = {"rung": rung, "block_parameters": mine[0]["block_parameters"], "seeds": len(mine),
                               "steps": mine[0]["config"]["steps"]}
        for column, where, _ in COLUMNS:
            values = [v for v in (_last(r, where) for r in mine) if v is not None]
            row[column] = (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
                           len(values)) if values else None
        rows.append(row)
    return rows


def table(args: argparse.Namespace) -> int:
    rows = derive_table(Path(args.out))
    header = ["rung", "Muon group", "steps", "seeds", *(c for c, _, _ in COLUMNS)]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        cells = [row["rung"], f"{row['block_parameters']:,}", str(row["steps"]), str(row["seeds"])]
        for column, _, digits in COLUMNS:
            value = row[column]
            cells.append("–" if value is None else f"{value[0]:.{digits}f} ± {value[1]:.{digits}f}")
        print("| " + " | ".join(cells) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="train the missing (rung, seed) records")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--rungs", default=DEFAULT_RUNGS)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--base-steps", type=int, default=600, help="steps at the smallest rung")
    p.add_argument("--steps-exponent", type=float, default=0.5, help="steps grow as (N / N_smallest) ** this")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="2 rungs, 1 seed, 40 steps: does the script work")
    p.set_defaults(func=run)
    p = sub.add_parser("table", help="the per-rung table from the records")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.set_defaults(func=table)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
