"""One self-contained HTML report: figures inlined as base64 PNG, the numbers behind them as tables, and a header
that says which features the FD was computed on and with how many samples.

The report is built from the computed data objects (``ReportData``), so every number in a table is the number
drawn in the figure above it. The file needs nothing but a browser: no scripts or styles are fetched. A small
inline script counts, after ``load``, the images the browser decoded (``data-images-loaded`` on ``<body>``), so a
headless browser can check that the report renders.
"""

from __future__ import annotations

import base64
import datetime as _dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

from ._alignment import AlignmentCurves, alignment_html, compute_alignment, plot_alignment
from ._analysis import (
    budgets_html,
    claims_html,
    controls_html,
    controls_lead_html,
    crossings_html,
    diagnostics_html,
    time_ratio_html,
)
from ._curves import FDCurves, LossCurves, compute_fd_curves, compute_loss_curves, plot_fd_curves, plot_loss_curves
from ._draw import png_bytes
from ._errors import DashboardError, DashboardInputError
from ._heatmap import HeatmapData, compute_heatmap, plot_heatmap
from ._html import escape as _e
from ._html import table as _table
from ._records import FDInfo, Records, RecordsLike, as_records, merge_fd
from ._scaling import SCALING_METRICS, ScalingPlotData, compute_scaling_plot, plot_scaling
from ._sweepviews import (
    ComparisonData,
    FrontData,
    ImportanceData,
    TrialsView,
    comparison_html,
    front_html,
    importance_html,
    plot_comparison,
    plot_front,
    plot_importance,
    plot_parallel,
    trials_view_html,
)
from ._timing import TimingData, compute_timing, plot_timing
from ._updates import UpdateScaleData, compute_update_scale, plot_update_scale, update_scale_table

if TYPE_CHECKING:
    from scaling.fits import ScalingFit

__all__ = ["ReportData", "build_report", "compute_report", "report_figures", "write_report"]


@dataclass(frozen=True)
class ReportData:
    """The sections of a report; any may be absent. ``fd`` defaults to what the sections' records say;
    ``context`` holds provenance lines (tracking URI, parent run id, git SHA, ...) shown in the header."""

    title: str = "scalesweep report"
    heatmap: HeatmapData | None = None
    fd_curves: FDCurves | None = None
    alignment: AlignmentCurves | None = None  # the alignment score beside FD: scenes-cnn runs only
    loss: LossCurves | None = None
    scaling: tuple[ScalingPlotData, ...] = ()
    timing: TimingData | None = None
    updates: UpdateScaleData | None = None
    fd: FDInfo | None = None
    context: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    targets: Mapping[str, Any] | None = None  # sweeper.TransferResult.target_summary(): time to a declared target
    target_scaling: tuple[ScalingPlotData, ...] = ()  # steps / time to that target against size, with their fits
    importance: ImportanceData | None = None  # a sweep's: which searched parameter mattered
    front: FrontData | None = None  # a sweep's quality-cost front
    trials_view: TrialsView | None = None  # a sweep's trials: parallel coordinates and slices
    comparison: ComparisonData | None = None  # two sweeps side by side
    # A transfer's analysis (`sweeper.TransferResult.analysis()`, or its controls, targets, claims, diagnostics,
    # tuning_budgets and lr_brackets): the controls open the page, the claims and budgets follow the targets.
    analysis: Mapping[str, Any] | None = None

    @property
    def fd_info(self) -> FDInfo:
        if self.fd is not None:
            return self.fd
        sources = [self.heatmap, self.fd_curves, *self.scaling]
        return merge_fd(s.fd for s in sources if s is not None)


