"""A transfer's state on disk (`transfer.json`) and its live status.

Two readings of one file: `TransferHead`, what every reader needs (the status, cancel, the result: identity,
source, plan, timing), which leaves the stored sweep specs as they are; and `TransferState`, the driver's, which
holds the sweep spec that runs the transfer (and the pilot's) typed, validated once as the file is read.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from ..jobfiles import (
    TRANSFER_FILE,
    driver_running,
    is_sweep_folder,
    read_outcome,
    read_status,
    read_transfer,
    write_json,
)
from ..jobs import sweep_status
from ..specs import SweepSpec
from ._errors import TransferError
from ._pilot import PILOT_FOLDER
from ._plan import TransferPlan

__all__ = ["TransferHead", "TransferState", "now", "read_head", "read_state", "revised", "transfer_status",
           "validated_sweep"]


def now() -> str:
    """The time a state or outcome records: UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class TransferHead(BaseModel):
    """What `transfer.json` holds, as its readers need it: the transfer's identity, its source, its plan and the
    per-step timing once measured. Written when the transfer is planned, read by every later call. The sweep specs
    it stores (`sweep_spec`, `pilot_sweep_spec`) stay as stored here: only the driver reads them (`TransferState`)."""

    model_config = ConfigDict(extra="allow")

    transfer_id: str
    name: str
    fingerprint: str | None = None
    spec: dict[str, Any] = {}
    source: dict[str, Any]  # the sweep's provenance (`_Source.provenance`)
    source_objectives: dict[str, Any] = {}
    plan: TransferPlan
    created_at: str | None = None
    step_timing: dict[str, Any] | None = None  # None until measured, before the first run

    @property
    def tracking(self) -> dict[str, str]:
        return dict((self.model_extra or {})["sweep_spec"]["tracking"])


class TransferState(TransferHead):
    """The driver's state: the head, and the sweep spec that runs the transfer and the pilot's (target rule
    `pilot`), typed (validated when planned, or once as the file is read on resume)."""

    sweep_spec: SweepSpec
    pilot_sweep_spec: SweepSpec | None = None

    @property
    def tracking(self) -> dict[str, str]:
        return self.sweep_spec.tracking.model_dump(mode="json")

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.model_dump(mode="json", exclude={"plan"}).items() if v is not None}
        return {**doc, "plan": self.plan.to_dict()}

    def write(self, path: Path) -> None:
        write_json(path / TRANSFER_FILE, self.to_dict())


def validated_sweep(sweep_spec: dict[str, Any]) -> SweepSpec:
    """A sweep spec that runs the transfer (or its pilot), validated: the one time in its process; its errors are
    the transfer's, naming each field."""
    try:
        validated = SweepSpec.model_validate(sweep_spec)
    except ValidationError as exc:  # e.g. a `trial` override that trials refuses
        parts = "; ".join(f"{'.'.join(map(str, e['loc']))}: {str(e['msg']).removeprefix('Value error, ')}"
                          for e in exc.errors())
        raise TransferError(f"the transfer's runs would be invalid: {parts}") from None
    return validated


def revised(sweep: SweepSpec, **changes: Any) -> SweepSpec:
    """`sweep` with some sections changed (a round's or an extension's seeds, the execution a resume asks for):
    a new spec, validated once, its errors the transfer's."""
    return validated_sweep({**sweep.model_dump(mode="json"), **changes})


_Read = TypeVar("_Read", bound=TransferHead)


def _read(path: Path, model: type[_Read]) -> _Read:
    state = read_transfer(path)
    if state is None:
        raise TransferError(f"{path} is not a transfer work folder (no {TRANSFER_FILE})")
    try:
        return model.model_validate(state)
    except ValidationError as exc:
        raise TransferError(f"{path / TRANSFER_FILE} is not a transfer's state: {exc.errors()[0]['msg']}") from None


def read_head(path: Path) -> TransferHead:
    """The transfer in `path` as its readers need it (its sweep specs left as stored)."""
    return _read(path, TransferHead)


def read_state(path: Path) -> TransferState:
    """The transfer in `path` as its driver needs it (its sweep specs typed)."""
    return _read(path, TransferState)


def transfer_status(workdir: str | Path) -> dict[str, Any]:
    """The live status of the transfer in `workdir`: state (PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, or
    INTERRUPTED when its driver died; `--resume` continues it), run counts, driver_alive, pid, MLflow ids and the
    last events."""
    path = Path(workdir).resolve()
    state = read_head(path)
    plan = state.plan
    base = {"transfer_id": state.transfer_id, "name": state.name, "workdir": str(path),
            "source_sweep_id": state.source["sweep_id"], "rungs": plan.rungs, "arms": plan.arms,
            "horizon": plan.horizon, "runs_planned": plan.planned_runs(),
            "tracking_uri": state.tracking["tracking_uri"], "experiment": state.tracking["experiment"]}
    if not is_sweep_folder(path):  # the driver has not reached its sweep yet (timing, or the pilot)
        outcome = read_outcome(path)  # a transfer stopped in its pilot ended there
        return {**base, "state": outcome["state"] if outcome else "PENDING", "driver_alive": driver_running(path),
                "counts": {}, "parent_run_id": None, **_pilot_status(path, state.plan)}
    status = sweep_status(path)
    outcome = read_outcome(path)
    sweep_state = status.get("state")
    if sweep_state in ("SUCCEEDED", "FAILED"):
        final = outcome["state"] if outcome else sweep_state
    else:
        final = sweep_state
    counts = {k: v for k, v in (status.get("counts") or {}).items()}
    return {**base, "state": final, "driver_alive": status.get("driver_alive", False), "pid": status.get("pid"),
            "counts": counts, "sweep_id": status.get("sweep_id"), "parent_run_id": status.get("parent_run_id"),
            "experiment_id": status.get("experiment_id"),
            "tracking_uri": status.get("tracking_uri", base["tracking_uri"]),
            "experiment": status.get("experiment", base["experiment"]), "summary": status.get("summary"),
            "running": status.get("running") or [], "events": status.get("events") or [],
            "error": (outcome or {}).get("error") or status.get("error"), "updated_at": status.get("updated_at"),
            **_pilot_status(path, plan)}


def _pilot_status(path: Path, plan: TransferPlan) -> dict[str, Any]:
    """{"pilot": its state, run counts and target once derived} for a transfer with a pilot; {} without."""
    if plan.pilot is None:
        return {}
    status = read_status(path / PILOT_FOLDER) or {}
    state = status.get("state", "PENDING")
    if state == "RUNNING" and not driver_running(path):  # its driver is the transfer's
        state = "INTERRUPTED"
    result = plan.pilot.get("result") or {}
    # per rung: rung -> its target; else the one target of every rung
    target = result.get("values") if plan.pilot.get("per_rung") else result.get("value")
    return {"pilot": {"state": state, "counts": status.get("counts") or {}, "target": target}}

