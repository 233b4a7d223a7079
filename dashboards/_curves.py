"""Curves over training: FD versus step per trial and per arm, and loss versus step and versus effective
wall-clock time per arm (the picture in which per-step and per-second rankings differ).

Seeds: trials with the same rung and arm label (arm plus its knobs) are the seeds of one group; the group is drawn
as the mean over its SUCCEEDED seeds with a min–max band. A failed or diverged trial is drawn on its own (its
curve ends where it stopped) but stays out of the group mean, and the group counts it in ``n_failed``.

Effective time of the train loss: a trial logs the train loss every ``log_every`` steps but its effective time
(training steps only, evaluation excluded) only at eval steps. The time of a train-loss point is interpolated
linearly in the step between (0, 0) and the eval points, i.e. the step time is taken as constant between two eval
points; that holds because effective time leaves evaluation out, and it is off only in the first interval where
warm-up costs (allocation, first-call overheads) land. Points after the last eval step are not extrapolated and
are left out of the time panel. The validation loss is measured at eval steps, where the effective time is
measured too, so it is drawn at its exact times (markers) and needs no interpolation.

Rankings (``LossCurves.by_step``/``by_time``) are on the train loss, the dense series: by step at the largest step
every group reached, by time at the shortest total effective time among the groups (every group has been running
that long), each group's loss interpolated linearly in time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ._draw import colors_for, grid_shape, new_figure
from ._records import FDInfo, Records, RecordsLike, RunRecord, SeedStats, arm_key, as_records, seed_stats

__all__ = [
    "FDCurves",
    "GroupSeries",
    "LossCurves",
    "Ranking",
    "RunSeries",
    "band",
    "compute_fd_curves",
    "compute_loss_curves",
    "group_label",
    "group_series",
    "groups_of",
    "plot_fd_curves",
    "plot_loss_curves",
    "rung_panels",
]


@dataclass(frozen=True)
class _Series:
    """A curve's group: the arm label (arm plus its knobs) at one rung, and the effective time at each of its x."""

    label: str
    arm: str
    rung: str
    time_s: tuple[float, ...]


@dataclass(frozen=True)
class RunSeries(_Series):
    """One trial's series: values at steps, and the effective time at those steps (NaN where not known)."""

    run_id: str
    seed: int
    status: str
    steps: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class GroupSeries(_Series):
    """One arm label at one rung over its succeeded seeds: ``stats.x`` are steps; ``time_s`` the mean effective
    time over seeds at each of those steps (NaN where no seed has one)."""

    stats: SeedStats
    seeds: tuple[int, ...]
    n_failed: int


@dataclass(frozen=True)
class FDCurves:
    """FD over training steps, per trial and per group, one panel per rung (smallest model first)."""

    fd: FDInfo
    rungs: tuple[str, ...]
    runs: tuple[RunSeries, ...]
    groups: tuple[GroupSeries, ...]
    # (rung, arm label) -> the mean over succeeded seeds of the all-correct alignment share at each seed's last eval
    # step, for the groups whose runs carry alignment (shown beside the FD; empty for other extractors)
    alignment: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True)
class Ranking:
    """Group labels from best (lowest loss) to worst at one rung, at step ``at`` or effective time ``at`` s."""

    rung: str
    unit: str  # "step" or "s"
    at: float
    order: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class LossCurves:
    """Train loss (``train``: x = step, time interpolated as the module says) and validation loss (``val``: x =
    eval step, measured time) per group; rankings per rung by step and by effective time."""

    rungs: tuple[str, ...]
    train: tuple[GroupSeries, ...]
    val: tuple[GroupSeries, ...]
    by_step: tuple[Ranking, ...]
    by_time: tuple[Ranking, ...]


def _time_at(record: RunRecord, steps: Sequence[int]) -> list[float]:
    """Effective time at ``steps``: linear between (0, 0) and the eval points, NaN beyond the last eval point."""
    known = sorted((s, t) for s, t in record.effective_time_s.items() if math.isfinite(t))
    if not known:
        return [math.nan] * len(steps)
    xs = [0.0] + [float(s) for s, _ in known]
    ts = [0.0] + [t for _, t in known]
    last = xs[-1]
    return [float(np.interp(s, xs, ts)) if s <= last else math.nan for s in steps]


def groups_of(records: Records) -> list[tuple[str, str, list[RunRecord]]]:
    """(rung, arm label, its records by seed) per group, smallest rung first, arms in `ARMS` order."""
    by_key: dict[tuple[str, str], list[RunRecord]] = {}
    for r in records:
        by_key.setdefault((r.rung, r.label), []).append(r)
    rungs = records.rungs
    keys = sorted(by_key, key=lambda k: (rungs.index(k[0]), arm_key(k[1])))
    return [(rung, label, sorted(by_key[(rung, label)], key=lambda r: (r.seed, r.run_id))) for rung, label in keys]


