"""A transfer's scaling fits: each metric against parameter count (`scaling.fit_scaling`), fitted once per
result and form, predictions from them, and the fits as documents (marked where fitted over undertrained rungs).
Where the rungs' declared targets differ, steps to target is fitted per target level (`scaling.fits.fit_target_levels`:
every run's crossing of each level, censored runs kept) and the headline level's first-crossing fit is the
`steps_to_target` fit; time to target is not fitted across rungs then.

Metric `alignment` fits the alignment score's error, 1 - alignment (the share of samples whose every attribute matches
the caption, at each run's last eval step): lower is better and positive, as FD, so it takes FD's form. Only runs
scored by an extractor that reads captions (scenes-cnn) carry alignment; on others the metric is refused, naming the
metrics those runs can fit (`fit_metrics_of`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scaling import ScalingError, ScalingInputError
from scaling.fits import ScalingFit, TargetLevelFits, fit_scaling, fit_target_levels, target_levels

from ._record import ResultRecord, memo
from ._savings import succeeded_of
from ._targets import targets_of, undertrained_rungs_of

__all__ = ["ALIGNMENT_FIT", "FIT_METRICS", "fit_data_of", "fit_docs_of", "fit_metrics_of", "fits_of",
           "fits_or_errors_of", "level_fits_of", "predict_of", "rung_targets_of", "targets_differ_of",
           "undertrained_fitted_of"]


FIT_METRICS = ("time_to_best", "best_fd", "endpoint_fd", "steps_to_target", "time_to_target", "alignment")
# What the `alignment` fit is fitted on, said wherever the fit is shown.
ALIGNMENT_FIT = "1 - alignment (the all-correct share at each run's last eval step; lower is better)"
# Fitted against size like time to best (A*N^-alpha, exponent of either sign): they grow with size at a fixed horizon.
_COST_METRICS = ("time_to_best", "steps_to_target", "time_to_target")
# Read against the declared target: their fits say whether the rungs' targets differ.
_TARGET_METRICS = ("steps_to_target", "time_to_target")
# Time to best grows with model size at a fixed horizon: the fit must allow a negative exponent.
_TIME_ALPHA_BOUNDS = (-3.0, 3.0)


def fit_data_of(result: ResultRecord, metric: str = "time_to_best") -> dict[str, tuple[list[float], list[float]]]:
    """Arm -> (sizes, values): one entry per succeeded run (sizes repeat over seeds), arms with fewer than two
    rungs left out. Steps and time to target count only runs that reached the target; where the rungs' targets
    differ, steps to target is the headline level's restricted mean per arm and rung (`level_fits`) and time to
    target has no data."""
    if metric not in FIT_METRICS:
        raise ScalingInputError(f"unknown metric {metric!r}; allowed: {list(FIT_METRICS)}")
    _check_alignment(result, metric)
    if metric in ("steps_to_target", "time_to_target") and targets_differ_of(result):
        if metric == "time_to_target":
            return {}  # not fitted across targets of different difficulty (`fits` says why)
        try:
            return level_fits_of(result).at().data.data  # the headline level, first crossing: what `fits` fits
        except ScalingError:
            return {}
    data: dict[str, tuple[list[float], list[float]]] = {}
    hits = targets_of(result)["per_run"] if metric in ("steps_to_target", "time_to_target") else {}
    for run, ttb in succeeded_of(result):
        if run.arm not in result.plan.arms:
            continue  # a control arm: judged in the controls section, never fitted beside the arms
        if hits:
            hit = hits.get(run.run_id)
            value = math.nan if not hit or not hit["reached"] else (
                hit["steps"] if metric == "steps_to_target" else hit["time_s"])
        elif metric == "alignment":
            share = run.endpoint_alignment
            value = math.nan if share is None else 1.0 - share  # a run with every sample right (0) is left out
        else:
            value = {"time_to_best": ttb.best_time_s, "best_fd": ttb.best_fd,
                     "endpoint_fd": ttb.endpoint_fd}.get(metric, math.nan)
        if not (math.isfinite(value) and value > 0):
            continue
        sizes, values = data.setdefault(run.arm, ([], []))
        sizes.append(float(result.parameters(run.rung)))
        values.append(float(value))
    return {arm: d for arm, d in data.items() if len(set(d[0])) >= 2}


def fit_metrics_of(result: ResultRecord) -> tuple[str, ...]:
    """The metrics these runs can be fitted on: `FIT_METRICS`, without `alignment` where no run carries it."""
    carried = any(run.alignment for run in result.runs)
    return tuple(m for m in FIT_METRICS if m != "alignment" or carried)


def _check_alignment(result: ResultRecord, metric: str) -> None:
    if metric == "alignment" and "alignment" not in fit_metrics_of(result):
        raise ScalingInputError(
            "metric 'alignment': no run of this transfer carries an alignment score (only an extractor that reads "
            f"captions logs one: eval.extractor scenes-cnn on data scenes); allowed: {list(fit_metrics_of(result))}")


def fits_of(result: ResultRecord, metric: str = "time_to_best", form: str | None = None, share: Sequence[str] = (),
        **kwargs: Any) -> ScalingFit:
    """`fit_scaling` over the arms for `metric` (time_to_best | best_fd | endpoint_fd | alignment, ...) against
    parameter count. Default form: `A*N^-alpha` for time to best (with alpha in (-3, 3): it grows with size),
    `E+A*N^-alpha` for FD and for alignment's error (1 - alignment: `ALIGNMENT_FIT`). Other keyword arguments go to
    `fit_scaling` (n_boot, seed, allow_extrapolation, ...)."""
    _check_alignment(result, metric)
    share_t = (share,) if isinstance(share, str) else tuple(share)
    if metric in ("steps_to_target", "time_to_target") and targets_differ_of(result):
        if metric == "time_to_target":
            raise ScalingInputError(
                f"the rungs' targets differ ({rung_targets_of(result)}): time to target is not fitted across "
                "targets of different difficulty; steps to target is fitted per level (fits.steps_to_target."
                "levels)")
        level = level_fits_of(result, form=form, share=share_t, **kwargs).at()
        if level.fit is None:
            raise ScalingInputError(f"no steps_to_target fit at the headline level {level.level:g}: {level.error}")
        return level.fit
    data = fit_data_of(result, metric)
    if not data:
        raise ScalingInputError(f"no arm has succeeded runs at two rungs or more to fit {metric} on")
    form = form or ("A*N^-alpha" if metric in _COST_METRICS else "E+A*N^-alpha")
    if metric in _COST_METRICS:
        kwargs.setdefault("alpha_bounds", _TIME_ALPHA_BOUNDS)
    key = (metric, form, share_t, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    if key not in result._fits:
        result._fits[key] = fit_scaling(data, form=form, share=share_t, **kwargs)
    return result._fits[key]


def rung_targets_of(result: ResultRecord) -> dict[str, float | None]:
    """Rung -> the target it declared (the target report's value; None where it has none)."""
    return {rung: entry.get("target") for rung, entry in targets_of(result)["rungs"].items()}


def targets_differ_of(result: ResultRecord) -> bool:
    """Whether the rungs that declared a target declared more than one level."""
    declared = {r: v for r, v in rung_targets_of(result).items() if v is not None}
    return bool(declared) and len(target_levels(declared)) > 1


def level_fits_of(result: ResultRecord, form: str | None = None, share: Sequence[str] = (),
               **kwargs: Any) -> TargetLevelFits:
    """Steps to target fitted per declared level across rungs (`scaling.fits.fit_target_levels`, the arms
    only, every finished run's crossing of each level, censoring kept), at the first and sustained crossing;
    other keyword arguments go to `fit_scaling`. Fitted once per result and settings."""
    kwargs.setdefault("alpha_bounds", _TIME_ALPHA_BOUNDS)
    share_t = (share,) if isinstance(share, str) else tuple(share)
    key = (form, share_t, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
    level_fits: dict[tuple[Any, ...], TargetLevelFits] = memo(result, "level_fits", dict)
    if key not in level_fits:
        declared = {r: v for r, v in rung_targets_of(result).items() if v is not None}
        level_fits[key] = fit_target_levels(result.runs, declared, arms=result.plan.arms,
                                                  form=form or "A*N^-alpha", share=share_t, **kwargs)
    return level_fits[key]


def predict_of(result: ResultRecord, arm: str, size: float | int | str, metric: str = "time_to_best",
            **kwargs: Any) -> tuple[float, float, float]:
    """(point, lo, hi) of `metric` for `arm` at `size` (a parameter count or a rung name), from `fits(metric)`;
    raises `ExtrapolationRefused` with the reason beyond the fit's limit."""
    n = result.parameters(size) if isinstance(size, str) else size
    allow = kwargs.pop("allow_extrapolation", None)
    return fits_of(result, metric, **kwargs).predict(arm, n, allow_extrapolation=allow)


def fits_or_errors_of(result: ResultRecord, metrics: Sequence[str],
                   n_boot: int | None = None) -> dict[str, ScalingFit | ScalingError]:
    """metric -> its default fit, or the error that stopped it: the one loop every document of the fits
    (`analysis`, `target_summary`, `export`) goes through."""
    extra: dict[str, Any] = {} if n_boot is None else {"n_boot": n_boot}
    out: dict[str, ScalingFit | ScalingError] = {}
    for metric in metrics:
        try:
            out[metric] = fits_of(result, metric, **extra)
        except ScalingError as exc:
            out[metric] = exc
    return out


def fit_docs_of(result: ResultRecord, metrics: Sequence[str], n_boot: int | None,
             undertrained: Sequence[str]) -> dict[str, Any]:
    """metric -> its fit as a document, marked with the undertrained rungs it was fitted over (or the error
    that stopped it): what `analysis()` and `target_summary()` report."""
    docs: dict[str, dict[str, Any]] = {
        metric: {"error": str(fit)} if isinstance(fit, ScalingError)
        else _mark_undertrained(_fit_doc(fit), undertrained_fitted_of(result, fit, undertrained))
        for metric, fit in fits_or_errors_of(result, metrics, n_boot).items()}
    if "alignment" in docs:
        docs["alignment"]["fitted_on"] = ALIGNMENT_FIT
    if "steps_to_target" in docs and targets_differ_of(result):
        extra: dict[str, Any] = {} if n_boot is None else {"n_boot": n_boot}
        try:
            levels = level_fits_of(result, **extra)
        except ScalingError as exc:
            docs["steps_to_target"]["levels"] = {"error": str(exc)}
        else:
            def doc_of(fit: ScalingFit) -> dict[str, Any]:
                return _mark_undertrained(_fit_doc(fit), undertrained_fitted_of(result, fit, undertrained))

            docs["steps_to_target"].update(target_level=levels.headline, endpoint="first",
                                           levels=levels.to_dict(fit_doc=doc_of))
    report = targets_of(result)
    for metric in set(docs) & set(_TARGET_METRICS):
        _mark_targets(docs[metric], report["target_values"], report["targets_differ"])
    return docs


def undertrained_fitted_of(result: ResultRecord, fit: ScalingFit,
                        undertrained: Sequence[str] | None = None) -> list[str]:
    """The undertrained rungs (default: `undertrained_rungs()`) among the sizes `fit` was fitted on."""
    rungs = undertrained_rungs_of(result) if undertrained is None else undertrained
    fitted = {s for a in fit.arms for s in fit.sizes[a]}
    return [r for r in rungs if float(result.parameters(r)) in fitted]


def _mark_targets(doc: dict[str, Any], values: Mapping[str, float | None], differ: bool) -> None:
    """A steps- or time-to-target fit's document with the target at each rung (`target_values`) and whether they
    differ (`targets_differ`, then also a flag): an exponent fitted across rungs whose targets differ mixes model
    size with how hard each rung's target was (one target per study: target rule `pilot`)."""
    doc["target_values"] = dict(values)
    doc["targets_differ"] = differ
    # A fit at one declared level (`target_level`: the per-level fits) does not mix targets: no flag.
    if differ and "flags" in doc and "target_level" not in doc:
        doc["flags"] = sorted({*doc["flags"], "targets_differ"})
        doc["flag_details"] = {**doc["flag_details"], "targets_differ": (
            f"fitted across rungs whose targets differ ({dict(values)}): the exponent mixes model size with target "
            "difficulty; read it per target level, or declare one target for the study (target rule 'pilot')")}


def _mark_undertrained(doc: dict[str, Any], over: Sequence[str]) -> dict[str, Any]:
    """`doc` (a `_fit_doc`) and its alternative flagged `undertrained` when fitted over rungs in `over`: a size fit
    over rungs still improving fast mixes model size with training length, whichever form it takes."""
    if over:
        doc["flags"] = sorted({*doc["flags"], "undertrained"})
        doc["flag_details"]["undertrained"] = (
            f"fitted over rungs whose runs were still improving fast at their end: {list(over)}; the fit mixes "
            "model size with under-training")
        if doc.get("alternative"):
            _mark_undertrained(doc["alternative"], over)
    return doc


def _fit_doc(fit: ScalingFit) -> dict[str, Any]:
    doc: dict[str, Any] = {
        # A copy: marking a document (`_mark_undertrained`) must not change the fit every other document shares.
        "form": fit.form, "share": list(fit.share), "flags": sorted(fit.flags), "flag_details": dict(fit.flag_details),
        "bootstrap": fit.bootstrap, "n_boot_ok": fit.n_boot_ok, "level": fit.level, "converged": fit.converged,
        "notes": list(fit.notes), "suggestion": fit.suggestion,
        "loss_function": fit.loss_function, "loss_reason": fit.loss_reason,
        "arms": {arm: {"params": fit.params[arm], "intervals": {p: list(v) for p, v in fit.intervals[arm].items()},
                       "loo_error": fit.loo_error.get(arm), "loo_baseline_error": fit.loo_baseline_error.get(arm),
                       "sizes": list(fit.sizes[arm])} for arm in fit.arms},
    }
    if fit.alternative is not None:
        doc["alternative"] = _fit_doc(fit.alternative)
    return doc
