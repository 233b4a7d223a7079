"""Exports: the transferred hyperparameters for a target rung, as YAML or JSON, from a transfer (verified where
it ran) or from a SUCCEEDED sweep alone (carried by the lr rules, verified nowhere)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from scaling import ScalingError
from sweeper.jobfiles import STATUS_FILE, transfer_version
from sweeper.transfer import TransferError, export_from_sweep

from ..cache import file_version
from ..db import SweepRecord
from ..deps import ReadAccess, ResultsDep, SessionDep, SessionRoute, release
from .transfers import get_transfer_record, started_folder, transfer_result

router = APIRouter(tags=["exports"], route_class=SessionRoute)

Format = Literal["yaml", "json"]
_MEDIA = {"yaml": "application/yaml", "json": "application/json"}
_RUNG = Query(min_length=1, max_length=40, pattern=r"^[a-z0-9][a-z0-9.\-]*$",
              description="Target rung (scalesweep trial rungs: cpu-xs ... paper-15b).")
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/yaml": {"schema": {"type": "string"}},
                      "application/json": {"schema": {"type": "object"}}},
          "description": "the export document (per arm: optimizer config, the rule behind each value, whether it "
                         "was verified at that size; provenance; a PyTorch snippet)"},
    409: {"description": "not finished, or nothing to export yet"},
}


_ALLOW_LOSING = Annotated[bool, Query(description="export a choice that is worse than a baseline with confidence "
                                                  "(refused with 409 without it; the export then carries the warning)")]


def _render(export: Any, fmt: Format, name: str) -> Response:
    text = export.to_yaml() if fmt == "yaml" else export.to_json()
    return Response(text, media_type=_MEDIA[fmt],
                    headers={"Content-Disposition": f'attachment; filename="{name}.{fmt}"'})


def _export(make: Any) -> Any:
    try:
        return make()
    except (ScalingError, TransferError) as exc:
        raise HTTPException(409, str(exc)) from None
    except ValueError as exc:  # an unknown rung (trials.models.check_rung)
        raise HTTPException(422, f"rung: {exc}") from None


@router.get("/transfers/{transfer_id}/export", response_class=Response, responses=_RESPONSES,
            summary="A transfer's hyperparameters for a rung (default: its largest), as YAML or JSON")
def export_transfer(
    transfer_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess,
    format: Format = "yaml", rung: Annotated[str | None, _RUNG] = None, allow_losing: _ALLOW_LOSING = False,
) -> Response:
    record = get_transfer_record(session, transfer_id)
    release(session)
    folder = started_folder(record)
    version = transfer_version(folder)  # read before the result: a label never newer than what it labels
    result = transfer_result(results, record)
    target = rung or result.plan["rungs"][-1]
    # Once per version of the transfer's runs and rung (its first computation fits the runs: a second or more),
    # shared by concurrent readers.
    export = _export(lambda: results.get(
        f"transfer-export:{folder}:{target}:{allow_losing}", version,
        lambda: result.export(target, allow_losing=allow_losing), fresh=True))
    return _render(export, format, f"{record.id}-{target}")


@router.get("/sweeps/{sweep_id}/export", response_class=Response, responses=_RESPONSES,
            summary="A SUCCEEDED sweep's choice carried to a rung by the lr rules alone (verified nowhere)")
def export_sweep(
    sweep_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess,
    rung: Annotated[str, _RUNG], format: Format = "yaml", allow_losing: _ALLOW_LOSING = False,
) -> Response:
    record = session.get(SweepRecord, sweep_id)
    if record is None:
        raise HTTPException(404, f"no sweep {sweep_id!r}")
    if record.state != "SUCCEEDED" or not record.storage_path:
        raise HTTPException(409, f"sweep {sweep_id} is {record.state}: only a SUCCEEDED sweep exports its choice")
    release(session)
    folder = Path(record.storage_path)
    export = _export(lambda: results.get(
        f"sweep-export:{folder}:{rung}:{allow_losing}", file_version(folder / STATUS_FILE),
        lambda: export_from_sweep(folder, rung, allow_losing=allow_losing)))
    return _render(export, format, f"{record.id}-{rung}")
