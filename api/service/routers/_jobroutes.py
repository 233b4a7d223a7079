"""What the sweep and transfer routers share: both are jobs the service queues, so both are created with an
optional Idempotency-Key, listed newest first by an opaque cursor, fetched by id, cancelled and resumed the same
way. Each router keeps only what is its own (the spec it accepts, its public shape, its sub-resources)."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Response, status
from fastapi import Path as PathParam
from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.exc import IntegrityError

from sweeper import SweepError, SweepSpec, TransferSpec
from sweeper.demand import JobEstimate, TrialMemory
from sweeper.jobfiles import ESTIMATE_FILE, read_json

from ..db import SweepRecord, TransferRecord, new_id
from ..deps import JobsDep, Owner, SessionDep, SettingsDep
from ..render import ClientLeft, RenderFailed, client_left, render_bounded
from ..security import check_capacity_at_submission, check_memory, check_rest_spec, check_rungs, check_work
from ..settings import Settings

__all__ = [
    "HTML_PAGE",
    "STATE_PATTERN",
    "BudgetQuery",
    "Demand",
    "PageDep",
    "PageQuery",
    "PriorQuery",
    "add_state_routes",
    "admit",
    "cancel_job",
    "check_queue",
    "create_job",
    "create_responses",
    "draw_page",
    "estimate_of",
    "extend_job",
    "get_job",
    "list_page",
    "live_meta",
    "mlflow_links",
    "plan_job",
    "progress",
    "queue_room",
    "resume_job",
    "shown",
]

STATE_PATTERN = "^(PENDING|RUNNING|SUCCEEDED|FAILED|CANCELLED)$"

# The OpenAPI answer of a route that returns one self-contained HTML page (a report).
HTML_PAGE: dict[int | str, dict[str, Any]] = {200: {"content": {"text/html": {"schema": {"type": "string"}}}}}

Job = TypeVar("Job", SweepRecord, TransferRecord)
Public = TypeVar("Public")


def draw_page(settings: Settings, request: Any, what: str, fn: Callable[..., str], *args: Any,
              conflict: str | None = None) -> str:
    """An HTML report drawn by `fn(*args)` in a bounded worker (`api.service.render`), killed when `request`'s
    client leaves; 503 naming the limit it passed, 409 when the page raised the exception class named `conflict`
    (its reason: nothing to draw yet)."""
    try:
        return render_bounded(fn, *args, timeout_s=settings.report_timeout_s,
                              memory_bytes=settings.report_memory_mb * 2**20, left=client_left(request))
    except ClientLeft:  # its own client reads no answer; a reader that waited for the same drawing reads this one
        raise HTTPException(503, f"{what} was not drawn: the request that was drawing it was closed; ask again",
                            headers={"Retry-After": "1"}) from None
    except RenderFailed as exc:
        if conflict is not None and exc.error == conflict:
            raise HTTPException(409, str(exc).removeprefix(f"{conflict}: ")) from None
        if exc.error is not None:  # the page's own error, not a limit: said as it is (issue 64, N6)
            raise HTTPException(503, f"{what} was not drawn: {exc}; its JSON views answer") from None
        raise HTTPException(503, f"{what} was not drawn: {exc} (SCALESWEEP_REPORT_TIMEOUT_S, "
                            "SCALESWEEP_REPORT_MEMORY_MB); its JSON views answer") from None


def shown(settings: Settings, text: str | None) -> str | None:
    """An error text fit for any reader: URIs without their credentials, the service's secrets replaced."""
    return None if text is None else str(settings.redact(text))


def mlflow_links(settings: Any, experiment_id: str | None, run_id: str | None) -> tuple[str | None, str | None]:
    """Links to the job's experiment and parent run in the MLflow UI, when the service knows where the UI is."""
    base = settings.mlflow_ui_url
    if not base or not experiment_id:
        return None, None
    base = settings.redact(base)  # a UI URL may carry a user and password: a link never does
    # `#/experiments/<id>` alone opens MLflow 3's GenAI overview (traces, judges); `/runs` opens the training runs,
    # nested under each sweep's parent run.
    runs = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs"
    return runs, (f"{runs}/{run_id}" if run_id else None)


def estimate_of(record: SweepRecord | TransferRecord) -> dict[str, Any] | None:
    """The job's estimate beside its actual machine-hours, from its work folder (written as each driver run ends)."""
    if not record.storage_path:
        return None
    doc = read_json(Path(record.storage_path) / ESTIMATE_FILE)
    if doc is None:
        return None
    keep = ("estimated_wall_s", "machine_hours", "no_estimate", "actual_wall_s", "actual_machine_hours",
            "driver_runs_s", "trials", "calibration")
    return {k: doc.get(k) for k in keep}