def compute_report(
    records: RecordsLike,
    *,
    title: str = "scalesweep report",
    fits: Mapping[str, ScalingFit] | None = None,
    chosen: tuple[int, float] | None = None,
    ks: Sequence[int] | None = None,
    gammas: Sequence[float] | None = None,
    context: Mapping[str, str] | None = None,
) -> ReportData:
    """Every section the records support: the K x γ heatmap when periodic trials cover two or more (K, γ) cells
    (or a grid is given), FD and loss curves, timing, and scaling panels for each ``fits[metric]`` (keys of
    ``SCALING_METRICS``; the fit must be on that metric) or, without fits, points only when an arm spans two
    or more model sizes. The records are checked once, into the table every section is computed from."""
    unknown = sorted(set(fits or {}) - set(SCALING_METRICS))
    if unknown:
        raise DashboardInputError(f"fits: unknown metrics {unknown}; choices: {sorted(SCALING_METRICS)}")
    recs = as_records(records)
    cells = {(r.K, r.gamma) for r in recs if r.arm == "periodic" and r.K is not None and r.gamma is not None}
    heatmap = None
    if len(cells) >= 2 or ks or gammas or chosen:
        heatmap = compute_heatmap(recs, ks=ks, gammas=gammas, chosen=chosen)
    fd_curves = compute_fd_curves(recs) if any(r.fd for r in recs) else None
    alignment = compute_alignment(recs)  # None for runs without an alignment score: no section, no column
    loss = compute_loss_curves(recs) if any(r.loss or r.val_loss for r in recs) else None
    timed = any(r.succeeded and (r.step_time_s or r.optimizer_time_s or r.optimizer_step_time_s) for r in recs)
    timing = compute_timing(recs) if timed else None
    scaling, notes = _scaling_panels(recs, fits or {})
    updates = compute_update_scale(recs) if any(r.succeeded and r.updates for r in recs) else None
    return ReportData(title=title, heatmap=heatmap, fd_curves=fd_curves, alignment=alignment, loss=loss,
                      scaling=scaling, timing=timing, updates=updates, fd=recs.fd, context=dict(context or {}),
                      notes=tuple(notes))


def _scaling_panels(recs: Records, fits: Mapping[str, ScalingFit]) -> tuple[tuple[ScalingPlotData, ...], list[str]]:
    """A panel per fit; without fits, or when a fit's panel cannot be drawn (e.g. several configurations of one
    arm), the points alone where an arm spans two or more model sizes. What is left out is said in a note."""
    notes: list[str] = []
    if fits:
        try:
            return tuple(compute_scaling_plot(recs, metric, fit) for metric, fit in fits.items()), notes
        except DashboardError as exc:
            notes.append(f"scaling panels left out: {exc}")
    sizes: dict[str, set[int]] = {}
    for r in recs:
        if r.succeeded and r.parameters is not None:
            sizes.setdefault(r.arm, set()).add(r.parameters)
    if not any(len(s) >= 2 for s in sizes.values()):
        return (), notes
    panels: list[ScalingPlotData] = []
    metrics = ("time_to_best_s", "best_fd", *(("alignment_error",) if any(r.alignment for r in recs) else ()))
    for metric in metrics:
        try:
            panels.append(compute_scaling_plot(recs, metric))
        except DashboardError as exc:
            notes.append(f"scaling plot of {metric} left out: {exc}")
            break
    return tuple(panels), notes


def report_figures(data: ReportData) -> dict[str, Figure]:
    """name -> figure for each section present, in page order (names are safe artifact file names, see
    ``log_figures``); a figure that cannot be drawn is left out (`_draw_figures` says why)."""
    return _draw_figures(data)[0]


def _draw_figures(data: ReportData) -> tuple[dict[str, Figure], dict[str, str]]:
    """`report_figures`, and name -> why for each figure that could not be drawn: one broken figure (an interval
    whose mean lies outside it: matplotlib refuses a negative error bar) costs its own section's picture, said
    there, never the page (issue 64, N6)."""
    figures, failed = {}, {}
    for section in _SECTIONS:
        source = getattr(data, section.figure_field or section.field)
        try:
            figure = section.plot(source) if _present(source) else None
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError) as exc:
            failed[section.name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        if figure is not None:
            figures[section.name] = figure
    return figures, failed


# ----------------------------------------------------------------------------------------------------------
# HTML


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}g}"


