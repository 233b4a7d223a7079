"""`/v1/transfers`: carry a SUCCEEDED sweep's choice to larger rungs beside the baselines; follow and cancel it,
read its runs. Fits, predictions, the report (`fits`) and exports (`exports`) have routers of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, HTTPException, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from api.schemas import RunsPublic, TransferCreate, TransferExtend, TransferLinks, TransferPublic, TransfersPublic
from scaling import ScalingError
from sweeper import SweepSpec, trial_memory
from sweeper.jobfiles import is_transfer_folder, transfer_version
from sweeper.transfer import (
    TransferError,
    TransferSpec,
    load_transfer_result,
    transfer_estimate,
    transfer_status,
    transfer_work,
)

from ..db import SweepRecord, TransferRecord
from ..deps import JobsDep, Owner, ReadAccess, ResultsDep, SessionDep, SessionRoute, SettingsDep, release
from ..settings import Settings
from . import _jobroutes as jobs

router = APIRouter(prefix="/transfers", tags=["transfers"], route_class=SessionRoute)
plans = APIRouter(prefix="/plans", tags=["plans"], route_class=SessionRoute)  # a transfer priced before it exists

CREATE_EXAMPLE = {"sweep_id": "sw-0123456789ab", "rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "adamw"],
                  "horizon_factor": 2.0, "seeds": [0]}


def get_transfer_record(session: Any, transfer_id: str) -> TransferRecord:
    return jobs.get_job(session, TransferRecord, transfer_id, "transfer")


def _folder(record: TransferRecord) -> Path | None:
    folder = Path(record.storage_path) if record.storage_path else None
    return folder if folder is not None and is_transfer_folder(folder) else None


def _live(record: TransferRecord) -> dict[str, Any]:
    folder = _folder(record)
    if folder is None:
        return {}
    try:
        return transfer_status(folder)
    except (ScalingError, TransferError, OSError, ValueError, KeyError):
        return {}


def started_folder(record: TransferRecord) -> Path:
    """The transfer's work folder once its driver planned it; else a 409."""
    folder = _folder(record)
    if folder is None:
        raise HTTPException(409, f"transfer {record.id} ({record.state}) has not started its runs yet")
    return folder


def transfer_result(results: ResultsDep, record: TransferRecord, *, started: bool = True, fresh: bool = False) -> Any:
    """The transfer's runs and analysis source (`sweeper.TransferResult`), read from MLflow again only when the
    driver's files changed; None before the driver planned it. With `started`, a 409 instead of None. With
    `fresh`, never a value older than the driver's files (`api.service.cache`)."""
    folder = started_folder(record) if started else _folder(record)
    if folder is None:
        return None
    try:
        return results.get(f"transfer:{folder}", transfer_version(folder), lambda: load_transfer_result(folder),
                           fresh=fresh)
    except (ScalingError, TransferError) as exc:
        raise HTTPException(409, f"transfer {record.id}: {exc}") from None


def public(settings: Settings, record: TransferRecord) -> TransferPublic:
    meta = jobs.live_meta(settings, record, _live(record))
    base = f"/v1/transfers/{record.id}"
    return TransferPublic(
        id=record.id, sweep_id=record.sweep_id, name=str(record.spec.get("name", "")), state=record.state,
        owner=record.owner, created_at=record.created_at, updated_at=record.updated_at,
        error=jobs.shown(settings, record.error),
        progress=meta["progress"], mlflow_experiment_id=meta["experiment_id"],
        mlflow_parent_run_id=meta["parent_run_id"],
        links=TransferLinks(self=base, sweep=f"/v1/sweeps/{record.sweep_id}", runs=f"{base}/runs",
                            fits=f"{base}/fits", export=f"{base}/export", report=f"{base}/report",
                            mlflow_experiment=meta["mlflow_experiment"], mlflow_parent_run=meta["mlflow_parent_run"]),
        spec=record.spec,
        estimate=jobs.estimate_of(record),
    )


