"""Optimizer time and end-to-end step time per arm and rung, as grouped bars.

Per run, from the last eval point that has the number: optimizer time per step is ``optimizer_step_time_s``
when logged, else the cumulative ``optimizer_time_s`` divided by that step (a command-backend trainer may log only
the total); step time is ``step_time_s`` (effective training time per step so far). Only succeeded runs count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import NDArray

from ._draw import colors_for, new_figure
from ._records import RecordsLike, RunRecord, arm_key, as_records

__all__ = ["TimingData", "compute_timing", "plot_timing"]


@dataclass(frozen=True)
class TimingData:
    """Milliseconds per step; matrices are (len(labels), len(rungs)): mean, min and max over succeeded seeds,
    NaN where an arm has no run at a rung; ``n`` seeds per cell."""

    labels: tuple[str, ...]
    rungs: tuple[str, ...]
    optimizer_ms: NDArray[np.float64]
    optimizer_lo: NDArray[np.float64]
    optimizer_hi: NDArray[np.float64]
    step_ms: NDArray[np.float64]
    step_lo: NDArray[np.float64]
    step_hi: NDArray[np.float64]
    n: NDArray[np.int64]


def _last(series: Mapping[int, float]) -> tuple[int, float] | None:
    finite = [(s, v) for s, v in series.items() if math.isfinite(v)]
    return max(finite) if finite else None


def _optimizer_s(r: RunRecord) -> float:
    last = _last(r.optimizer_step_time_s)
    if last is not None:
        return last[1]
    total = _last(r.optimizer_time_s)
    if total is not None and total[0] > 0:
        return total[1] / total[0]
    return math.nan


def _step_s(r: RunRecord) -> float:
    last = _last(r.step_time_s)
    return last[1] if last is not None else math.nan


def compute_timing(records: RecordsLike) -> TimingData:
    """Per arm label and rung, mean and min–max over succeeded seeds of optimizer and step time per step (ms)."""
    recs = as_records(records).where(lambda r: r.succeeded)
    rungs = recs.rungs
    labels = tuple(sorted({r.label for r in recs}, key=arm_key))
    shape = (len(labels), len(rungs))
    out = {name: np.full(shape, np.nan) for name in ("om", "ol", "oh", "sm", "sl", "sh")}
    n = np.zeros(shape, np.int64)
    for i, label in enumerate(labels):
        for j, rung in enumerate(rungs):
            runs = [r for r in recs if r.label == label and r.rung == rung]
            n[i, j] = len(runs)
            for prefix, values in (("o", [_optimizer_s(r) for r in runs]), ("s", [_step_s(r) for r in runs])):
                ms = [1000.0 * v for v in values if math.isfinite(v)]
                if ms:
                    out[prefix + "m"][i, j] = float(np.mean(ms))
                    out[prefix + "l"][i, j] = float(np.min(ms))
                    out[prefix + "h"][i, j] = float(np.max(ms))
    return TimingData(
        labels=labels,
        rungs=rungs,
        optimizer_ms=out["om"],
        optimizer_lo=out["ol"],
        optimizer_hi=out["oh"],
        step_ms=out["sm"],
        step_lo=out["sl"],
        step_hi=out["sh"],
        n=n,
    )


def _bars(
    ax: Any, data: TimingData, mean: NDArray[np.float64], lo: NDArray[np.float64], hi: NDArray[np.float64], title: str
) -> bool:
    """Draws the bars; False when there was nothing to draw."""
    colors = colors_for(data.labels)
    drawn = False
    width = 0.8 / max(1, len(data.labels))
    x = np.arange(len(data.rungs), dtype=float)
    for i, label in enumerate(data.labels):
        keep = np.isfinite(mean[i])
        if not keep.any():
            continue
        pos = x[keep] - 0.4 + width * (i + 0.5)
        yerr = np.array([mean[i][keep] - lo[i][keep], hi[i][keep] - mean[i][keep]])
        ax.bar(
            pos, mean[i][keep], width=width, color=colors[label], label=label, yerr=yerr, capsize=2, gid=f"bars:{label}"
        )
    ax.set_xticks(x, [r or "(rung not recorded)" for r in data.rungs])
    ax.set_ylabel("ms per step")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    if not drawn:
        ax.text(0.5, 0.5, "no timing logged", transform=ax.transAxes, ha="center", va="center", color="0.4")
    return drawn


def plot_timing(data: TimingData) -> Figure:
    """Two panels of bars grouped by rung, one bar per arm with min–max over seeds: optimizer time per step and
    end-to-end training step time."""
    fig = new_figure(min(14.0, max(8.0, 3.0 * len(data.rungs) + 2.0)), 3.8)
    ax_opt, ax_step = fig.subplots(1, 2, squeeze=False)[0]
    if _bars(ax_opt, data, data.optimizer_ms, data.optimizer_lo, data.optimizer_hi, "optimizer time per step"):
        ax_opt.legend(fontsize=7)
    _bars(ax_step, data, data.step_ms, data.step_lo, data.step_hi, "training step time (effective)")
    return fig
