"""`/v1/transfers/{id}/fits`, `/predict` and `/report`: time to best, savings and scaling fits of a transfer."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse

from api.schemas import Prediction
from scaling import ExtrapolationRefused, ScalingError
from sweeper.jobfiles import ANALYSIS_FILE, read_labelled, stored_transfer_report, transfer_version

from ..deps import AnalysisDep, ReadAccess, ResultsDep, SessionDep, SessionRoute, SettingsDep, release
from ..gate import AnalysisGate
from ..render import transfer_page
from ._jobroutes import HTML_PAGE, draw_page
from .transfers import get_transfer_record, started_folder, transfer_result

router = APIRouter(prefix="/transfers", tags=["fits"], route_class=SessionRoute)

T = TypeVar("T")
# `alignment` is fitted on 1 - alignment (sweeper.transfer's fits), for transfers whose runs carry it.
Metric = Literal["time_to_best", "best_fd", "endpoint_fd", "steps_to_target", "time_to_target", "alignment"]


def _current(results: ResultsDep, record: Any) -> tuple[Any, Any]:
    """(version, result): the transfer's runs as the driver's files stand now, runs without a rung left out."""
    version = transfer_version(started_folder(record))  # read before the result: never newer than it
    return version, _planned_runs(transfer_result(results, record, fresh=True))


def _planned_runs(result: Any) -> Any:
    """The result without runs that have no rung yet (their rung tag is written when they start): nothing can be
    computed for them, and their parameter count is unknown."""
    if all(run.rung for run in result.runs):
        return result
    return replace(result, runs=[run for run in result.runs if run.rung], _fits={})


def _cached(results: ResultsDep, record: Any, what: str, compute: Any) -> tuple[Any, Any]:
    """(`compute(result)`, result): computed once per version of the transfer's runs (bootstrap fits take seconds),
    always from the current runs: from the result of the version it is stored under, waiting when it changed."""
    version, result = _current(results, record)
    value = results.get(f"{what}:{Path(result.workdir)}", version, lambda: compute(result),
                                          fresh=True)
    return value, result


def _stored_or_computed(results: ResultsDep, record: Any, what: str, stored: Callable[[Path, Any], T | None],
                        compute: Callable[[Any], T], gate: AnalysisGate | None = None) -> T:
    """What a finished transfer's driver stored for the current version of its job files (`stored(folder,
    version)`: a file read), else `compute(result)` from its runs; once per version, shared by concurrent readers.
    Unlike `_cached`, a stored value needs no MLflow read at all. With `gate`, what is computed is computed in
    one of its slots (503 when every one is taken)."""
    folder = started_folder(record)
    version = transfer_version(folder)

    def computed() -> T:
        return compute(_planned_runs(transfer_result(results, record, fresh=True)))

    def load() -> T:
        value = stored(folder, version)
        if value is not None:  # a file read: readers of one version share it, no slot needed
            return value
        if gate is None:
            return computed()
        with gate.slot():  # drawn here: in an analysis slot (503 when every one is taken)
            return computed()

    return results.get(f"{what}:{folder}", version, load, fresh=True)


@router.get("/{transfer_id}/fits", summary="Time to best and FD per run, savings per rung, scaling fits per metric",
            responses={409: {"description": "the transfer has not started its runs"}})
def get_fits(transfer_id: str, results: ResultsDep, session: SessionDep, _reader: ReadAccess,
             metric: Metric | None = None) -> dict[str, Any]:
    """The transfer's analysis (`sweeper.TransferResult.analysis()`): every run's time to best, best and endpoint
    FD and volatile checkpoints; savings of the searched arm against each baseline per rung (%, seed spread);
    fits of each metric with bootstrap intervals, flags (at_bound, non_identifiable, misspecified, ...) and
    leave-one-rung-out errors. With `metric`, only that fit under `fits`; `alignment` (fitted on 1 - alignment at each
    run's last eval step) is refused with 422 where no run carries an alignment score."""
    record = get_transfer_record(session, transfer_id)
    release(session)
    doc = dict(_stored_or_computed(results, record, "analysis",
                                   lambda folder, version: read_labelled(folder / ANALYSIS_FILE, version),
                                   lambda result: dict(result.analysis())))
    if metric is not None:
        fits = doc.get("fits", {})
        if metric == "alignment" and metric not in fits:  # the runs carry no alignment score (shapes, pixels)
            raise HTTPException(422, "metric: 'alignment': no run of this transfer carries an alignment score (only "
                                f"eval.extractor scenes-cnn logs one); allowed: {sorted(fits)}")
        doc["fits"] = {metric: fits.get(metric)}
    # The service's id, not the transfer's own (its MLflow tag scalesweep.transfer_id), kept as tracking_id.
    return {**doc, "transfer_id": record.id, "tracking_id": doc.get("transfer_id")}


def _size(size: str) -> float | str:
    """A parameter count (1.2e6) or a rung name (cpu-m)."""
    try:
        value = float(size)
    except ValueError:
        return size
    if not value > 0 or value != value or value == float("inf"):
        raise HTTPException(422, "size: a positive parameter count or a rung name")
    return value


@router.get("/{transfer_id}/predict", response_model=Prediction,
            summary="A fit's prediction at a model size: point and interval, or a 422 saying why it was refused",
            responses={409: {"description": "the transfer has not started its runs"},
                       422: {"description": "refused (beyond the fit's range, fit failed) or invalid input"}})
def predict(
    transfer_id: str,
    results: ResultsDep,
    session: SessionDep,
    _reader: ReadAccess,
    size: Annotated[str, Query(min_length=1, max_length=40, description="Parameter count (e.g. 2.6e6) or a rung.")],
    arm: Annotated[str, Query(min_length=1, max_length=40, description="periodic, muon, adamw, ...")],
    metric: Metric = "time_to_best",
) -> Prediction:
    record = get_transfer_record(session, transfer_id)
    release(session)
    n = _size(size)
    if isinstance(n, str) and not re.fullmatch(r"[a-z0-9.\-]+", n):
        raise HTTPException(422, f"size: {size!r} is neither a number nor a rung name")
    try:
        fit, result = _cached(results, record, f"fit-{metric}", lambda r: r.fits(metric))
    except ScalingError as exc:  # too few sizes or runs, or the fit did not converge
        raise HTTPException(422, f"refused: no {metric} fit: {exc}") from None
    if arm not in fit.arms:
        raise HTTPException(422, f"arm: no fit for {arm!r}; fitted arms: {', '.join(fit.arms)}")
    try:
        parameters = result.parameters(n) if isinstance(n, str) else n
        point, lo, hi = fit.predict(arm, parameters)
    except ExtrapolationRefused as exc:
        raise HTTPException(422, f"refused: {exc}") from None
    except (ScalingError, ValueError, KeyError) as exc:
        raise HTTPException(422, f"cannot predict {metric} for {arm} at {size}: {exc}") from None
    if point is None or not math.isfinite(point):
        raise HTTPException(422, f"refused: the {metric} fit for {arm} gives no finite value at {size}")

    def finite(value: float | None) -> float | None:
        return value if value is not None and math.isfinite(value) else None

    return Prediction(arm=arm, size=float(parameters), metric=metric, point=point, lo=finite(lo), hi=finite(hi))


@router.get("/{transfer_id}/report", response_class=HTMLResponse,
            summary="One self-contained HTML report: curves, timing, scaling fits, the numbers behind them",
            responses={**HTML_PAGE, 409: {"description": "the transfer has not started its runs"}})
def report(transfer_id: str, request: Request, settings: SettingsDep, results: ResultsDep, gate: AnalysisDep,
           session: SessionDep, _reader: ReadAccess) -> HTMLResponse:
    """A finished transfer's page is the one its job stored when it ended (read once per version, no MLflow
    read, no fit); a running or changed transfer's page is drawn in a bounded worker, once per version of its runs
    (409 while it has no MLflow parent run: `dashboards.DashboardError`)."""
    record = get_transfer_record(session, transfer_id)
    release(session)

    def page(result: Any) -> str:
        return draw_page(settings, request, f"the report of transfer {transfer_id}", transfer_page, result,
                         record.id, record.sweep_id, conflict="DashboardError")

    return HTMLResponse(_stored_or_computed(results, record, "report", stored_transfer_report, page, gate))
