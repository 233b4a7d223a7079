"""A small measured example of the study's decisions, run in one process without Ray (robust on a loaded machine):
select a (K, gamma) point with `select_point`, confirm the top points on fresh seeds (the winner's curse), and
bracket the confirmed point with `verification_design` / `verify_transfer`.

    python benchmarks/decision_example.py --json out.json            # defaults: cpu-xs, 120 steps, 2 + 2 seeds
    python benchmarks/decision_example.py --tiny --steps 60 --gammas 0.15 --json out.json   # a loaded machine

Every trial is `trials.run_trial` with the demo's quick-profile settings (batch 16, 256 FD samples, 8 sampler
steps) and the learned text encoder; the numbers are small-sample and say how the decisions read, not which
optimizer setting is best at scale.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

TRIAL: dict[str, Any] = {
    "batch_size": 16, "log_every": 10, "warmup_steps": 10, "text_encoder": "learned",
    "eval": {"fd_samples": 256, "reference_samples": 1024, "sample_steps": 8, "val_samples": 64},
}


# --tiny: pooled-pixel FD (48-d, nothing to train), batch 8, 128 FD samples, 4 sampler steps: for a loaded machine.
TINY: dict[str, Any] = {
    "batch_size": 8, "log_every": 10, "warmup_steps": 5, "text_encoder": "learned",
    "eval": {"extractor": "pixels", "extractor_options": {"size": 4}, "fd_samples": 128, "reference_samples": 256,
             "sample_steps": 4, "val_samples": 32},
}
_SETTINGS = {"trial": TRIAL}


def objective(rung: str, steps: int, seed: int, k: int, gamma: float, lr: float, threads: int) -> float:
    from trials import run_trial

    cfg = {**_SETTINGS["trial"], "rung": rung, "steps": steps, "seed": seed, "threads": threads,
           "optimizer": {"name": "periodic", "refresh_every": k, "gamma": gamma, "lr": lr}}
    result = run_trial(cfg)
    return float(result.objective) if result.objective is not None else float("nan")


def main() -> None:
    from scaling.verify import verification_design, verify_transfer
    from sweeper.selection import select_point

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rung", default="cpu-xs")
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--ks", default="3,4")
    p.add_argument("--gammas", default="0.15,0.35")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--fresh-seeds", default="2,3")
    p.add_argument("--top", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--tiny", action="store_true", help="pooled-pixel FD, batch 8, 128 FD samples (a loaded machine)")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if a.tiny:
        _SETTINGS["trial"] = TINY
    seeds = [int(s) for s in a.seeds.split(",")]
    fresh = [int(s) for s in a.fresh_seeds.split(",")]
    t0 = time.perf_counter()
    cache: dict[tuple[Any, ...], float] = {}

    def obj(k: int, g: float, lr: float, seed: int) -> float:
        key = (k, g, lr, seed)
        if key not in cache:
            cache[key] = objective(a.rung, a.steps, seed, k, g, lr, a.threads)
            print(f"  K={k} gamma={g:g} lr={lr:g} seed={seed}: {cache[key]:.2f}", flush=True)
        return cache[key]

    grid = [(int(k), float(g)) for k in a.ks.split(",") for g in a.gammas.split(",")]
    print(f"1. select on seeds {seeds}", flush=True)
    search = {(k, g): [obj(k, g, a.lr, s) for s in seeds] for k, g in grid}
    sel = select_point(search)
    out: dict[str, Any] = {"args": vars(a), "search": {f"K={k},gamma={g:g}": v for (k, g), v in search.items()},
                           "selection": sel.to_dict()}
    print(f"chosen {sel.chosen}; rule: {sel.rule}")
    for key in sorted(search, key=lambda x: sel.means[x]):
        d = sel.diff_to_best[key]
        print(f"  {key}: mean {sel.means[key]:.2f}, P(best) {sel.p_best[key]:.3f}, vs best "
              + d.describe(str(key), str(sel.best_by_mean), "FD"))
    tops = [sel.chosen, *[k for k in sorted(search, key=lambda x: sel.means[x]) if k != sel.chosen]][: a.top]
    print(f"2. confirm {tops} on fresh seeds {fresh}", flush=True)
    confirmed = {k: [obj(k[0], k[1], a.lr, s) for s in fresh] for k in tops}
    final = select_point(confirmed)
    curse = {f"K={k[0]},gamma={k[1]:g}": {"selected": sel.means[k], "confirmed": final.means[k],
                                            "winners_curse": final.means[k] - sel.means[k]} for k in tops}
    out["confirmation"] = {"seeds": fresh, "selection": final.to_dict(), "points": curse}
    print(f"final choice {final.chosen}; P(best) on fresh seeds {final.p_best}")
    for key, row in curse.items():
        print(f"  {key}: selected {row['selected']:.2f}, confirmed {row['confirmed']:.2f}, winner's curse "
              f"{row['winners_curse']:+.2f}")
    if not a.no_verify:
        k, g = final.chosen
        design = verification_design({"K": k, "gamma": g, "lr": a.lr})
        print(f"3. verify: bracket of {len(design)} points on seeds {fresh}", flush=True)
        labels = {0: "center"}
        objectives, points = {}, {}
        for i, pt in enumerate(design):
            lab = labels.get(i, f"b{i}")
            objectives[lab] = [obj(int(pt.get("K", k)), float(pt.get("gamma", g)), float(pt["lr"]), s) for s in fresh]
            points[lab] = pt
        verdict = verify_transfer(objectives, "center", points=points)
        out["verification"] = verdict.to_dict()
        print(f"verdict: {verdict.verdict}: {verdict.reason}"
              + (f"; seeds that would settle it: {verdict.seeds_needed}" if verdict.seeds_needed else ""))
    out["wall_s"] = time.perf_counter() - t0
    out["trials"] = len(cache)
    print(f"{len(cache)} trials in {out['wall_s']:.0f} s")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2, default=str)


if __name__ == "__main__":
    main()
