"""`/v1/sweeps`: submit, list, follow, cancel and resume sweeps; read their trials and the chosen point."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse

from api.schemas import Links, SweepPublic, SweepsPublic, TrialPublic, TrialsPublic
from sweeper import SweepError, SweepSpec, load_sweep_result, sweep_memory, sweep_status, sweep_work
from sweeper.analysis import compare_sweeps, write_optuna_study
from sweeper.demand import sweep_estimate
from sweeper.jobfiles import STATUS_FILE, is_sweep_folder
from sweeper.specs import redact_spec

from ..cache import file_version
from ..db import SweepRecord
from ..deps import AnalysisDep, JobsDep, Owner, ReadAccess, ResultsDep, SessionDep, SessionRoute, SettingsDep, release
from ..render import comparison_page, sweep_page
from ..settings import Settings
from . import _jobroutes as jobs

router = APIRouter(prefix="/sweeps", tags=["sweeps"], route_class=SessionRoute)
# A sweep priced before it exists: under /plans, not /sweeps, where `/sweeps/plan` would also be `/sweeps/{id}`.
plans = APIRouter(prefix="/plans", tags=["plans"], route_class=SessionRoute)

STATES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED")

SPEC_EXAMPLE = {
    "name": "tiny",
    "rung": "cpu-xs",
    "horizon": 40,
    "search": {"method": "grid", "space": {"K": [2, 3], "gamma": [0.15, 0.25]}},
    "seeds": [0],
}


def _live(record: SweepRecord) -> dict[str, Any]:
    """The driver's own status file (progress, best so far), when the sweep has started."""
    if not record.storage_path or not is_sweep_folder(record.storage_path):
        return {}
    try:
        return sweep_status(record.storage_path)
    except (SweepError, OSError, ValueError):
        return {}


def _public(settings: Settings, record: SweepRecord) -> SweepPublic:
    live = _live(record)
    meta = jobs.live_meta(settings, record, live)
    base = f"/v1/sweeps/{record.id}"
    return SweepPublic(
        id=record.id,
        name=record.name,
        state=record.state,
        owner=record.owner,
        created_at=record.created_at,
        updated_at=record.updated_at,
        error=jobs.shown(settings, record.error),
        progress=meta["progress"],
        best_so_far=live.get("best"),
        mlflow_experiment_id=meta["experiment_id"],
        mlflow_parent_run_id=meta["parent_run_id"],
        links=Links(self=base, trials=f"{base}/trials", best=f"{base}/best", report=f"{base}/report",
                    mlflow_experiment=meta["mlflow_experiment"], mlflow_parent_run=meta["mlflow_parent_run"]),
        spec=redact_spec(record.spec),
        estimate=jobs.estimate_of(record),
    )


def _demand(spec: SweepSpec) -> jobs.Demand:
    rungs: dict[tuple[str | int, ...], str] = {("rung",): spec.rung}
    rungs.update({("baselines", i, "rung"): b.rung for i, b in enumerate(spec.baselines) if b.rung})
    return jobs.Demand(sweep_work(spec), rungs, sweep_memory(spec), spec.execution, spec.widest_trial)


def _get(session: Any, sweep_id: str) -> SweepRecord:
    return jobs.get_job(session, SweepRecord, sweep_id, "sweep")


