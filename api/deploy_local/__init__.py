"""The compose topology (docker/compose.yaml) as local processes on loopback, for a person and for the tests:
`python -m api.deploy_local` (or `make deploy-local`). How it starts and stops each component:
`api.deploy_local._deploy`.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core.lazy import lazy_face

if TYPE_CHECKING:
    from ._deploy import (
        Component,
        DeployError,
        Deployment,
        Postgres,
        main,
        pg_bin,
        postgres_server,
        ray_dashboard_missing,
        stop_pids,
    )
    from ._settings import DeploySettings

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
