"""Scaling plots: time to best quality and FD against model size per arm, on log axes, with the fitted curves of a
``scaling.ScalingFit``.

Per-run values come from ``scaling.time_to_best`` on the run's checkpoints (FD and effective time at the eval
steps), so the dots are the same numbers the fits were made from (``scaling_fit_data`` gives them in the shape
``fit_scaling`` takes). A curve is drawn solid over the fitted sizes, dashed where it extrapolates (past the
arm's largest fitted size), with its bootstrap band, and stops where ``ScalingFit.predict`` refuses
(``ExtrapolationRefused``): that region is shaded and labelled, so a reader sees where the fit declines to
answer instead of a line that looks like a prediction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure

from ._draw import colors_for, new_figure
from ._errors import DashboardInputError
from ._records import FDInfo, Records, RecordsLike, RunRecord, arm_key, as_records

if TYPE_CHECKING:
    from scaling.fits import ScalingFit

__all__ = [
    "SCALING_METRICS",
    "FitCurve",
    "FitSummary",
    "ScalingPlotData",
    "ScalingPoints",
    "compute_fit_plot",
    "compute_scaling_plot",
    "plot_scaling",
    "scaling_fit_data",
]

# metric name -> how it is read from one run's TimeToBest; `alignment_error` (1 - the all-correct alignment share at
# the run's last eval step, lower is better: what the transfer's `alignment` fit is fitted on) from its alignment.
SCALING_METRICS: dict[str, Callable[[Any], float] | None] = {
    "best_fd": lambda t: t.best_fd,
    "endpoint_fd": lambda t: t.endpoint_fd,
    "time_to_best_s": lambda t: t.best_time_s,
    "robust_time_to_best_s": lambda t: t.robust_time_s,
    "alignment_error": None,
}
_GRID_POINTS = 120


@dataclass(frozen=True)
class ScalingPoints:
    """One arm's measured values per model size: every seed's value, their mean and min–max."""

    arm: str
    sizes: tuple[float, ...]
    values: tuple[tuple[float, ...], ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]


@dataclass(frozen=True)
class FitCurve:
    """One arm's fitted curve on a grid of sizes, up to where the fit refuses. ``lo``/``hi`` are NaN without a
    bootstrap. Sizes above ``largest_fitted`` are extrapolated; ``refused_from`` (None when nothing was refused)
    is the size past which ``predict`` raised ``ExtrapolationRefused``, up to ``refused_to``."""

    arm: str
    sizes: tuple[float, ...]
    point: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    largest_fitted: float
    refused_from: float | None
    refused_to: float
    refused_reason: str | None


@dataclass(frozen=True)
class FitSummary:
    """What the report needs from a fit, copied before anything was asked of it."""

    form: str
    share: tuple[str, ...]
    params: Mapping[str, Mapping[str, float]]
    intervals: Mapping[str, Mapping[str, tuple[float, float]]]
    level: float
    flags: tuple[str, ...]
    flag_details: Mapping[str, str]
    loo_error: Mapping[str, float | None]
    loo_baseline_error: Mapping[str, float | None]
    max_extrapolation: float
    notes: tuple[str, ...]
    suggestion: str | None


@dataclass(frozen=True)
class ScalingPlotData:
    """One panel: ``metric`` (a key of ``SCALING_METRICS``) against model size per arm."""

    metric: str
    ylabel: str
    points: tuple[ScalingPoints, ...]
    curves: tuple[FitCurve, ...]
    fit: FitSummary | None
    fd: FDInfo
    x_range: tuple[float, float]
    notes: tuple[str, ...] = ()


def _check_metric(metric: str) -> None:
    if metric not in SCALING_METRICS:
        raise DashboardInputError(f"unknown scaling metric {metric!r}; choices: {sorted(SCALING_METRICS)}")


def _run_value(r: RunRecord, metric: str) -> tuple[float | None, str | None]:
    """The run's value of ``metric`` from its checkpoints, or None with the reason."""
    # scaling is imported where it is used: its package pulls in torch (seconds), which drawing never needs.
    from scaling import ScalingInputError
    from scaling.targets import time_to_best

    if metric == "alignment_error":
        share = r.endpoint_alignment
        if share is None:
            return None, f"run {r.run_id or r.label}: no alignment score logged"
        if not math.isfinite(share) or share >= 1:
            return None, f"run {r.run_id or r.label}: alignment {share} leaves no error to draw on a log axis"
        return 1.0 - share, None
    steps = [s for s in r.fd if s in r.effective_time_s]
    if not steps:
        return None, f"run {r.run_id or r.label}: no checkpoint with both FD and effective time"
    try:
        ttb = time_to_best(steps, [r.effective_time_s[s] for s in steps], [r.fd[s] for s in steps])
    except ScalingInputError as exc:
        return None, f"run {r.run_id or r.label}: {exc}"
    read = SCALING_METRICS[metric]
    value = float(read(ttb)) if read is not None else math.nan
    if not math.isfinite(value) or value <= 0:
        return None, f"run {r.run_id or r.label}: {metric} is {value} (diverged endpoint or zero time)"
    return value, None


