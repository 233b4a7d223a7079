"""The REST service (FastAPI), HTTP only, calling sweeper/ and scaling/: `create_app(settings)` wires the app
(`app`), its routers (one per resource under `routers/`, each taking what it needs through the `Annotated`
dependencies of `deps`), the database of job records (`db`, Alembic migrations in `migrations/`), the job queue
whose drivers run as processes of their own or as Ray Jobs (`_jobs`), the result cache (`cache`), the token and
what it allows (`security`), the analysis gate (`gate`), the heavy pages drawn in a bounded worker (`render`), the
work folder's leader lock (`_leader`), the problem+json answers (`_problems`) and the settings (`Settings`, every
`SCALESWEEP_*` variable it reads). `scalesweep serve` starts it.

The modules without a leading underscore are the ones the routers use (a router reads its own service package's
public modules, never its private ones); the face below is what the other packages use.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core.lazy import lazy_face

if TYPE_CHECKING:
    from ._leader import LeaderError
    from .app import create_app
    from .security import forget_secret_env
    from .settings import Settings, get_settings

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