def group_series(rung: str, label: str, members: Sequence[RunRecord], series: str, interpolate: bool) -> GroupSeries:
    """One group's `series` over its succeeded seeds (mean, min–max), with the mean effective time at each step."""
    ok = [r for r in members if r.succeeded]
    values = [dict(getattr(r, series)) for r in ok]
    stats = seed_stats(values)
    steps = [int(x) for x in stats.x]
    times: list[list[float]] = []
    for r in ok:
        if interpolate:
            times.append(_time_at(r, steps))
        else:
            times.append([r.effective_time_s.get(s, math.nan) for s in steps])
    mean_time = []
    for i in range(len(steps)):
        column = [t[i] for t in times if math.isfinite(t[i])]
        mean_time.append(float(np.mean(column)) if column else math.nan)
    return GroupSeries(
        label=label,
        arm=members[0].arm,
        rung=rung,
        stats=stats,
        time_s=tuple(mean_time),
        seeds=tuple(r.seed for r in ok),
        n_failed=len(members) - len(ok),
    )


def compute_fd_curves(records: RecordsLike) -> FDCurves:
    """FD per trial and per group (rung, arm label) from trial records with an ``fd`` series."""
    recs = as_records(records).where(lambda r: bool(r.fd))
    groups = groups_of(recs)
    runs = tuple(
        RunSeries(label=r.label, arm=r.arm, rung=r.rung, run_id=r.run_id, seed=r.seed, status=r.status,
                  steps=tuple(r.fd), values=tuple(r.fd.values()),
                  time_s=tuple(r.effective_time_s.get(s, math.nan) for s in r.fd))
        for _, _, members in groups
        for r in members
    )
    means = tuple(
        group_series(rung, label, members, "fd", interpolate=False)
        for rung, label, members in groups
        if any(r.succeeded for r in members)
    )
    alignment = {}
    for rung, label, members in groups:
        shares = [a for r in members if r.succeeded and (a := r.endpoint_alignment) is not None]
        if shares:
            alignment[(rung, label)] = float(np.mean(shares))
    return FDCurves(fd=recs.fd, rungs=recs.rungs, runs=runs, groups=means, alignment=alignment)


def _ranking_by_step(rung: str, groups: Sequence[GroupSeries]) -> Ranking | None:
    common = set.intersection(*(set(g.stats.x) for g in groups)) if groups else set()
    if not common:
        return None
    at = max(common)
    values = [(g.label, g.stats.at(at)) for g in groups]
    order = sorted(((label, math.nan if v is None else v) for label, v in values), key=lambda p: p[1])
    return Ranking(rung=rung, unit="step", at=at, order=tuple(order))


def _ranking_by_time(rung: str, groups: Sequence[GroupSeries]) -> Ranking | None:
    curves = []
    for g in groups:
        pts = [(t, m) for t, m in zip(g.time_s, g.stats.mean, strict=True) if math.isfinite(t)]
        if pts:
            curves.append((g.label, [t for t, _ in pts], [m for _, m in pts]))
    if not curves or len(curves) < len(groups):
        return None
    at = min(ts[-1] for _, ts, _ in curves)
    order = []
    for label, ts, ms in curves:
        if at < ts[0]:
            return None  # a group has no loss point that early: no common budget to compare at
        order.append((label, float(np.interp(at, ts, ms))))
    return Ranking(rung=rung, unit="s", at=at, order=tuple(sorted(order, key=lambda p: p[1])))


def compute_loss_curves(records: RecordsLike) -> LossCurves:
    """Train and validation loss per group against step and effective time, and the two rankings per rung."""
    recs = as_records(records).where(lambda r: bool(r.loss or r.val_loss))
    train: list[GroupSeries] = []
    val: list[GroupSeries] = []
    for rung, label, members in groups_of(recs):
        if not any(r.succeeded for r in members):
            continue
        if any(r.loss for r in members):
            train.append(group_series(rung, label, members, "loss", interpolate=True))
        if any(r.val_loss for r in members):
            val.append(group_series(rung, label, members, "val_loss", interpolate=False))
    rungs = recs.rungs
    by_step: list[Ranking] = []
    by_time: list[Ranking] = []
    for rung in rungs:
        in_rung = [g for g in train if g.rung == rung]
        step_rank = _ranking_by_step(rung, in_rung)
        time_rank = _ranking_by_time(rung, in_rung)
        if step_rank is not None:
            by_step.append(step_rank)
        if time_rank is not None:
            by_time.append(time_rank)
    return LossCurves(rungs=rungs, train=tuple(train), val=tuple(val), by_step=tuple(by_step), by_time=tuple(by_time))


# ----------------------------------------------------------------------------------------------------------
# Drawing