def _img(name: str, figure: Figure, dpi: float) -> str:
    try:
        png = png_bytes(figure, dpi=dpi)
    except (ArithmeticError, ValueError) as exc:
        # matplotlib overflows on values near the largest float (an objective of 1.8e308 on the heatmap's ticks):
        # the section says so, with its numbers below, and the rest of the page stands.
        return f'<p class="error">figure not drawn ({_e(type(exc).__name__)}: {_e(str(exc)[:200])})</p>'
    encoded = base64.b64encode(png).decode("ascii")
    return f'<figure><img alt="{_e(name)}" src="data:image/png;base64,{encoded}"></figure>'


def _heatmap_html(h: HeatmapData) -> str:
    def cell(matrix: Any, i: int, j: int) -> str:
        value = matrix[i, j]
        text = _fmt(value) if math.isfinite(value) else _e(h.status[i][j] if h.status[i][j] != "ok" else "no value")
        if h.n_ok[i, j] < h.n_runs[i, j] and math.isfinite(value):
            text += f" ({h.n_ok[i, j]}/{h.n_runs[i, j]} seeds)"
        if h.chosen is not None and h.cell(*h.chosen) == (i, j):
            text = f'<strong class="chosen">{text} ★</strong>'
        return text

    parts = []
    chosen = (
        f"Chosen pair: <strong>K={h.chosen[0]}, γ={h.chosen[1]:g}</strong> ({_e(h.chosen_source)})."
        if h.chosen is not None
        else "No pair could be chosen: no cell has an objective."
    )
    parts.append(f"<p>{chosen}</p>")
    matrices = [("objective (mean FD over eval steps and seeds)", h.objective)]
    matrices += [(f"FD at step {s}", m) for s, m in zip(h.steps, h.per_step, strict=True)]
    for caption, matrix in matrices:
        rows = [[f"K={k}"] + [cell(matrix, i, j) for j in range(len(h.gammas))] for i, k in enumerate(h.ks)]
        parts.append(_table(["K \\ γ"] + [f"{g:g}" for g in h.gammas], rows, _e(caption)))
    if h.baselines:
        rows = [[_e(name), _fmt(v)] for name, v in h.baselines.items()]
        parts.append(_table(["baseline", "objective (mean over seeds)"], rows, "baselines at the same rung"))
    return "".join(parts)


def _fd_curves_html(c: FDCurves) -> str:
    rows = []
    for g in c.groups:
        best = min(range(len(g.stats.mean)), key=lambda i: g.stats.mean[i]) if g.stats.mean else None
        rows.append(
            [
                _e(g.rung or "—"),
                _e(g.label),
                _e(", ".join(map(str, g.seeds))),
                str(g.n_failed),
                _fmt(g.stats.mean[best]) if best is not None else "—",
                str(int(g.stats.x[best])) if best is not None else "—",
                _fmt(g.stats.mean[-1]) if g.stats.mean else "—",
                str(int(g.stats.x[-1])) if g.stats.x else "—",
            ]
            # the alignment score beside FD where the runs carry it (scenes-cnn): no column otherwise
            + ([_fmt(c.alignment.get((g.rung, g.label)), 3)] if c.alignment else [])
        )
    failed = [r for r in c.runs if r.status != "SUCCEEDED"]
    note = ""
    if failed:
        note = (
            "<p>Not in the means: "
            + "; ".join(_e(f"{r.label} seed {r.seed} ({r.status}, run {r.run_id or '?'})") for r in failed)
            + ".</p>"
        )
    header = ["rung", "arm", "seeds", "failed", "best mean FD", "at step", "endpoint mean FD", "at step"]
    header += ["endpoint mean alignment"] if c.alignment else []
    return _table(header, rows, "FD of the mean over succeeded seeds") + note


