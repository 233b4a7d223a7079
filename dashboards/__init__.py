"""Figures and an HTML report computed from run records and fits: compute the data, then draw it.

Records (``RunRecord``, or dicts with the same keys, e.g. from ``load_runs``) are checked once into a ``Records``
table; ``compute_report`` turns the table into the data of every section (``ReportData``), ``report_figures`` draws
it as ``matplotlib.figure.Figure`` objects without touching pyplot or any global state, and ``build_report`` /
``write_report`` make one self-contained HTML page. ``sweep_report``, ``transfer_report`` and ``transfer_page``
read a job's runs from MLflow; ``log_figures`` saves figures as its artifacts. ``JobFigures`` draws a finished
sweep's or transfer's figures and page for the sweeper, through the figure hook the command line registers (it
imports nothing of the sweeper).

Each figure on its own is a ``compute_*``/``plot_*`` pair (the heatmap, FD and loss curves, scaling, timing, update
scale: docs/guide.md's table), in the public module ``dashboards.figures``. Every name loads its module on first
use: importing the package costs nothing until something is drawn (matplotlib is imported then).
"""

from __future__ import annotations

import importlib
from typing import Any

# The face, written once: module -> the names other packages and the docs use. `__all__` is derived from it.
_FACE = {
    "._errors": ("DashboardError", "DashboardInputError"),
    "._records": ("ARMS", "Records", "RunRecord", "as_records"),
    "._mlflow": ("load_runs", "log_figures"),
    "._report": ("ReportData", "build_report", "compute_report", "report_figures", "write_report"),
    "._study": ("comparison_report", "log_report_figures", "sweep_report", "transfer_report"),
    "._transfer_page": ("transfer_page",),
    "._decisions": ("decision_notes",),
    "._jobs": ("JobFigures",),
}
_HOMES = {name: module for module, names in _FACE.items() for name in names}

__all__ = sorted(name for names in _FACE.values() for name in names)


def __getattr__(name: str) -> Any:
    if name == "figures":  # the compute-then-draw pairs, a public module of their own
        return importlib.import_module(".figures", __name__)
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES, "figures"})
