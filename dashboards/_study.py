"""A sweep's and a transfer's reports straight from MLflow: the records of their child runs, the sweep's choice,
and the transfer's fits, assembled into one ``ReportData``; and its figures logged back to the parent run.

The transfer report carries the source sweep's K x γ heatmap beside its own curves, timing and scaling panels, so
one page shows the whole study: what was searched, what was chosen, and how the choice held at larger sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._decisions import choice_notes, decision_notes, load_selection
from ._errors import DashboardError
from ._heatmap import compute_heatmap
from ._mlflow import load_chosen, load_runs, log_figures
from ._records import FDInfo
from ._report import ReportData, compute_report, report_figures
from ._sweepviews import comparison_from_document, compute_trials_view, front_from_document, importance_from_document

if TYPE_CHECKING:
    from scaling.fits import ScalingFit

__all__ = ["comparison_report", "log_report_figures", "sweep_report", "transfer_report"]


def sweep_report(tracking_uri: str, sweep_run_id: str, *, title: str = "scalesweep sweep",
                 context: Mapping[str, str] | None = None) -> ReportData:
    """Heatmap (chosen pair marked), FD and loss curves, and timing of a sweep's trials; the header states the
    decisions the sweep recorded (choice and P(best), confirmation and winner's curse, budgets, paired claims)."""
    records = load_runs(tracking_uri, sweep_run_id)
    chosen = load_chosen(tracking_uri, sweep_run_id)
    data = compute_report(records, title=title, chosen=chosen,
                          context={"tracking URI": tracking_uri, "sweep parent run": sweep_run_id, **(context or {})})
    selection = load_selection(tracking_uri, sweep_run_id)
    notes = decision_notes(selection)  # P(best), winner's curse, paired claims
    data = replace(data, importance=importance_from_document((selection or {}).get("importance")),
                   front=front_from_document((selection or {}).get("front")),
                   trials_view=compute_trials_view(records))
    return replace(data, notes=(*notes, *data.notes)) if notes else data


def transfer_report(
    tracking_uri: str,
    transfer_run_id: str,
    *,
    fits: Mapping[str, ScalingFit] | None = None,
    sweep_run_id: str | None = None,
    title: str = "scalesweep transfer",
    context: Mapping[str, str] | None = None,
) -> ReportData:
    """FD and loss curves, timing and scaling panels (with ``fits``, keyed by ``SCALING_METRICS``) of a transfer's
    runs, plus the source sweep's heatmap, importance and quality-cost front, and its chosen line with the choice's
    warnings in the header, when ``sweep_run_id`` is given. A fit that cannot be drawn (e.g. on too few sizes) leaves
    its panel out with a note instead of failing the report."""
    ctx = {"tracking URI": tracking_uri, "transfer parent run": transfer_run_id, **(context or {})}
    data = compute_report(load_runs(tracking_uri, transfer_run_id), title=title, fits=fits or None, context=ctx)
    notes: list[str] = []
    choice: list[str] = []
    if sweep_run_id:
        ctx["sweep parent run"] = sweep_run_id
        sweep_records = load_runs(tracking_uri, sweep_run_id)
        chosen = load_chosen(tracking_uri, sweep_run_id)
        try:
            data = replace(data, heatmap=compute_heatmap(sweep_records, chosen=chosen))
        except DashboardError as exc:
            notes.append(f"the sweep's heatmap left out: {exc}")
        selection = load_selection(tracking_uri, sweep_run_id) or {}  # the sweep's importance and front beside it
        data = replace(data, importance=importance_from_document(selection.get("importance")),
                       front=front_from_document(selection.get("front")), context=ctx)
        choice = choice_notes(selection)  # a choice worse than the baselines says so on the transfer's page too
    return replace(data, notes=(*choice, *data.notes, *notes)) if choice or notes else data


def comparison_report(doc: Mapping[str, Any]) -> ReportData:
    """Two sweeps compared (`sweeper.SweepComparison.to_dict()`, or the service's `/compare` answer): the table of
    points with their paired differences and its figure; the warnings (different eval steps or feature spaces,
    nothing scored in both) in the header."""
    a, b = doc["a"], doc["b"]
    return ReportData(
        title=f"scalesweep: {a['name']} (A) against {b['name']} (B)", comparison=comparison_from_document(doc),
        fd=FDInfo(metric_names=tuple(sorted({*(a.get("metric") or ()), *(b.get("metric") or ())}))),
        context={side: f"{d['name']}, sweep {d.get('id') or d['sweep_id']}, parent run {d.get('parent_run_id')}, "
                 f"seeds {d.get('seeds')}, eval steps {d.get('eval_steps')}, chosen {d.get('chosen')}"
                 for side, d in (("A", a), ("B", b))},
        notes=tuple(f"Warning: {w}" for w in doc.get("warnings") or ()))


def log_report_figures(tracking_uri: str, run_id: str, data: ReportData, *, dpi: float = 100) -> list[str]:
    """Every figure of ``data`` as ``figures/<name>.png`` on run ``run_id`` (visible in the MLflow UI)."""
    return log_figures(tracking_uri, run_id, report_figures(data), dpi=dpi)
