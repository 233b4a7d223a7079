"""Run records as the dashboards see them, the table a page computes once, the honest name of the FD they carry,
and seed statistics.

A record is one trial (one MLflow child run): its arm and knobs, seed, status, the eval steps it declared, and the
series it logged, each a mapping training step -> value; `load_runs` builds them from `trials.record`'s runs. Its
status is one of `trials.record.STATES` or DIVERGED. ``as_records`` checks ``RunRecord`` objects or plain dicts with
the same keys (step keys may be strings, as JSON gives them back) once, into a ``Records`` table that every
``compute_*`` takes as it is: a report builds one table and hands it to each of its sections.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

import numpy as np

from trials.optim import ARMS
from trials.record import METRIC, SUCCEEDED

from ._errors import DashboardInputError

__all__ = [
    "ARMS",
    "SERIES",
    "SUCCEEDED",
    "FDInfo",
    "Records",
    "RecordsLike",
    "RunRecord",
    "SeedStats",
    "as_records",
    "describe_fd",
    "fd_label",
]

# The per-step series a trial logs (`trials.record.METRIC`) that the dashboards draw.
SERIES = (METRIC.FD, METRIC.VAL_LOSS, METRIC.LOSS, METRIC.EFFECTIVE_TIME_S, METRIC.OPTIMIZER_TIME_S,
          METRIC.STEP_TIME_S, METRIC.OPTIMIZER_STEP_TIME_S, METRIC.ALIGNMENT)
# The only extractor whose FD is FD-DINO (trials.metrics); every other number is FD on other features.
_DINO_METRIC = "fd_dinov2"

Series = dict[int, float]


@dataclass(frozen=True)
class RunRecord:
    """One trial. Series map training step -> value; ``optimizer_time_s`` is cumulative, ``step_time_s`` is the
    mean effective step time so far, as a trial logs them. ``K`` and ``gamma`` are None for an arm that does not
    use them (``K`` only for periodic, ``gamma`` for periodic and rownorm), so a baseline is never drawn as a cell
    of the K x gamma grid. ``parameters`` is the model's parameter count (the x axis of scaling plots).
    ``eval_steps`` are the steps the trial declared for FD (empty when not recorded): once checked, a record keeps
    FD at those steps only, so a trainer that reports FD at other steps cannot add points or heatmap panels."""

    run_id: str = ""
    arm: str = "periodic"
    rung: str = ""
    seed: int = 0
    K: int | None = None
    gamma: float | None = None
    status: str = SUCCEEDED
    objective: float | None = None
    parameters: int | None = None
    metric_name: str | None = None
    fd_samples: int | None = None
    eval_steps: tuple[int, ...] = ()
    fd: Mapping[int, float] = field(default_factory=dict)
    val_loss: Mapping[int, float] = field(default_factory=dict)
    loss: Mapping[int, float] = field(default_factory=dict)
    effective_time_s: Mapping[int, float] = field(default_factory=dict)
    optimizer_time_s: Mapping[int, float] = field(default_factory=dict)
    step_time_s: Mapping[int, float] = field(default_factory=dict)
    optimizer_step_time_s: Mapping[int, float] = field(default_factory=dict)
    # `update_rms.<kind>.<step kind>` / `update_spec.<kind>.<step kind>` at the last eval step (Muon family)
    updates: Mapping[str, float] = field(default_factory=dict)
    # The alignment score (scenes-cnn runs; empty elsewhere): the all-correct share at each eval step, and each
    # attribute's share (count, position, kind, colour, size, relation) at the last eval step. Higher is better.
    alignment: Mapping[int, float] = field(default_factory=dict)
    alignment_attributes: Mapping[str, float] = field(default_factory=dict)

    @property
    def endpoint_alignment(self) -> float | None:
        """The all-correct share at the last eval step with one; None without alignment."""
        return self.alignment[max(self.alignment)] if self.alignment else None

    @property
    def succeeded(self) -> bool:
        return self.status == SUCCEEDED

    @property
    def label(self) -> str:
        """The arm with the knobs that make it what it is: ``periodic K=3 γ=0.15``, ``rownorm γ=0.15``, ``muon``."""
        parts = [self.arm]
        if self.K is not None:
            parts.append(f"K={self.K}")
        if self.gamma is not None:
            parts.append(f"γ={self.gamma:g}")
        return " ".join(parts)

    def objective_value(self) -> float | None:
        """The sweep objective: the logged ``objective`` (mean FD at the objective steps) when there is one, else
        the mean of the FD series; None when there is no FD or some checkpoint diverged (NaN), since a mean over
        the finite ones would flatter the run."""
        if self.objective is not None and math.isfinite(self.objective):
            return self.objective
        values = list(self.fd.values())
        if not values or not all(math.isfinite(v) for v in values):
            return None
        return float(np.mean(values))


_FIELDS = {f.name for f in fields(RunRecord)}
_OPTIONAL_INT = ("K", "parameters", "fd_samples")


def _step(name: str, run: str, step: Any) -> int:
    try:
        s = int(step)
        whole = not isinstance(step, bool) and float(step) == s
    except (TypeError, ValueError) as exc:
        raise DashboardInputError(f"record {run}: {name} has a non-numeric entry {step!r}") from exc
    if s < 0 or not whole:
        raise DashboardInputError(f"record {run}: {name} steps must be whole numbers >= 0, got {step!r}")
    return s


def _series(name: str, run: str, value: Any) -> Series:
    if not isinstance(value, Mapping):
        raise DashboardInputError(f"record {run}: {name} must map step -> value, got {type(value).__name__}")
    out: Series = {}
    for step, v in value.items():
        try:
            x = float(v)  # NaN and inf are kept: they mark a diverged checkpoint
        except (TypeError, ValueError) as exc:
            raise DashboardInputError(f"record {run}: {name} has a non-numeric entry {step!r}: {v!r}") from exc
        out[_step(name, run, step)] = x
    return out


def _optional_number(name: str, run: str, value: Any, kind: type) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        raise DashboardInputError(f"record {run}: {name} must be a number, got {value!r}")
    try:
        number = kind(float(value)) if kind is int else float(value)
    except (TypeError, ValueError) as exc:
        raise DashboardInputError(f"record {run}: {name} must be a number, got {value!r}") from exc
    if kind is int and number != float(value):
        raise DashboardInputError(f"record {run}: {name} must be a whole number, got {value!r}")
    return number


def _from_mapping(item: Mapping[str, Any], index: int) -> RunRecord:
    unknown = sorted(set(item) - _FIELDS)
    if unknown:
        raise DashboardInputError(f"record {index}: unknown keys {unknown}; allowed: {sorted(_FIELDS)}")
    run = repr(item.get("run_id") or index)
    values: dict[str, Any] = dict(item)
    for name in SERIES:
        if name in values:
            values[name] = _series(name, run, values[name])
    for name in _OPTIONAL_INT:
        values[name] = _optional_number(name, run, values.get(name), int)
    for name in ("gamma", "objective"):
        values[name] = _optional_number(name, run, values.get(name), float)
    if "eval_steps" in values:
        steps = values["eval_steps"]
        if isinstance(steps, str | bytes | Mapping) or not isinstance(steps, Iterable):
            raise DashboardInputError(f"record {run}: eval_steps must be a list of steps, got {steps!r}")
        values["eval_steps"] = tuple(_step("eval_steps", run, s) for s in steps)
    for name in ("updates", "alignment_attributes"):
        if name in values:
            if not isinstance(values[name], Mapping):
                raise DashboardInputError(f"record {run}: {name} must map name -> value")
            values[name] = {str(k): float(v) for k, v in values[name].items()}
    if "seed" in values:
        values["seed"] = _optional_number("seed", run, values["seed"], int)
        if values["seed"] is None:
            raise DashboardInputError(f"record {run}: seed must be a whole number, got None")
    for name in ("run_id", "arm", "rung", "status"):
        if name in values and not isinstance(values[name], str):
            raise DashboardInputError(f"record {run}: {name} must be a string, got {values[name]!r}")
    if "status" in values:
        values["status"] = values["status"].upper()
    return RunRecord(**values)


def _checked(item: RunRecord | Mapping[str, Any], index: int) -> RunRecord:
    """One record as every figure reads it: series in step order (they are drawn in mapping order, and a record
    built by hand may hold its steps in any order), FD at its declared eval steps only."""
    if isinstance(item, Mapping):
        item = _from_mapping(item, index)
    elif not isinstance(item, RunRecord):
        raise DashboardInputError(f"record {index}: expected a RunRecord or a dict, got {type(item).__name__}")
    series: dict[str, Any] = {name: dict(sorted(getattr(item, name).items())) for name in SERIES}
    declared = set(item.eval_steps)
    if declared:
        # FD at a step the trial never declared is a trainer's extra, not an evaluation the sweep asked for: one
        # that reported 20,000 of them once made a report of 20,000 heatmap panels.
        series[METRIC.FD] = {s: v for s, v in series[METRIC.FD].items() if s in declared}
        series[METRIC.ALIGNMENT] = {s: v for s, v in series[METRIC.ALIGNMENT].items() if s in declared}
    return replace(item, eval_steps=tuple(sorted(declared)), **series)


@dataclass(frozen=True)
class Records:
    """Records checked once (build one with ``as_records``): the table a page computes and hands to each of its
    sections, which take it as it is; it reads like the list ``load_runs`` used to return. Its rung order and FD
    description are worked out on first use; ``where`` keeps some of the records without checking them again."""

    records: tuple[RunRecord, ...] = ()

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> RunRecord:
        return self.records[index]

    @cached_property
    def rungs(self) -> tuple[str, ...]:
        """Rungs from the smallest model to the largest (``rung_order``)."""
        return rung_order(self.records)

    @cached_property
    def fd(self) -> FDInfo:
        """Which features and sample counts the records' FD numbers were computed with (``describe_fd``)."""
        return describe_fd(self.records)

    def where(self, keep: Callable[[RunRecord], bool]) -> Records:
        return Records(tuple(r for r in self.records if keep(r)))