@router.post(
    "",
    status_code=201,
    response_model=SweepPublic,
    summary="Submit a sweep",
    responses=jobs.create_responses("sweep", SweepPublic, "Idempotency-Key already used with another spec"),
)
def create_sweep(
    response: Response,
    session: SessionDep,
    owner: Owner,
    settings: SettingsDep,
    queue: JobsDep,
    spec: Annotated[SweepSpec, Body(openapi_examples={"tiny": {"summary": "a 2x2 grid", "value": SPEC_EXAMPLE}})],
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> SweepPublic:
    # a token is not a shell: registered trainers only, no server path outside the registered locations
    return jobs.create_job(response, session, queue, settings, SweepRecord, spec=spec,
                           demand=_demand(spec), owner=owner, fields={"name": spec.name},
                           idempotency_key=idempotency_key, public=_public, what="sweep spec")


@plans.post(
    "/sweeps",
    summary="Price a sweep before it runs: its trials, machine-hours, peak memory, smallest detectable saving",
    responses={422: {"description": "a bad spec, a trial over the machine's memory, an estimate over budget_hours"}},
)
def plan_sweep(session: SessionDep, settings: SettingsDep, queue: JobsDep, _owner: Owner,
               spec: Annotated[SweepSpec, Body(openapi_examples={"tiny": {"summary": "a 2x2 grid",
                                                                          "value": SPEC_EXAMPLE}})],
               budget_hours: jobs.BudgetQuery = None) -> dict[str, Any]:
    # The create route's refusals first (what a token may ask for, the work and memory caps): a plan of a sweep
    # the service would refuse is refused alike. Nothing is stored and nothing starts.
    jobs.admit(spec, _demand(spec), queue, settings, "sweep")
    return jobs.plan_job(session, None, lambda spread: sweep_estimate(spec, measure=False,
                                                                       budget_hours=budget_hours))


@router.get("", response_model=SweepsPublic, summary="List sweeps, newest first")
def list_sweeps(
    settings: SettingsDep,
    session: SessionDep,
    _reader: ReadAccess,
    query: jobs.PageDep,
) -> SweepsPublic:
    page, next_cursor = jobs.list_page(session, SweepRecord, query)
    data = [_public(settings, r) for r in page]
    return SweepsPublic(data=data, count=len(data), next_cursor=next_cursor)


@router.get("/{sweep_id}", response_model=SweepPublic, summary="A sweep: state, progress, best so far, MLflow ids")
def get_sweep(sweep_id: str, settings: SettingsDep, session: SessionDep, _reader: ReadAccess) -> SweepPublic:
    # Synchronous like every route that reads the database: see api.service.deps (docs/load.md).
    return _public(settings, _get(session, sweep_id))


def _result_source(record: SweepRecord) -> tuple[str, Any, Any] | None:
    """(cache key, version, loader) of the sweep's result, or None before its driver wrote its work folder."""
    folder = Path(record.storage_path) if record.storage_path else None
    if folder is None or not is_sweep_folder(folder):
        return None
    return f"sweep:{folder}", file_version(folder / STATUS_FILE), lambda: load_sweep_result(folder)


def _result(results: ResultsDep, record: SweepRecord) -> Any:
    """The sweep's result from MLflow, read again only when the driver's status file changed (`api.service.cache`)."""
    source = _result_source(record)
    if source is None:
        return None
    try:
        return results.get(*source)
    except SweepError:
        return None


@router.get("/{sweep_id}/trials", response_model=TrialsPublic, summary="Each trial: params, state, FD per eval step")
def get_trials(sweep_id: str, settings: SettingsDep, results: ResultsDep, session: SessionDep,
               _reader: ReadAccess) -> TrialsPublic:
    record = _get(session, sweep_id)
    release(session)  # the first read of a result waits for MLflow: without holding a connection
    result = _result(results, record)
    if result is None:
        return TrialsPublic(data=[], count=0)
    data = [
        TrialPublic(key=t.trial_key, role=t.role, arm=t.arm, params=t.params, seed=t.seed, state=t.status,
                    attempt=t.attempt, fd=t.fd, objective=t.objective, run_id=t.run_id or "",
                    error=jobs.shown(settings, t.error),
                    metric_name=t.metric_name, rank_restarts=t.rank_restarts)
        for t in result.trials
    ]
    return TrialsPublic(data=data, count=len(data))


@router.get("/{sweep_id}/best", summary="The chosen point with its rank table, gap and seed spread",
            responses={409: {"description": "no point scored yet"}})
def get_best(sweep_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess) -> dict[str, Any]:
    record = _get(session, sweep_id)
    release(session)
    result = _result(results, record)
    if result is None or result.selection is None:
        raise HTTPException(409, f"sweep {sweep_id} ({record.state}) has no point scored on every seed yet")
    doc = result.selection_document()
    # The service's id, not the sweeper's own (its MLflow tag scalesweep.sweep_id), which is kept as tracking_id.
    return {**doc, "sweep_id": record.id, "tracking_id": doc.get("sweep_id"), "state": record.state,
            "best": result.best}


def _scored(sweep_id: str, results: ResultsDep, session: Any) -> tuple[SweepRecord, Any]:
    """The sweep's record and result, or 409 when nothing was scored yet."""
    record = _get(session, sweep_id)
    release(session)
    result = _result(results, record)
    if result is None or not any(p.objective is not None for p in result.points):
        raise HTTPException(409, f"sweep {sweep_id} ({record.state}) has no point scored on every seed yet")
    return record, result


def _derived(results: ResultsDep, gate: AnalysisDep, record: SweepRecord, what: str, compute: Any) -> Any:
    """A figure's numbers computed from the sweep's result, cached under the same version as the result: a stored
    value at once, else computed in one of the analysis slots (503 when every one is taken: `api.service.gate`)."""
    folder = Path(str(record.storage_path))
    key, version = f"{what}:{folder}", file_version(folder / STATUS_FILE)
    found, value = results.current(key, version)
    if found:
        return value
    with gate.slot():
        return results.get(key, version, compute, fresh=True)


# The bootstrap resamples an importance is computed with: a request's n_boot is raised to the first of these at or
# above it (never fewer resamples than asked), so a job version holds at most 2 evaluators x 3 values, each
# computed once (issue 53, M5: every n_boot from 0 to 1000 was its own 25-second computation). 100: the default;
# 1000: the most the route ever offered.
N_BOOT_LEVELS = (0, 100, 1000)


def _n_boot_level(n_boot: int) -> int:
    return next(level for level in N_BOOT_LEVELS if level >= n_boot)


@router.get("/{sweep_id}/importance", responses={409: {"description": "fewer than three points scored"}},
            summary="Which searched hyperparameter mattered: Optuna's evaluator, the seeds bootstrapped")
def get_importance(
    sweep_id: str, results: ResultsDep, gate: AnalysisDep, session: SessionDep, _reader: ReadAccess,
    evaluator: Annotated[Literal["fanova", "ped-anova"], Query(description="Optuna's importance evaluator")] = "fanova",
    n_boot: Annotated[int, Query(ge=0, le=1000, description="paired bootstrap resamples of the seeds, raised to "
                                 "the first of 0, 100 and 1000 at or above it (the answer's n_boot says which)")] = 100,
) -> dict[str, Any]:
    record, result = _scored(sweep_id, results, session)
    n_boot = _n_boot_level(n_boot)
    try:
        found = _derived(results, gate, record, f"importance:{evaluator}:{n_boot}",
                         lambda: result.importance(evaluator=evaluator, n_boot=n_boot))
    except SweepError as exc:
        raise HTTPException(409, str(exc)) from exc
    return {"sweep_id": record.id, "state": record.state, **found.to_dict()}


@router.get("/{sweep_id}/front", responses={409: {"description": "no point scored yet"}},
            summary="The quality-cost front: each point's objective against Newton-Schulz calls and optimizer time")
def get_front(sweep_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess) -> dict[str, Any]:
    record, result = _scored(sweep_id, results, session)
    return {"sweep_id": record.id, "state": record.state, **result.front().to_dict()}


@router.get("/{sweep_id}/compare/{other_id}", responses={409: {"description": "either sweep has no point scored"}},
            summary="Two sweeps side by side: points lined up, paired differences (other - this) where seeds match")
def get_comparison(sweep_id: str, other_id: str, results: ResultsDep, session: SessionDep,
                   _reader: ReadAccess) -> dict[str, Any]:
    record = _get(session, sweep_id)
    other = _get(session, other_id)
    release(session)
    a, b = _result(results, record), _result(results, other)
    if a is None or b is None:
        missing = sweep_id if a is None else other_id
        raise HTTPException(409, f"sweep {missing} has no result in MLflow yet")
    doc = compare_sweeps(a, b).to_dict()
    doc["a"]["id"], doc["b"]["id"] = record.id, other.id  # the service's ids beside the tracking ids
    return doc


@router.get("/{sweep_id}/compare/{other_id}/report", response_class=HTMLResponse,
            responses={**jobs.HTML_PAGE, 409: {"description": "either sweep has no result yet"}},
            summary="The comparison as one self-contained HTML page: its table and figure")
def get_comparison_report(sweep_id: str, other_id: str, request: Request, settings: SettingsDep,
                          results: ResultsDep, gate: AnalysisDep, session: SessionDep,
                          reader: ReadAccess) -> HTMLResponse:
    doc = get_comparison(sweep_id, other_id, results, session, reader)
    with gate.slot():  # a figure drawn per request: in an analysis slot and a bounded worker like every report
        return HTMLResponse(jobs.draw_page(settings, request, f"the comparison of sweeps {sweep_id} and {other_id}",
                                           comparison_page, doc))


@router.get("/{sweep_id}/report", response_class=HTMLResponse,
            responses={**jobs.HTML_PAGE, 409: {"description": "no point scored yet"}},
            summary="The sweep's report as one self-contained HTML page: heatmap, importance, front, parallel "
            "coordinates and slices, curves, timing, the decisions recorded")
def get_report(sweep_id: str, request: Request, settings: SettingsDep, results: ResultsDep, gate: AnalysisDep,
               session: SessionDep, _reader: ReadAccess) -> HTMLResponse:
    record, result = _scored(sweep_id, results, session)

    def draw() -> str:  # in a worker process with a time and a memory limit, gone with its client
        return jobs.draw_page(settings, request, f"the report of sweep {sweep_id}", sweep_page, result.tracking_uri,
                              result.parent_run_id, f"scalesweep sweep {result.name}", {"sweep": record.id})

    return HTMLResponse(_derived(results, gate, record, "report", draw))


@router.post("/{sweep_id}/extend", status_code=202,
             responses={409: {"description": "the sweep is not finished"},
                        422: {"description": "the spec changes more than an extension may, or adds nothing"}},
             summary="Add seeds, grid values, budget or baselines to a finished sweep; only what is missing runs")
def extend_sweep(sweep_id: str, settings: SettingsDep, queue: JobsDep, session: SessionDep, owner: Owner,
                 spec: Annotated[SweepSpec, Body()]) -> dict[str, Any]:
    record = _get(session, sweep_id)
    jobs.admit(spec, _demand(spec), queue, settings, "sweep")
    added = jobs.extend_job(session, settings, queue, owner, record, "sweep",
                            lambda: queue.extend(session, record, spec), SweepError,
                            "the spec adds nothing to the sweep: give more seeds, grid values, search budget or "
                            "baselines")
    return {**_public(settings, record).model_dump(mode="json"), "added": added}


_OPTUNA_WRITES = threading.Lock()  # one writer at a time: writing replaces the study (delete, then create)


@router.post("/{sweep_id}/optuna", responses={409: {"description": "no trial ran yet"}},
             summary="Write the sweep's trials to the service's Optuna storage, as a study optuna-dashboard opens")
def write_optuna(sweep_id: str, settings: SettingsDep, results: ResultsDep, session: SessionDep,
                 _owner: Owner) -> dict[str, Any]:
    record = _get(session, sweep_id)
    release(session)
    result = _result(results, record)
    if result is None:
        raise HTTPException(409, f"sweep {sweep_id} ({record.state}) has no result in MLflow yet")
    try:
        with _OPTUNA_WRITES:
            name = write_optuna_study(result, str(settings.optuna_storage))
    except SweepError as exc:
        raise HTTPException(409, str(exc)) from exc
    storage = settings.redact(str(settings.optuna_storage))
    return {"sweep_id": record.id, "study_name": name, "storage": storage,
            "trials": sum(n for state, n in result.counts.items() if state not in ("PENDING", "attempts")),
            "open_with": f"optuna-dashboard {storage}"}


jobs.add_state_routes(router, noun="sweep", response_model=SweepPublic, get=_get, public=_public)
