"""What a transfer reports per rung against a target declared before the runs: the target rule, horizons per rung,
per-step time measured in isolation, and the per-rung table (fraction reaching, steps and time to target, the
steps-to-target ratio, the per-step time ratio and their product, the plateau flag).

Definitions:
- The **target** at a rung comes from the transfer's `target` rule, fixed in its spec before any run starts and
  applied alike to every arm and seed: `final_mean` = (1 + slack) x the mean over seeds of the reference arm's
  (AdamW by default) final value on the quality curve at that rung; `fixed` = a stated value per rung; `pilot` =
  one value for every rung, (1 + slack) x the plateau quality of a longer pilot of the reference arm run before
  the judged runs (`scaling.targets.pilot_target`). The report says whether the rungs' targets differ.
- The **quality curve** of a run is its dense tracking FD (`fd_track`) when every run at the rung has one, else
  its FD at the deciding checkpoints; target and crossings are always read on the same curve.
- **Steps to target** and **time to target** are `time_to_target`'s interpolated first crossing, in training
  steps and in effective training seconds (the run's own clock).
- The **steps-to-target ratio** (searched arm / baseline, paired by seed) is the optimizer effect. The
  **per-step time ratio** is measured in isolation (a short timing run per arm and rung, one at a time, before
  the transfer's runs start), the systems effect. The **time saving** is 1 - their product. Time to best (the
  paper's definition: the effective time at the best deciding checkpoint) is kept beside it, labelled so.
- A comparison needs at least half of the seeds (and one) to reach the target in both arms; otherwise it is
  reported as `too_few_reached`, never as a number. One paired seed is reported as one run, without an interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .records import TransferRun
from .stats import holm_rejections, mean_interval, t_interval, t_p_value, t_quantile, two_sided_t_p
from .targets import plateau, time_to_target

__all__ = [
    "PlateauRule",
    "TargetRule",
    "median_step_times",
    "pilot_lines",
    "run_targets",
    "rung_report",
    "step_ratio_text",
    "step_time_ratio",
    "target_table",
]


class TargetRule(Protocol):
    """The target a transfer declared, as the report reads it (`sweeper.transfer`'s `TargetSpec` is one): the
    rule, its reference arm and slack, the fixed values per rung, the rule in words and as recorded."""

    @property
    def rule(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def slack(self) -> float: ...
    @property
    def values(self) -> Mapping[str, float]: ...
    def describe(self) -> str: ...
    def model_dump(self, *, mode: str) -> dict[str, Any]: ...


class PlateauRule(Protocol):
    """The plateau check of every run (`scaling.targets.plateau`), as the report reads it (`sweeper.transfer`'s
    `PlateauSpec` is one): the last fraction of the horizon checked and the largest drop allowed over it."""

    @property
    def window(self) -> float: ...
    @property
    def max_drop(self) -> float: ...

def median_step_times(runs: Mapping[str, Mapping[str, Sequence[float]]]) -> dict[str, dict[str, float]]:
    """Rung -> arm -> the median of that arm's timing rounds (seconds per step)."""
    return {rung: {arm: statistics.median(times) for arm, times in per.items()} for rung, per in runs.items()}


def step_time_ratio(runs: Mapping[str, Sequence[float]], ours: str, base: str) -> dict[str, Any] | None:
    """`ours` / `base` per-step time from timing rounds, paired by round: the geometric mean with a Student-t
    interval on the log ratios and n (rounds); one round gives the ratio labelled one run. None when either
    arm has no timing."""
    a, b = runs.get(ours) or [], runs.get(base) or []
    if len(a) != len(b):  # a round missing for one arm: the rounds no longer pair up (the medians are used)
        return None
    logs = [math.log(x / y) for x, y in zip(a, b, strict=True) if x > 0 and y > 0]
    if not logs:
        return None
    return {**_geometric(logs), "log_ratios": logs,
            "definition": f"{ours} / {base} seconds per training step in isolation, paired by timing round"}


# ----------------------------------------------------------------------------------------------------------
# Reading the runs against the target


def _curve_name(runs: Sequence[TransferRun]) -> str:
    return "fd_track" if runs and all(r.track for r in runs) else "fd"


def _final(points: Sequence[tuple[int, float, float]]) -> float | None:
    finite = [f for _, _, f in points if math.isfinite(f)]
    return finite[-1] if finite and math.isfinite(points[-1][2]) else None


def _points(run: TransferRun, curve: str) -> tuple[tuple[int, float, float], ...]:
    return run.track if curve == "fd_track" else run.checkpoints


def _targets(target: TargetRule, by_rung: Mapping[str, list[TransferRun]],
             pilot: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rung, runs in by_rung.items():
        curve = _curve_name(runs)
        if target.rule == "pilot":
            out[rung] = _pilot_entry(pilot, curve, rung)
            continue
        if target.rule == "fixed":
            value = target.values.get(rung)
            out[rung] = {"value": value, "curve": curve,
                         "source": "fixed" if value is not None else f"no fixed value for {rung}"}
            continue
        finals = {r.seed: _final(_points(r, curve)) for r in runs if r.arm == target.arm}
        finite = {s: v for s, v in finals.items() if v is not None}
        if not finite:
            out[rung] = {"value": None, "curve": curve,
                         "source": f"no finished {target.arm} run at {rung} to set the target"}
            continue
        mean = statistics.fmean(finite.values())
        out[rung] = {"value": (1 + target.slack) * mean, "curve": curve, "reference_mean": mean,
                     "reference_seeds": sorted(finite),
                     "source": f"(1 + {target.slack:g}) x {mean:.4g}, the mean final {curve} of {target.arm} over "
                               f"seeds {sorted(finite)}"}
    return out


def _pilot_entry(pilot: Mapping[str, Any] | None, curve: str, rung: str) -> dict[str, Any]:
    """A rung's target under rule `pilot`: the pilot's one value (per rung: that rung's pilot's), on the curve the
    rung's runs are judged on."""
    derived = (pilot or {}).get("result") or {}
    if derived.get("per_rung"):
        derived = {**(derived.get("rungs") or {}).get(rung, {}), "curve": derived.get("curve")}
    if derived.get("value") is None:
        return {"value": None, "curve": curve, "source": "the pilot has not set the target (it has not finished)"}
    if derived.get("curve") != curve:
        # FD and tracking FD are different scales: a line drawn on one is never read on the other.
        return {"value": None, "curve": curve, "source": f"the pilot's target is on {derived.get('curve')}, the runs "
                f"at this rung are judged on {curve}"}
    return {"value": float(derived["value"]), "curve": curve, "reference_mean": derived.get("quality"),
            "reference_seeds": [int(s) for s in derived.get("per_seed") or {}],
            "source": f"the pilot's: {derived.get('definition', '')}"}


def run_targets(
    runs: Sequence[TransferRun], target: TargetRule, pilot: Mapping[str, Any] | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(rung -> target {value, curve, source}, run id -> {reached, steps, time_s, target}) for succeeded runs;
    `pilot`: the plan's pilot section (rule `pilot`), whose `result` holds the one target it derived."""
    ok = [r for r in runs if r.state == "SUCCEEDED" and (r.track or r.checkpoints)]
    by_rung: dict[str, list[TransferRun]] = {}
    for r in ok:
        by_rung.setdefault(r.rung, []).append(r)
    targets = _targets(target, by_rung, pilot)
    per_run: dict[str, dict[str, Any]] = {}
    for r in ok:
        t = targets[r.rung]
        if t["value"] is None:
            continue
        points = _points(r, t["curve"])
        steps, times, values = zip(*points, strict=True)
        hit = time_to_target(steps, times, values, t["value"])
        final = _final(points)
        per_run[r.run_id] = {"reached": hit.reached, "steps": hit.step, "time_s": hit.time_s, "target": t["value"],
                             "curve": t["curve"], "left_censored": hit.left_censored,
                             # A seed that never reaches is censored at its last checkpoint (not dropped).
                             "censored_at": None if hit.reached else float(steps[-1]),
                             # The first crossing does not see a run that crosses and then rises again: this does.
                             "below_at_end": None if final is None else final <= t["value"]}
    return targets, per_run


def _spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else None,
            "n": len(values)}


def _geometric(log_ratios: Sequence[float]) -> dict[str, Any]:
    """A ratio from paired log ratios: the geometric mean, its Student-t interval mapped back (None for one
    pair) and n."""
    p = mean_interval(log_ratios)
    return {"mean": math.exp(p["mean"]), "lo": math.exp(p["lo"]) if p["lo"] is not None else None,
            "hi": math.exp(p["hi"]) if p["hi"] is not None else None, "n": p["n"]}


def _time_saving(step_logs: Sequence[float], timing: Mapping[str, Any] | None, step_ratio: float,
                 level: float = 0.95) -> dict[str, Any]:
    """1 - steps-to-target ratio x per-step time ratio, in %. The product's log is the sum of two independent
    means of paired logs (over seeds, over timing rounds), so its standard error is the root of the summed squared
    errors and its interval a Student-t one with Welch-Satterthwaite degrees of freedom. With one timing round
    only the seeds' spread is there to carry."""
    n = len(step_logs)
    log_steps = statistics.fmean(step_logs)
    var_s = statistics.variance(step_logs) / n if n > 1 else None
    var_t, df_t = None, None
    logs_t = (timing or {}).get("log_ratios") or []
    if len(logs_t) > 1:
        var_t, df_t = statistics.variance(logs_t) / len(logs_t), len(logs_t) - 1
    center = log_steps + math.log(step_ratio)
    out: dict[str, Any] = {"mean": 100 * (1 - math.exp(center)), "lo": None, "hi": None, "n": n,
                           "timing_rounds": len(logs_t) or 1}
    if var_s is None:
        out["label"] = "one run"
    else:
        var = var_s + (var_t or 0.0)
        # Welch-Satterthwaite: the degrees of freedom of a sum of two variance estimates.
        df = var**2 / (var_s**2 / (n - 1) + (var_t**2 / df_t if var_t and df_t else 0.0)) if var > 0 else n - 1
        half = t_quantile(level, df) * math.sqrt(var)
        # A larger product is a smaller saving: the interval's ends swap.
        out.update(lo=100 * (1 - math.exp(center + half)), hi=100 * (1 - math.exp(center - half)), level=level)
        out["p_value"] = two_sided_t_p(center, math.sqrt(var), df)
        # The two parts of the log's standard error: only the seeds' shrinks as seeds are added.
        out["se_seeds_log"] = math.sqrt(var_s)
        out["se_timing_log"] = math.sqrt(var_t) if var_t is not None else None
        out.update(_power(statistics.variance(step_logs), n, var_t, df_t, level))
    out["definition"] = ("1 - steps-to-target ratio x per-step time ratio (positive: faster); the interval carries "
                         "the seeds' spread" + (" and, with 2 or more timing rounds, the timing's" if var_t is not None
                                                else " (one timing round: no timing spread to carry)"))
    return out


def correct_across_rungs(rungs: Mapping[str, Mapping[str, Any]], level: float = 0.95) -> dict[str, Any]:
    """Holm's correction over every comparison the per-rung tables make (each rung x each baseline), once for the
    steps-to-target ratios and once for the time savings: each gets `p_value` (its own paired t test),
    `p_holm` and `rejected` (its interval's claim survives the correction at 1 - `level`). In place; returns what
    was corrected, for the report."""
    families: dict[str, dict[tuple[str, str], dict[str, Any]]] = {"steps_to_target_ratio": {},
                                                                   "time_saving_pct": {}}
    for rung, entry in rungs.items():
        for base, comp in entry.get("comparisons", {}).items():
            for name, family in families.items():
                doc = comp.get(name)
                if isinstance(doc, dict) and doc.get("p_value") is not None:
                    family[(rung, base)] = doc
    out: dict[str, Any] = {"method": "Holm", "alpha": round(1 - level, 10)}
    for name, family in families.items():
        rejected, adjusted = holm_rejections({k: d["p_value"] for k, d in family.items()}, 1 - level)
        for key, doc in family.items():
            doc.update(p_holm=adjusted[key], rejected=key in rejected)
        out[name] = {"comparisons": len(family), "rejected": sorted(f"{r} vs {b}" for r, b in rejected)}
    return out


POWER = 0.8  # the power the detectable saving and the seeds needed are stated at
_MAX_SEEDS_NEEDED = 1000


def _detectable_log(var_seed: float, n: int, var_t: float | None, df_t: int | None, level: float) -> float:
    """The smallest |log product| a two-sided test at `level` detects with probability POWER, for n seeds."""
    var = var_seed / n + (var_t or 0.0)
    if var <= 0:
        return 0.0
    df = var**2 / ((var_seed / n) ** 2 / max(n - 1, 1) + (var_t**2 / df_t if var_t and df_t else 0.0))
    # t quantiles: two-sided at `level` plus one-sided at POWER (t_quantile is two-sided: 2 * POWER - 1 gives it)
    return (t_quantile(level, df) + t_quantile(2 * POWER - 1, df)) * math.sqrt(var)


def _power(var_seed: float, n: int, var_t: float | None, df_t: int | None, level: float) -> dict[str, Any]:
    """What the study could detect, from the observed spreads (seeds' paired log ratios, timing rounds): the
    smallest time saving detectable with POWER at `level` with these n seeds, and the seeds needed to detect a
    10 % saving (None when even 1000 seeds would not, because the timing rounds' spread alone is too wide)."""
    detectable = 100 * (1 - math.exp(-_detectable_log(var_seed, n, var_t, df_t, level)))
    target = -math.log(0.9)
    needed = next((m for m in range(2, _MAX_SEEDS_NEEDED + 1)
                   if _detectable_log(var_seed, m, var_t, df_t, level) <= target), None)
    return {"detectable_pct": detectable, "seeds_for_10pct": needed, "power": POWER}


def _plateau_summary(at: Sequence[TransferRun], curve: str, rung_horizon: int | None, *, window: float,
                     max_drop: float) -> dict[str, Any]:
    """Plateau per run, per arm and the rung's flags. An arm is undertrained when most of its checked runs still
    fall by more than max_drop over the window, and rising when most got worse by more than that; the rung is
    flagged when any arm is (one vote pooled over arms would hide one undertrained arm among two plateaued ones)."""
    checks: dict[str, Any] = {}
    arm_of: dict[str, str] = {}
    for r in at:
        points = _points(r, curve)
        if points:
            s, _, v = zip(*points, strict=True)
            checks[r.run_id] = plateau(s, v, horizon=r.horizon or rung_horizon or s[-1],
                                       window=window, max_drop=max_drop)
            arm_of[r.run_id] = r.arm
    arms: dict[str, dict[str, Any]] = {}
    for arm in sorted(set(arm_of.values())):
        mine = [c for rid, c in checks.items() if arm_of[rid] == arm and c.checked]
        arms[arm] = {
            "runs_checked": len(mine),
            "runs_flagged": sum(c.undertrained for c in mine),
            "runs_rising": sum(c.rising for c in mine),
            "undertrained": bool(mine) and sum(c.undertrained for c in mine) > len(mine) / 2,
            "rising": bool(mine) and sum(c.rising for c in mine) > len(mine) / 2,
            "median_drop": statistics.median(c.drop for c in mine if c.drop is not None) if mine else None,
        }
    checked = [c for c in checks.values() if c.checked]
    return {
        "undertrained": any(a["undertrained"] for a in arms.values()),
        "rising": any(a["rising"] for a in arms.values()),
        "undertrained_arms": [arm for arm, a in arms.items() if a["undertrained"]],
        "rising_arms": [arm for arm, a in arms.items() if a["rising"]],
        "arms": arms,
        "runs_flagged": sum(c.undertrained for c in checked), "runs_rising": sum(c.rising for c in checked),
        "runs_checked": len(checked), "window": window, "max_drop": max_drop,
        "median_drop": statistics.median(c.drop for c in checked if c.drop is not None) if checked else None,
        "runs": {rid: c.drop for rid, c in checks.items()},
    }


def _compare(ours: dict[int, dict[str, Any]], theirs: dict[int, dict[str, Any]],
             by_arm: dict[str, dict[int, TransferRun]], *, base: str, searched_arm: str, timing: Mapping[str, float],
             need: int, time_to_best: Mapping[str, float],
             timing_runs: Mapping[str, Sequence[float]] | None = None) -> dict[str, Any]:
    """The searched arm against one baseline at one rung, over the seeds both ran: steps and time to the target
    (a number only when at least `need` paired seeds reached it in both arms) and time to best."""
    paired = sorted(s for s in ours if s in theirs)
    both = [s for s in paired if ours[s]["reached"] and theirs[s]["reached"]]
    comp: dict[str, Any] = {"seeds_paired": len(paired), "seeds_both_reached": len(both)}
    ratio_doc = step_time_ratio(timing_runs, searched_arm, base) if timing_runs else None
    step_ratio_time = ratio_doc["mean"] if ratio_doc else (
        timing[searched_arm] / timing[base] if searched_arm in timing and base in timing and timing[base] > 0 else None)
    comp["step_time_ratio"] = step_ratio_time
    rounds = max(len((timing_runs or {}).get(a) or []) for a in (searched_arm, base))
    if ratio_doc is None and step_ratio_time is not None and rounds > 1:
        # Several rounds that do not pair (a round missing for one arm): the ratio of the medians, no interval.
        comp["step_time_ratio_label"] = "medians of unpaired timing rounds"
    if ratio_doc:
        comp["step_time_ratio_interval"] = ratio_doc
    comp["step_time_ratio_source"] = ("measured in isolation: short timing runs per arm at this rung"
                                      if step_ratio_time is not None else "not measured (timing.steps 0)")
    # Censored, not dropped: a seed that did not reach counts at its last checkpoint (a restricted mean, so the
    # ratio is a bound in the direction of the arm that failed to reach), over every paired seed.
    def restricted(h: Mapping[str, Any]) -> float | None:
        return h["steps"] if h["reached"] else h.get("censored_at")

    full = [s for s in paired if restricted(ours[s]) and restricted(theirs[s])]
    if len(full) >= 1 and len(full) > len(both):
        logs = [math.log(restricted(ours[s]) / restricted(theirs[s])) for s in full]  # type: ignore[operator]
        comp["steps_to_target_ratio_restricted"] = {
            **_geometric(logs), "seeds_censored": {searched_arm: sum(not ours[s]["reached"] for s in full),
                                                   base: sum(not theirs[s]["reached"] for s in full)},
            "definition": f"{searched_arm} / {base} steps to target over every paired seed, a seed that did not "
                          "reach counted at its last checkpoint (right-censored: a bound, not a measurement)",
        }
    if len(both) < need:
        comp["status"] = "too_few_reached"
        comp["note"] = (f"{len(both)} of {len(paired)} paired seeds reached the target in both arms; at "
                        f"least {need} are needed for a number")
    else:
        comp["status"] = "ok"
        log_ratios = [math.log(ours[s]["steps"] / theirs[s]["steps"]) for s in both]
        comp["steps_to_target_ratio"] = {
            **_geometric(log_ratios),
            "p_value": t_p_value(t_interval(log_ratios)) if len(log_ratios) > 1 else None,
            "per_seed": {str(s): ours[s]["steps"] / theirs[s]["steps"] for s in both},
            "definition": f"{searched_arm} / {base} steps to target, geometric mean over paired seeds",
        }
        left = [s for s in both if ours[s].get("left_censored") or theirs[s].get("left_censored")]
        if left:
            comp["left_censored_seeds"] = len(left)
            comp["note"] = (f"{len(left)} of {len(both)} seeds crossed the target at the first tracking point in one "
                            "arm or both: their steps are upper bounds (the crossing happened before that "
                            "point and was not observed), so for them the ratio is not a measurement")
        comp["steps_to_target_difference"] = mean_interval([ours[s]["steps"] - theirs[s]["steps"] for s in both])
        comp["time_to_target_difference_s"] = mean_interval(
            [ours[s]["time_s"] - theirs[s]["time_s"] for s in both])
        if step_ratio_time is not None:
            comp["time_saving_pct"] = _time_saving(log_ratios, ratio_doc, step_ratio_time)
    ttb_ours = {s: time_to_best[r.run_id] for s, r in by_arm.get(searched_arm, {}).items()
                if r.run_id in time_to_best}
    ttb_base = {s: time_to_best[r.run_id] for s, r in by_arm.get(base, {}).items() if r.run_id in time_to_best}
    common = sorted(s for s in ttb_ours if s in ttb_base)
    if common:
        comp["time_to_best_saving_pct"] = {
            **mean_interval([100 * (ttb_base[s] - ttb_ours[s]) / ttb_base[s] for s in common]),
            "definition": "the paper's time to best: each arm timed to its own best deciding checkpoint",
        }
    return comp


def _arm_entry(seeds_run: Mapping[int, TransferRun], per_run: Mapping[str, Mapping[str, Any]],
               time_to_best: Mapping[str, float], step_time: float | None) -> dict[str, Any]:
    """One arm's row at one rung: how many seeds reached the target, their steps and time to it, time to best, the
    per-step time and the FD's sample count and bias."""
    hits = {s: per_run[r.run_id] for s, r in seeds_run.items() if r.run_id in per_run}
    reached = {s: h for s, h in hits.items() if h["reached"]}
    return {
        "seeds": len(seeds_run), "reached": len(reached),
        "fraction_reached": len(reached) / len(seeds_run) if seeds_run else None,
        # Of the seeds that reached the target, those still at or below it at their last point.
        "held_to_end": sum(bool(h["below_at_end"]) for h in reached.values()),
        # Already below the target at the first tracking point: steps to target is an upper bound there.
        "left_censored": sum(bool(h.get("left_censored")) for h in reached.values()),
        "steps_to_target": _spread([h["steps"] for h in reached.values()]),
        "time_to_target_s": _spread([h["time_s"] for h in reached.values()]),
        "per_seed": {str(s): {"reached": h["reached"], "steps": h["steps"], "time_s": h["time_s"],
                              "below_at_end": h["below_at_end"]} for s, h in sorted(hits.items())},
        "time_to_best_s": _spread([time_to_best[r.run_id] for r in seeds_run.values() if r.run_id in time_to_best]),
        "time_to_best_definition": "the paper's: effective time at the best deciding checkpoint",
        "step_time_s": step_time,
        # Beside every FD: its sample count and bias estimate (FD - FD-infinity) at the last deciding step.
        "fd_samples": sorted({r.fd_samples for r in seeds_run.values() if r.fd_samples}),
        "fd_bias_end": _spread([r.fd_bias[-1][1] for r in seeds_run.values() if r.fd_bias]),
    }


def rung_report(
    runs: Sequence[TransferRun],
    *,
    rungs: Sequence[str],
    arms: Sequence[str],
    searched_arm: str,
    seeds: Sequence[int],
    target: TargetRule,
    step_times: Mapping[str, Mapping[str, float]] | None,
    time_to_best: Mapping[str, float],
    plateau_spec: PlateauRule,
    horizons: Mapping[str, int],
    step_time_runs: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    pilot: Mapping[str, Any] | None = None,
    alpha: float = 0.05,
    looks: int = 1,
) -> dict[str, Any]:
    """The per-rung table against the declared target (module docstring), JSON-able; with rule `pilot`, `pilot` is
    the plan's pilot section (its runs, curves and the target it derived), reported as `pilot`. Its Holm flags are
    at the family-wise `alpha` of one of the study's `looks` (alpha / looks: rounds, extensions)."""
    targets, per_run = run_targets(runs, target, pilot)
    ok = [r for r in runs if r.state == "SUCCEEDED"]
    need = max(1, math.ceil(len(seeds) / 2))
    out: dict[str, Any] = {"rule": target.model_dump(mode="json"), "rule_text": target.describe(),
                           "min_paired_seeds": need, "rungs": {}}
    if target.rule == "pilot":
        out["pilot"] = dict(pilot or {"result": None})
        derived = out["pilot"].get("result")
        if derived and not derived.get("plateaued"):
            # Said first by every report: a target drawn on a curve still falling is easier for longer runs.
            out["pilot"]["flag"] = (f"PILOT NOT AT A PLATEAU: its curve still fell by more than "
                                    f"{100 * derived['max_drop']:.0f}% over the last {derived['window']:.2g} of its "
                                    f"horizon on some seed (drops {derived.get('drops')})")
        if derived and derived.get("horizon_short"):
            # The judged runs at such a rung would be censored for want of steps, not of quality.
            short = ", ".join(f"{r} (reached at {derived['horizon_check'][r]['reached_at']}, judged horizon "
                              f"{derived['horizon_check'][r]['judged_horizon']})" for r in derived["horizon_short"])
            out["pilot"]["horizon_flag"] = (f"HORIZON SHORT: a pilot seed reached its rung's target only after the "
                                            f"judged horizon at {short}")
    for rung in rungs:
        at = [r for r in ok if r.rung == rung]
        t = targets.get(rung, {"value": None, "curve": _curve_name(at), "source": "no succeeded runs"})
        entry: dict[str, Any] = {"target": t["value"], "curve": t["curve"], "target_source": t["source"],
                                 "horizon": horizons.get(rung), "arms": {}, "comparisons": {}}
        entry["plateau"] = _plateau_summary(at, t["curve"], horizons.get(rung), window=plateau_spec.window,
                                            max_drop=plateau_spec.max_drop)
        by_arm: dict[str, dict[int, TransferRun]] = {}
        for r in at:
            by_arm.setdefault(r.arm, {})[r.seed] = r
        timing = (step_times or {}).get(rung, {})
        for arm in arms:
            entry["arms"][arm] = _arm_entry(by_arm.get(arm, {}), per_run, time_to_best, timing.get(arm))
        ours = {s: per_run[r.run_id] for s, r in by_arm.get(searched_arm, {}).items() if r.run_id in per_run}
        for base in (a for a in arms if a != searched_arm):
            theirs = {s: per_run[r.run_id] for s, r in by_arm.get(base, {}).items() if r.run_id in per_run}
            entry["comparisons"][base] = _compare(ours, theirs, by_arm, base=base, searched_arm=searched_arm,
                                                  timing=timing, need=need, time_to_best=time_to_best,
                                                  timing_runs=(step_time_runs or {}).get(rung))
        entry["sensitivity"] = target_sensitivity(by_arm, t["curve"], searched_arm=searched_arm,
                                                  bases=[a for a in arms if a != searched_arm])
        out["rungs"][rung] = entry
    # One target per study or not: a steps-to-target exponent fitted across rungs of different targets mixes size
    # with target difficulty, so the values are said beside the fits.
    values = {rung: e["target"] for rung, e in out["rungs"].items()}
    out["target_values"] = values
    out["targets_differ"] = len({v for v in values.values() if v is not None}) > 1
    # Each rung x each baseline is a comparison of the same study: their claims are corrected together.
    out["multiplicity"] = correct_across_rungs(out["rungs"], level=1 - alpha / looks)
    if looks > 1:
        out["multiplicity"].update(looks=looks, alpha_study=alpha)
    out["per_run"] = per_run
    return out


SENSITIVITY_LEVELS = 12


def target_sensitivity(by_arm: Mapping[str, Mapping[int, TransferRun]], curve: str, *, searched_arm: str,
                       bases: Sequence[str], levels: int = SENSITIVITY_LEVELS) -> dict[str, Any]:
    """The paired steps-to-target ratio of `searched_arm` against each base at `levels` target values spread evenly
    from the best arm's mean final value up to 1.5 x the worst arm's: whether the answer depends on where the
    target line was drawn. At each level: the geometric mean ratio with its interval over the seeds where both
    arms reached it (n), and how many paired seeds that is."""
    finals: dict[str, list[float]] = {}
    for arm, seeds in by_arm.items():
        finals[arm] = [f for r in seeds.values() if (f := _final(_points(r, curve))) is not None]
    means = [statistics.fmean(v) for v in finals.values() if v]
    if not means or searched_arm not in by_arm:
        return {"levels": [], "comparisons": {}}
    low, high = min(means), 1.5 * max(means)
    grid = [low + (high - low) * i / (levels - 1) for i in range(levels)] if levels > 1 and high > low else [low]
    out: dict[str, Any] = {"levels": grid, "curve": curve, "comparisons": {}}

    def steps_at(run: TransferRun, level: float) -> float | None:
        points = _points(run, curve)
        if not points:
            return None
        s, t, v = zip(*points, strict=True)
        hit = time_to_target(s, t, v, level)
        return hit.step if hit.reached else None

    ours = by_arm[searched_arm]
    for base in bases:
        theirs = by_arm.get(base, {})
        rows = []
        for level in grid:
            logs = []
            for seed in sorted(set(ours) & set(theirs)):
                a, b = steps_at(ours[seed], level), steps_at(theirs[seed], level)
                if a and b:
                    logs.append(math.log(a / b))
            rows.append({"target": level, "ratio": _geometric(logs) if logs else None, "seeds_both_reached": len(logs)})
        out["comparisons"][base] = rows
    return out


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None else format(value, fmt)


def _ms(spread: Mapping[str, Any]) -> str:
    if not spread or spread.get("mean") is None:
        return "-"
    std = spread.get("std")
    return f"{spread['mean']:.4g}" + (f" ± {std:.2g}" if std is not None else "")


def _interval(d: Mapping[str, Any], fmt: str = ".3g", sign: str = "") -> str:
    text = format(d["mean"], sign + fmt)
    if d.get("lo") is None:
        return f"{text} (n={d['n']}, one run)" if d.get("n") == 1 else f"{text} (n={d['n']})"
    return f"{text} [{format(d['lo'], sign + fmt)}, {format(d['hi'], sign + fmt)}] (n={d['n']})"


def step_ratio_text(comp: Mapping[str, Any]) -> str:
    """The per-step time ratio with its interval over timing rounds, or labelled one run."""
    ratio = comp.get("step_time_ratio_interval")
    if ratio:
        return _interval(ratio)
    label = comp.get("step_time_ratio_label", "one timing run")
    return _num(comp.get("step_time_ratio"), ".3g") + (f" ({label})" if comp.get("step_time_ratio") else "")


def target_table(report: Mapping[str, Any], searched_arm: str) -> list[str]:
    """The per-rung report as text lines (the CLI's and the demo's table)."""
    lines = [f"\nagainst the target declared before the runs: {report['rule_text']}", *pilot_lines(report),
             f"{'rung':<10} {'horizon':>7} {'target':>8} {'arm':<9} {'reached':>7} {'held':>4} {'steps to target':>17} "
             f"{'time to target s':>17} {'time to best s*':>16} {'ms/step':>8}"]
    for rung, e in report["rungs"].items():
        for arm, a in e["arms"].items():
            lines.append(f"{rung:<10} {_num(e['horizon'], 'd') if e['horizon'] else '-':>7} "
                         f"{_num(e['target']):>8} {arm:<9} {a['reached']:>3}/{a['seeds']:<3} "
                         f"{a.get('held_to_end', 0):>4} "
                         f"{_ms(a['steps_to_target']):>17} {_ms(a['time_to_target_s']):>17} "
                         f"{_ms(a['time_to_best_s']):>16} "
                         f"{_num(1e3 * a['step_time_s'] if a['step_time_s'] else None, '.1f'):>8}")
        p = e["plateau"]
        flags = [f"UNDERTRAINED ({', '.join(p.get('undertrained_arms', []))})" if p["undertrained"] else "",
                 f"RISING ({', '.join(p.get('rising_arms', []))})" if p.get("rising") else ""]
        state = "; ".join(f for f in flags if f) or "plateau ok"
        lines.append(f"{'':<10} {state}: {p['runs_flagged']}/{p['runs_checked']} runs still falling > "
                     f"{100 * p['max_drop']:.0f}%, {p.get('runs_rising', 0)} rising > {100 * p['max_drop']:.0f}% "
                     f"over the last {p['window']:.2g} (median drop "
                     f"{_num(100 * p['median_drop'] if p['median_drop'] is not None else None, '.1f')}%); "
                     f"curve {e['curve']}")
    lines.append("held: of the seeds that reached the target, those still at or below it at their last point")
    lines.append("* time to best: the paper's definition (each arm timed to its own best deciding checkpoint)")
    lines.append(f"\n{searched_arm} against each baseline (paired over seeds; ratio < 1 and saving > 0: {searched_arm} "
                 "is faster):")
    for rung, e in report["rungs"].items():
        for base, c in e["comparisons"].items():
            restricted = c.get("steps_to_target_ratio_restricted")
            if restricted:
                lines.append(f"  {rung:<10} vs {base:<8} censored seeds {restricted['seeds_censored']} counted at "
                             f"their last checkpoint: steps ratio {_interval(restricted)} (a bound)")
            if c["status"] != "ok":
                lines.append(f"  {rung:<10} vs {base:<8} {c['note']}")
                continue
            if c.get("note"):
                lines.append(f"  {rung:<10} vs {base:<8} note: {c['note']}")
            saving = c.get("time_saving_pct")
            power = ""
            if saving and saving.get("detectable_pct") is not None:
                needed = saving.get("seeds_for_10pct")
                power = (f"; detectable with {100 * saving['power']:.0f} % power: {saving['detectable_pct']:.0f} %, "
                         f"seeds for 10 %: {needed if needed is not None else '> 1000 (timing spread)'}")
            lines.append(
                f"  {rung:<10} vs {base:<8} steps-to-target ratio {_interval(c['steps_to_target_ratio'])}"
                f"{_holm(c['steps_to_target_ratio'])} x per-step time ratio {step_ratio_text(c)} "
                f"({c.get('step_time_ratio_how', 'isolated')}) = time "
                "saving " + (_interval(saving, '.1f', '+') + " %" + _holm(saving) if saving else "- (no timing)")
                + power)
    multiplicity = report.get("multiplicity")
    if multiplicity:
        looks = (f", alpha {multiplicity['alpha_study']:g} over {multiplicity['looks']} looks"
                 if multiplicity.get("looks") else "")
        lines.append(f"  Holm-adjusted p over the {multiplicity['steps_to_target_ratio']['comparisons']} ratio and "
                     f"{multiplicity['time_saving_pct']['comparisons']} saving comparisons above (family-wise error "
                     f"{multiplicity['alpha']:g}{looks}); shown beside each: a claim stands only where it is "
                     f"<= {multiplicity['alpha']:g}")
    return lines


def pilot_lines(report: Mapping[str, Any]) -> list[str]:
    """The pilot behind a rule-`pilot` target in words (none for the other rules): its runs, plateau quality and
    target, and a flag when it had not plateaued."""
    if "pilot" not in report:
        return []
    pilot = report["pilot"] or {}
    derived = pilot.get("result")
    if not derived:
        return ["  pilot: not finished, so no target yet"]
    if derived.get("per_rung"):
        lines = [f"  pilot at {rung}: {pilot.get('arm')}, {(pilot.get('horizons') or {}).get(rung)} steps, seeds "
                 f"{pilot.get('seeds')}: plateau quality {d['quality']:.4g} -> target {d['value']:.4g}"
                 + (" (plateaued)" if d.get("plateaued") else " (NOT at a plateau)")
                 for rung, d in (derived.get("rungs") or {}).items()]
        return lines + [f"  {pilot[k]}" for k in ("flag", "horizon_flag") if pilot.get(k)]
    head = (f"  pilot: {pilot.get('arm')} at {pilot.get('rung')}, {pilot.get('horizon')} steps, seeds "
            f"{pilot.get('seeds')} (runs {', '.join(derived.get('run_ids') or [])}): plateau quality "
            f"{derived['quality']:.4g} -> target {derived['value']:.4g} at every rung")
    return [head + (" (plateaued)" if derived.get("plateaued") else ""),
            *([f"  {pilot['flag']}"] if pilot.get("flag") else [])]


def _holm(doc: Mapping[str, Any]) -> str:
    """' (Holm p 0.031)' beside a corrected comparison, '' where none was made (one seed)."""
    return f" (Holm p {doc['p_holm']:.2g})" if doc.get("p_holm") is not None else ""