def _loss_html(loss: LossCurves) -> str:
    by_step = {rk.rung: rk for rk in loss.by_step}
    by_time = {rk.rung: rk for rk in loss.by_time}
    rows = []
    for rung in loss.rungs:
        s, t = by_step.get(rung), by_time.get(rung)
        for i in range(max(len(s.order) if s else 0, len(t.order) if t else 0)):
            row = [_e(rung or "—") if i == 0 else "", str(i + 1)]
            for rk, at in ((s, f"step {int(s.at)}" if s else ""), (t, f"{t.at:.4g} s" if t else "")):
                if rk is not None and i < len(rk.order):
                    label, value = rk.order[i]
                    row += [_e(label), _fmt(value), _e(at) if i == 0 else ""]
                else:
                    row += ["—", "—", ""]
            rows.append(row)
    header = ["rung", "rank", "by step: arm", "train loss", "at", "by effective time: arm", "train loss", "at"]
    parts = [
        _table(
            header,
            rows,
            "train-loss rankings (mean over seeds): at the last step every arm reached, and at "
            "the shortest total effective time among the arms",
        )
        if rows
        else "<p>No ranking: the arms share no step or time budget.</p>"
    ]
    parts.append(
        "<p>Train-loss times are interpolated linearly in the step between (0, 0) and the eval points, where "
        "effective time is measured (constant step time between evals); validation loss (markers) is drawn at "
        "its measured times.</p>"
    )
    return "".join(parts)


def _scaling_html(panels: Sequence[ScalingPlotData]) -> str:
    parts = []
    for p in panels:
        rows = [
            [_e(pt.arm), f"{size:.4g}", _fmt(m), _fmt(lo), _fmt(hi), str(len(v))]
            for pt in p.points
            for size, m, lo, hi, v in zip(pt.sizes, pt.mean, pt.lo, pt.hi, pt.values, strict=True)
        ]
        parts.append(_table(["arm", "parameters", "mean", "min", "max", "seeds"], rows, _e(p.ylabel)))
        if p.fit is not None:
            f = p.fit
            fit_rows = []
            for arm, params in f.params.items():
                cells = []
                for name, value in params.items():
                    lo, hi = f.intervals.get(arm, {}).get(name, (math.nan, math.nan))
                    cells.append(f"{_e(name)} = {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]")
                fit_rows.append(
                    [
                        _e(arm),
                        "; ".join(cells),
                        _fmt(f.loo_error.get(arm)),
                        _fmt(f.loo_baseline_error.get(arm)),
                    ]
                )
            caption = f"fit {_e(f.form)} of {_e(p.metric)} ({f.level:.0%} bootstrap intervals)"
            if f.share:
                caption += f", shared: {_e(', '.join(f.share))}"
            parts.append(
                _table(["arm", "parameters", "leave-last-out error", "carry-forward baseline error"], fit_rows, caption)
            )
            flags = [f"<li><code>{_e(name)}</code>: {_e(f.flag_details.get(name, ''))}</li>" for name in f.flags]
            flags += [f"<li>{_e(note)}</li>" for note in f.notes]
            if f.suggestion:
                flags.append(f"<li>suggestion: {_e(f.suggestion)}</li>")
            if flags:
                parts.append(f"<ul>{''.join(flags)}</ul>")
        refused = [c for c in p.curves if c.refused_from is not None]
        for c in refused:
            parts.append(
                f"<p>{_e(c.arm)}: the fit refuses to predict above {c.refused_from:.4g} parameters "
                f"(shaded): {_e(c.refused_reason or '')}</p>"
            )
        if p.notes:
            parts.append("<ul>" + "".join(f"<li>{_e(n)}</li>" for n in p.notes) + "</ul>")
    return "".join(parts)


def _timing_html(t: TimingData) -> str:
    rows = []
    for i, label in enumerate(t.labels):
        for j, rung in enumerate(t.rungs):
            if t.n[i, j] == 0:
                continue
            opt, step = t.optimizer_ms[i, j], t.step_ms[i, j]
            share = opt / step if math.isfinite(opt) and math.isfinite(step) and step > 0 else math.nan
            rows.append(
                [
                    _e(rung or "—"),
                    _e(label),
                    str(t.n[i, j]),
                    f"{_fmt(opt)} [{_fmt(t.optimizer_lo[i, j])}, {_fmt(t.optimizer_hi[i, j])}]",
                    f"{_fmt(step)} [{_fmt(t.step_lo[i, j])}, {_fmt(t.step_hi[i, j])}]",
                    _fmt(100 * share, 3) + ("%" if math.isfinite(share) else ""),
                ]
            )
    header = ["rung", "arm", "seeds", "optimizer ms/step [min, max]", "step ms [min, max]", "optimizer share"]
    return _table(header, rows, "time per training step, mean over succeeded seeds")