def _spec(body: TransferCreate, sweep: SweepRecord) -> TransferSpec:
    """The transfer spec the driver runs: the request's fields over the sweep's work folder; its own checks
    (known rungs, distinct arms and seeds, lr rules for listed arms) are 422s naming the field."""
    fields = body.model_dump(exclude={"sweep_id"}, exclude_none=True)
    fields.setdefault("name", f"{sweep.name}-transfer")
    try:  # a sweep not started yet has no folder: a plan reads its spec from the record alone
        return TransferSpec.model_validate({**fields, "sweep": str(sweep.storage_path or sweep.id)})
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """The sweep's trial section with the transfer's overrides, nested keys merged (as the transfer's plan does)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _demand(spec: TransferSpec, base: SweepSpec) -> jobs.Demand:
    """The transfer's work, its rungs (those it names, else the sweep's and every larger one of its family) and
    each rung's trial memory."""
    from trials.models import list_rungs

    family = list_rungs(base.rung.split("-")[0])
    named = spec.rung_names or family[family.index(base.rung):]
    # A rung of the list by its index, of the mapping by its name: the field a refusal names.
    rungs: dict[tuple[str | int, ...], str] = {("rungs", i if isinstance(spec.rungs, list) else r): r
                                               for i, r in enumerate(named)}
    if spec.verify is not None and spec.verify.rung:
        rungs[("verify", "rung")] = spec.verify.rung
    trial = _merged(base.trial, spec.trial)
    memory = {loc: trial_memory({**trial, "rung": rung, "steps": 1}) for loc, rung in rungs.items()}
    if not spec.rung_workers:
        return jobs.Demand(transfer_work(spec, base), rungs, memory, spec.execution)
    # Rungs on their own worker counts: the widest trial must fit the workers, at the transfer's resources per
    # worker, else its sweep's (what the runs take); a refusal names the field that sets its count.
    execution = spec.execution or base.execution
    counts = {r: spec.rung_workers.get(r, execution.workers_per_trial) for r in named}
    rung = max(counts, key=lambda r: counts[r])
    loc = ("rungs", rung, "workers") if rung in spec.rung_workers else ("execution", "workers_per_trial")
    return jobs.Demand(transfer_work(spec, base), rungs, memory, execution,
                       widest_trial=(".".join(loc), counts[rung]), widest_loc=loc)