def _collect(records: Records, metric: str) -> tuple[dict[str, dict[float, list[float]]], list[str]]:
    _check_metric(metric)
    by_arm: dict[str, dict[float, list[float]]] = {}
    labels: dict[str, set[str]] = {}
    notes: list[str] = []
    for r in records:
        if not r.succeeded or not r.fd:
            continue
        if r.parameters is None:
            notes.append(f"run {r.run_id or r.label}: no parameter count recorded (tag model.parameters); left out")
            continue
        value, why = _run_value(r, metric)
        if value is None:
            notes.append(f"{why}; left out")
            continue
        labels.setdefault(r.arm, set()).add(r.label)
        by_arm.setdefault(r.arm, {}).setdefault(float(r.parameters), []).append(value)
    mixed = {arm: sorted(ls) for arm, ls in labels.items() if len(ls) > 1}
    if mixed:
        # A fit per arm across sizes assumes one configuration per arm (the transferred defaults); a sweep's
        # many periodic cells would be fitted as if they were seeds.
        raise DashboardInputError(f"several configurations per arm ({mixed}); pass one configuration per arm")
    return by_arm, notes


def scaling_fit_data(
    records: RecordsLike, metric: str = "best_fd"
) -> dict[str, tuple[list[float], list[float]]]:
    """arm -> (sizes, values), one entry per succeeded run (sizes repeat for seeds), as ``scaling.fit_scaling``
    takes it. ``metric`` is a key of ``SCALING_METRICS``; runs need ``parameters`` and FD with effective time."""
    by_arm, _ = _collect(as_records(records), metric)
    out: dict[str, tuple[list[float], list[float]]] = {}
    for arm in sorted(by_arm, key=arm_key):
        sizes: list[float] = []
        values: list[float] = []
        for size in sorted(by_arm[arm]):
            sizes += [size] * len(by_arm[arm][size])
            values += by_arm[arm][size]
        out[arm] = (sizes, values)
    return out


def _summary(fit: ScalingFit) -> FitSummary:
    return FitSummary(
        form=fit.form,
        share=tuple(fit.share),
        params={arm: dict(p) for arm, p in fit.params.items()},
        intervals={arm: dict(i) for arm, i in fit.intervals.items()},
        level=fit.level,
        flags=tuple(sorted(fit.flags)),
        flag_details=dict(fit.flag_details),
        loo_error=dict(fit.loo_error),
        loo_baseline_error=dict(fit.loo_baseline_error),
        max_extrapolation=fit.max_extrapolation,
        notes=tuple(fit.notes),
        suggestion=fit.suggestion,
    )


