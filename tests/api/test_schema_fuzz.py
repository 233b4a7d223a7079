"""Schemathesis over the OpenAPI schema: no input makes the service answer 5xx or break its own schema."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from api._settings import Settings
from api.main import create_app

from .conftest import AUTH, TOKEN

_workdir = Path(tempfile.mkdtemp(prefix="scalesweep-schemathesis-"))
_app = create_app(Settings(workdir=_workdir, api_token=TOKEN))  # type: ignore[arg-type]
schema = schemathesis.openapi.from_asgi("/openapi.json", _app)


@schema.parametrize()
@settings(max_examples=int(os.environ.get("SCALESWEEP_FUZZ_EXAMPLES", "15")), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=os.environ.get("SCALESWEEP_FUZZ_RANDOM") != "1")
def test_api_conforms_to_its_schema(case: schemathesis.Case) -> None:
    response = case.call(headers=AUTH)
    assert response.status_code < 500, response.text
    # Every check but "schema-valid data must be accepted": a sweep spec has cross-field rules (eval steps within
    # the horizon, a non-empty search space, ...) that JSON Schema cannot state, so the service refuses some
    # schema-valid bodies with a 422 that names the field, as it should.
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
