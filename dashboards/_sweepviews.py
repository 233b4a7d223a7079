"""A sweep's views beyond the heatmap: which parameter mattered, the quality-cost front, parallel coordinates and
slices of its trials, and two sweeps compared point by point.

Importance and front come from the documents the sweep stored with its selection (`selection.json`: `importance`
and `front`, computed by the sweeper from the same records); parallel coordinates and slices are drawn from the
trial records themselves; a comparison from `sweeper.compare_sweeps(a, b).to_dict()`. Each is "compute the data"
then "draw it", as the other figures are.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from matplotlib.figure import Figure

from ._draw import new_figure
from ._html import escape as _e
from ._html import table as _table
from ._records import RecordsLike, as_records

__all__ = [
    "ComparisonData",
    "FrontData",
    "ImportanceData",
    "TrialsView",
    "comparison_from_document",
    "comparison_html",
    "compute_trials_view",
    "front_from_document",
    "front_html",
    "importance_from_document",
    "importance_html",
    "plot_comparison",
    "plot_front",
    "plot_importance",
    "plot_parallel",
    "trials_view_html",
]


@dataclass(frozen=True)
class ImportanceData:
    """The importance document of a sweep (`sweeper.SweepImportance.to_dict()`)."""

    evaluator: str
    method: str
    params: tuple[Mapping[str, Any], ...]
    seed_share: float | None
    notes: tuple[str, ...] = ()


def importance_from_document(doc: Mapping[str, Any] | None) -> ImportanceData | None:
    """None when the sweep stored no importance (fewer than three points, or an older sweep)."""
    if not doc or not doc.get("params"):
        return None
    return ImportanceData(evaluator=str(doc["evaluator"]), method=str(doc.get("method", "")),
                          params=tuple(doc["params"]), seed_share=doc.get("seed_share"),
                          notes=tuple(doc.get("notes") or ()))


def plot_importance(data: ImportanceData) -> Figure:
    """Horizontal bars of each parameter's importance with its 5-95 % bootstrap interval."""
    fig = new_figure(6.0, 1.2 + 0.5 * len(data.params))
    ax = fig.add_subplot()
    names = [str(p["param"]) for p in data.params][::-1]
    values = [float(p["importance"]) for p in data.params][::-1]
    ax.barh(names, values, color="tab:green")
    for i, p in enumerate(list(data.params)[::-1]):
        if p.get("interval"):
            lo, hi = p["interval"]
            ax.plot([lo, hi], [i, i], color="black", lw=1.5)
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"importance ({data.evaluator}; bars: 5-95 % over a paired bootstrap of seeds)")
    ax.set_title("Which searched parameter mattered")
    return fig


def importance_html(data: ImportanceData) -> str:
    rows = []
    for p in data.params:
        interval = f"[{p['interval'][0]:.2f}, {p['interval'][1]:.2f}]" if p.get("interval") else "-"
        share = "-" if p.get("variance_share") is None else f"{p['variance_share']:.2f}"
        p_first = "-" if p.get("p_first") is None else f"{p['p_first']:.2f}"
        rows.append([_e(str(p["param"])), f"{p['importance']:.2f}", interval, p_first, share])
    if data.seed_share is not None:
        rows.append(["seed", "", "", "", f"{data.seed_share:.2f}"])
    notes = "".join(f"<p>{_e(n)}</p>" for n in data.notes)
    return _table(["parameter", "importance", "5-95 %", "P(first)", "share of per-trial variance"], rows,
                  _e(data.method + ". A parameter whose variance share is below the seed's moved the objective "
                     "less than the choice of seed did.")) + notes


@dataclass(frozen=True)
class FrontData:
    """The quality-cost front document of a sweep (`sweeper.QualityCostFront.to_dict()`)."""

    points: tuple[Mapping[str, Any], ...]
    baselines: tuple[Mapping[str, Any], ...]
    chosen: str | None
    rule: str | None
    notes: tuple[str, ...] = ()


def front_from_document(doc: Mapping[str, Any] | None) -> FrontData | None:
    if not doc or not doc.get("points"):
        return None
    return FrontData(points=tuple(doc["points"]), baselines=tuple(doc.get("baselines") or ()),
                     chosen=doc.get("chosen"), rule=doc.get("rule"), notes=tuple(doc.get("notes") or ()))


