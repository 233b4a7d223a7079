"""Liveness and readiness."""

from __future__ import annotations

import urllib.request
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from ..deps import SessionDep, SettingsDep

router = APIRouter(tags=["health"])


@router.get("/health", summary="Liveness: the process answers")
def health() -> dict[str, str]:
    return {"status": "ok"}


def _check_mlflow(uri: str) -> str:
    from mlflow import MlflowClient

    MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
    return "ok"


def _check_ray(address: str | None) -> str:
    if address is None:
        import ray  # noqa: F401  # local drivers start their own Ray: importable is enough

        return "ok (local drivers)"
    base = address if address.startswith("http") else f"http://{address.split('://')[-1].split(':')[0]}:8265"
    with urllib.request.urlopen(f"{base}/api/version", timeout=3) as response:
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
        ("ray", lambda: _check_ray(settings.ray_address)),
    ):
        try:
            checks[name] = str(check())
        except Exception as exc:  # a readiness probe reports, it does not raise
            checks[name] = f"unavailable: {type(exc).__name__}: {str(exc)[:200]}"
    ok = all(v.startswith("ok") for v in checks.values())
    body = {"status": "ready" if ok else "not ready", "checks": checks}
    return body if ok else JSONResponse(body, status_code=503)