def _update_scale_html(u: UpdateScaleData) -> str:
    return _table(["arm", "width", "matrix", "RMS refresh", "RMS row norm", "ratio", "spectral refresh",
                   "spectral row norm", "ratio", "runs"], update_scale_table(u),
                  "mean over seeds at the last eval step; the row-norm RMS ratio is gamma by construction, the "
                  "spectral ratio is what changes with width")


# `_targets` imports `scaling` (and torch behind it): only a page with a target section pays for it.
def _targets_html(targets: Mapping[str, Any]) -> str:
    from ._targets import targets_html

    return targets_html(targets)


def _sensitivity_html(_: Mapping[str, Any]) -> str:
    return ("<p>The paired steps-to-target ratio at target levels from the best arm's mean final value to 1.5 × "
            "the worst's (the numbers are in the table above); the dashed line is the declared target.</p>")


def _plot_sensitivity(targets: Mapping[str, Any]) -> Figure | None:
    from ._targets import has_sensitivity, plot_target_sensitivity

    return plot_target_sensitivity(targets) if has_sensitivity(targets) else None


@dataclass(frozen=True)
class _Section:
    """One section of the page: its tables show `field` of ``ReportData`` (left out when that is empty), its
    figure draws `figure_field` (default the same); `name` names the figure's artifact and the section's anchor."""

    name: str
    heading: str
    field: str
    html: Callable[[Any], str]
    plot: Callable[[Any], Figure | None]
    figure_field: str = ""
    figure_only: bool = False  # no figure, no section


def _present(value: Any) -> bool:
    return value is not None and value != ()


def _no_figure(_: Any) -> None:
    return None


