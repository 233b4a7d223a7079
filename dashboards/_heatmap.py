"""The K x γ heatmap of a sweep: the objective (mean FD over eval steps and seeds) and one panel per eval step
(at most ``MAX_STEP_PANELS``), with the chosen pair marked and cells that have no number drawn as such.

Only SUCCEEDED trials enter the numbers; a cell whose trials all failed (FAILED, DIVERGED, PRUNED, ...) shows
that status, a cell never run shows "missing". A cell where some seeds failed shows the number of the seeds
that succeeded and says how many did ("2/3 seeds").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from numpy.typing import NDArray

from ._draw import grid_shape, new_figure
from ._errors import DashboardInputError
from ._records import FDInfo, RecordsLike, RunRecord, as_records

__all__ = ["HeatmapData", "compute_heatmap", "plot_heatmap"]

OK = "ok"
MISSING = "missing"
# Step panels at the most. Each is a subplot with its colour bar: a report of 1,000 declared eval steps (the spec's
# cap) drew 1,000 of them, minutes and gigabytes in the driver. Past this many, evenly spaced ones, the last
# included; the objective panel still averages every eval step.
MAX_STEP_PANELS = 6


@dataclass(frozen=True)
class HeatmapData:
    """Numbers of a K x γ sweep. Matrices are (len(ks), len(gammas)), NaN where there is no number.

    ``objective``: mean over succeeded seeds of each trial's objective (``RunRecord.objective_value``).
    ``per_step[i]``: mean over succeeded seeds of FD at ``steps[i]``.
    ``status[k][g]``: "ok", "missing" (never run) or the failing status of the cell's trials.
    ``n_ok``/``n_runs``: succeeded and all trials per cell.
    ``chosen``: (K, γ) marked on every panel; ``chosen_source`` says whether it was given or is the best cell.
    ``baselines``: other arms at the same rung(s) -> mean objective over their succeeded seeds.
    ``eval_steps``: every eval step of the grid; ``steps`` those with a panel (all, up to ``MAX_STEP_PANELS``).
    """

    ks: tuple[int, ...]
    gammas: tuple[float, ...]
    steps: tuple[int, ...]
    objective: NDArray[np.float64]
    per_step: tuple[NDArray[np.float64], ...]
    status: tuple[tuple[str, ...], ...]
    n_ok: NDArray[np.int64]
    n_runs: NDArray[np.int64]
    chosen: tuple[int, float] | None
    chosen_source: str | None
    rungs: tuple[str, ...]
    baselines: Mapping[str, float]
    fd: FDInfo
    notes: tuple[str, ...] = ()
    eval_steps: tuple[int, ...] = ()

    def cell(self, k: int, gamma: float) -> tuple[int, int]:
        """Row and column of (K, γ); raises ``DashboardInputError`` when not in the grid."""
        return _cell_index(self.ks, self.gammas, k, gamma)


def _cell_index(ks: Sequence[int], gammas: Sequence[float], k: int, gamma: float) -> tuple[int, int]:
    rows = [i for i, v in enumerate(ks) if v == int(k)]
    if not rows:
        raise DashboardInputError(f"K={k} not in the grid {list(ks)}")
    # γ comes back from MLflow params as text: compare with a tolerance, not bit for bit.
    cols = [j for j, g in enumerate(gammas) if math.isclose(g, float(gamma), rel_tol=1e-9, abs_tol=1e-12)]
    if not cols:
        raise DashboardInputError(f"γ={gamma} not in the grid {list(gammas)}")
    return rows[0], cols[0]


def _distinct_gammas(values: Iterable[float]) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or not math.isclose(out[-1], v, rel_tol=1e-9, abs_tol=1e-12):
            out.append(v)
    return out


def _axes(
    grid: list[RunRecord], ks: Sequence[int] | None, gammas: Sequence[float] | None, steps: Sequence[int] | None
) -> tuple[list[int], list[float], list[int]]:
    """The K rows, gamma columns and step panels: the given values and those the records have."""
    k_values = sorted({int(k) for k in (ks or ())} | {int(r.K) for r in grid if r.K is not None})
    seen = [float(r.gamma) for r in grid if r.gamma is not None]
    g_values = _distinct_gammas([float(g) for g in (gammas or ())] + seen)
    if steps is None:
        step_values = sorted({s for r in grid if r.succeeded for s, v in r.fd.items() if math.isfinite(v)})
    else:
        step_values = sorted({int(s) for s in steps})
    return k_values, g_values, step_values


def _panel_steps(steps: list[int]) -> list[int]:
    """The steps that get a panel: all of them up to ``MAX_STEP_PANELS``, else that many evenly spaced ones, the
    first and the last included."""
    if len(steps) <= MAX_STEP_PANELS:
        return steps
    return [steps[i] for i in np.linspace(0, len(steps) - 1, MAX_STEP_PANELS).round().astype(int).tolist()]


def _chosen(
    k_values: list[int], g_values: list[float], objective: NDArray[np.float64], chosen: tuple[int, float] | None
) -> tuple[tuple[int, float] | None, str | None]:
    """The cell to mark and where it came from: the given pair (snapped to the grid), else the lowest objective."""
    shape = objective.shape
    source: str | None
    if chosen is not None:
        row, col = _cell_index(k_values, g_values, *chosen)
        chosen_pair: tuple[int, float] | None = (k_values[row], g_values[col])
        source = "given"
    elif np.isfinite(objective).any():
        best_row, best_col = np.unravel_index(int(np.nanargmin(objective)), shape)
        chosen_pair = (k_values[int(best_row)], g_values[int(best_col)])
        source = "lowest objective"
    else:
        chosen_pair, source = None, None
    return chosen_pair, source


def _baselines(others: list[RunRecord], rungs: tuple[str, ...]) -> dict[str, float]:
    """Each other arm's mean objective over its succeeded runs at the grid's rungs."""
    baselines: dict[str, float] = {}
    for name in sorted({r.label for r in others}):
        values = [
            v
            for r in others
            if r.label == name and r.succeeded and (not rungs or r.rung in rungs)
            for v in [r.objective_value()]
            if v is not None
        ]
        if values:
            baselines[name] = float(np.mean(values))
    return baselines


def _cell(runs: Sequence[RunRecord], step_values: Sequence[int], per_step_rows: list[NDArray[np.float64]],
          j: int) -> tuple[int, int, float, str]:
    """One grid cell's runs: (runs, succeeded, mean objective or NaN, status word); the mean FD at each panel step
    goes into column `j` of that step's row."""
    ok = [r for r in runs if r.succeeded]
    values = [v for v in (r.objective_value() for r in ok) if v is not None]
    if values:
        word = OK
    elif ok:
        word = "no FD"
    else:
        # The most common failure names the cell (ties: alphabetical, so the figure does not depend on order).
        counts = Counter(r.status for r in runs)
        word = min(counts, key=lambda s: (-counts[s], s))
    for row, step in zip(per_step_rows, step_values, strict=True):
        at_step = [r.fd[step] for r in ok if step in r.fd and math.isfinite(r.fd[step])]
        if at_step:
            row[j] = float(np.mean(at_step))
    return len(runs), len(ok), float(np.mean(values)) if values else math.nan, word