_AXES = (("ns_calls_per_step", "on_front_ns", "Newton-Schulz calls per step", 1.0),
         ("optimizer_step_s", "on_front_time", "optimizer ms per step", 1000.0))


def plot_front(data: FrontData) -> Figure:
    """Objective against each cost axis: every point, the non-dominated ones joined, the choice starred."""
    axes = [a for a in _AXES if any(p.get(a[0]) is not None for p in data.points)]
    fig = new_figure(5.0 * max(len(axes), 1), 4.0)
    for i, (axis, flag, label, scale) in enumerate(axes, start=1):
        ax = fig.add_subplot(1, len(axes), i)
        placed = [p for p in data.points if p.get(axis) is not None]
        ax.scatter([scale * p[axis] for p in placed], [p["objective"] for p in placed], color="tab:gray",
                   label="points")
        front = sorted((p for p in placed if p.get(flag)), key=lambda p: p[axis])
        ax.plot([scale * p[axis] for p in front], [p["objective"] for p in front], "-o", color="tab:green",
                label="non-dominated")
        for p in placed:
            ax.annotate(str(p["point_key"]), (scale * p[axis], p["objective"]), fontsize=7, alpha=0.8)
            if p.get("chosen"):
                ax.scatter([scale * p[axis]], [p["objective"]], marker="*", s=220, color="tab:red", zorder=5,
                           label="chosen")
        for b in data.baselines:  # a reference line each, named at the left edge (their cost may be off-axis)
            ax.axhline(b["objective"], ls=":", color="tab:blue", lw=1)
            ax.annotate(str(b["point_key"]), (0.01, b["objective"]), xycoords=("axes fraction", "data"),
                        fontsize=7, color="tab:blue", va="bottom")
        ax.set_xlabel(label)
        ax.set_ylabel("objective (mean FD over seeds)")
        ax.legend(fontsize=7)
    fig.suptitle("Quality against optimizer cost (lower is better on both axes)")
    return fig


def front_html(data: FrontData) -> str:
    rows = []
    for p in sorted(data.points, key=lambda p: (p.get("ns_calls_per_step") or 0.0, p["objective"])):
        rel = "-" if p.get("rel_to_best") is None else f"{100 * p['rel_to_best']:+.1f} %"
        ns = "-" if p.get("ns_calls_per_step") is None else f"{p['ns_calls_per_step']:.3f}"
        ms = "-" if p.get("optimizer_step_s") is None else f"{1000 * p['optimizer_step_s']:.2f}"
        marks = ", ".join(n for n, f in (("NS", "on_front_ns"), ("time", "on_front_time")) if p.get(f)) or "-"
        rows.append([_e(str(p["point_key"])) + (" <strong>(chosen)</strong>" if p.get("chosen") else ""),
                     f"{p['objective']:.4g}", rel, ns, ms, marks])
    rule = f"Chosen by: {data.rule}." if data.rule else ""
    notes = "".join(f"<p>{_e(n)}</p>" for n in data.notes)
    return _table(["point", "objective", "vs best (paired mean)", "NS calls / step", "optimizer ms / step",
                   "non-dominated on"], rows, _e(rule)) + notes


@dataclass(frozen=True)
class TrialsView:
    """One row per finished periodic trial: its parameters and objective (parallel coordinates and slices)."""

    params: tuple[str, ...]
    rows: tuple[Mapping[str, float], ...]  # param -> value, plus "objective" (and "alignment" where logged)
    slices: Mapping[str, tuple[tuple[float, float, int], ...]] = field(default_factory=dict)  # value, mean, n
    # The same slices of the endpoint alignment score (scenes-cnn trials; empty elsewhere)
    alignment_slices: Mapping[str, tuple[tuple[float, float, int], ...]] = field(default_factory=dict)