# What every compute_* takes: a checked table, taken as it is, or records (objects or dicts) to check into one.
RecordsLike = Records | Iterable[RunRecord | Mapping[str, Any]]


def as_records(items: RecordsLike) -> Records:
    """``RunRecord`` objects or dicts with the same keys -> a checked ``Records`` table; an unknown key or a
    malformed series raises ``DashboardInputError`` naming the record. A ``Records`` table is returned as it is:
    it was checked when it was built."""
    if isinstance(items, Records):
        return items
    return Records(tuple(_checked(item, i) for i, item in enumerate(items)))


# ----------------------------------------------------------------------------------------------------------
# What the FD numbers are


def fd_label(metric_name: str | None) -> str:
    """An axis label that says which features the FD was computed on: FD-DINOv2 only for DINOv2 features."""
    if metric_name is None:
        return "FD (features not recorded)"
    if metric_name == _DINO_METRIC:
        return "FD-DINOv2"
    return f"FD on {metric_name.removeprefix('fd_')} features"


@dataclass(frozen=True)
class FDInfo:
    """Which feature extractor scored the FD numbers (the ``fd.metric_name`` tag) and on how many generated
    samples (``fd.samples``); several values mean the numbers are not comparable with each other."""

    metric_names: tuple[str, ...] = ()
    samples: tuple[int, ...] = ()

    @property
    def consistent(self) -> bool:
        return len(self.metric_names) <= 1 and len(self.samples) <= 1

    @property
    def label(self) -> str:
        if len(self.metric_names) == 1:
            return fd_label(self.metric_names[0])
        if not self.metric_names:
            return fd_label(None)
        return "FD (mixed feature extractors)"

    @property
    def description(self) -> str:
        """One sentence for a report header."""
        if not self.metric_names:
            what = "FD: the feature extractor was not recorded with these runs"
        elif len(self.metric_names) > 1:
            what = (
                f"FD from several feature extractors ({', '.join(self.metric_names)}): "
                "their numbers are on different scales and must not be compared"
            )
        elif self.metric_names[0] == _DINO_METRIC:
            what = f"FD-DINOv2 (metric {_DINO_METRIC}: Fréchet distance on DINOv2 features)"
        else:
            name = self.metric_names[0]
            what = (
                f"FD on {name.removeprefix('fd_')} features (metric {name}): a stand-in feature network, "
                "not FD-DINO; its numbers are on its own scale"
            )
        if not self.samples:
            count = "sample count not recorded"
        elif len(self.samples) == 1:
            count = f"{self.samples[0]} generated samples per FD"
        else:
            count = (
                f"generated samples per FD differ between runs ({', '.join(map(str, self.samples))}): "
                "FD is biased upward at small sample counts, so these are not comparable"
            )
        return f"{what}; {count}."