BudgetQuery = Annotated[float | None, Query(gt=0, le=1_000_000, description="Refuse (422) a plan whose estimate is "
                                            "over this many machine-hours on the service's machine")]
PriorQuery = Annotated[str | None, Query(max_length=40, description="A transfer of this service whose time "
                                         "ratios' spread over seeds gives the smallest saving the plan can detect")]


def plan_job(session: Any, prior: str | None, price: Callable[[dict[str, float] | None], JobEstimate],
             ) -> dict[str, Any]:
    """A job priced without starting it (`POST /v1/plans/<jobs>`): `price(spread)` from the cached calibration
    only, from the prior transfer's spread where `prior` names one; a refusal (a trial over the machine's memory,
    an estimate over the budget) is a 422. Nothing is stored, and nothing trains: a missing calibration is named in
    the answer's `no_estimate` (training it here would run work on the service's host outside the job queue and
    its limits; `scalesweep sweep plan SPEC` on that host measures it)."""
    from sweeper.transfer import TransferError, prior_spread

    spread = None
    if prior is not None:
        record = session.get(TransferRecord, prior)
        if record is None or not record.storage_path:
            raise HTTPException(422, f"prior: no started transfer {prior!r}")
        try:
            spread = prior_spread(record.storage_path)
        except TransferError as exc:
            raise HTTPException(422, f"prior: {exc}".replace("prior: --prior: ", "prior: ")) from None
    try:
        return price(spread).to_dict()
    except SweepError as exc:
        raise HTTPException(422, str(exc)) from None


def live_meta(settings: Settings, record: SweepRecord | TransferRecord, live: dict[str, Any]) -> dict[str, Any]:
    """What both jobs' public shapes take from the record or, before it is stored there, from the driver's status
    document: the MLflow ids, the run counts and the links to the MLflow UI."""
    parent = record.mlflow_parent_run_id or live.get("parent_run_id")
    experiment_id = record.mlflow_experiment_id or live.get("experiment_id")
    exp_link, run_link = mlflow_links(settings, experiment_id, parent)
    return {"experiment_id": experiment_id, "parent_run_id": parent, "progress": progress(live),
            "mlflow_experiment": exp_link, "mlflow_parent_run": run_link}


def create_responses(noun: str, model: type[Any], conflict: str) -> dict[int | str, dict[str, Any]]:
    """The documented answers of a create route: 201 with its Location, 200 for a repeated Idempotency-Key,
    and the 409 `conflict` describes."""
    return {
        201: {"headers": {"Location": {"description": f"the new {noun}", "schema": {"type": "string"}}}},
        200: {"model": model, "description": f"the {noun} already created with this Idempotency-Key"},
        409: {"description": conflict},
    }


def progress(live: dict[str, Any]) -> dict[str, int]:
    """The run counts per state from a driver's status document."""
    return {k: int(v) for k, v in (live.get("counts") or {}).items() if isinstance(v, int | float)}


def get_job(session: Any, model: type[Job], job_id: str, noun: str) -> Job:
    record = session.get(model, job_id)
    if record is None:
        raise HTTPException(404, f"no {noun} {job_id!r}")
    return record


def _encode_cursor(record: SweepRecord | TransferRecord) -> str:
    raw = f"{record.created_at.isoformat()}|{record.id}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _decode_cursor(cursor: str) -> tuple[dt.datetime, str]:
    try:
        created, _, job_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return dt.datetime.fromisoformat(created), job_id
    except (ValueError, UnicodeDecodeError):
        raise HTTPException(422, "cursor: not a cursor this service issued (pass next_cursor as given)") from None


@dataclass(frozen=True)
class PageQuery:
    """A list route's `?state=&limit=&cursor=`."""

    state: str | None
    limit: int
    cursor: str | None


async def _page_query(state: Annotated[str | None, Query(pattern=STATE_PATTERN)] = None,
                      limit: Annotated[int, Query(ge=1, le=200)] = 50, cursor: str | None = None) -> PageQuery:
    return PageQuery(state, limit, cursor)


PageDep = Annotated[PageQuery, Depends(_page_query)]


def list_page(session: Any, model: type[Job], query: PageQuery,
              filters: Callable[[Select[Any]], Select[Any]] | None = None) -> tuple[list[Job], str | None]:
    """One page of jobs, newest first (ties broken by id), and the cursor of the next page (None on the last).
    The cursor is the last row's (created_at, id), so rows created meanwhile neither repeat nor go missing."""
    rows_query = select(model).order_by(model.created_at.desc(), model.id.desc())
    if query.state:
        rows_query = rows_query.where(model.state == query.state)
    if filters is not None:
        rows_query = filters(rows_query)
    if query.cursor:
        created, last_id = _decode_cursor(query.cursor)
        rows_query = rows_query.where(
            or_(model.created_at < created, and_(model.created_at == created, model.id < last_id)))
    rows = list(session.scalars(rows_query.limit(query.limit + 1)))
    page = rows[:query.limit]
    return page, (_encode_cursor(page[-1]) if len(rows) > query.limit else None)