def _curve(fit: ScalingFit, arm: str, x_max: float) -> FitCurve:
    from scaling import ExtrapolationRefused

    # predict() records a refusal in the fit's own flags; ask a copy, so that drawing a plot does not change what
    # the caller's fit (and a report built from it) says about extrapolation.
    probe = replace(fit, flags=set(fit.flags), flag_details=dict(fit.flag_details))
    fitted = fit.sizes[arm]
    smallest, largest = float(fitted[0]), float(fitted[-1])
    # The grid holds the fitted sizes and the refusal limit itself, so the solid/dashed switch and the refused
    # region start at the exact sizes rather than at the nearest grid point.
    grid = set(np.geomspace(smallest, max(x_max, smallest), _GRID_POINTS).tolist())
    grid |= {float(s) for s in fitted} | {largest * fit.max_extrapolation}
    sizes: list[float] = []
    point: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    refused_from: float | None = None
    reason: str | None = None
    for n in sorted(s for s in grid if smallest <= s <= x_max):
        try:
            p, low, high = probe.predict(arm, n)
        except ExtrapolationRefused as exc:
            refused_from = sizes[-1] if sizes else n
            reason = str(exc)
            break
        sizes.append(n)
        point.append(p)
        lo.append(low)
        hi.append(high)
    return FitCurve(
        arm=arm,
        sizes=tuple(sizes),
        point=tuple(point),
        lo=tuple(lo),
        hi=tuple(hi),
        largest_fitted=largest,
        refused_from=refused_from,
        refused_to=x_max,
        refused_reason=reason,
    )


def _ylabel(metric: str, fd: FDInfo) -> str:
    from scaling.targets import DEFAULT_TOL  # the tolerance time_to_best uses for its robust variant

    return {
        "best_fd": f"best-seen {fd.label}",
        "endpoint_fd": f"endpoint {fd.label}",
        "time_to_best_s": "time to best FD (effective s)",
        "robust_time_to_best_s": f"time to within {DEFAULT_TOL:.0%} of best FD (effective s)",
        "alignment_error": "1 − alignment at the endpoint (all attributes correct; lower is better)",
    }[metric]


def _points(by_arm: Mapping[str, Mapping[float, Sequence[float]]]) -> list[ScalingPoints]:
    """Per arm (in arm order), its sizes ascending with each size's values, their mean and their range."""
    points = []
    for arm in sorted(by_arm, key=arm_key):
        sizes = sorted(by_arm[arm])
        vals = [tuple(float(v) for v in by_arm[arm][n]) for n in sizes]
        points.append(ScalingPoints(
            arm=arm, sizes=tuple(sizes), values=tuple(vals), mean=tuple(float(np.mean(v)) for v in vals),
            lo=tuple(min(v) for v in vals), hi=tuple(max(v) for v in vals)))
    return points


def compute_scaling_plot(
    records: RecordsLike,
    metric: str = "best_fd",
    fit: ScalingFit | None = None,
    *,
    extend_to: float | None = None,
) -> ScalingPlotData:
    """Points per arm and size from succeeded runs (``parameters`` and FD with effective time needed), and the
    curves of ``fit`` (fitted on the same metric) per arm from its smallest fitted size to ``extend_to``
    (default: twice the refusal limit, so the region where the fit refuses shows)."""
    recs = as_records(records)
    by_arm, notes = _collect(recs, metric)
    fit_to = None
    sizes = [] if extend_to is None else [float(extend_to)]
    if fit is not None:
        x_max = float(extend_to) if extend_to is not None else 2.0 * fit.max_extrapolation * _largest_fitted(fit)
        if not math.isfinite(x_max) or x_max <= 0:
            raise DashboardInputError(f"extend_to must be a size > 0, got {extend_to!r}")
        fit_to = (fit, x_max)
        sizes = [float(fit.sizes[arm][0]) for arm in fit.arms]
        missing = sorted(set(by_arm) - set(fit.arms))
        if missing:
            notes.append(f"no fitted curve for {missing}: the fit covers {list(fit.arms)}")
    return _panel(metric, _ylabel(metric, recs.fd), by_arm, fit_to, sizes, fd=recs.fd, notes=notes)


