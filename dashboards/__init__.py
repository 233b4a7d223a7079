"""Figures and an HTML report computed from run records and fits (compute the data, then draw it).

Not built yet (issue: "One command runs the whole study; dashboards; deployment"); the public surface will be named
here.
"""

from __future__ import annotations

__all__: list[str] = []
