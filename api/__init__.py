"""The REST service (FastAPI) and its Python client: HTTP only, calling sweeper/ and scaling/.

- `api.main.create_app(settings)` builds the service: sweeps, transfers, fits and exports under `/v1`, bearer-token
  auth, RFC 9457 problem responses, a database of job records, and a job queue whose drivers run as processes of
  their own (or as Ray Jobs). `scalesweep serve` starts it with settings from `SCALESWEEP_*` variables.
- `api.client.ScalesweepClient` talks to a running service (`scalesweep remote ...` is its command line);
  `api.client.ApiError` is what a refused request raises.

Nothing is imported here, so that the client does not load the service's dependencies (the `service` extra).
"""

from __future__ import annotations

__all__: list[str] = []