def compute_fit_plot(
    metric: str,
    ylabel: str,
    data: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    fit: ScalingFit | None = None,
    *,
    fd: FDInfo | None = None,
    notes: Sequence[str] = (),
) -> ScalingPlotData:
    """A scaling panel from values already measured per run (`data`: arm -> (sizes, values), sizes repeating over
    seeds, as `fit_scaling` takes them), for quantities the run records do not hold directly, such as a transfer's
    steps or time to its declared target. `fit`, when given, must be fitted on the same data; its curves reach
    one refusal limit past the largest fitted size."""
    by_arm: dict[str, dict[float, list[float]]] = {}
    for arm, (sizes, values) in data.items():
        if len(sizes) != len(values):
            raise DashboardInputError(f"{metric}: arm {arm!r} has {len(sizes)} sizes and {len(values)} values")
        by_size = by_arm.setdefault(arm, {})
        for n, v in zip(sizes, values, strict=True):
            by_size.setdefault(float(n), []).append(float(v))
    fit_to = (fit, fit.max_extrapolation * _largest_fitted(fit)) if fit is not None else None
    return _panel(metric, ylabel, by_arm, fit_to, [], fd=fd or FDInfo(metric_names=(), samples=()), notes=notes)


def _panel(metric: str, ylabel: str, by_arm: Mapping[str, Mapping[float, Sequence[float]]],
           fit_to: tuple[ScalingFit, float] | None, sizes: Sequence[float], *, fd: FDInfo,
           notes: Sequence[str]) -> ScalingPlotData:
    """One panel: the measured points per arm and, with `fit_to` (a fit and the size its curves reach), the fit's
    curves; the x range spans the points, `sizes` and the curves' reach."""
    points = _points(by_arm)
    summary, curves = _fitted_curves(*fit_to) if fit_to is not None else (None, [])
    reach = [fit_to[1]] if fit_to is not None else []
    return ScalingPlotData(metric=metric, ylabel=ylabel, points=tuple(points), curves=tuple(curves), fit=summary,
                           fd=fd, x_range=_x_range([s for p in points for s in p.sizes] + list(sizes) + reach),
                           notes=tuple(notes))


def _largest_fitted(fit: ScalingFit) -> float:
    return max(float(fit.sizes[arm][-1]) for arm in fit.arms)


def _fitted_curves(fit: ScalingFit, x_max: float) -> tuple[FitSummary, list[FitCurve]]:
    """The fit's summary and each arm's curve up to `x_max` (the two panels differ only in how far they reach)."""
    return _summary(fit), [_curve(fit, arm, x_max) for arm in sorted(fit.arms, key=arm_key)]


def _x_range(sizes: Sequence[float]) -> tuple[float, float]:
    return (min(sizes), max(sizes)) if sizes else (1.0, 10.0)