def compute_trials_view(records: RecordsLike) -> TrialsView | None:
    """None when fewer than two finished periodic trials with an objective."""
    rows = []
    for r in as_records(records):
        objective = r.objective_value()
        if r.arm != "periodic" or not r.succeeded or objective is None or r.K is None or r.gamma is None:
            continue
        row = {"K": float(r.K), "gamma": float(r.gamma), "seed": float(r.seed), "objective": objective}
        if r.endpoint_alignment is not None:
            row["alignment"] = r.endpoint_alignment
        rows.append(row)
    if len(rows) < 2:
        return None
    params = ("K", "gamma", "seed")

    def slices_of(name: str) -> dict[str, tuple[tuple[float, float, int], ...]]:
        out = {}
        for p in params:
            by_value: dict[float, list[float]] = {}
            for row in rows:
                if name in row:
                    by_value.setdefault(row[p], []).append(row[name])
            out[p] = tuple((v, statistics.fmean(vs), len(vs)) for v, vs in sorted(by_value.items()))
        return out

    aligned = any("alignment" in row for row in rows)
    return TrialsView(params=params, rows=tuple(rows), slices=slices_of("objective"),
                      alignment_slices=slices_of("alignment") if aligned else {})


def plot_parallel(view: TrialsView) -> Figure:
    """Parallel coordinates (each trial a line across K, gamma, seed and objective, coloured by objective) and a
    slice per parameter (objective against it, the mean at each value joined)."""
    import matplotlib

    fig = new_figure(4.0 + 2.6 * len(view.params), 4.0)
    grid = fig.add_gridspec(1, 1 + len(view.params), width_ratios=[2.0] + [1.0] * len(view.params))
    ax = fig.add_subplot(grid[0, 0])
    axes_names = [*view.params, "objective"]
    lows = {n: min(r[n] for r in view.rows) for n in axes_names}
    highs = {n: max(r[n] for r in view.rows) for n in axes_names}

    def scaled(n: str, v: float) -> float:
        span = highs[n] - lows[n]
        return 0.5 if span == 0 or not math.isfinite(span) else (v - lows[n]) / span

    cmap = matplotlib.colormaps["viridis"]
    for row in sorted(view.rows, key=lambda r: -r["objective"]):  # the best drawn last, on top
        ax.plot(range(len(axes_names)), [scaled(n, row[n]) for n in axes_names],
                color=cmap(1.0 - scaled("objective", row["objective"])), alpha=0.8, lw=1.2)
    ax.set_xticks(range(len(axes_names)))
    ax.set_xticklabels([f"{n}\n[{lows[n]:.3g}, {highs[n]:.3g}]" for n in axes_names], fontsize=8)
    ax.set_yticks([])
    ax.set_title("Parallel coordinates (yellow = lower objective)")
    for i, name in enumerate(view.params, start=1):
        sax = fig.add_subplot(grid[0, i])
        sax.scatter([r[name] for r in view.rows], [r["objective"] for r in view.rows], color="tab:gray", s=14)
        means = view.slices[name]
        sax.plot([v for v, _, _ in means], [m for _, m, _ in means], "-o", color="tab:green")
        sax.set_xlabel(name)
        if i == 1:
            sax.set_ylabel("objective (per trial)")
        sax.set_title(f"slice: {name}", fontsize=9)
    return fig


def trials_view_html(view: TrialsView) -> str:
    def cells(slices: Mapping[str, Any], name: str, digits: str) -> str:
        return ", ".join(f"{v:g}: {m:{digits}} (n={n})" for v, m, n in slices[name])

    rows = [[_e(name), cells(view.slices, name, ".4g"),
             *([cells(view.alignment_slices, name, ".3f")] if view.alignment_slices else [])] for name in view.params]
    header = ["parameter", "mean objective at each value (trials)"]
    header += ["mean endpoint alignment at each value (trials; higher is better)"] if view.alignment_slices else []
    return _table(header, rows,
                  _e(f"{len(view.rows)} finished periodic trials; a slice averages over the other parameters, "
                     "so read it beside the heatmap. MLflow's own compare view: select the sweep's child runs in "
                     "the experiment's runs table and press Compare."))