def compute_heatmap(
    records: RecordsLike,
    *,
    ks: Sequence[int] | None = None,
    gammas: Sequence[float] | None = None,
    steps: Sequence[int] | None = None,
    chosen: tuple[int, float] | None = None,
    arm: str = "periodic",
) -> HeatmapData:
    """The heatmap's numbers from a sweep's trial records.

    ``records``: trials of one sweep (``RunRecord`` or dicts with at least K, gamma, seed, fd, status; objective
    optional). Records of ``arm`` with both K and γ make the grid; records of other arms become ``baselines``.
    ``ks``/``gammas``: the sweep's grid, so that cells never run show as missing (default: the values seen).
    ``steps``: the eval steps (default: every step at which a succeeded trial has an FD; a record keeps FD at the
    steps it declared only); at most ``MAX_STEP_PANELS`` of them get a panel.
    ``chosen``: the pair to mark (e.g. the sweeper's choice); default the cell with the lowest objective.
    """
    recs = as_records(records)
    grid = [r for r in recs if r.arm == arm and r.K is not None and r.gamma is not None]
    others = [r for r in recs if r.arm != arm]
    if not grid and not ks:
        raise DashboardInputError(f"no {arm!r} records with K and gamma, and no grid given")
    k_values, g_values, eval_steps = _axes(grid, ks, gammas, steps)
    step_values = _panel_steps(eval_steps)

    shape = (len(k_values), len(g_values))
    cells: dict[tuple[int, int], list[RunRecord]] = {}
    for r in grid:
        cells.setdefault(_cell_index(k_values, g_values, r.K or 0, r.gamma or 0.0), []).append(r)

    objective = np.full(shape, np.nan)
    per_step = [np.full(shape, np.nan) for _ in step_values]
    n_ok = np.zeros(shape, np.int64)
    n_runs = np.zeros(shape, np.int64)
    status = [[MISSING] * shape[1] for _ in range(shape[0])]
    notes: list[str] = []
    if len(step_values) < len(eval_steps):
        notes.append(f"the heatmap draws FD at {len(step_values)} of the {len(eval_steps)} eval steps "
                     f"({', '.join(map(str, step_values))}: evenly spaced, the last included); the objective "
                     "panel covers them all")
    for (i, j), runs in cells.items():
        n_runs[i, j], n_ok[i, j], objective[i, j], status[i][j] = _cell(runs, step_values, [m[i] for m in per_step], j)
        if 0 < n_ok[i, j] < n_runs[i, j]:
            notes.append(f"K={k_values[i]}, γ={g_values[j]:g}: {n_ok[i, j]} of {n_runs[i, j]} seeds succeeded; the "
                         "cell is their mean")

    chosen_pair, source = _chosen(k_values, g_values, objective, chosen)

    rungs = tuple(sorted({r.rung for r in grid}))
    baselines = _baselines(others, rungs)
    return HeatmapData(
        ks=tuple(k_values),
        gammas=tuple(g_values),
        steps=tuple(step_values),
        objective=objective,
        per_step=tuple(per_step),
        status=tuple(tuple(row) for row in status),
        n_ok=n_ok,
        n_runs=n_runs,
        chosen=chosen_pair,
        chosen_source=source,
        rungs=rungs,
        baselines=baselines,
        fd=recs.fd,
        notes=tuple(notes),
        eval_steps=tuple(eval_steps),
    )