@router.post(
    "",
    status_code=201,
    response_model=TransferPublic,
    summary="Transfer a SUCCEEDED sweep's choice to larger rungs",
    responses=jobs.create_responses(
        "transfer", TransferPublic, "the sweep has not SUCCEEDED, or the Idempotency-Key was used with another body"),
)
def create_transfer(
    response: Response,
    session: SessionDep,
    owner: Owner,
    settings: SettingsDep,
    queue: JobsDep,
    body: Annotated[TransferCreate, Body(openapi_examples={"two rungs": {"summary": "periodic vs AdamW on two "
                                                                       "rungs", "value": CREATE_EXAMPLE}})],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> TransferPublic:
    sweep = session.get(SweepRecord, body.sweep_id)
    if sweep is None:
        raise RequestValidationError([{"loc": ("body", "sweep_id"), "msg": f"no sweep {body.sweep_id!r}",
                                       "type": "not_found"}])
    if sweep.state != "SUCCEEDED" or not sweep.storage_path:
        raise HTTPException(409, f"sweep {sweep.id} is {sweep.state}: only a SUCCEEDED sweep can be transferred")
    spec = _spec(body, sweep)  # validated once, here; passed on typed
    # e.g. no Ray cluster of the caller's choosing, no server path outside the registered locations
    return jobs.create_job(response, session, queue, settings, TransferRecord, spec=spec,
                           demand=_demand(spec, SweepSpec.model_validate(sweep.spec)), owner=owner,
                           fields={"sweep_id": sweep.id}, idempotency_key=idempotency_key, public=public)


@plans.post(
    "/transfers",
    summary="Price a transfer before it runs: pilot, timing, runs, controls, verification; machine-hours, peak "
    "memory, smallest detectable saving",
    responses={422: {"description": "a bad body, no such sweep, a trial over the machine's memory, an estimate over "
                     "budget_hours"}},
)
def plan_transfer(session: SessionDep, settings: SettingsDep, queue: JobsDep, _owner: Owner,
                  body: Annotated[TransferCreate, Body(openapi_examples={"two rungs": {
                      "summary": "periodic vs AdamW on two rungs", "value": CREATE_EXAMPLE}})],
                  budget_hours: jobs.BudgetQuery = None, prior: jobs.PriorQuery = None) -> dict[str, Any]:
    sweep = session.get(SweepRecord, body.sweep_id)
    if sweep is None:
        raise RequestValidationError([{"loc": ("body", "sweep_id"), "msg": f"no sweep {body.sweep_id!r}",
                                       "type": "not_found"}])
    spec, base = _spec(body, sweep), SweepSpec.model_validate(sweep.spec)
    jobs.admit(spec, _demand(spec, base), queue, settings, "transfer")
    return jobs.plan_job(session, prior, lambda spread: transfer_estimate(spec, base, measure=False,
                                                                          budget_hours=budget_hours, spread=spread))


@router.get("", response_model=TransfersPublic, summary="List transfers, newest first")
def list_transfers(
    settings: SettingsDep,
    session: SessionDep,
    _reader: ReadAccess,
    query: jobs.PageDep,
    sweep_id: Annotated[str | None, Query(max_length=40)] = None,
) -> TransfersPublic:
    page, next_cursor = jobs.list_page(
        session, TransferRecord, query,
        filters=(lambda rows: rows.where(TransferRecord.sweep_id == sweep_id)) if sweep_id else None)
    data = [public(settings, r) for r in page]
    return TransfersPublic(data=data, count=len(data), next_cursor=next_cursor)


@router.get("/{transfer_id}", response_model=TransferPublic, summary="A transfer: state, run counts, MLflow ids")
def get_transfer(transfer_id: str, settings: SettingsDep, session: SessionDep, _reader: ReadAccess) -> TransferPublic:
    return public(settings, get_transfer_record(session, transfer_id))


@router.get("/{transfer_id}/runs", response_model=RunsPublic,
            summary="Each run: rung, arm, seed, lr and its rule, state, checkpoints (step, time s, FD)")
def get_runs(transfer_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess) -> RunsPublic:
    record = get_transfer_record(session, transfer_id)
    release(session)  # the first read of a result waits for MLflow: without holding a connection
    result = transfer_result(results, record, started=False)
    data = [run.to_dict() for run in result.runs] if result is not None else []
    return RunsPublic(data=data, count=len(data))


@router.post("/{transfer_id}/extend", status_code=202,
             responses={409: {"description": "the transfer is not finished"},
                        422: {"description": "seeds left out, not fresh, or nothing added; a rounds or verify "
                              "transfer"}},
             summary="Add seeds to a finished transfer; only the new seeds' runs run (one more look for its claims)")
def extend_transfer(transfer_id: str, settings: SettingsDep, queue: JobsDep, session: SessionDep, owner: Owner,
                    body: Annotated[TransferExtend, Body()]) -> dict[str, Any]:
    record = get_transfer_record(session, transfer_id)
    fields = {**record.spec, **body.model_dump(exclude_none=True)}
    try:
        spec = TransferSpec.model_validate(fields)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from None
    sweep = session.get(SweepRecord, record.sweep_id)
    if sweep is not None:
        jobs.admit(spec, _demand(spec, SweepSpec.model_validate(sweep.spec)), queue,
                   settings, "transfer")
    added = jobs.extend_job(session, settings, queue, owner, record, "transfer",
                            lambda: queue.extend_transfer(session, record, spec), TransferError,
                            f"seeds: {body.seeds} adds no seed to the transfer's: give its seeds and the new ones")
    return {**public(settings, record).model_dump(mode="json"), "added": added}


jobs.add_state_routes(router, noun="transfer", response_model=TransferPublic, get=get_transfer_record, public=public)
