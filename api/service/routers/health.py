"""Liveness and readiness."""

from __future__ import annotations

import threading
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ..deps import SessionDep, SessionRoute, SettingsDep
from ..settings import Settings

router = APIRouter(tags=["health"], route_class=SessionRoute)


@router.get("/health", summary="Liveness: the process answers (never touches the database)")
async def health() -> dict[str, str]:
    # On the event loop, not the thread pool: it answers even while every route thread waits for the database.
    return {"status": "ok"}


MLFLOW_PROBE_S = 10.0  # how long /ready waits for an MLflow server's answer
_probes = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ready-mlflow")
_in_flight: dict[str, Future[str]] = {}
_in_flight_lock = threading.Lock()


def _search_experiments(uri: str) -> str:
    from mlflow import MlflowClient

    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    return "ok"


def _check_mlflow(uri: str) -> str:
    """One experiment search, waited for at most MLFLOW_PROBE_S: MLflow's client retries a failing server for
    minutes (an MLflow server whose database is down answers 500s), and a probe must answer. One search per URI is
    in flight at a time; a probe that finds one running waits for that one. A local store (SQLite, a folder) is
    asked directly (creating one takes seconds, and nothing retries)."""
    if not uri.lower().startswith(("http://", "https://")):
        return _search_experiments(uri)
    with _in_flight_lock:
        future = _in_flight.get(uri)
        if future is None or future.done():
            future = _in_flight[uri] = _probes.submit(_search_experiments, uri)
    try:
        return future.result(timeout=MLFLOW_PROBE_S)
    except FutureTimeout:
        raise TimeoutError(f"no answer within {MLFLOW_PROBE_S:g} s") from None


def _check_ray(settings: Settings) -> str:
    if settings.ray_address is None and settings.ray_dashboard_url is None:
        import importlib.util

        # Local drivers start their own Ray: installed is enough (importing Ray here would cost seconds).
        if importlib.util.find_spec("ray") is None:
            raise RuntimeError("ray is not installed")
        return "ok (local drivers)"
    # Probe the head's dashboard health endpoint (SCALESWEEP_RAY_DASHBOARD_URL, else port 8265 on the GCS address's
    # host), which Ray 2.60 serves without its auth token (other /api paths answer 401 under token auth).
    with urllib.request.urlopen(f"{settings.ray_jobs_address}/api/gcs_healthz", timeout=3) as response:
        response.read()
    return "ok"


@router.get(
    "/ready", summary="Readiness: database, MLflow and Ray reachable", responses={503: {"description": "not ready"}}
)
def ready(session: SessionDep, settings: SettingsDep) -> Any:
    checks: dict[str, str] = {}
    for name, check in (
        ("database", lambda: session.execute(text("SELECT 1")).scalar_one() and "ok"),
        ("mlflow", lambda: _check_mlflow(settings.tracking_uri)),
        ("ray", lambda: _check_ray(settings)),
    ):
        try:
            checks[name] = str(check())
        except Exception as exc:  # a readiness probe reports, it does not raise
            # A library's error may quote a URI with its password (MLflow's "API request to http://u:p@..."):
            # the check says what failed, never the credentials (docs/security.md).
            checks[name] = settings.redact(f"unavailable: {type(exc).__name__}: {exc}")[:300]
    ok = all(v.startswith("ok") for v in checks.values())
    body = {"status": "ready" if ok else "not ready", "checks": checks}
    return body if ok else JSONResponse(body, status_code=503)