def describe_fd(records: Iterable[RunRecord]) -> FDInfo:
    """The distinct FD metric names and sample counts among the records that carry an FD."""
    names: set[str] = set()
    samples: set[int] = set()
    for r in records:
        if not r.fd:
            continue
        if r.metric_name is not None:
            names.add(r.metric_name)
        if r.fd_samples is not None:
            samples.add(r.fd_samples)
    return FDInfo(metric_names=tuple(sorted(names)), samples=tuple(sorted(samples)))


def merge_fd(infos: Iterable[FDInfo | None]) -> FDInfo:
    names: set[str] = set()
    samples: set[int] = set()
    for info in infos:
        if info is not None:
            names.update(info.metric_names)
            samples.update(info.samples)
    return FDInfo(metric_names=tuple(sorted(names)), samples=tuple(sorted(samples)))


# ----------------------------------------------------------------------------------------------------------
# Statistics over seeds


@dataclass(frozen=True)
class SeedStats:
    """Mean and min–max over seeds at each x; ``n`` is the number of seeds with a finite value there. An x at
    which no seed has a finite value is left out."""

    x: tuple[float, ...]
    mean: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    n: tuple[int, ...]

    def at(self, x: float) -> float | None:
        """The mean at ``x`` exactly, or None."""
        for xi, m in zip(self.x, self.mean, strict=True):
            if xi == x:
                return m
        return None


