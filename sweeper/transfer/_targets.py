"""How a transfer did against the target its spec declared: the per-rung report (`scaling.rung_report`), each
steps-to-target comparison at the first crossing, in steps above the target and at the sustained crossing
(`scaling.compare_crossings`: restricted-mean ratio over every seed, censoring counted), the controls' outcomes
(`scaling.controls_section`), and the rungs still improving fast at their end."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from scaling import ScalingInputError
from scaling.claims import (
    CO_PRIMARY,
    ENDPOINTS,
    AlphaBudget,
    CrossingComparison,
    alpha_budget,
    co_primary_power,
    compare_crossings,
    control_not_judged,
    controls_section,
    judge_claims,
)
from scaling.controls import ControlOutcome, control_outcome, null_reading
from scaling.rungs import rung_report as per_rung_report

from ._record import ResultRecord, memo
from ._savings import time_to_best_of
from ._sections import PlateauSpec, TargetSpec
from ._timing import round_log_ratios

# The controls are judged, and a null read, at the first crossing: the endpoint the earlier studies reported, and
# the one whose interval coverage the injection simulation holds to 95 % at every steps ratio (docs/targets.md).
# Each is judged at the level the study's strongest claim must pass (`claims_budget_of(...).first_step`), never
# at the family's alpha: a control detected at 0.05 says nothing of a claim that must pass 0.05 / 12.
CONTROL_ENDPOINT = "first"
CONTROL_ALPHA = 0.05  # the family-wise alpha of a study without a rounds rule

__all__ = ["claims_of", "controls_of", "controls_summary", "diagnostics_of", "fixed_arms_of", "targets_of",
           "timing_how", "tuning_budgets_of", "undertrained_rungs_of"]


def _sd_seed_log(comp: CrossingComparison, endpoint: str) -> float | None:
    """The sd over seeds of `endpoint`'s log steps ratio (its bootstrap standard error x sqrt(n), as the first
    crossing's power takes it), or None where the endpoint has no ratio or no spread to resample."""
    steps = comp.steps.get(endpoint)
    if steps is None or steps.log_se is None:
        return None
    return steps.log_se * math.sqrt(steps.n)


def rung_report_of(result: ResultRecord) -> dict[str, Any]:
    """The per-rung table against the declared target (`scaling.rungs.rung_report`) over the result's runs."""
    return memo(result, "rung_report", lambda: _rung_report(result))


def _rung_report(result: ResultRecord) -> dict[str, Any]:
    ttb = {rid: t.best_time_s for rid, t in time_to_best_of(result).items()}
    plan = result.plan
    alpha, looks = alpha_looks_of(result)
    # Transfers planned before targets existed get the default rule, applied now (and said so in the text).
    return per_rung_report(
        result.runs, rungs=plan.rungs, arms=plan.arms, searched_arm=result.searched_arm,
        seeds=plan.seeds, target=TargetSpec.model_validate(plan.target or {}),
        step_times=result.step_timing.get("seconds_per_step"), time_to_best=ttb,
        step_time_runs=result.step_timing.get("seconds_per_step_runs"),
        plateau_spec=PlateauSpec.model_validate(plan.plateau or {}),
        horizons=plan.horizon_of(), pilot=_pilot_report(plan.pilot), alpha=alpha, looks=looks)


def alpha_looks_of(result: ResultRecord) -> tuple[float, int]:
    """The study's family-wise alpha and its looks: the rounds' alpha and planned looks (else 0.05 and one),
    plus one look per extension (`transfer extend`, decided after a look at the results)."""
    rule = (result.plan.rounds or {}).get("rule") or {}
    looks = int((result.plan.rounds or {}).get("looks_planned") or 1) + len(result.plan.get("extensions") or [])
    return float(rule.get("alpha", CONTROL_ALPHA)), looks


def claims_budget_of(result: ResultRecord) -> AlphaBudget:
    """The claims' alpha budget: the study's alpha over every rung x baseline comparison and every look."""
    alpha, looks = alpha_looks_of(result)
    return alpha_budget(alpha, comparisons=max(1, len(comparisons_of(result))), looks=looks)


def control_alpha_of(result: ResultRecord) -> float:
    """The level every control is judged at: the one the strongest claim must pass (Holm's first step)."""
    return claims_budget_of(result).first_step


