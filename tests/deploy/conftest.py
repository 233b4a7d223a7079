"""The compose topology as local processes (`api.deploy_local.Deployment`), once per session, for the tests of
`make test-deploy`: PostgreSQL, an MLflow server on it, a Ray head and a worker node, and `scalesweep serve`.

Not collected by the main suite (tests/conftest.py leaves tests/deploy out unless it is named on the command line).
Where PostgreSQL or psycopg is missing the fixture skips, which CI (SCALESWEEP_CI=1) turns into a failure."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from api.deploy_local import DeployError, Deployment, Postgres


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
    why = Postgres.missing()
    if why:
        pytest.skip(why)
    dep = Deployment(extra_env={"SCALESWEEP_POLL_INTERVAL_S": "0.5"}, timeout_s=180)
    try:
        dep.start()
    except DeployError as exc:
        dep.cleanup()
        pytest.fail(f"the deployment did not start: {exc}", pytrace=False)
    try:
        yield dep
    finally:
        left = dep.stop()
        dep.cleanup()
        assert not left, f"processes left running after the deployment stopped: {sorted(left)}"


@pytest.fixture
def api(deployment: Deployment) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=deployment.api_url, timeout=30,
                      headers={"Authorization": f"Bearer {deployment.api_token}"}) as client:
        yield client


def wait_for(client: httpx.Client, path: str, states: tuple[str, ...], timeout: float = 420) -> dict[str, Any]:
    """Poll GET `path` until its `state` is one of `states`; answers other than 200 (a 503 while a dependency is
    down) are waited through."""
    deadline = time.time() + timeout
    body: dict[str, Any] = {}
    while time.time() < deadline:
        response = client.get(path)
        if response.status_code == 200:
            body = response.json()
            if body["state"] in states:
                return body
        time.sleep(1)
    raise AssertionError(f"{path} still {body.get('state')} after {timeout} s: {body}")