# The page in order: one row per section, read by both `report_figures` and `build_report`.
_SECTIONS = (
    # First on a transfer's page, before any saving: whether the pipeline sees a known saving decides how the rest
    # reads.
    _Section("controls", "Controls: does this pipeline see a known saving?", "analysis", controls_html, _no_figure),
    _Section("comparison", "Two sweeps, point by point (B − A)", "comparison", comparison_html, plot_comparison),
    _Section("heatmap", "K × γ sweep", "heatmap", _heatmap_html, plot_heatmap),
    _Section("importance", "Which searched parameter mattered", "importance", importance_html, plot_importance),
    _Section("front", "Quality against optimizer cost", "front", front_html, plot_front),
    _Section("parallel", "Trials: parallel coordinates and slices", "trials_view", trials_view_html, plot_parallel),
    _Section("fd_curves", "FD versus step", "fd_curves", _fd_curves_html, plot_fd_curves),
    _Section("alignment", "Alignment: does the image show what its caption says?", "alignment", alignment_html,
             plot_alignment),
    _Section("loss", "Loss versus step and effective training time", "loss", _loss_html, plot_loss_curves),
    _Section("scaling", "Scaling with model size", "scaling", _scaling_html, plot_scaling),
    _Section("targets", "Time to the declared target", "targets", _targets_html, plot_scaling,
             figure_field="target_scaling"),
    _Section("target_sensitivity", "The answer against where the target is drawn", "targets", _sensitivity_html,
             _plot_sensitivity, figure_only=True),
    _Section("crossings", "Every seed kept: each endpoint, co-primary or reported", "analysis", crossings_html,
             _no_figure),
    _Section("claims", "Claims in one alpha budget", "analysis", claims_html, _no_figure),
    _Section("time_ratio", "The time ratio against size: held out, then extrapolated", "analysis", time_ratio_html,
             _no_figure),
    _Section("diagnostics", "A steps penalty: the step size or the direction?", "analysis", diagnostics_html,
             _no_figure),
    _Section("budgets", "Tuning budget per arm", "analysis", budgets_html, _no_figure),
    _Section("timing", "Optimizer and step time", "timing", _timing_html, plot_timing),
    _Section("update_scale", "Update size against width (refresh vs row norm)", "updates", _update_scale_html,
             plot_update_scale),
)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
header { border-bottom: 2px solid #444; margin-bottom: 1.5em; }
.fd { background: #fff6d8; border-left: 4px solid #d9a400; padding: 0.5em 1em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
caption { text-align: left; font-weight: 600; padding: 0.3em 0; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: right; }
th { background: #eee; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 0.5em 0; }
img { max-width: 100%; height: auto; }
.chosen { color: #b00; }
.controls { background: #eef4ff; border-left: 4px solid #3060c0; padding: 0.3em 1em; }
"""

# Counts decoded images after load so a headless browser (tests) can tell the figures rendered.
_SCRIPT = """
window.addEventListener("load", function () {
  var ok = 0;
  for (var i = 0; i < document.images.length; i++) {
    var img = document.images[i];
    if (img.complete && img.naturalWidth > 0) { ok += 1; }
  }
  document.body.dataset.imagesTotal = String(document.images.length);
  document.body.dataset.imagesLoaded = String(ok);
});
"""


def build_report(data: ReportData, *, figures: Mapping[str, Figure] | None = None, dpi: float = 100) -> str:
    """The report as one HTML string. ``figures`` replaces the figures drawn from ``data`` (default:
    ``report_figures(data)``), e.g. to reuse figures already logged; figures without a section of their own go
    at the end."""
    figs, failed = _draw_figures(data) if figures is None else (dict(figures), {})
    info = data.fd_info
    body: list[str] = []
    for section in _SECTIONS:
        drawn = section.name in figs or section.name in failed
        if not _present(getattr(data, section.field)) or (section.figure_only and not drawn):
            continue
        img = _img(section.name, figs.pop(section.name), dpi) if section.name in figs else ""
        if section.name in failed:
            img = f'<p class="error">figure not drawn ({_e(failed[section.name])})</p>'
        tables = section.html(getattr(data, section.field))
        if not img and not tables:  # nothing of this section in the data (e.g. a transfer without diagnostics)
            continue
        body.append(f'<section id="{_e(section.name)}"><h2>{_e(section.heading)}</h2>{img}{tables}</section>')
    for name, fig in figs.items():
        body.append(f'<section id="{_e(name)}"><h2>{_e(name)}</h2>{_img(name, fig, dpi)}</section>')

    context = "".join(f"<li>{_e(k)}: <code>{_e(v)}</code></li>" for k, v in data.context.items())
    notes = [*data.notes, *(data.heatmap.notes if data.heatmap is not None else ())]
    notes_html = "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>" if notes else ""
    lead = controls_lead_html(data.analysis) if data.analysis is not None else ""  # before any number of the page
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(data.title)}</title><style>{_STYLE}</style></head>\n"
        f'<body data-fd-metric="{_e(",".join(info.metric_names))}">\n'
        f"<header><h1>{_e(data.title)}</h1>{lead}"
        f'<p class="fd"><strong>Quality metric:</strong> {_e(info.description)}</p>'
        f"<ul>{context}<li>generated: {_e(generated)}</li></ul>{notes_html}</header>\n"
        + "\n".join(body)
        + f"\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )


def write_report(
    path: str | Path, data: ReportData, *, figures: Mapping[str, Figure] | None = None, dpi: float = 100
) -> Path:
    """Write ``build_report(data)`` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(build_report(data, figures=figures, dpi=dpi), encoding="utf-8")
    return out


def write_report_folder(folder: str | Path, data: ReportData, *, dpi: float = 100) -> list[Path]:
    """The report as ``folder/report.html`` and each of its figures as ``folder/<name>.png`` (the same figures,
    drawn once); returns the files written, the page first."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    figures = report_figures(data)
    written = [write_report(out / "report.html", data, figures=dict(figures), dpi=dpi)]
    for name, figure in figures.items():
        path = out / f"{name}.png"
        path.write_bytes(png_bytes(figure, dpi=dpi))
        written.append(path)
    return written