def target_report_of(result: ResultRecord) -> dict[str, Any]:
    """The per-rung table with every comparison at each endpoint and how to read a null (`TransferResult.targets`)."""
    return memo(result, "target_report", lambda: _target_report(result))


def _target_report(result: ResultRecord) -> dict[str, Any]:
    report = rung_report_of(result)
    # Every endpoint beside the complete-case numbers, every seed kept; a null read against the positive control.
    positive = control_outcomes_of(result).get("positive", {})
    for rung, entry in report["rungs"].items():
        how = timing_how(result.step_timing, rung)
        for base, comp in entry["comparisons"].items():
            if how is not None and comp.get("step_time_ratio") is not None:
                comp["step_time_ratio_how"], comp["step_time_ratio_source"] = how
            crossed = comparisons_of(result)[rung, base]
            if not isinstance(crossed, CrossingComparison):
                comp.update({endpoint: {"error": crossed} for endpoint in ENDPOINTS})
                continue
            doc = crossed.to_dict()
            for endpoint in ENDPOINTS:
                saving = crossed.savings.get(endpoint)
                comp[endpoint] = doc[endpoint]
                if saving is not None:
                    comp[endpoint]["reading"] = null_reading(saving, positive.get(rung))
    return report


def targets_of(result: ResultRecord) -> dict[str, Any]:
    """The report against the declared target (`TransferResult.targets`), worked out once per record; a top-level
    copy for the caller."""
    return dict(target_report_of(result))


def undertrained_rungs_of(result: ResultRecord) -> list[str]:
    """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
    return [r for r, e in target_report_of(result)["rungs"].items() if e["plateau"]["undertrained"]]


def timing_how(timing: Mapping[str, Any], rung: str) -> tuple[str, str] | None:
    """(short label, source text) of the per-step ratio at `rung` when the interleaved method measured it (the
    isolated method's wording is the report's default), with the ranks it ran on."""
    if timing.get("method") != "interleaved":
        return None
    digest = (timing.get("rungs") or {}).get(rung) or {}
    # The document's `workers` is rung -> count (one count in none of the documents written so far); a rung's
    # digest carries its own where the ranks were more than one.
    counts = timing.get("workers")
    workers = int(digest.get("workers") or (counts.get(rung) if isinstance(counts, Mapping) else counts) or 1)
    clock = digest.get("clock") or timing.get("clock") or "thread"
    ranks = f", {workers} gloo ranks" if workers > 1 else ""
    source = (f"interleaved in one process per rung on the {clock} clock, whole refresh periods per block"
              + (f", the slowest of {workers} gloo ranks' step, communication included" if workers > 1 else ""))
    return f"interleaved{ranks}", source


def comparisons_of(result: ResultRecord) -> dict[tuple[str, str], CrossingComparison | str]:
    """(rung, baseline) -> the searched arm against it at every endpoint, or why there is none."""
    return memo(result, "comparisons", lambda: _comparisons(result))


def _comparisons(result: ResultRecord) -> dict[tuple[str, str], CrossingComparison | str]:
    rungs = rung_report_of(result)["rungs"]
    return {(rung, base): crossing_of(result, rung, result.searched_arm, base, rungs[rung]["target"])
            for rung in result.plan.rungs for base in result.plan.arms if base != result.searched_arm}


def claims_of(result: ResultRecord) -> dict[str, Any]:
    """The study's claims in one alpha budget (`scaling.judge_claims`): every rung x baseline comparison of the
    time saving, Holm at alpha / looks (the rounds' alpha and planned looks, else 0.05 and one look; plus one
    look per extension), a claim standing only where the first crossing and the steps above the target both
    show it in one direction (the sustained crossing's Holm p reported beside them, not judged); with each
    comparison's power at the level the strongest claim must pass: the first crossing's (`power`,
    `scaling.power_at_alpha`) and the pair's a claim needs (`power_co_primary`, `scaling.claims.co_primary_power`:
    each co-primary endpoint's power from its own spread, bounds on both, the seeds for the lower bound to reach
    80 %)."""
    return memo(result, "claims", lambda: _claims(result))


def _claims(result: ResultRecord) -> dict[str, Any]:
    budget = claims_budget_of(result)
    judged = {f"{rung} vs {base}": c for (rung, base), c in comparisons_of(result).items()
              if isinstance(c, CrossingComparison)}
    doc: dict[str, Any] = {"budget": budget.to_dict(), "budget_text": budget.text(),
                           "not_judged": [f"{r} vs {b}" for (r, b), c in comparisons_of(result).items()
                                          if not isinstance(c, CrossingComparison)]}
    if judged:
        doc.update(judge_claims(judged, budget).to_dict())
    # A claim stands only where both co-primary endpoints show it, so beside the first crossing's power
    # (`power`, kept as the committed tables read it) goes the pair's, bounded from each endpoint's own spread
    # on the same seeds and timing rounds (`power_co_primary`).
    power: dict[str, Any] = {}
    co_power: dict[str, Any] = {}
    for key, comp in judged.items():
        saving, sd_first = comp.savings.get("first"), _sd_seed_log(comp, "first")
        if saving is None or sd_first is None:
            continue
        n = comp.steps["first"].n
        var_t = saving.se_timing_log**2 if saving.se_timing_log is not None else None
        df_t = saving.timing_rounds - 1 if saving.timing_rounds > 1 else None
        pair = co_primary_power(sd_seed_log={e: _sd_seed_log(comp, e) for e in CO_PRIMARY}, n=n,
                                alpha=budget.first_step, var_timing_log=var_t, df_timing=df_t)
        first = pair.endpoints["first"]  # `power_at_alpha` on the first crossing's spread (never None here)
        if first is not None:
            power[key] = first.to_dict()
        co_power[key] = pair.to_dict()
    doc["power"] = power
    doc["power_co_primary"] = co_power
    return doc


def crossing_of(result: ResultRecord, rung: str, searched: str, base: str,
             target: float | None) -> CrossingComparison | str:
    """`searched` against `base` at `rung` at every endpoint (with the saving when both were timed), or why
    there is none."""
    if target is None:
        return f"no target at {rung}"
    logs = round_log_ratios((result.step_timing.get("seconds_per_step_runs") or {}).get(rung) or {}, searched,
                            base)
    try:
        return compare_crossings(result.runs, rung=rung, searched=searched, baseline=base, target=target,
                                 horizon=result.plan.horizon_of().get(rung), step_time_log_ratios=logs)
    except ScalingInputError as exc:  # e.g. a seed one arm has not run yet
        return str(exc)


def control_comparisons_of(result: ResultRecord) -> dict[str, dict[str, CrossingComparison | str]]:
    """Control kind -> rung -> Muon against the control arm (negative: muon_twin; positive: muon_extra_ns; steps:
    muon_stretched), on the rung's declared target, or why there is none."""
    return memo(result, "control_comparisons", lambda: _control_comparisons(result))