def _legend_handles(data: ScalingPlotData, arms: list[str], colors: dict[str, Any],
                    seeds: dict[str, tuple[int, int]], *,
                    has_extrapolation: bool, has_band: bool, has_refused: bool) -> list[Any]:
    """One legend entry per arm and one per line style, instead of one per artist (three per arm)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = []
    for arm in arms:
        lo, hi = seeds.get(arm, (0, 0))
        count = f"{hi}" if lo == hi else f"{lo}–{hi}"
        what = f" (mean, min–max over {count} seed{'s' if hi != 1 else ''})" if hi else ""
        handles.append(Line2D([], [], color=colors[arm], marker="o" if hi else None, label=f"{arm}{what}"))
    if data.curves:
        handles.append(Line2D([], [], color="0.3", label="fit over the fitted sizes"))
    if has_extrapolation:
        handles.append(Line2D([], [], color="0.3", linestyle="--", label="fit extrapolated"))
    if has_band and data.fit is not None:
        handles.append(Patch(facecolor="0.3", alpha=0.15, label=f"{data.fit.level:.0%} bootstrap interval"))
    if has_refused and data.fit is not None:
        handles.append(
            Patch(
                facecolor="0.9",
                edgecolor="0.6",
                hatch="//",
                label=f"fit refuses to extrapolate (> {data.fit.max_extrapolation:g}× largest fitted size)",
            )
        )
    return handles


def _draw_panel(ax: Any, data: ScalingPlotData) -> None:
    from matplotlib.ticker import FuncFormatter

    arms = sorted({p.arm for p in data.points} | {c.arm for c in data.curves}, key=arm_key)
    colors = colors_for(arms)
    # Seeds per point can differ between sizes (steps to target count only the seeds that reached it).
    seeds = {p.arm: (min(len(v) for v in p.values), max(len(v) for v in p.values)) for p in data.points if p.values}
    for p in data.points:
        mean = np.array(p.mean)
        yerr = np.array([mean - np.array(p.lo), np.array(p.hi) - mean])
        ax.errorbar(
            p.sizes, p.mean, yerr=yerr, fmt="o", color=colors[p.arm], capsize=3, zorder=3, gid=f"points:{p.arm}"
        )
    refused: set[tuple[float, float]] = set()
    has_band = has_extrapolation = False
    for c in data.curves:
        x = np.array(c.sizes)
        y = np.array(c.point)
        inside = x <= c.largest_fitted
        # The boundary point belongs to both pieces so the solid and dashed lines meet.
        outside = x >= c.largest_fitted
        ax.plot(x[inside], y[inside], color=colors[c.arm], linewidth=1.8, gid=f"fit:{c.arm}")
        if outside.sum() > 1:
            has_extrapolation = True
            ax.plot(
                x[outside], y[outside], color=colors[c.arm], linewidth=1.8, linestyle="--", gid=f"extrapolated:{c.arm}"
            )
        lo, hi = np.array(c.lo), np.array(c.hi)
        band = np.isfinite(lo) & np.isfinite(hi)
        if band.any():
            has_band = True
            ax.fill_between(
                x[band], lo[band], hi[band], color=colors[c.arm], alpha=0.15, linewidth=0, gid=f"ci:{c.arm}"
            )
        if c.refused_from is not None:
            refused.add((c.refused_from, c.refused_to))

    handles = _legend_handles(data, arms, colors, seeds, has_extrapolation=has_extrapolation, has_band=has_band,
                              has_refused=bool(refused))
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Plain numbers on the value axis: a decade rarely fits in an FD panel, and "2.4 × 10^1" reads badly.
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    lo_x, hi_x = data.x_range
    ax.set_xlim(lo_x / 1.15, hi_x * 1.15)
    for start, stop in sorted(refused):
        # A region that runs to the end of the plotted range is shaded to the edge of the axes.
        end = hi_x * 1.15 if stop >= hi_x else stop
        ax.axvspan(start, end, facecolor="0.9", edgecolor="0.6", hatch="//", linewidth=0, zorder=0, gid="refused")
    ax.set_xlabel("model size (parameters)")
    ax.set_ylabel(data.ylabel)
    title = data.ylabel
    if data.fit is not None:
        title += f"\nfit {data.fit.form}" + (f", shared {', '.join(data.fit.share)}" if data.fit.share else "")
        if data.fit.flags:
            title += f"; flags: {', '.join(data.fit.flags)}"
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    if handles:
        ax.legend(handles=handles, fontsize=7)


def plot_scaling(data: ScalingPlotData | Sequence[ScalingPlotData]) -> Figure:
    """One log–log panel per ``ScalingPlotData``: seed spread as error bars, the fit solid over the fitted
    sizes and dashed beyond, its interval as a band, and the refused region shaded."""
    panels = [data] if isinstance(data, ScalingPlotData) else list(data)
    if not panels:
        raise DashboardInputError("nothing to draw: no scaling panels given")
    fig = new_figure(5.4 * len(panels), 4.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        _draw_panel(ax, panel)
    return fig
