"""Update size against width: the update RMS and spectral norm that Muon-family trials log per block matrix kind
and per step kind (`trials.optim.update_stats`), at their last eval step, drawn against the model width.

What to look for: the row-norm step (gamma x unit rows) has the Newton-Schulz step's RMS by construction, so the
RMS ratio rownorm / refresh stays at gamma across widths; its spectral norm does not (unit rows of a
low-rank-dominated momentum stack up along the top singular direction), so the spectral ratio growing with width
says gamma, tuned at the smallest width, makes a relatively larger step at a larger one.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from matplotlib.figure import Figure

from ._draw import new_figure
from ._errors import DashboardInputError
from ._records import RecordsLike, RunRecord, as_records

__all__ = ["UpdateScaleData", "UpdateScaleRow", "compute_update_scale", "plot_update_scale"]

_KINDS = ("qkv", "attn_out", "mlp_in", "mlp_out", "modulation")
_STEPS = ("refresh", "rownorm")


@dataclass(frozen=True)
class UpdateScaleRow:
    """Mean over succeeded runs (seeds) of one arm at one width, for one matrix kind and step kind."""

    arm: str
    width: int
    kind: str
    step_kind: str
    rms: float
    spec: float
    n: int


@dataclass(frozen=True)
class UpdateScaleData:
    rows: tuple[UpdateScaleRow, ...]
    widths: tuple[int, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def ratios(self, arm: str = "periodic") -> dict[tuple[int, str], tuple[float, float]]:
        """(width, kind) -> (RMS ratio, spectral ratio) of rownorm to refresh for `arm` (both kinds logged)."""
        by = {(r.width, r.kind, r.step_kind): r for r in self.rows if r.arm == arm}
        out = {}
        for (width, kind, step), row in by.items():
            other = by.get((width, kind, "refresh"))
            if step == "rownorm" and other is not None and other.rms > 0 and other.spec > 0:
                out[(width, kind)] = (row.rms / other.rms, row.spec / other.spec)
        return out


def _width(record: RunRecord, widths: Mapping[str, int] | None) -> int | None:
    if widths and record.rung in widths:
        return int(widths[record.rung])
    try:
        from trials.models import get_rung

        return int(get_rung(record.rung).config.width)
    except Exception:  # an unknown rung name (a team's own trainer): no width to place it at
        return None


def compute_update_scale(
    records: RecordsLike, *, widths: Mapping[str, int] | None = None
) -> UpdateScaleData:
    """Rows of mean update RMS and spectral norm per (arm, width, kind, step kind) over succeeded runs that logged
    them. `widths` maps rung -> width (default: the built-in ladder's widths)."""
    recs = as_records(records)
    groups: dict[tuple[str, int, str, str], list[tuple[float, float]]] = {}
    notes: list[str] = []
    for r in recs:
        if not r.succeeded or not r.updates:
            continue
        width = _width(r, widths)
        if width is None:
            notes.append(f"run {r.run_id}: rung {r.rung!r} has no known width; left out")
            continue
        for kind in _KINDS:
            for step in _STEPS:
                rms, spec = r.updates.get(f"update_rms.{kind}.{step}"), r.updates.get(f"update_spec.{kind}.{step}")
                if rms is not None and spec is not None and math.isfinite(rms) and math.isfinite(spec):
                    groups.setdefault((r.arm, width, kind, step), []).append((rms, spec))
    if not groups:
        raise DashboardInputError("no succeeded run logged update statistics (update_rms.* / update_spec.*)")
    rows = tuple(
        UpdateScaleRow(arm=a, width=w, kind=k, step_kind=s, rms=statistics.fmean(v[0] for v in vals),
                       spec=statistics.fmean(v[1] for v in vals), n=len(vals))
        for (a, w, k, s), vals in sorted(groups.items())
    )
    return UpdateScaleData(rows=rows, widths=tuple(sorted({r.width for r in rows})), notes=tuple(notes))


def plot_update_scale(data: UpdateScaleData) -> Figure:
    """Left: update RMS; right: spectral norm; against width (log-log), one colour per matrix kind, solid for the
    refresh (Newton-Schulz) step, dashed for the row-norm step."""
    fig = new_figure(11, 4.2)
    axes = fig.subplots(1, 2)
    colours = dict(zip(_KINDS, ("C0", "C1", "C2", "C3", "C4"), strict=True))
    for ax, attr, label in ((axes[0], "rms", "update RMS"), (axes[1], "spec", "update spectral norm")):
        series: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
        for row in data.rows:
            series.setdefault((row.arm, row.kind, row.step_kind), []).append((row.width, getattr(row, attr)))
        for (arm, kind, step), points in sorted(series.items()):
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", color=colours.get(kind, "k"), linestyle="-" if step == "refresh" else "--",
                    label=f"{arm} {kind} {step}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("model width")
        ax.set_ylabel(label)
        ax.set_xticks(list(data.widths), [str(w) for w in data.widths])
        ax.minorticks_off()
    axes[1].legend(fontsize=7, ncol=2)
    fig.suptitle("Applied update per matrix kind: refresh (solid) vs row norm (dashed)")
    return fig


def update_scale_table(data: UpdateScaleData, arms: Sequence[str] | None = None) -> list[list[str]]:
    """Rows for the report: arm, width, kind, RMS and spectral norm of each step kind, and their ratios."""
    out = []
    by = {(r.arm, r.width, r.kind, r.step_kind): r for r in data.rows}
    for arm, width, kind in sorted({(r.arm, r.width, r.kind) for r in data.rows}):
        if arms is not None and arm not in arms:
            continue
        ref, row = by.get((arm, width, kind, "refresh")), by.get((arm, width, kind, "rownorm"))

        def f(x: float | None) -> str:
            return "-" if x is None else f"{x:.3g}"

        rms_ratio = row.rms / ref.rms if row and ref and ref.rms else None
        spec_ratio = row.spec / ref.spec if row and ref and ref.spec else None
        n = max((x.n for x in (ref, row) if x is not None), default=0)
        out.append([arm, str(width), kind, f(ref.rms if ref else None), f(row.rms if row else None), f(rms_ratio),
                    f(ref.spec if ref else None), f(row.spec if row else None), f(spec_ratio), str(n)])
    return out