def _control_comparisons(result: ResultRecord) -> dict[str, dict[str, CrossingComparison | str]]:
    if not result.plan.controls:
        return {}
    rungs = rung_report_of(result)["rungs"]  # the same target and curve the arms are judged on
    return {kind: {rung: crossing_of(result, rung, c["against"], c["arm"], rungs[rung]["target"])
                   for rung in result.plan.rungs}
            for kind, c in result.plan.controls.items()}


def expected_step_time_ratio_of(result: ResultRecord) -> dict[str, float]:
    """Rung -> Muon / muon_extra_ns per-step ratio as the redundant work's own clock predicts it."""
    rungs: Mapping[str, Any] = result.step_timing.get("rungs") or {}
    return {rung: float(d["expected_step_time_ratio"]["muon_extra_ns"]) for rung, d in rungs.items()
            if "muon_extra_ns" in (d.get("expected_step_time_ratio") or {})}


def control_outcomes_of(result: ResultRecord) -> dict[str, dict[str, ControlOutcome]]:
    """Control kind -> rung -> its outcome (`scaling.control_outcome`), where it could be judged."""
    return memo(result, "control_outcomes", lambda: _control_outcomes(result))


def expected_steps_ratio_of(result: ResultRecord) -> float | None:
    """The steps control's known Muon / muon_stretched steps ratio, stretch / (stretch + 1), where it ran."""
    steps = (result.plan.controls or {}).get("steps")
    if steps is None:
        return None
    stretch = int(steps.get("stretch") or 8)
    return float(steps.get("expected_steps_ratio") or stretch / (stretch + 1))


