"""Which methods the service's routes serve at a path: asked of the router itself, so routes of included routers
count too. The request guard (`_http`) and the problem answers (`_problems`: 405 with `Allow`) both use it."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.routing import Match

__all__ = ["WRITES", "route_methods"]

Scope = MutableMapping[str, Any]

WRITES = ("POST", "PUT", "PATCH", "DELETE")


def route_methods(app: Any, scope: Scope) -> list[str]:
    """The methods some route of `app` serves at this request's path (HEAD wherever GET is), sorted."""
    allowed = set()
    for method in ("GET", *WRITES):
        probe = {**scope, "method": method}
        if any(route.matches(probe)[0] == Match.FULL for route in app.router.routes):
            allowed.add(method)
    if "GET" in allowed:
        allowed.add("HEAD")
    return sorted(allowed)
