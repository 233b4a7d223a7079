"""A transfer's answers as documents: the whole analysis as JSON-able data, the target section of the report,
and the export of the transferred hyperparameters for a rung, with the evidence behind each value."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from scaling import ScalingError, ScalingInputError
from scaling.export import Export, build_export
from scaling.fits import ScalingFit

from ._fits import FIT_METRICS, fit_docs_of, fits_or_errors_of, level_fits_of, rung_targets_of, targets_differ_of
from ._plan import _clean, _rung_shape
from ._record import ResultRecord
from ._savings import common_targets_of, savings_of, time_to_best_of
from ._targets import (
    claims_of,
    controls_of,
    diagnostics_of,
    fixed_arms_of,
    targets_of,
    tuning_budgets_of,
    undertrained_rungs_of,
)
from ._time_ratio import time_ratio_of
from ._verification import verification_doc_of

__all__ = ["analysis_of", "export_of", "target_summary_of"]


def analysis_of(result: ResultRecord, *, n_boot: int | None = None) -> dict[str, Any]:
    """Everything as JSON-able data: per-run time to best, the savings table, and fits per metric (params,
    intervals, flags, leave-one-rung-out errors) with the chosen pair, FD metric name and sample count."""
    ttb = time_to_best_of(result)
    report = targets_of(result)
    hits = report.pop("per_run")
    drops = {rid: d for e in report["rungs"].values() for rid, d in e["plateau"]["runs"].items()}
    runs = []
    for run in result.runs:
        t = ttb.get(run.run_id)
        hit = hits.get(run.run_id) or {}
        runs.append({**run.to_dict(), "parameters": result.parameters(run.rung),
                     "best_fd": t.best_fd if t else None, "best_step": t.best_step if t else None,
                     "time_to_best_s": t.best_time_s if t else None,
                     "robust_time_to_best_s": t.robust_time_s if t else None,
                     "endpoint_fd": t.endpoint_fd if t else None,
                     "volatile_steps": list(t.volatile_steps) if t else [],
                     "horizon": run.horizon, "fd_track": [[s, tt, f] for s, tt, f in run.track],
                     "target": hit.get("target"), "target_reached": hit.get("reached"),
                     "steps_to_target": hit.get("steps"), "time_to_target_s": hit.get("time_s"),
                     "plateau_drop": drops.get(run.run_id), "fd_samples": run.fd_samples,
                     # FD - FD-infinity at the last deciding checkpoint: how much of endpoint_fd is sample bias
                     "fd_bias_estimate": run.fd_bias[-1][1] if run.fd_bias else None})
    undertrained = [r for r, e in report["rungs"].items() if e["plateau"]["undertrained"]]
    fits = fit_docs_of(result, FIT_METRICS, n_boot, undertrained)
    metric_names = sorted({r.metric_name for r in result.runs if r.metric_name})
    samples = sorted({r.fd_samples for r in result.runs if r.fd_samples})
    return _clean({
        "transfer_id": result.transfer_id, "name": result.name, "state": result.state,
        # the controls first: whether the instrument saw what it must decides how everything after it reads
        "controls": controls_of(result),
        "chosen": result.chosen, "searched_arm": result.searched_arm, "source": result.source,
        "metric_name": metric_names[0] if len(metric_names) == 1 else metric_names,
        "fd_samples": samples[0] if len(samples) == 1 else samples,
        "horizon": result.plan.horizon, "eval_steps": result.plan.eval_steps, "seeds": result.plan.seeds,
        "rungs": {r: result.parameters(r) for r in result.plan.rungs}, "size_basis": result.size_basis,
        "counts": result.counts, "runs": runs,
        "savings": {rung: {b: {"mean_pct": s.mean_pct, "std_pct": s.std_pct, "n": s.n,
                               "per_seed_pct": list(s.per_seed_pct), "seeds": list(s.seeds)}
                           for b, s in per.items()} for rung, per in savings_of(result).items()},
        "common_target": {rung: {str(seed): {"target_fd": c.target_fd, "reference_arm": c.reference_arm,
                                             "time_s": c.time_s, "step": c.step}
                                 for seed, c in per.items()} for rung, per in common_targets_of(result).items()},
        "targets": report, "horizons": result.plan.horizon_of(), "horizon_rule": result.plan.horizon_rule_doc(),
        "step_timing": result.step_timing, "undertrained_rungs": undertrained,
        "track_samples": sorted({r.track_samples for r in result.runs if r.track_samples}),
        "fits": fits,
        "time_ratio": time_ratio_of(result, n_boot=n_boot),
        "verification": verification_doc_of(result),
        "seeds_note": result.seeds_note,
        "rounds": result.plan.rounds,
        "extensions": result.plan.get("extensions"),
        "diagnostics": diagnostics_of(result),
        "fixed_arms": fixed_arms_of(result),
        "tuning_budgets": tuning_budgets_of(result),
        "claims": claims_of(result),
        "lr_brackets": {"multiples": result.plan.lr_brackets, "choices": result.lr_choices,
                        "runs": [r.to_dict() for r in result.tuning_runs]} if result.plan.lr_brackets else None,
    })


def target_summary_of(result: ResultRecord, *, n_boot: int | None = None) -> dict[str, Any]:
    """The target report (without its per-run rows), the fits of steps and time to target (as in
    `analysis()`), the undertrained rungs and the searched arm: what the HTML report's target section shows."""
    report = targets_of(result)
    report.pop("per_run")
    fits = fit_docs_of(result, ("steps_to_target", "time_to_target"), n_boot, undertrained_rungs_of(result))
    return _clean({"report": report, "fits": fits, "undertrained_rungs": undertrained_rungs_of(result),
                   "searched_arm": result.searched_arm})