def _control_outcomes(result: ResultRecord) -> dict[str, dict[str, ControlOutcome]]:
    expected = expected_step_time_ratio_of(result)
    alpha = control_alpha_of(result)
    out: dict[str, dict[str, ControlOutcome]] = {}
    for kind, per in control_comparisons_of(result).items():
        for rung, comp in per.items():
            saving = comp.savings.get(CONTROL_ENDPOINT) if isinstance(comp, CrossingComparison) else None
            if saving is not None:
                out.setdefault(kind, {})[rung] = control_outcome(
                    kind, saving, alpha=alpha,  # type: ignore[arg-type]
                    expected_step_time_ratio=expected.get(rung) if kind == "positive" else None,
                    expected_steps_ratio=expected_steps_ratio_of(result))
    return out


def controls_of(result: ResultRecord) -> dict[str, Any] | None:
    """The analysis' `controls` section (`scaling.controls_section`, judged at the first crossing): per control
    its outcome per rung and `passed`, the comparisons behind them at every endpoint, the verdict lines the
    report prints first, and rungs that could not be judged; None for a transfer without controls."""
    if not result.plan.controls:
        return None
    comps = control_comparisons_of(result)
    judged = {kind: [c for c in per.values() if isinstance(c, CrossingComparison)] for kind, per in comps.items()}
    budget = claims_budget_of(result)
    doc = controls_section(judged, endpoint=CONTROL_ENDPOINT, alpha=budget.first_step,  # type: ignore[arg-type]
                           expected_step_time_ratio=expected_step_time_ratio_of(result),
                           expected_steps_ratio=expected_steps_ratio_of(result))
    doc["alpha_text"] = (f"every control judged at alpha {budget.first_step:.3g}, the level the strongest claim must "
                         f"pass ({budget.text()})")
    for kind, c in result.plan.controls.items():
        section = doc.setdefault(kind, {"passed": False, "rungs": {}})
        section.update(arm=c["arm"], against=c["against"])
        section["comparisons"] = {rung: comp.to_dict() if isinstance(comp, CrossingComparison) else
                                  {"error": comp} for rung, comp in comps[kind].items()}
        missing = {rung: comp for rung, comp in comps[kind].items() if not isinstance(comp, CrossingComparison)}
        for rung, why in missing.items():
            section["rungs"][rung] = control_not_judged(kind, why)
            doc["lines"].append(f"{rung}: {section['rungs'][rung]['verdict']}")
        section["passed"] = bool(section["rungs"]) and all(r["passed"] for r in section["rungs"].values())
    doc["summary"] = controls_summary(doc)
    return doc


def diagnostics_of(result: ResultRecord) -> dict[str, Any] | None:
    """The diagnostics' section (None without): effective_step per rung: the searched arm against Muon and
    against Muon at the searched arm's mean update size (`muon_effective_step`), at the first crossing, and the
    verdict: is a steps penalty against Muon the step size or the direction?"""

    def at_rung(d: dict[str, Any], rung: str, target: Any) -> tuple[dict[str, Any], list[str]]:
        vs_muon = crossing_of(result, rung, d["against"], d["reference"], target)
        vs_eff = crossing_of(result, rung, d["against"], d["arm"], target)
        doc: dict[str, Any] = {}
        for key, comp in ((f"vs_{d['reference']}", vs_muon), (f"vs_{d['arm']}", vs_eff)):
            doc[key] = comp.to_dict() if isinstance(comp, CrossingComparison) else {"error": comp}
        if isinstance(vs_muon, CrossingComparison) and isinstance(vs_eff, CrossingComparison):
            doc["verdict"] = effective_step_verdict(vs_muon.steps[CONTROL_ENDPOINT], vs_eff.steps[CONTROL_ENDPOINT])
        else:
            doc["verdict"] = "not judged: " + str(vs_muon if isinstance(vs_muon, str) else vs_eff)
        return doc, [f"{rung}: effective step: {doc['verdict']}"]

    return _sections_by_rung(result, result.plan.diagnostics, at_rung)


