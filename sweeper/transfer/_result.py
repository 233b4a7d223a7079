"""A transfer's results, analysed: time to best per run, savings of the searched arm against each baseline per
rung, the target report, scaling fits per metric, predictions and exports (`TransferResult`), over runs already
read (`TransferRun`) and the transfer's typed plan (`TransferPlan`). No Ray, no MLflow: every number is one of
`scaling`'s pure functions over those runs.

Running a transfer, its status, its cancel and reading its runs from MLflow are the transfer job beside it
(`_job`).
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict

from scaling import (
    Checkpoints,
    CommonTarget,
    Export,
    PlateauSpec,
    Savings,
    ScalingError,
    ScalingFit,
    ScalingInputError,
    TargetSpec,
    TimeToBest,
    TransferRun,
    build_export,
    fit_scaling,
    rung_report,
    savings,
    target_table,
    time_to_best,
    time_to_common_target,
)

from ._verification import verification_line, verification_verdict

__all__ = ["FIT_METRICS", "PlanBase", "PlanRow", "TransferPlan", "TransferResult", "size_basis"]

FIT_METRICS = ("time_to_best", "best_fd", "endpoint_fd", "steps_to_target", "time_to_target")
# Fitted against size like time to best (A*N^-alpha, exponent of either sign): they grow with size at a fixed horizon.
_COST_METRICS = ("time_to_best", "steps_to_target", "time_to_target")
# Time to best grows with model size at a fixed horizon: the fit must allow a negative exponent.
_TIME_ALPHA_BOUNDS = (-3.0, 3.0)


# ----------------------------------------------------------------------------------------------------------
# The plan


class _Keyed(BaseModel):
    """Read by attribute; `plan["rungs"]` and `plan.get("horizons")` still work for readers written against the
    plan as a dict (older callers, and `transfer.json` as it is stored). A key the plan was built without is
    missing, as it was from the dict: plans of older transfers lack the sections added since."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def __getitem__(self, key: str) -> Any:
        if key in self.model_fields_set or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def to_dict(self) -> dict[str, Any]:
        """As stored in `transfer.json`: the keys the plan was built with, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True)


_MISSING = object()


class PlanRow(_Keyed):
    """One (rung, arm) of a transfer: its size and the lr and weight decay carried to it, by which rule."""

    rung: str
    arm: str = ""
    width: int | None = None
    parameters: int | None = None
    lr: float | None = None
    lr_rule: str | None = None
    lr_base: float | None = None  # the arm's lr at the sweep's rung
    weight_decay: float | None = None
    weight_decay_rule: str | None = None


class PlanBase(_Keyed):
    """The sweep's rung, where the carried values come from: its width, size and every arm's optimizer there."""

    rung: str
    width: int
    parameters: int | None = None
    optimizers: dict[str, dict[str, Any]]


class TransferPlan(_Keyed):
    """What a transfer runs, decided before any run: rungs, arms, seeds, horizons and eval steps, the target and
    plateau rules, the chosen pair and the carried lr per (rung, arm). Optional fields are None in plans of
    transfers started before they existed."""

    rungs: list[str]
    horizon: int  # the first rung's (the sweep's own rung runs there at this horizon)
    seeds: list[int]
    arms: list[str]
    searched_arm: str
    chosen: dict[str, Any]
    runs: list[PlanRow] = []
    source_horizon: int | None = None
    eval_steps: list[int] = []
    horizons: dict[str, int] | None = None  # per rung; None: every rung at `horizon`
    eval_steps_by_rung: dict[str, list[int]] | None = None
    horizon_rule: dict[str, Any] | None = None
    target: dict[str, Any] | None = None
    target_text: str | None = None
    plateau: dict[str, Any] | None = None
    weight_decay_rule: str | None = None
    size_basis: dict[str, Any] | None = None
    base: PlanBase | None = None
    verification: dict[str, Any] | None = None

    def horizon_of(self) -> dict[str, int]:
        """Steps per rung (every rung at `horizon` in plans from before per-rung horizons)."""
        return dict(self.horizons) if self.horizons else {r: self.horizon for r in self.rungs}

    def horizon_rule_doc(self) -> dict[str, Any]:
        return dict(self.horizon_rule) if self.horizon_rule else {"mode": "fixed"}


# ----------------------------------------------------------------------------------------------------------
# Sizes


def size_basis(trial: Mapping[str, Any] | None) -> tuple[dict[str, int], str]:
    """(denoiser overrides, description) of a study's size basis: a rung's parameters counted as the study's
    trials build its denoiser (the text encoder's context and pooled widths, the image size and channels), the
    same count every run logs as `model.parameters`. The sweep export, the transfer's plan, fits and predictions
    all count sizes this way, so one study never mixes two counts of one rung."""
    from trials import TrialConfig
    from trials.data import DATASETS

    cfg = TrialConfig.model_validate({**dict(trial or {}), "rung": "cpu-xs"})  # any rung: these fields are shared
    if cfg.text_encoder == "minilm":
        from trials.text import MiniLMEncoder

        context, pooled = int(MiniLMEncoder.context_dim), int(MiniLMEncoder.pooled_dim)
    else:
        from trials.text import LearnedTextEncoder

        encoder = LearnedTextEncoder(max_length=cfg.text_max_length)
        context, pooled = int(encoder.context_dim), int(encoder.pooled_dim)
    # The dataset class's channel count (3: RGB); building the dataset itself would cost seconds.
    factory = DATASETS.factory(cfg.data.name) if cfg.data.name in DATASETS else None
    channels = int(getattr(factory, "channels", 3))
    overrides = {"image_size": cfg.data.image_size, "in_channels": channels, "context_dim": context,
                 "pooled_dim": pooled}
    text = (f"trainable denoiser parameters as this study's trials build them ({cfg.text_encoder} text encoder: "
            f"context {context}, pooled {pooled}; {cfg.data.image_size}px images, {channels} channels); frozen "
            "text encoders are not counted")
    return overrides, text


def _rung_shape(rung: str, trial: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """(width, parameters) of a rung's denoiser on the study's size basis (`size_basis(trial)`), counted on the
    meta device (no memory, any size)."""
    return _count(rung, json.dumps(dict(trial or {}), sort_keys=True))


@cache
def _count(rung: str, trial_json: str) -> tuple[int, int]:
    from trials.models import build_model, count_parameters, get_rung

    overrides, _ = size_basis(json.loads(trial_json))
    return get_rung(rung).config.width, count_parameters(build_model(rung, device="meta", **overrides)).total



def _clean(value: Any) -> Any:
    """JSON-able: NaN and inf -> None, tuples -> lists, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in (sorted(value) if isinstance(value, set) else value)]
    return value