def export_of(result: ResultRecord, target_rung: str, *, lr_rules: Mapping[str, str] | None = None,
           allow_losing: bool = False) -> Export:
    """The transferred hyperparameters for `target_rung` (any rung: verified only where this transfer ran
    that arm there and it succeeded), with the rule behind each value and provenance. Refused when the
    source sweep's choice is worse than a baseline with confidence, unless `allow_losing`."""
    from scaling.export import refuse_losing_choice
    from trials.models import check_rung

    check_rung(target_rung)
    refuse_losing_choice(list(result.source.get("warnings") or []), allow_losing)
    base = result.plan.base
    if base is None:
        raise ScalingInputError(f"transfer {result.transfer_id}'s plan names no base rung: nothing to export")
    rules = {r.arm: r.lr_rule for r in result.plan.runs if r.lr_rule}
    rules.update(lr_rules or {})
    verified = {arm: any(r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED" for r in result.runs)
                for arm in result.plan.arms}
    ttb = time_to_best_of(result)
    evidence: dict[str, dict[str, Any]] = {}
    for arm in result.plan.arms:
        at = [r for r in result.runs if r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED"]
        ev: dict[str, Any] = {"sweep": result.source_objectives.get(arm, {})}
        if at:
            ev["transfer_run_ids"] = [r.run_id for r in at]
            ev["best_fd_mean"] = statistics.fmean(ttb[r.run_id].best_fd for r in at if r.run_id in ttb)
            ev["time_to_best_s_mean"] = statistics.fmean(ttb[r.run_id].best_time_s for r in at
                                                         if r.run_id in ttb)
        evidence[arm] = _clean(ev)
    report = targets_of(result)
    at_rung = report["rungs"].get(target_rung)
    if at_rung is not None:  # against the declared target, where this transfer ran the rung
        for arm in result.plan.arms:
            a = at_rung["arms"].get(arm, {})
            evidence[arm] = {**evidence[arm], **_clean({
                "target": at_rung["target"], "fraction_reached": a.get("fraction_reached"),
                "steps_to_target_mean": (a.get("steps_to_target") or {}).get("mean"),
                "time_to_target_s_mean": (a.get("time_to_target_s") or {}).get("mean"),
                "undertrained_rung": at_rung["plateau"]["undertrained"]})}
    under = undertrained_rungs_of(result)
    # The fitted curve at the target, or why there is none, each at the target level it is read at.
    for metric, (fit, level) in target_fits_of(result, target_rung).items():
        if isinstance(fit, ScalingError):
            for arm in result.plan.arms:
                evidence[arm] = {**evidence[arm], f"{metric}_fit": {"error": str(fit), **level}}
            continue
        flags = sorted({*fit.flags, *(["undertrained"] if under else [])})
        for arm in result.plan.arms:
            doc: dict[str, Any] = {"form": fit.form, "flags": flags, "loss_function": fit.loss_function,
                                   "loo_error": fit.loo_error.get(arm),
                                   "loo_baseline_error": fit.loo_baseline_error.get(arm), **level}
            try:
                point, lo, hi = fit.predict(arm, result.parameters(target_rung))
                doc.update(point=point, lo=lo, hi=hi, level=fit.level)
            except ScalingError as exc:  # not fitted for this arm, or beyond the extrapolation limit
                doc["refused"] = str(exc)
            evidence[arm] = {**evidence[arm], f"{metric}_fit": _clean(doc)}
    shas = sorted({r.git_sha for r in result.runs if r.git_sha})
    return build_export(
        {a: base.optimizers[a] for a in result.plan.arms},
        base_width=int(base.width),
        target_width=_rung_shape(target_rung)[0],
        target={"rung": target_rung, "parameters": result.parameters(target_rung), "size_basis": result.size_basis,
                "base_rung": base.rung,
                "horizon": result.plan.horizon},
        lr_rules=rules,
        verified=verified,
        evidence=evidence,
        weight_decay_rule=result.plan.weight_decay_rule or "keep_wd",  # older transfers kept wd
        provenance={**result.source, "verification": verification_doc_of(result), "transfer_id": result.transfer_id,
                    "transfer_parent_run_id": result.parent_run_id,
                    "code_version": shas[0] if len(shas) == 1 else shas,
                    "target_rule": report["rule"], "target_rule_text": report["rule_text"],
                    "horizon_rule": result.plan.horizon_rule_doc(), "horizons": result.plan.horizon_of()},
    )


def target_fits_of(result: ResultRecord, rung: str) -> dict[str, tuple[ScalingFit | ScalingError, dict[str, Any]]]:
    """metric -> (the steps- and time-to-target fit the export reads `rung` off, or why there is none; the target
    level it is at, `target_level` and `target_level_of`). Where the rungs' declared targets differ, steps to
    target is read at `rung`'s own level (its per-level fit), not the headline level the analysis leads with:
    a team training at `rung` aims at that rung's target. A rung this transfer declared no target for (one it
    did not run) gets the headline level, said so; time to target is not fitted across targets then."""
    fits = fits_or_errors_of(result, ("steps_to_target", "time_to_target"))
    declared = {r: v for r, v in rung_targets_of(result).items() if v is not None}
    if not declared:
        return {metric: (fit, {}) for metric, fit in fits.items()}
    if not targets_differ_of(result):
        level = {"target_level": next(iter(declared.values())), "target_level_of": "every rung's target"}
        return {metric: (fit, level) for metric, fit in fits.items()}
    try:
        levels = level_fits_of(result)
    except ScalingError as exc:
        return {**{m: (f, {}) for m, f in fits.items()}, "steps_to_target": (exc, {})}
    if rung in declared:  # the declared level it belongs to (levels within rounding of each other are one)
        own = min(levels.levels, key=lambda lv: abs(lv - declared[rung]))
        level = {"target_level": own, "target_level_of": f"{rung}'s own target"}
    else:
        own = levels.headline
        level = {"target_level": own, "target_level_of": (
            f"the headline level ({levels.headline_rule}): {rung} declared no target in this transfer")}
    at = levels.at(own)
    steps: ScalingFit | ScalingError = at.fit if at.fit is not None else ScalingInputError(
        f"no steps_to_target fit at {level['target_level_of']}, {own:g}: {at.error}")
    return {"steps_to_target": (steps, level), "time_to_target": (fits["time_to_target"], {})}