def _sections_by_rung(result: ResultRecord, plan: dict[str, Any] | None,
                      at_rung: Callable[[dict[str, Any], str, Any], tuple[dict[str, Any], list[str]]],
                      **extra: Any) -> dict[str, Any] | None:
    """A section per kind of `plan` (None without one): the kind's plan with `at_rung(its plan, rung, the rung's
    target)` at every rung, judged at the first crossing: (the rung's document, its report lines)."""
    if not plan:
        return None
    rungs = rung_report_of(result)["rungs"]
    out: dict[str, Any] = {}
    for kind, d in plan.items():
        per: dict[str, Any] = {}
        lines: list[str] = []
        for rung in result.plan.rungs:
            per[rung], rung_lines = at_rung(d, rung, rungs[rung]["target"])
            lines += rung_lines
        out[kind] = {**d, "endpoint": CONTROL_ENDPOINT, **extra, "rungs": per, "lines": lines}
    return out


def tuning_budgets_of(result: ResultRecord) -> dict[str, Any]:
    """Per arm, the settings tried before the transfer carried one (the sweep's points for the searched arm, its
    lr bracket for a baseline) and the settings and runs per rung in the transfer, with whether they are equal
    across the arms (a searched arm tuned on more settings than the baselines has an advantage no test sees)."""
    sweep_settings: dict[str, int] = {}
    for arm, doc in result.source_objectives.items():
        tried = (doc or {}).get("lr_tuning") or {}
        sweep_settings[arm] = max(1, len(tried))
    chosen = result.source.get("selection_points")
    if chosen:
        sweep_settings[result.searched_arm] = int(chosen)
    brackets = result.plan.lr_brackets or {}
    seeds = len(result.source.get("selection_seeds") or [])
    per_arm = {arm: {"sweep_settings": sweep_settings.get(arm),
                     # trials at the tuning rung: settings x the sweep's seeds (None where the seeds are not recorded)
                     "sweep_trials": sweep_settings[arm] * seeds if arm in sweep_settings and seeds else None,
                     "transfer_settings_per_rung": len(brackets.get(arm, [1])),
                     "runs_per_rung": len(brackets.get(arm, [1])) * len(result.plan.seeds)}
               for arm in result.plan.arms}
    transfer_equal = len({a["runs_per_rung"] for a in per_arm.values()}) == 1
    known = [a["sweep_settings"] for a in per_arm.values() if a["sweep_settings"] is not None]
    selection = dict(result.source.get("selection") or {})
    if selection:
        # the transfer judges steps (and time) to the target: tuning on it is tuning on the judged quantity
        selection["on_judged_quantity"] = selection.get("objective") == "steps_to_target"
    return {"arms": per_arm, "equal_in_transfer": transfer_equal,
            "equal_in_sweep": (len(set(known)) <= 1) if len(known) == len(per_arm) else None,
            "selection": selection or None}


def fixed_arms_of(result: ResultRecord) -> dict[str, Any] | None:
    """The fixed arms' section (None without): per fixed arm (paper_default: periodic at K=3, gamma=0.15) and rung,
    it against every arm at the first crossing (steps ratio, time saving where timed), reported beside the claims,
    not among them."""

    def at_rung(d: dict[str, Any], rung: str, target: Any) -> tuple[dict[str, Any], list[str]]:
        doc, lines = {}, []
        for other in result.plan.arms:
            comp = crossing_of(result, rung, d["arm"], other, target)
            doc[other] = comp.to_dict() if isinstance(comp, CrossingComparison) else {"error": comp}
            lines.append(f"{rung}: {d['arm']} (K={d.get('refresh_every')}, gamma={d.get('gamma')}) against "
                         f"{other}: {_first_text(comp)}")
        return doc, lines

    return _sections_by_rung(result, result.plan.get("fixed_arms"), at_rung, judged=False)


def _first_text(comp: CrossingComparison | str) -> str:
    """The first crossing's steps ratio and time saving in words (or why there is none)."""
    if not isinstance(comp, CrossingComparison):
        return f"not compared: {comp}"
    steps = comp.steps.get(CONTROL_ENDPOINT)
    if steps is None:
        return f"not compared: {comp.refused.get(CONTROL_ENDPOINT, 'no ratio')}"
    ci = f" [{steps.lo:.3g}, {steps.hi:.3g}]" if steps.lo is not None else ""
    text = f"steps ratio {steps.ratio:.3g}{ci} (n={steps.n})"
    saving = comp.savings.get(CONTROL_ENDPOINT)
    if saving is not None:
        sci = f" [{saving.lo:+.1f}, {saving.hi:+.1f}]" if saving.lo is not None else ""
        text += f", time saving {saving.pct:+.1f}{sci} %"
    return text + " (reported, not judged)"