@dataclass(frozen=True)
class ComparisonData:
    """Two sweeps side by side (`sweeper.SweepComparison.to_dict()`): differences are B - A."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    points: tuple[Mapping[str, Any], ...]
    same_choice: bool | None
    warnings: tuple[str, ...] = ()


def comparison_from_document(doc: Mapping[str, Any] | None) -> ComparisonData | None:
    """None when no point was scored in both sweeps (nothing to draw)."""
    if not doc or not any(p.get("difference") is not None for p in doc.get("points") or ()):
        return None
    return ComparisonData(a=dict(doc["a"]), b=dict(doc["b"]), points=tuple(doc["points"]),
                          same_choice=doc.get("same_choice"), warnings=tuple(doc.get("warnings") or ()))


def _side_label(side: Mapping[str, Any], letter: str) -> str:
    return f"{letter}: {side.get('name')}"


def plot_comparison(data: ComparisonData) -> Figure:
    """Left: each point's objective in A and in B (each sweep's choice starred). Right: B - A per point, the
    paired mean over common seeds with its interval where there is one, else the unpaired difference (hollow)."""
    both = [p for p in data.points if p.get("difference") is not None]
    fig = new_figure(11.0, 1.6 + 0.42 * len(both))
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2, sharey=None)
    names = [str(p["point_key"]) for p in both][::-1]
    ys = range(len(names))
    rows = both[::-1]
    for side, key, colour, offset in (("a", "objective_a", "tab:blue", 0.12), ("b", "objective_b", "tab:orange",
                                                                               -0.12)):
        label = _side_label(data.a if side == "a" else data.b, side.upper())
        left.scatter([p[key] for p in rows], [y + offset for y in ys], color=colour, label=label, s=22)
        chosen = (data.a if side == "a" else data.b).get("chosen")
        for y, p in zip(ys, rows, strict=True):
            if p["point_key"] == chosen:
                left.scatter([p[key]], [y + offset], marker="*", s=200, color=colour, edgecolor="black", zorder=5)
    left.set_yticks(list(ys), names, fontsize=8)
    left.set_xlabel("objective (mean FD over seeds; star: that sweep's choice)")
    left.legend(fontsize=7)
    left.set_title("Each sweep's objective per point")
    for y, p in zip(ys, rows, strict=True):
        paired = p.get("paired")
        if paired and paired.get("interval"):
            lo, hi = paired["interval"]
            right.plot([lo, hi], [y, y], color="black", lw=1.4)
            right.scatter([paired["mean"]], [y], color="black", s=22)
        elif paired:
            right.scatter([paired["mean"]], [y], color="black", s=22)
        else:
            right.scatter([p["difference"]], [y], facecolor="none", edgecolor="black", s=22)
    right.axvline(0.0, color="tab:gray", ls=":")
    right.set_yticks(list(ys), [""] * len(names))
    right.set_xlabel("B - A (paired over common seeds, t interval; hollow: no common seed)")
    right.set_title("Difference, B - A (negative: B lower)")
    return fig


def comparison_html(data: ComparisonData) -> str:
    rows = []
    for p in data.points:
        paired = p.get("paired")
        if paired and paired.get("interval"):
            lo, hi = paired["interval"]
            text = f"{paired['mean']:+.4g} [{lo:+.4g}, {hi:+.4g}], n={paired['n']}"
        elif paired:
            text = f"{paired['mean']:+.4g}, n=1 (one run)"
        else:
            text = "no common seed: unpaired" if p.get("difference") is not None else "-"
        rows.append([_e(str(p["point_key"])), _e(str(p.get("role", ""))),
                     *(("-" if p.get(k) is None else f"{p[k]:.4g}") for k in ("objective_a", "objective_b")),
                     *(("-" if p.get(k) is None else str(p[k])) for k in ("rank_a", "rank_b")),
                     "-" if p.get("difference") is None else f"{p['difference']:+.4g}", _e(text)])
    same = {True: "the same choice", False: "different choices", None: "no choice in one of them"}[data.same_choice]
    caption = (f"A: {data.a.get('name')} ({data.a.get('sweep_id')}), chosen {data.a.get('chosen')}; "
               f"B: {data.b.get('name')} ({data.b.get('sweep_id')}), chosen {data.b.get('chosen')}: {same}. "
               "Lower objective is better, so a negative B - A means B is lower.")
    warnings = "".join(f"<p><strong>Warning:</strong> {_e(w)}</p>" for w in data.warnings)
    return _table(["point", "role", "A", "B", "rank A", "rank B", "B - A", "paired over common seeds"], rows,
                  _e(caption)) + warnings