def seed_stats(series: Sequence[Mapping[int, float]]) -> SeedStats:
    by_x: dict[float, list[float]] = {}
    for s in series:
        for x, v in s.items():
            if math.isfinite(v):
                by_x.setdefault(x, []).append(v)
    xs = sorted(by_x)
    return SeedStats(
        x=tuple(float(x) for x in xs),
        mean=tuple(float(np.mean(by_x[x])) for x in xs),
        lo=tuple(float(np.min(by_x[x])) for x in xs),
        hi=tuple(float(np.max(by_x[x])) for x in xs),
        n=tuple(len(by_x[x]) for x in xs),
    )


def rung_order(records: Iterable[RunRecord]) -> tuple[str, ...]:
    """Rungs from the smallest model to the largest (by recorded parameter count, then by name)."""
    size: dict[str, float] = {}
    for r in records:
        current = size.get(r.rung, math.inf)
        if r.parameters is not None:
            current = min(current, float(r.parameters))
        size[r.rung] = current
    return tuple(sorted(size, key=lambda rung: (size[rung], rung)))


def arm_key(label: str) -> tuple[int, str]:
    """Sort key: arms in ``ARMS`` order, then the knobs."""
    arm = label.split(" ", 1)[0]
    return (ARMS.index(arm) if arm in ARMS else len(ARMS), label)
