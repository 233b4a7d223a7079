"""A transfer's raw records as plain files, and the transfer read back from them: what a study keeps in a
repository so every headline number re-derives without the MLflow store that produced it.

    <folder>/transfer_record.json  identity, plan (as stored), source, the sweep's objectives, the timing record
    <folder>/runs.csv              one row per run (its last attempt): rung, arm, seed, lr, K, gamma, state, ...
    <folder>/curves.csv            one row per recorded point: run_id, series (checkpoint | track | fd_bias |
                                   alignment), step, effective_time_s, value (FD, tracking FD, FD bias or the
                                   all-correct alignment share)

Floats are written at full precision (Python's shortest round-trip repr), so the analysis of the transfer read back
equals the analysis of the transfer read from MLflow, number for number (a test checks it). `scalesweep transfer
records DIR --out FOLDER` writes them; `scalesweep fit FOLDER` and `read_transfer_records` read them.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaling import ScalingInputError, TransferRun

if TYPE_CHECKING:
    from ._result import TransferResult

__all__ = ["RECORD_FILES", "is_records_folder", "read_transfer_records", "write_transfer_records"]

RECORD_FILES = ("transfer_record.json", "runs.csv", "curves.csv")
RECORDS_FORMAT = 1

# TransferRun's point series, each a tuple of tuples: (step, effective_time_s, value), fd_bias (step, value). Records
# written before alignment was kept have no alignment rows and read back without it.
_SERIES = ("checkpoints", "track", "fd_bias", "alignment")
_SERIES_NAME = {"checkpoints": "checkpoint", "track": "track", "fd_bias": "fd_bias", "alignment": "alignment"}
_SCALARS = tuple(f.name for f in dataclasses.fields(TransferRun) if f.name not in _SERIES)
_INTS = {"parameters", "seed", "attempt", "fd_samples", "horizon", "track_samples", "K"}
_FLOATS = {"lr", "lr_base", "gamma"}
# Which of the result's run lists a row belongs to (`runs` holds an lr bracket's every multiple: the record
# splits them again, as the run read from MLflow does).
_GROUPS = ("runs", "verification_runs")


def is_records_folder(path: str | Path) -> bool:
    """True when `path` holds a transfer's records (all of `RECORD_FILES`)."""
    p = Path(path)
    return all((p / name).is_file() for name in RECORD_FILES)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return str(value)


def write_transfer_records(result: TransferResult, out: str | Path) -> list[Path]:
    """Write `result`'s records into `out` (created; existing record files replaced); returns the files."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    groups = {"runs": [*result.runs, *result.tuning_runs], "verification_runs": list(result.verification_runs)}
    doc = {
        "records_format": RECORDS_FORMAT,
        "transfer_id": result.transfer_id, "name": result.name, "state": result.state,
        "experiment": result.experiment, "parent_run_id": result.parent_run_id,
        "plan": result.plan.to_dict(), "source": result.source, "source_objectives": result.source_objectives,
        "step_timing": result.step_timing, "counts": result.counts,
    }
    paths = [folder / name for name in RECORD_FILES]
    paths[0].write_text(json.dumps(doc, indent=1, sort_keys=True, allow_nan=True) + "\n", encoding="utf-8")
    with paths[1].open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["group", *_SCALARS])
        for group, runs in groups.items():
            for run in runs:
                writer.writerow([group, *(_text(getattr(run, name)) for name in _SCALARS)])
    with paths[2].open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["run_id", "series", "step", "effective_time_s", "value"])
        for runs in groups.values():
            for run in runs:
                for series in _SERIES:
                    for point in getattr(run, series):
                        step, *rest = point
                        time_s, value = (rest if len(rest) == 2 else (None, rest[0]))
                        writer.writerow([run.run_id, _SERIES_NAME[series], int(step), _text(time_s), _text(value)])
    return paths


def _scalar(name: str, text: str) -> Any:
    if text == "":
        return None
    if name in _INTS:
        return int(text)
    if name in _FLOATS:
        return float(text)
    return text


def _read_csv(path: Path, columns: Sequence[str]) -> Iterable[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise ScalingInputError(f"{path}: missing columns {missing}; a transfer record has {list(columns)}")
        yield from reader


def read_transfer_records(folder: str | Path) -> TransferResult:
    """The transfer whose records `write_transfer_records` wrote into `folder`, as a `TransferResult` (every
    answer of a transfer read from MLflow; no store is opened)."""
    from ._result import TransferResult

    path = Path(folder)
    if not is_records_folder(path):
        absent = [n for n in RECORD_FILES if not (path / n).is_file()]
        raise ScalingInputError(f"{path} is not a transfer's records folder: {absent} missing "
                                f"(`scalesweep transfer records DIR --out {path}` writes them)")
    doc = json.loads((path / RECORD_FILES[0]).read_text(encoding="utf-8"))
    if doc.get("records_format") != RECORDS_FORMAT:
        raise ScalingInputError(f"{path / RECORD_FILES[0]}: records_format {doc.get('records_format')!r}; this "
                                f"version reads {RECORDS_FORMAT}")
    points: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for row in _read_csv(path / RECORD_FILES[2], ("run_id", "series", "step", "effective_time_s", "value")):
        value = float(row["value"])
        point = ((int(row["step"]), value) if row["series"] == "fd_bias"
                 else (int(row["step"]), float(row["effective_time_s"]), value))
        points.setdefault((row["run_id"], row["series"]), []).append(point)
    groups: dict[str, list[TransferRun]] = {g: [] for g in _GROUPS}
    for row in _read_csv(path / RECORD_FILES[1], ("group", *_SCALARS)):
        if row["group"] not in groups:
            raise ScalingInputError(f"{path / RECORD_FILES[1]}: group {row['group']!r}; allowed: {list(_GROUPS)}")
        fields: dict[str, Any] = {name: _scalar(name, row[name]) for name in _SCALARS}
        series: dict[str, Any] = {s: tuple(points.get((row["run_id"], _SERIES_NAME[s]), ())) for s in _SERIES}
        groups[row["group"]].append(TransferRun(**fields, **series))
    return TransferResult(
        transfer_id=doc["transfer_id"], name=doc["name"], state=doc["state"], workdir=str(path.resolve()),
        tracking_uri="", experiment=doc["experiment"], parent_run_id=doc.get("parent_run_id"),
        source=doc["source"], plan=doc["plan"], runs=groups["runs"], counts=doc.get("counts") or {},
        source_objectives=doc.get("source_objectives") or {}, verification_runs=groups["verification_runs"],
        step_timing=doc.get("step_timing") or {},
    )
