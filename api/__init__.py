"""The REST service (FastAPI): HTTP only, calling sweeper/ and scaling/.

Not built yet (issue: "The REST service"); the public surface will be named here.
"""

from __future__ import annotations

__all__: list[str] = []
