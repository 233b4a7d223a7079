"""Secrets out of every text the service shows or logs, and out of every process it starts.

Credentials out of every text the service shows or logs: `scheme://user:password@host` -> `scheme://host`.

URIs a service holds (the records database, the MLflow store, its UI, the Ray dashboard) may carry a user and a
password; an error or a log line that quotes one (MLflow's "API request to http://u:p@host/... failed", a
driver's traceback) must not show them to a reader. Percent-encoded and decoded passwords both go: the user
information is removed wherever a `//...@` appears, and any extra secret strings given are replaced too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["REDACTED", "SERVICE_SECRET_ENV", "uri_secrets", "without_credentials"]

REDACTED = "<redacted>"

# The service's secrets as environment variables, the one list: the service reads them once at start-up and then
# erases them (`api.forget_secret_env`), no process it or the local deployment starts inherits them, and a driver
# started with them in its environment never hands them to a trainer.
SERVICE_SECRET_ENV = ("SCALESWEEP_API_TOKEN", "SCALESWEEP_DATABASE_URL")

# `//` then user information (no `/`, whitespace or quote before the `@`) then the host: `//user:pass@host`.
_USERINFO = re.compile(r"//[^/\s@'\"<>]+@(?=[^\s@])")


def without_credentials(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with the user information of every URI in it removed, and each of `secrets` replaced."""
    out = _USERINFO.sub("//", text)
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    return out


def uri_secrets(*uris: str | None) -> set[str]:
    """The user information of each URI (as written and percent-decoded), and its password alone: what must not
    appear in an answer or a log even where a library quotes it without its `//...@` frame."""
    out: set[str] = set()
    for uri in uris:
        if not uri or "@" not in uri:
            continue
        netloc = urlsplit(uri if "://" in uri else f"//{uri}").netloc
        userinfo = netloc.rpartition("@")[0]
        if not userinfo:
            continue
        password = userinfo.partition(":")[2]
        out.update({userinfo, unquote(userinfo)})
        if password:
            out.update({password, unquote(password)})
    return out
