"""The REST service and the programs around it, one subpackage each, all HTTP-side, calling sweeper/ and scaling/:

- `api.service`: the service (FastAPI): sweeps, transfers, fits and exports under `/v1`, bearer-token auth,
  RFC 9457 problem responses, a database of job records, and a job queue whose drivers run as processes of their
  own (or as Ray Jobs). `api.create_app(settings)` builds it; `scalesweep serve` starts it with settings from
  `SCALESWEEP_*` variables (`api.Settings`); `api.forget_secret_env()` drops the secrets from the process
  environment once they are read.
- `api.client`: `ScalesweepClient` talks to a running service (`ApiError` is what a refused request raises), and
  `api.client.cli` (also `api.cli`) is `scalesweep remote ...`.
- `api.demo`: `scalesweep demo`, the whole study through the client.
- `api.deploy_local`: the compose topology as local processes (`python -m api.deploy_local`).
- `api.schemas`: the wire format both sides share.

Nothing is imported here until a name is asked for, so that the client does not load the service's dependencies
(the `service` extra).
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core.lazy import lazy_face

if TYPE_CHECKING:
    from . import cli, client, demo, deploy_local, schemas, service
    from .service import Settings, create_app, forget_secret_env

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