# Each job kind: what its URLs and messages call it, and its ids' prefix.
_KINDS: dict[type[Any], tuple[str, str]] = {SweepRecord: ("sweep", "sw"), TransferRecord: ("transfer", "tr")}


@dataclass(frozen=True)
class Demand:
    """What a job asks of the workers, as the routes compute it from its typed spec: its total work in
    training-step units, its rungs by the field that names each, and each rung's trial memory estimate."""

    work: int
    rungs: dict[tuple[str | int, ...], str]
    memory: dict[tuple[str | int, ...], TrialMemory]
    execution: Any = None  # the job's resources per trial (sweeper.ExecutionSpec); None: its sweep's, checked there
    widest_trial: tuple[str, int] | None = None  # (field, workers) of its widest trial where rungs set their own
    widest_loc: tuple[str | int, ...] | None = None  # that field's location in the body, where not its dotted name


def admit(spec: SweepSpec | TransferSpec, demand: Demand, queue: JobsDep, settings: Settings, noun: str) -> None:
    """Refuse (422, naming the field) what a token holder may not ask for (a free-form command, an unregistered
    trainer, a Ray cluster of its own, a server path outside the registered ones, a rung the operator did not
    offer), work over the limit, a trial whose estimated memory is over the workers' (issue 53, H2) and one that
    needs more workers than the cluster has (issue 52)."""
    check_rest_spec(spec, queue.trainers, settings.data_path_list)
    check_rungs(demand.rungs, settings.rest_rung_list)
    check_work(demand.work, settings.max_work, noun)
    check_memory(demand.memory, settings.max_trial_memory_bytes, noun)
    # a job's own local Ray (no cluster to attach to) is as large as its execution.num_cpus says
    local_ray = settings.drivers == "local" and not (settings.ray_address or os.environ.get("RAY_ADDRESS"))
    check_capacity_at_submission(demand, settings.trial_cpus, settings.max_trial_gpus, local_ray=local_ray)


QUEUE_RETRY_AFTER_S = 60  # a queued job leaves the queue when a driver slot frees: minutes, not seconds


# One count-then-queue at a time in this service: counted and queued apart, 24 concurrent submissions of one owner
# were all queued under a cap of 3. One service runs per work folder (its leader lock), so a lock of the process
# is enough for the services this project starts; services of other work folders sharing one database each count
# on their own.
_QUEUEING = threading.Lock()


@contextlib.contextmanager
def queue_room(session: Any, settings: Settings, owner: str) -> Iterator[None]:
    """`check_queue`, then the block (which queues the job and commits) before any other request counts."""
    with _QUEUEING:
        check_queue(session, settings, owner)
        yield


def check_queue(session: Any, settings: Settings, owner: str) -> None:
    """Refuse (429 with Retry-After) one more queued job beyond `max_queued_jobs` PENDING jobs in all, or beyond
    `max_queued_per_owner` of this owner (issue 53, L2: 200 submissions in 12 s were all accepted). Call it through
    `queue_room`, so that the count and the write that queues are one step."""
    total = mine = 0
    for model in _KINDS:
        pending = select(func.count()).select_from(model).where(model.state == "PENDING")
        total += session.scalar(pending) or 0
        mine += session.scalar(pending.where(model.owner == owner)) or 0
    for count, cap, whose, variable in ((mine, settings.max_queued_per_owner, f"of {owner!r}",
                                         "SCALESWEEP_MAX_QUEUED_PER_OWNER"),
                                        (total, settings.max_queued_jobs, "in all", "SCALESWEEP_MAX_QUEUED_JOBS")):
        if count >= cap:
            raise HTTPException(429, f"{count} jobs {whose} are queued (PENDING), the most this service queues "
                                f"({variable}); retry once some have started, or cancel some",
                                headers={"Retry-After": str(QUEUE_RETRY_AFTER_S)})