def _panel(ax: Any, data: HeatmapData, matrix: NDArray[np.float64], title: str, fig: Figure) -> None:
    import matplotlib

    # Lower FD is better: the reversed map makes the best cells the brightest.
    cmap = matplotlib.colormaps["viridis_r"].with_extremes(bad="white")
    masked = np.ma.masked_invalid(matrix)
    finite = matrix[np.isfinite(matrix)]
    image = ax.imshow(
        masked,
        cmap=cmap,
        origin="lower",
        aspect="auto",
        vmin=float(finite.min()) if finite.size else None,
        vmax=float(finite.max()) if finite.size else None,
    )
    mid = (float(finite.min()) + float(finite.max())) / 2 if finite.size else 0.0
    for i in range(len(data.ks)):
        for j in range(len(data.gammas)):
            value = matrix[i, j]
            if math.isfinite(value):
                text = f"{value:.3g}"
                if data.n_ok[i, j] < data.n_runs[i, j]:
                    text += f"\n{data.n_ok[i, j]}/{data.n_runs[i, j]} seeds"
                # Dark text on the bright (low) end of viridis_r, light text on the dark end.
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="black" if value < mid else "white")
                continue
            state = data.status[i][j]
            kind = MISSING if state == MISSING else ("no value" if state == OK else "failed")
            ax.add_patch(
                Rectangle(
                    (j - 0.5, i - 0.5),
                    1,
                    1,
                    facecolor="0.85",
                    edgecolor="0.45",
                    hatch="///",
                    linewidth=0.5,
                    gid=f"no-value:{kind}",
                )
            )
            label = state.lower() if state != OK else "no value"
            ax.text(
                j,
                i,
                label,
                ha="center",
                va="center",
                fontsize=8,
                color="0.15",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
            )
    if data.chosen is not None:
        row, col = data.cell(*data.chosen)
        ax.add_patch(
            Rectangle(
                (col - 0.5, row - 0.5),
                1,
                1,
                fill=False,
                edgecolor="red",
                linewidth=2.5,
                gid="chosen",
                label=f"chosen: K={data.chosen[0]}, γ={data.chosen[1]:g} ({data.chosen_source})",
            )
        )
    ax.set_xticks(range(len(data.gammas)), [f"{g:g}" for g in data.gammas])
    ax.set_yticks(range(len(data.ks)), [str(k) for k in data.ks])
    ax.set_xlabel("γ (row-norm step ratio)")
    ax.set_ylabel("K (refresh period)")
    ax.set_title(title, fontsize=10)
    if finite.size:
        fig.colorbar(image, ax=ax, label=f"{data.fd.label} (lower is better)", shrink=0.9)


def _steps_text(steps: Sequence[int]) -> str:
    if not steps:
        return "the objective steps"
    if len(steps) > MAX_STEP_PANELS:
        return f"{len(steps)} eval steps"
    return "steps " + ", ".join(map(str, steps))


def plot_heatmap(data: HeatmapData) -> Figure:
    """The objective panel, then one panel per eval step; the chosen pair is outlined in red on each, and cells
    with no number are hatched grey and labelled with why. Colour scales are per panel: the question a panel
    answers is which cell is best at that step, and FD falls between steps by more than cells differ."""
    panels = [(f"objective: mean FD over {_steps_text(data.eval_steps or data.steps)} and seeds", data.objective)]
    panels += [(f"FD at step {s} (mean over seeds)", m) for s, m in zip(data.steps, data.per_step, strict=True)]
    width = 0.75 * len(data.gammas) + 2.8
    height = 0.55 * len(data.ks) + 2.4
    rows, cols = grid_shape(len(panels))
    fig = new_figure(width * cols, height * rows + 0.5)
    grid = fig.subplots(rows, cols, squeeze=False).ravel()
    axes = grid[: len(panels)]
    for ax in grid[len(panels) :]:
        fig.delaxes(ax)
    for ax, (title, matrix) in zip(axes, panels, strict=True):
        _panel(ax, data, matrix, title, fig)
    if data.chosen is not None:
        axes[0].legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize=8, frameon=False)
    header = f"K × γ sweep{' at ' + ', '.join(r for r in data.rungs if r) if any(data.rungs) else ''}"
    if data.baselines:
        header += " — baselines: " + ", ".join(f"{name} {v:.3g}" for name, v in data.baselines.items())
    fig.suptitle(header, fontsize=11)
    return fig
