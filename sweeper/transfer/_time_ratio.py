"""The fits' `time_ratio` section: the searched arm's time ratio at equal quality against one baseline at each rung,
fitted against size (`scaling.fits.fit_time_ratio`), tested on the largest rung held out, then extrapolated to the
paper's rungs beside the paper's own figures.

Per rung and seed, the time ratio at equal quality is the steps ratio to the declared target (each run's first
crossing, the same crossings the per-rung report reads) times the per-step time ratio from the timing stage (the
mean of its per-round log ratios, one value per rung): log r = log(steps_a / steps_b) + mean log(step_a / step_b).
A seed counts where both arms reached the target; the others are listed (a censored seed has no finite ratio).
Size is each rung's block-matrix parameters (the Muon group, `trials.models.count_parameters(...).block_matrix`),
which do not depend on the study's image size or text encoder, so CPU and paper rungs sit on one axis.

With 4 or more rungs the largest is held out and predicted before the line is refitted on every rung; with 3 the
line is fitted and extrapolated but nothing is held out (`holdout.tested` false, with the reason); with fewer the
fit is refused with its reason (a line through 2 points leaves no residual to judge it by).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from scaling import ScalingError
from scaling.fits import fit_time_ratio

from ._record import ResultRecord, memo
from ._targets import targets_of
from ._timing import round_log_ratios

__all__ = ["PAPER_FIGURES", "PAPER_RUNGS", "block_parameters", "time_ratio_of"]

# The sizes the line is extrapolated to: the paper's models, as the ladder builds them.
PAPER_RUNGS = ("paper-1.3b", "paper-4b", "paper-9b", "paper-15b")
# What the paper reports for periodic (K=3, gamma=0.15) against vanilla Muon over its 1.3B to 15B models, as a
# change in %: printed beside the extrapolation, never used by it.
PAPER_FIGURES: dict[str, Any] = {
    "source": "the paper's measurements, periodic K=3, gamma=0.15 against vanilla Muon, 1.3B to 15B",
    "step_time_pct": [-24.3, -15.7],
    "optimizer_time_pct": [-54.3, -46.9],
    "time_to_best_pct": [-64.8, -33.7],
}


@cache
def block_parameters(rung: str) -> int:
    """A rung's block-matrix (Muon group) parameters, counted on the meta device (any size, no memory)."""
    from trials.models import build_model, count_parameters

    return int(count_parameters(build_model(rung, device="meta")).block_matrix)


def _baseline(result: ResultRecord, against: str | None) -> str:
    others = [a for a in result.plan.arms if a != result.searched_arm]
    if against is None:
        against = "muon" if "muon" in others else (others[0] if others else None)
    if against is None or against not in others:
        raise ScalingError(f"time_ratio: against must be one of the baseline arms {others}, got {against!r}")
    return against


def _step_log_ratio(result: ResultRecord, rung: str, against: str) -> float | None:
    """Mean log per-step ratio searched / baseline at `rung` over the timing rounds (else of the medians)."""
    timing = result.step_timing
    logs = round_log_ratios((timing.get("seconds_per_step_runs") or {}).get(rung) or {}, result.searched_arm, against)
    if logs:
        return sum(logs) / len(logs)
    medians = (timing.get("seconds_per_step") or {}).get(rung) or {}
    a, b = medians.get(result.searched_arm), medians.get(against)
    return math.log(a / b) if a and b and a > 0 and b > 0 else None