def effective_step_verdict(vs_muon: Any, vs_effective: Any) -> str:
    """The effective-step diagnostic's verdict from two restricted-mean steps ratios (searched arm / Muon and
    searched arm / Muon at the searched arm's mean update size), each with its interval."""
    if vs_muon.lo is None or vs_effective.lo is None:
        return "not judged: one seed, no interval"
    if vs_muon.lo <= 1.0:
        return (f"no steps penalty against Muon shown (ratio {vs_muon.ratio:.3g} [{vs_muon.lo:.3g}, "
                f"{vs_muon.hi:.3g}]): nothing to attribute")
    head = (f"steps ratio {vs_muon.ratio:.3g} [{vs_muon.lo:.3g}, {vs_muon.hi:.3g}] against Muon, "
            f"{vs_effective.ratio:.3g} [{vs_effective.lo:.3g}, {vs_effective.hi:.3g}] against Muon at its update size")
    if vs_effective.lo > 1.0:
        return f"{head}: the direction (at equal update size Muon still needs fewer steps)"
    if vs_effective.hi < 1.0:
        return f"{head}: the step size, and more (at equal update size Muon needs more steps)"
    return f"{head}: the step size (at equal update size the penalty is gone; tune its lr)"


def _rung_states(section: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """A control's rungs that failed (judged, and not as it must) and those not judged (a comparison refused or
    without timing). An entry without `judged` (an analysis stored before the flag) counts as judged."""
    rungs = section.get("rungs") or {}
    failed = [r for r, o in rungs.items() if o.get("judged", True) and not o["passed"]]
    unjudged = [r for r, o in rungs.items() if not o.get("judged", True)]
    return failed, unjudged


def controls_summary(doc: Mapping[str, Any]) -> list[str]:
    """The report's first lines: whether each control came out as it must, over every rung, then each rung's
    verdict; a failed positive control first of all (a null elsewhere in the study is then not evidence), and one
    not judged at some rung next (a null at that rung is not evidence either). Failed and not judged are told
    apart: a rung where no seed reached the target was never put to the test."""
    lines = []
    positive = doc.get("positive")
    if positive is not None and not positive["passed"]:
        failed, unjudged = _rung_states(positive)
        if failed:
            lines.append(f"POSITIVE CONTROL FAILED at {', '.join(failed)}: a known per-step saving was not detected "
                         "there, so no null in this study is evidence of no saving (the study finished; its numbers "
                         "follow)")
        else:
            lines.append(f"POSITIVE CONTROL NOT JUDGED at {', '.join(unjudged)}: no null at "
                         f"{'that rung' if len(unjudged) == 1 else 'those rungs'} is evidence of no saving (each "
                         "rung's reason below)")
    steps = doc.get("steps")
    if steps is not None and not steps["passed"]:
        failed, unjudged = _rung_states(steps)
        where = ", ".join(failed or unjudged)
        lines.append(f"STEPS CONTROL {'FAILED' if failed else 'NOT JUDGED'} at {where}: a known steps ratio was not "
                     "detected there, so no null steps ratio in this study is evidence of equal steps")
    for kind in ("negative", "positive", "steps"):
        section = doc.get(kind)
        if section is None:
            continue
        failed, unjudged = _rung_states(section)
        judged_ok = [r for r in (section.get("rungs") or {}) if r not in failed and r not in unjudged]
        if section["passed"]:
            state = "came out as it must at every rung"
        elif failed:
            state = f"did NOT come out as it must at {', '.join(failed)}"
        else:
            state = (f"came out as it must at {', '.join(judged_ok) or 'no rung'}; NOT JUDGED at "
                     f"{', '.join(unjudged)}")
        lines.append(f"{kind} control ({section.get('arm')} against {section.get('against')}): {state}")
    if doc.get("alpha_text"):
        lines.append(str(doc["alpha_text"]))
    return lines + [f"  {line}" for line in doc.get("lines", [])]


def _pilot_report(pilot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The plan's pilot section as the report shows it: what was planned and what it derived, without the carried
    optimizer (in the plan's rows already)."""
    if pilot is None:
        return None
    return {k: v for k, v in pilot.items() if k != "optimizer"}