@dataclass
class TransferResult:
    """A transfer's runs, read from MLflow, and what follows from them: time to best per run, savings of the
    searched arm against each baseline per rung, scaling fits per metric, predictions and exports."""

    transfer_id: str
    name: str
    state: str
    workdir: str
    tracking_uri: str
    experiment: str
    parent_run_id: str | None
    source: dict[str, Any]
    plan: TransferPlan  # a mapping in the plan's stored form is validated into one
    runs: list[TransferRun]
    counts: dict[str, int] = field(default_factory=dict)
    source_objectives: dict[str, Any] = field(default_factory=dict)
    verification_runs: list[TransferRun] = field(default_factory=list)  # the bracket's, kept out of the analysis
    step_timing: dict[str, Any] = field(default_factory=dict)  # per-step time per rung and arm, in isolation
    _fits: dict[tuple[Any, ...], ScalingFit] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.plan, TransferPlan):
            self.plan = TransferPlan.model_validate(dict(self.plan))

    @property
    def searched_arm(self) -> str:
        return self.plan.searched_arm

    @property
    def chosen(self) -> dict[str, Any]:
        return dict(self.plan.chosen)

    def parameters(self, rung: str) -> int:
        """A rung's parameter count: as the runs logged it (tag `model.parameters`), else the plan's."""
        for run in self.runs:
            if run.rung == rung and run.parameters:
                return run.parameters
        for row in self.plan.runs:
            if row.rung == rung and row.parameters is not None:
                return int(row.parameters)
        # A rung this transfer did not run: counted on the study's basis (a transfer planned before the basis was
        # recorded falls back to the rung's default model).
        return _rung_shape(rung, (self.plan.size_basis or {}).get("trial"))[1]

    @property
    def size_basis(self) -> str:
        """What `parameters` counts, in words (one basis per study)."""
        basis = self.plan.size_basis or {}
        return str(basis.get("text") or "parameters of each rung's default model (a transfer planned before the "
                   "size basis was recorded)")

    def time_to_best(self, **kwargs: Any) -> dict[str, TimeToBest]:
        """Run id -> `time_to_best` of its checkpoints, for runs that succeeded or diverged part-way (keyword
        arguments go to `time_to_best`: tol, volatility_tol)."""
        out: dict[str, TimeToBest] = {}
        for run in self.runs:
            if run.state not in ("SUCCEEDED", "DIVERGED") or not run.checkpoints:
                continue
            if not any(math.isfinite(f) for _, _, f in run.checkpoints):
                continue
            steps, times, fds = zip(*run.checkpoints, strict=True)
            try:
                out[run.run_id] = time_to_best(steps, times, fds, **kwargs)
            except ScalingInputError:
                if kwargs:
                    raise  # the caller's tolerances are wrong, not the run
                continue  # records that cannot be read as checkpoints (e.g. a clock reset): left out
        return out

    def _succeeded(self) -> list[tuple[TransferRun, TimeToBest]]:
        ttb = self.time_to_best()
        return [(r, ttb[r.run_id]) for r in self.runs if r.state == "SUCCEEDED" and r.run_id in ttb]

    def savings(self, *, robust: bool = False) -> dict[str, dict[str, Savings]]:
        """Rung -> baseline arm -> time to best saved by the searched arm, in % of the baseline's (positive:
        faster), seeds paired, with the seed spread. Rungs or baselines without a common seed are left out."""
        by_rung: dict[str, dict[str, dict[int | str, float | TimeToBest]]] = {}
        for run, ttb in self._succeeded():
            by_rung.setdefault(run.rung, {}).setdefault(run.arm, {})[run.seed] = ttb
        out: dict[str, dict[str, Savings]] = {}
        for rung in self.plan.rungs:
            times = by_rung.get(rung, {})
            if self.searched_arm not in times:
                continue
            for base in (a for a in self.plan.arms if a != self.searched_arm and a in times):
                try:
                    s = savings({self.searched_arm: times[self.searched_arm], base: times[base]},
                                periodic=self.searched_arm, baselines=[base], robust=robust)
                except ScalingInputError:
                    continue  # no seed in common
                out.setdefault(rung, {})[base] = s[base]
        return out

    def common_targets(self) -> dict[str, dict[int, CommonTarget]]:
        """Rung -> seed -> each arm's time to reach the worst arm's smoothed best FD x 1.02 (time_to_common_target),
        for seeds where at least two arms succeeded."""
        by: dict[str, dict[int, dict[str, Checkpoints]]] = {}
        for run in self.runs:
            if run.state == "SUCCEEDED" and run.checkpoints:
                by.setdefault(run.rung, {}).setdefault(run.seed, {})[run.arm] = Checkpoints.from_rows(run.checkpoints)
        out: dict[str, dict[int, CommonTarget]] = {}
        for rung, seeds in by.items():
            for seed, arms in seeds.items():
                if len(arms) >= 2:
                    with contextlib.suppress(ScalingInputError):
                        out.setdefault(rung, {})[seed] = time_to_common_target(arms)
        return out

    def targets(self) -> dict[str, Any]:
        """The per-rung report against the target declared in the spec (`scaling.rung_report`): target
        value and its source, fraction of seeds reaching it per arm, steps and time to target, the paired
        steps-to-target ratio, the per-step time ratio measured in isolation and the time saving, time to best
        (the paper's definition) beside them, and the plateau flag per rung. Computed once per result (the
        analysis, the export and the fits each ask for it); callers get their own top-level copy."""
        return dict(self._target_report)

    @cached_property
    def _target_report(self) -> dict[str, Any]:
        ttb = {rid: t.best_time_s for rid, t in self.time_to_best().items()}
        plan = self.plan
        # Transfers planned before targets existed get the default rule, applied now (and said so in the text).
        return rung_report(
            self.runs, rungs=plan.rungs, arms=plan.arms, searched_arm=self.searched_arm,
            seeds=plan.seeds, target=TargetSpec.model_validate(plan.target or {}),
            step_times=self.step_timing.get("seconds_per_step"), time_to_best=ttb,
            step_time_runs=self.step_timing.get("seconds_per_step_runs"),
            plateau_spec=PlateauSpec.model_validate(plan.plateau or {}),
            horizons=plan.horizon_of())

    def target_summary(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """The target report (without its per-run rows), the fits of steps and time to target (as in
        `analysis()`), the undertrained rungs and the searched arm: what the HTML report's target section shows."""
        report = self.targets()
        report.pop("per_run")
        fits = self._fit_docs(("steps_to_target", "time_to_target"), n_boot, self.undertrained_rungs())
        return _clean({"report": report, "fits": fits, "undertrained_rungs": self.undertrained_rungs(),
                       "searched_arm": self.searched_arm})

    def _fit_docs(self, metrics: Sequence[str], n_boot: int | None, undertrained: Sequence[str]) -> dict[str, Any]:
        """metric -> its fit as a document, marked with the undertrained rungs it was fitted over (or the error
        that stopped it): what `analysis()` and `target_summary()` report."""
        extra: dict[str, Any] = {} if n_boot is None else {"n_boot": n_boot}
        fits: dict[str, Any] = {}
        for metric in metrics:
            try:
                fit = self.fits(metric, **extra)
            except ScalingError as exc:
                fits[metric] = {"error": str(exc)}
                continue
            fits[metric] = _mark_undertrained(_fit_doc(fit), self.undertrained_fitted(fit, undertrained))
        return fits

    def undertrained_fitted(self, fit: ScalingFit, undertrained: Sequence[str] | None = None) -> list[str]:
        """The undertrained rungs (default: `undertrained_rungs()`) among the sizes `fit` was fitted on."""
        rungs = self.undertrained_rungs() if undertrained is None else undertrained
        fitted = {s for a in fit.arms for s in fit.sizes[a]}
        return [r for r in rungs if float(self.parameters(r)) in fitted]

    def undertrained_rungs(self) -> list[str]:
        """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
        return [r for r, e in self.targets()["rungs"].items() if e["plateau"]["undertrained"]]

    def fit_data(self, metric: str = "time_to_best") -> dict[str, tuple[list[float], list[float]]]:
        """Arm -> (sizes, values): one entry per succeeded run (sizes repeat over seeds), arms with fewer than two
        rungs left out. Steps and time to target count only runs that reached the target."""
        if metric not in FIT_METRICS:
            raise ScalingInputError(f"unknown metric {metric!r}; allowed: {list(FIT_METRICS)}")
        data: dict[str, tuple[list[float], list[float]]] = {}
        hits = self.targets()["per_run"] if metric in ("steps_to_target", "time_to_target") else {}
        for run, ttb in self._succeeded():
            if hits:
                hit = hits.get(run.run_id)
                value = math.nan if not hit or not hit["reached"] else (
                    hit["steps"] if metric == "steps_to_target" else hit["time_s"])
            else:
                value = {"time_to_best": ttb.best_time_s, "best_fd": ttb.best_fd,
                         "endpoint_fd": ttb.endpoint_fd}.get(metric, math.nan)
            if not (math.isfinite(value) and value > 0):
                continue
            sizes, values = data.setdefault(run.arm, ([], []))
            sizes.append(float(self.parameters(run.rung)))
            values.append(float(value))
        return {arm: d for arm, d in data.items() if len(set(d[0])) >= 2}

    def fits(self, metric: str = "time_to_best", form: str | None = None, share: Sequence[str] = (),
             **kwargs: Any) -> ScalingFit:
        """`fit_scaling` over the arms for `metric` (time_to_best | best_fd | endpoint_fd) against parameter
        count. Default form: `A*N^-alpha` for time to best (with alpha in (-3, 3): it grows with size), `E+A*N^-alpha`
        for FD. Other keyword arguments go to `fit_scaling` (n_boot, seed, allow_extrapolation, ...)."""
        data = self.fit_data(metric)
        if not data:
            raise ScalingInputError(f"no arm has succeeded runs at two rungs or more to fit {metric} on")
        form = form or ("A*N^-alpha" if metric in _COST_METRICS else "E+A*N^-alpha")
        if metric in _COST_METRICS:
            kwargs.setdefault("alpha_bounds", _TIME_ALPHA_BOUNDS)
        share_t = (share,) if isinstance(share, str) else tuple(share)
        key = (metric, form, share_t, tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        if key not in self._fits:
            self._fits[key] = fit_scaling(data, form=form, share=share_t, **kwargs)
        return self._fits[key]

    def predict(self, arm: str, size: float | int | str, metric: str = "time_to_best",
                **kwargs: Any) -> tuple[float, float, float]:
        """(point, lo, hi) of `metric` for `arm` at `size` (a parameter count or a rung name), from `fits(metric)`;
        raises `ExtrapolationRefused` with the reason beyond the fit's limit."""
        n = self.parameters(size) if isinstance(size, str) else size
        allow = kwargs.pop("allow_extrapolation", None)
        return self.fits(metric, **kwargs).predict(arm, n, allow_extrapolation=allow)

    def verification(self) -> Any:
        """The verification stage's verdict (`scaling.TransferVerdict`), or None without one or before its runs."""
        return verification_verdict({"verification": self.plan.verification},
                                    [*self.runs, *self.verification_runs], self.searched_arm, self.plan.seeds)

    def verification_doc(self) -> dict[str, Any] | None:
        """The verdict as data, {"verdict": "pending", ...} while its runs are missing, None without a stage."""
        plan = self.plan.verification
        if not plan:
            return None
        verdict = self.verification()
        if verdict is None:
            return _clean({"verdict": "pending", "rung": plan["rung"], "points": plan["points"],
                           "reason": "the bracket's runs have not all succeeded on a common seed yet"})
        return _clean({"rung": plan["rung"], "points": plan["points"], **verdict.to_dict()})

    def analysis(self, *, n_boot: int | None = None) -> dict[str, Any]:
        """Everything as JSON-able data: per-run time to best, the savings table, and fits per metric (params,
        intervals, flags, leave-one-rung-out errors) with the chosen pair, FD metric name and sample count."""
        ttb = self.time_to_best()
        report = self.targets()
        hits = report.pop("per_run")
        drops = {rid: d for e in report["rungs"].values() for rid, d in e["plateau"]["runs"].items()}
        runs = []
        for run in self.runs:
            t = ttb.get(run.run_id)
            hit = hits.get(run.run_id) or {}
            runs.append({**run.to_dict(), "parameters": self.parameters(run.rung),
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
        fits = self._fit_docs(FIT_METRICS, n_boot, undertrained)
        metric_names = sorted({r.metric_name for r in self.runs if r.metric_name})
        samples = sorted({r.fd_samples for r in self.runs if r.fd_samples})
        return _clean({
            "transfer_id": self.transfer_id, "name": self.name, "state": self.state,
            "chosen": self.chosen, "searched_arm": self.searched_arm, "source": self.source,
            "metric_name": metric_names[0] if len(metric_names) == 1 else metric_names,
            "fd_samples": samples[0] if len(samples) == 1 else samples,
            "horizon": self.plan.horizon, "eval_steps": self.plan.eval_steps, "seeds": self.plan.seeds,
            "rungs": {r: self.parameters(r) for r in self.plan.rungs}, "size_basis": self.size_basis,
            "counts": self.counts, "runs": runs,
            "savings": {rung: {b: {"mean_pct": s.mean_pct, "std_pct": s.std_pct, "n": s.n,
                                   "per_seed_pct": list(s.per_seed_pct), "seeds": list(s.seeds)}
                               for b, s in per.items()} for rung, per in self.savings().items()},
            "common_target": {rung: {str(seed): {"target_fd": c.target_fd, "reference_arm": c.reference_arm,
                                                 "time_s": c.time_s, "step": c.step}
                                     for seed, c in per.items()} for rung, per in self.common_targets().items()},
            "targets": report, "horizons": self.plan.horizon_of(), "horizon_rule": self.plan.horizon_rule_doc(),
            "step_timing": self.step_timing, "undertrained_rungs": undertrained,
            "track_samples": sorted({r.track_samples for r in self.runs if r.track_samples}),
            "fits": fits,
            "verification": self.verification_doc(),
        })

    def export(self, target_rung: str, *, lr_rules: Mapping[str, str] | None = None) -> Export:
        """The transferred hyperparameters for `target_rung` (any rung: verified only where this transfer ran
        that arm there and it succeeded), with the rule behind each value and provenance."""
        from trials.models import check_rung

        check_rung(target_rung)
        base = self.plan.base
        if base is None:
            raise ScalingInputError(f"transfer {self.transfer_id}'s plan names no base rung: nothing to export")
        rules = {r.arm: r.lr_rule for r in self.plan.runs if r.lr_rule}
        rules.update(lr_rules or {})
        verified = {arm: any(r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED" for r in self.runs)
                    for arm in self.plan.arms}
        ttb = self.time_to_best()
        evidence: dict[str, dict[str, Any]] = {}
        for arm in self.plan.arms:
            at = [r for r in self.runs if r.rung == target_rung and r.arm == arm and r.state == "SUCCEEDED"]
            ev: dict[str, Any] = {"sweep": self.source_objectives.get(arm, {})}
            if at:
                ev["transfer_run_ids"] = [r.run_id for r in at]
                ev["best_fd_mean"] = statistics.fmean(ttb[r.run_id].best_fd for r in at if r.run_id in ttb)
                ev["time_to_best_s_mean"] = statistics.fmean(ttb[r.run_id].best_time_s for r in at
                                                             if r.run_id in ttb)
            evidence[arm] = _clean(ev)
        report = self.targets()
        at_rung = report["rungs"].get(target_rung)
        if at_rung is not None:  # against the declared target, where this transfer ran the rung
            for arm in self.plan.arms:
                a = at_rung["arms"].get(arm, {})
                evidence[arm] = {**evidence[arm], **_clean({
                    "target": at_rung["target"], "fraction_reached": a.get("fraction_reached"),
                    "steps_to_target_mean": (a.get("steps_to_target") or {}).get("mean"),
                    "time_to_target_s_mean": (a.get("time_to_target_s") or {}).get("mean"),
                    "undertrained_rung": at_rung["plateau"]["undertrained"]})}
        under = self.undertrained_rungs()
        for metric in ("steps_to_target", "time_to_target"):  # the fitted curve at the target, or why there is none
            try:
                fit = self.fits(metric)
            except ScalingError as exc:
                for arm in self.plan.arms:
                    evidence[arm] = {**evidence[arm], f"{metric}_fit": {"error": str(exc)}}
                continue
            flags = sorted({*fit.flags, *(["undertrained"] if under else [])})
            for arm in self.plan.arms:
                doc: dict[str, Any] = {"form": fit.form, "flags": flags, "loss_function": fit.loss_function,
                                       "loo_error": fit.loo_error.get(arm),
                                       "loo_baseline_error": fit.loo_baseline_error.get(arm)}
                try:
                    point, lo, hi = fit.predict(arm, self.parameters(target_rung))
                    doc.update(point=point, lo=lo, hi=hi, level=fit.level)
                except ScalingError as exc:  # not fitted for this arm, or beyond the extrapolation limit
                    doc["refused"] = str(exc)
                evidence[arm] = {**evidence[arm], f"{metric}_fit": _clean(doc)}
        shas = sorted({r.git_sha for r in self.runs if r.git_sha})
        return build_export(
            {a: base.optimizers[a] for a in self.plan.arms},
            base_width=int(base.width),
            target_width=_rung_shape(target_rung)[0],
            target={"rung": target_rung, "parameters": self.parameters(target_rung), "size_basis": self.size_basis,
                    "base_rung": base.rung,
                    "horizon": self.plan.horizon},
            lr_rules=rules,
            verified=verified,
            evidence=evidence,
            weight_decay_rule=self.plan.weight_decay_rule or "keep_wd",  # older transfers kept wd
            provenance={**self.source, "verification": self.verification_doc(), "transfer_id": self.transfer_id,
                        "transfer_parent_run_id": self.parent_run_id,
                        "code_version": shas[0] if len(shas) == 1 else shas,
                        "target_rule": report["rule"], "target_rule_text": report["rule_text"],
                        "horizon_rule": self.plan.horizon_rule_doc(), "horizons": self.plan.horizon_of()},
        )

    def table(self) -> str:
        """Time to best per rung and arm (mean over seeds), and the savings, as text."""
        lines = [f"transfer {self.name} ({self.transfer_id}): {self.state}; chosen {self.chosen}, "
                 f"{self.plan.horizon} steps"]
        ttb = self.time_to_best()
        header = f"{'rung':<10} {'params':>10} {'arm':<9} {'seeds':>5} {'best FD':>9} {'time to best s':>15}"
        lines += [header, "-" * len(header)]
        for rung in self.plan.rungs:
            for arm in self.plan.arms:
                done = [ttb[r.run_id] for r in self.runs
                        if r.rung == rung and r.arm == arm and r.state == "SUCCEEDED" and r.run_id in ttb]
                fd = f"{statistics.fmean(t.best_fd for t in done):.4g}" if done else "-"
                tt = f"{statistics.fmean(t.best_time_s for t in done):.4g}" if done else "-"
                lines.append(f"{rung:<10} {self.parameters(rung):>10} {arm:<9} {len(done):>5} {fd:>9} {tt:>15}")
        sav = self.savings()
        if sav:
            lines.append(f"\ntime to best saved by {self.searched_arm} (% of the baseline's; + = faster):")
            for rung, per in sav.items():
                for b, s in per.items():
                    spread = f" ± {s.std_pct:.1f}" if s.std_pct is not None else ""
                    lines.append(f"  {rung:<10} vs {b:<8} {s.mean_pct:+.1f}%{spread} (n={s.n})")
        lines += target_table(self.targets(), self.searched_arm)
        doc = self.verification_doc()
        if doc is not None:
            lines.append("\n" + verification_line(doc) + (f": {doc['reason']}" if doc.get("reason") else ""))
        return "\n".join(lines)


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
        "form": fit.form, "share": list(fit.share), "flags": sorted(fit.flags), "flag_details": fit.flag_details,
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