def _per_rung(result: ResultRecord, against: str) -> tuple[dict[str, Any], dict[str, str]]:
    """rung -> {block parameters, per-seed log time ratios, seeds, steps and per-step log ratios}, and rung -> why
    it has no ratio."""
    hits = targets_of(result)["per_run"]
    rows: dict[str, Any] = {}
    missing: dict[str, str] = {}
    for rung in result.plan.rungs:
        step_log = _step_log_ratio(result, rung, against)
        if step_log is None:
            missing[rung] = f"no per-step timing of {result.searched_arm} and {against} at {rung}"
            continue
        steps: dict[str, dict[int, float]] = {result.searched_arm: {}, against: {}}
        for run in result.runs:
            hit = hits.get(run.run_id) or {}
            if run.rung == rung and run.arm in steps and hit.get("reached") and hit.get("steps"):
                steps[run.arm][run.seed] = float(hit["steps"])
        seeds = sorted(set(steps[result.searched_arm]) & set(steps[against]))
        if not seeds:
            missing[rung] = f"no seed where both {result.searched_arm} and {against} reached the target at {rung}"
            continue
        step_logs = [math.log(steps[result.searched_arm][s] / steps[against][s]) for s in seeds]
        rows[rung] = {"block_parameters": block_parameters(rung), "seeds": seeds,
                      "log_steps_ratio": step_logs, "log_step_time_ratio": step_log,
                      "log_time_ratio": [x + step_log for x in step_logs]}
    return rows, missing


def time_ratio_of(result: ResultRecord, against: str | None = None, n_boot: int | None = None) -> dict[str, Any]:
    """The `time_ratio` section (module docstring): the per-rung ratios, the line, `holdout` and `extrapolation`
    (to `PAPER_RUNGS`, labelled extrapolations, beside `PAPER_FIGURES`), or `{error}` saying why there is no fit."""
    return memo(result, ("time_ratio", against, n_boot), lambda: _time_ratio(result, against, n_boot))


def _time_ratio(result: ResultRecord, against: str | None, n_boot: int | None) -> dict[str, Any]:
    try:
        base = _baseline(result, against)
    except ScalingError as exc:
        return {"error": str(exc)}
    rows, missing = _per_rung(result, base)
    head: dict[str, Any] = {
        "searched": result.searched_arm, "against": base,
        "definition": "time ratio at equal quality: steps to the declared target (first crossing, seeds where both "
                      "reached) x the per-step time ratio of the timing stage, searched / baseline; fitted as "
                      "log ratio against log10 block-matrix parameters",
        "per_rung": {r: {**d, "ratio_mean": math.exp(sum(d["log_time_ratio"]) / len(d["log_time_ratio"]))}
                     for r, d in rows.items()},
        "rungs_without_ratio": missing, "paper": PAPER_FIGURES}
    holdout = "largest" if len(rows) >= 4 else None
    try:
        fit = fit_time_ratio({r: (float(d["block_parameters"]), d["log_time_ratio"]) for r, d in rows.items()},
                             holdout=holdout, extrapolate={p: float(block_parameters(p)) for p in PAPER_RUNGS},
                             n_boot=2000 if n_boot is None else n_boot)
    except ScalingError as exc:
        return {**head, "error": f"time_ratio fit refused: {exc}"}
    doc = fit.to_dict()
    held = doc.pop("holdout")
    doc["holdout"] = ({"tested": True, **held, "verdict": "pass" if held["passed"] else "MISS"} if held is not None
                      else {"tested": False, "reason": f"{len(rows)} rungs: a hold-out needs 4 (3 to fit the line "
                                                       "and the largest to predict)"})
    for e in doc["extrapolation"].values():
        e["time_change_pct"] = 100 * (e["ratio"] - 1)
        e["time_change_interval_pct"] = [100 * (r - 1) for r in e["interval_ratio"]]
    doc["lines"] = fit.lines() + ([] if held is not None else [f"holdout not tested: {doc['holdout']['reason']}"])
    doc["lines"].append(f"the paper (not fitted; {PAPER_FIGURES['source']}): step time "
                        f"{_range(PAPER_FIGURES['step_time_pct'])}, optimizer time "
                        f"{_range(PAPER_FIGURES['optimizer_time_pct'])}, time to best quality "
                        f"{_range(PAPER_FIGURES['time_to_best_pct'])}")
    return {**head, **doc}


def _range(pcts: list[float]) -> str:
    return f"{pcts[0]:+.1f} to {pcts[1]:+.1f} %"
