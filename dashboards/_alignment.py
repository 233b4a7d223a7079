"""The alignment score beside FD: does a generated image show what its caption says (GenEval's question, read by the
scenes set's own feature network), as the all-correct share over training per arm and each attribute's share at the
last eval step.

Only runs scored by an extractor that reads captions (scenes-cnn) carry it; a page of other runs has no alignment
section (``compute_alignment`` gives None). Seeds are grouped as the FD curves group them (rung, arm label), with the
same rule: the mean over SUCCEEDED seeds, a failed seed counted in ``n_failed`` and left out of the mean.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from matplotlib.figure import Figure

from ._curves import GroupSeries, band, group_label, group_series, groups_of, rung_panels
from ._draw import colors_for
from ._html import escape as _e
from ._html import table as _table
from ._records import RecordsLike, arm_key, as_records

__all__ = ["AlignmentCurves", "alignment_html", "compute_alignment", "plot_alignment"]

# The attributes in the order a caption says them (trials.metrics.ALIGNMENT_ATTRIBUTES), each shown where logged.
_ATTRIBUTES = ("count", "position", "kind", "colour", "size", "relation")


@dataclass(frozen=True)
class AlignmentCurves:
    """The all-correct share per group (rung, arm label) over training steps, one panel per rung, and each group's
    mean share per attribute at its seeds' last eval step (``attributes[i]`` belongs to ``groups[i]``)."""

    rungs: tuple[str, ...]
    groups: tuple[GroupSeries, ...]
    attributes: tuple[Mapping[str, float], ...]
    names: tuple[str, ...]  # the attributes logged by any run, in caption order


def compute_alignment(records: RecordsLike) -> AlignmentCurves | None:
    """Alignment per group from the records that carry it; None when none does (a shapes or pixels study)."""
    recs = as_records(records).where(lambda r: bool(r.alignment))
    if not len(recs):
        return None
    groups: list[GroupSeries] = []
    attributes: list[dict[str, float]] = []
    for rung, label, members in groups_of(recs):
        ok = [r for r in members if r.succeeded]
        if not ok:
            continue
        groups.append(group_series(rung, label, members, "alignment", interpolate=False))
        attributes.append({n: statistics.fmean(r.alignment_attributes[n] for r in ok if n in r.alignment_attributes)
                           for n in {n for r in ok for n in r.alignment_attributes}})
    if not groups:
        return None
    logged = {n for a in attributes for n in a}
    order = tuple(n for n in _ATTRIBUTES if n in logged) + tuple(sorted(logged - set(_ATTRIBUTES)))
    return AlignmentCurves(rungs=recs.rungs, groups=tuple(groups), attributes=tuple(attributes), names=order)


def _share(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.3f}"


def alignment_html(data: AlignmentCurves) -> str:
    """One row per group: seeds, the all-correct share at the last eval step (mean [min, max] over seeds) and the
    mean share of each attribute there."""
    rows = []
    for g, attrs in zip(data.groups, data.attributes, strict=True):
        s = g.stats
        end = (f"{_share(s.mean[-1])} [{_share(s.lo[-1])}, {_share(s.hi[-1])}]" if s.mean else "—")
        rows.append([_e(g.rung or "—"), _e(g.label), _e(", ".join(map(str, g.seeds))), str(g.n_failed),
                     end, str(int(s.x[-1])) if s.x else "—", *(_share(attrs.get(n)) for n in data.names)])
    header = ["rung", "arm", "seeds", "failed", "all correct [min, max]", "at step", *data.names]
    return _table(header, rows, "alignment at the last eval step, mean over succeeded seeds: the share of samples "
                  "whose every attribute matches the caption, then each attribute's share (higher is better)")


def plot_alignment(data: AlignmentCurves) -> Figure:
    """One panel per rung: each group's all-correct share over steps (mean over succeeded seeds, min–max band)."""
    fig, panels = rung_panels(data.rungs)
    for ax, rung in panels:
        groups = [g for g in data.groups if g.rung == rung]
        colors = colors_for(sorted({g.label for g in groups}, key=arm_key))
        for g in groups:
            band(ax, g.stats.x, g, colors[g.label], group_label(g), linewidth=2.0, marker="o", markersize=3)
        ax.set(xlabel="training step", ylabel="alignment: all attributes correct (higher is better)", ylim=(0, 1))
        ax.set_title(f"alignment vs step{' — ' + rung if rung else ''}", fontsize=10)
        ax.grid(True, alpha=0.3)
        if groups:
            ax.legend(fontsize=7)
    return fig
