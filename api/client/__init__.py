"""The client of a running service and its command line: `ScalesweepClient` (typed calls, one `ApiError` for
every failure), `scalesweep remote ...` (`api.client.cli`, also importable as `api.cli`), a job's progress line
(`watch_sweep`, `watch_transfer`) and the remote command line's settings. Needs httpx, not the service's extra.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core.lazy import lazy_face

if TYPE_CHECKING:
    from . import cli
    from ._client import DEFAULT_SERVER, TERMINAL, ApiError, ScalesweepClient
    from ._progress import sweep_line, transfer_line, watch_sweep, watch_transfer
    from ._settings import API_TOKEN_ENV, ClientSettings

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
