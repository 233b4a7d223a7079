"""The REST service (FastAPI) and its Python client: HTTP only, calling sweeper/ and scaling/.

- `api.main.create_app(settings)` builds the service: sweeps, transfers, fits and exports under `/v1`, bearer-token
  auth, RFC 9457 problem responses, a database of job records, and a job queue whose drivers run as processes of
  their own (or as Ray Jobs). `scalesweep serve` starts it with settings from `SCALESWEEP_*` variables.
- `api.client.ScalesweepClient` talks to a running service (`scalesweep remote ...` is its command line);
  `api.client.ApiError` is what a refused request raises.

- `api.Settings` is the service's settings (every `SCALESWEEP_*` variable it reads); `api.forget_secret_env()`
  drops the secrets from the process environment once they are read. `api.cli` is `scalesweep remote ...`,
  `api.demo` is `scalesweep demo`.

Nothing is imported here until a name is asked for, so that the client does not load the service's dependencies
(the `service` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trials import lazy_attributes

if TYPE_CHECKING:
    from ._security import forget_secret_env
    from ._settings import Settings

__all__ = ["Settings", "forget_secret_env"]

__getattr__, __dir__ = lazy_attributes(
    __name__, globals(), {"Settings": "._settings", "forget_secret_env": "._security"}, ("cli", "demo"))