def create_job(
    response: Response,
    session: Any,
    queue: JobsDep,
    settings: Settings,
    model: type[Job],
    *,
    spec: SweepSpec | TransferSpec,
    demand: Demand,
    owner: str,
    fields: dict[str, Any],
    idempotency_key: str | None,
    public: Callable[[Settings, Job], Public],
    what: str | None = None,
) -> Public:
    """Admit a job (`admit`) and create it, or answer 200 with the one already created under the same
    Idempotency-Key (409 when that key came with another body: another spec or other `fields`). The record is
    `model(spec=<spec's JSON>, owner=owner, **fields)`, PENDING; its driver's spec is written (`JobRunner.write_spec`)
    and the job queue is woken to start it."""
    noun, prefix = _KINDS[model]
    admit(spec, demand, queue, settings, noun)
    spec_doc = spec.model_dump(mode="json")
    idempotency_key = (idempotency_key or "").strip() or None  # an empty header is no key at all
    if idempotency_key:
        existing = session.scalars(select(model).where(model.idempotency_key == idempotency_key)).first()
        if existing is not None:
            if existing.spec != spec_doc or any(getattr(existing, k) != v for k, v in fields.items()):
                raise HTTPException(409, f"Idempotency-Key was already used with a different {what or noun}")
            response.status_code = status.HTTP_200_OK
            response.headers["Location"] = f"/v1/{noun}s/{existing.id}"
            return public(settings, existing)
    with queue_room(session, settings, owner):
        record = model(id=new_id(prefix), state="PENDING", spec=spec_doc, owner=owner,
                       idempotency_key=idempotency_key, **fields)
        session.add(record)
        try:
            session.commit()
        except IntegrityError:  # the same key committed by a concurrent request between our look-up and insert
            session.rollback()
            raise HTTPException(409, f"Idempotency-Key is being used by another request; retry to get its {noun}") \
                from None
        with contextlib.suppress(OSError):  # a spec not written here is written by the launch
            queue.write_spec(record, spec)
    queue.wake()
    response.headers["Location"] = f"/v1/{noun}s/{record.id}"
    return public(settings, record)


def extend_job(session: Any, settings: Settings, queue: JobsDep, owner: str, record: SweepRecord | TransferRecord,
               noun: str, extend: Callable[[], list[Any] | None], refused: type[Exception], nothing: str) -> list[Any]:
    """`POST /{id}/extend` of a sweep or transfer, once its spec is validated: `extend()` (the queue's, under its
    lock) inside the owner's queue room; what it added, or 422 for a refused or empty extension and 409 for a job
    that is not finished (any more). Wakes the queue to run what was added."""
    try:
        with queue_room(session, settings, owner):
            added = extend()
    except refused as exc:
        raise HTTPException(422, str(exc)) from exc
    if added is None:
        raise HTTPException(409, f"{noun} {record.id} is {record.state}: only a SUCCEEDED, FAILED or CANCELLED "
                            f"{noun} is extended")
    if not added:
        raise HTTPException(422, nothing)
    queue.wake()
    return added


def cancel_job(queue: JobsDep, session: Any, record: SweepRecord | TransferRecord, noun: str) -> None:
    if not queue.cancel(session, record):  # finished, or another request changed it first
        raise HTTPException(409, f"{noun} {record.id} is {record.state}: only PENDING or RUNNING {noun}s can be "
                            "cancelled")


def resume_job(queue: JobsDep, session: Any, record: SweepRecord | TransferRecord, noun: str, settings: Settings,
               owner: str) -> None:
    with queue_room(session, settings, owner):
        resumed = queue.resume(session, record)  # the state's check and the write are one statement
    if not resumed:
        raise HTTPException(409, f"{noun} {record.id} is {record.state}: only FAILED or CANCELLED {noun}s resume")
    queue.wake()


def add_state_routes(router: APIRouter, *, noun: str, response_model: type[Any],
                     get: Callable[[Any, str], Any], public: Callable[[Settings, Any], Any]) -> None:
    """Register `POST /{<noun>_id}/cancel` and `POST /{<noun>_id}/resume` on a job router: 202 with the job's
    public shape, 409 when the job's state does not allow it; `get(session, job_id)` finds the job or answers 404."""
    param = f"{noun}_id"

    def cancel(job_id: str, session: SessionDep, queue: JobsDep, settings: SettingsDep, _owner: Owner) -> Any:
        record = get(session, job_id)
        cancel_job(queue, session, record, noun)
        return public(settings, record)

    def resume(job_id: str, session: SessionDep, queue: JobsDep, settings: SettingsDep, owner: Owner) -> Any:
        record = get(session, job_id)
        resume_job(queue, session, record, noun, settings, owner)
        return public(settings, record)

    for action, route, refusal in (("Cancel", cancel, "already finished"), ("Resume", resume, "not resumable")):
        # The path names the id after the job (`sweep_id`, `transfer_id`), as the job's other routes do.
        route.__annotations__["job_id"] = Annotated[str, PathParam(alias=param)]
        router.post(f"/{{{param}}}/{route.__name__}", status_code=202, response_model=response_model,
                    summary=f"{action} a {noun}", responses={409: {"description": refusal}})(route)