def band(ax: Any, x: Sequence[float], g: GroupSeries, color: str, label: str, **line: Any) -> None:
    s = g.stats
    keep = [i for i, v in enumerate(x) if math.isfinite(v)]
    xs = [x[i] for i in keep]
    ax.plot(xs, [s.mean[i] for i in keep], color=color, label=label, gid=f"mean:{g.label}", **line)
    if any(s.n[i] > 1 for i in keep):
        ax.fill_between(
            xs,
            [s.lo[i] for i in keep],
            [s.hi[i] for i in keep],
            color=color,
            alpha=0.18,
            linewidth=0,
            gid=f"band:{g.label}",
        )


def group_label(g: GroupSeries) -> str:
    seeds = f"{len(g.seeds)} seed{'s' if len(g.seeds) != 1 else ''}"
    failed = f", {g.n_failed} failed" if g.n_failed else ""
    return f"{g.label} ({seeds}{failed})"


def rung_panels(rungs: Sequence[str]) -> tuple[Figure, list[tuple[Any, str]]]:
    """A figure with one panel per rung (smallest first; one unnamed panel without rungs): (figure, [(axes, rung)])."""
    rungs = tuple(rungs) or ("",)
    rows, cols = grid_shape(len(rungs))
    fig = new_figure(5.2 * cols, 4.0 * rows)
    grid = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in grid[len(rungs) :]:
        fig.delaxes(ax)
    return fig, list(zip(grid, rungs, strict=False))


def plot_fd_curves(data: FDCurves) -> Figure:
    """One panel per rung: each trial as a thin line (a failed one ends in an ×), each group as its mean over
    succeeded seeds with a min–max band."""
    fig, panels = rung_panels(data.rungs)
    for ax, rung in panels:
        groups = [g for g in data.groups if g.rung == rung]
        runs = [r for r in data.runs if r.rung == rung]
        colors = colors_for(sorted({g.label for g in groups} | {r.label for r in runs}, key=arm_key))
        for r in runs:
            ax.plot(r.steps, r.values, color=colors[r.label], linewidth=0.8, alpha=0.4, gid=f"run:{r.run_id}")
            if r.status != "SUCCEEDED" and r.steps:
                finite = [(s, v) for s, v in zip(r.steps, r.values, strict=True) if math.isfinite(v)]
                if finite:
                    ax.plot(*finite[-1], marker="x", color=colors[r.label], markersize=8, gid=f"failed:{r.run_id}")
        for g in groups:
            band(ax, g.stats.x, g, colors[g.label], group_label(g), linewidth=2.0, marker="o", markersize=3)
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{data.fd.label} (lower is better)")
        ax.set_title(f"FD vs step{' — ' + rung if rung else ''}", fontsize=10)
        ax.grid(True, alpha=0.3)
        if groups:
            ax.legend(fontsize=7)
    return fig


def plot_loss_curves(data: LossCurves) -> Figure:
    """Per rung, loss versus step (left) and versus effective training time (right): the train loss as the mean
    over seeds with a min–max band, the validation loss as markers at the eval steps."""
    rungs = data.rungs or ("",)
    fig = new_figure(10.5, 3.8 * len(rungs))
    axes = fig.subplots(len(rungs), 2, squeeze=False)
    for row, rung in zip(axes, rungs, strict=True):
        train = [g for g in data.train if g.rung == rung]
        val = [g for g in data.val if g.rung == rung]
        colors = colors_for(sorted({g.label for g in train + val}, key=arm_key))
        ax_step, ax_time = row
        for g in train:
            band(ax_step, g.stats.x, g, colors[g.label], f"{group_label(g)} train", linewidth=1.5)
            band(ax_time, g.time_s, g, colors[g.label], f"{group_label(g)} train", linewidth=1.5)
        for g in val:
            keep = [i for i, t in enumerate(g.time_s) if math.isfinite(t)]
            timed = ([g.time_s[i] for i in keep], [g.stats.mean[i] for i in keep])
            for ax, (xs, ys) in ((ax_step, (g.stats.x, g.stats.mean)), (ax_time, timed)):
                ax.plot(xs, ys, linestyle="none", marker="o", color=colors[g.label], markeredgecolor="black",
                        label=f"{g.label} val", gid=f"val:{g.label}")
        suffix = f" — {rung}" if rung else ""
        ax_step.set_title(f"loss vs step{suffix}", fontsize=10)
        # The train-loss times are interpolated (module docstring); the title says so where the reader looks.
        ax_time.set_title(
            f"loss vs effective training time{suffix}\n(train: time interpolated between evals)", fontsize=10
        )
        ax_step.set_xlabel("training step")
        ax_time.set_xlabel("effective training time (s)")
        for ax in row:
            ax.set_ylabel("loss")
            ax.grid(True, alpha=0.3)
        if train or val:
            ax_step.legend(fontsize=7)
    return fig
