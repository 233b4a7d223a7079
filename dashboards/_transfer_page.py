"""A transfer's HTML report as one page.

Building the page reads every run from MLflow, fits three metrics with bootstrap intervals and draws the figures:
seconds on an idle machine, far longer beside training runs. A finished transfer does not change, so the job that
ran it builds the page once, when it ends, and stores it beside its state with the version of the job files it
was built from (`sweeper.jobfiles.store_transfer_report`). A reader (the REST service's `/report`) serves the
stored page while that version still holds (`sweeper.jobfiles.stored_transfer_report`), and builds a fresh one
only for a transfer that is still running or has changed since (a resumed one). Storing and reading the page is
the job protocol's; this module only draws it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ._errors import DashboardError
from ._report import ReportData, build_report
from ._study import transfer_report

__all__ = ["analysis_sections", "transfer_page", "transfer_page_data"]

# The report's scaling panels, keyed by the names the dashboards give the run record's fields; `alignment` (fitted on
# 1 - alignment) only for a transfer whose runs carry it (`fit_metrics`): a shapes transfer's page says nothing of it.
_REPORT_METRIC = {"time_to_best": "time_to_best_s", "best_fd": "best_fd", "endpoint_fd": "endpoint_fd",
                  "alignment": "alignment_error"}


def transfer_page(result: Any, *, transfer_id: str | None = None, sweep_id: str | None = None) -> str:
    """The whole report of a transfer (`sweeper.TransferResult`) as one self-contained HTML page: the controls'
    outcomes first, then curves, timing, scaling fits, the declared target, both crossings with their censoring
    counts, the claims in one alpha budget, the effective-step diagnostic, the tuning budget per arm and the
    verification verdict, with the source sweep's heatmap and its chosen line. `transfer_id`
    and `sweep_id` name them as the caller knows them (the service's ids); by default the transfer's own."""
    return build_report(transfer_page_data(result, transfer_id=transfer_id, sweep_id=sweep_id))


def transfer_page_data(result: Any, *, transfer_id: str | None = None, sweep_id: str | None = None) -> ReportData:
    """What `transfer_page` draws, before it is drawn (its figures can be logged to MLflow from the same data)."""
    from scaling import ScalingError

    if not result.parent_run_id:
        raise DashboardError(f"transfer {transfer_id or result.transfer_id} has no MLflow parent run yet")
    fits: dict[str, Any] = {}
    notes: list[str] = [result.seeds_note] if getattr(result, "seeds_note", None) else []
    notes += [f"Seeds added in rounds: {line}" for line in getattr(result, "rounds_lines", ())]
    notes += [f"Seeds added after the transfer ended: {line}" for line in getattr(result, "extension_lines", ())]
    fittable = result.fit_metrics()
    for metric, name in _REPORT_METRIC.items():
        if metric not in fittable:
            continue
        try:
            fits[name] = result.fits(metric)
        except ScalingError as exc:
            notes.append(f"no {metric} fit: {exc}")
    context = {"transfer": f"{result.name} ({transfer_id or result.transfer_id})",
               "sweep": sweep_id or str(result.source.get("sweep_id", "")), "state": result.state,
               "chosen": ", ".join(f"{k}={v}" for k, v in result.chosen.items())}
    verification = result.verification_doc()  # the verified transfer's verdict
    if verification is not None:
        context["verification"] = f"{verification['verdict']} at {verification['rung']}: " \
                                  f"{verification.get('reason', '')}"
    data = transfer_report(result.tracking_uri, result.parent_run_id, fits=fits or None,
                           sweep_run_id=result.source.get("sweep_parent_run_id"),
                           title=f"scalesweep transfer {result.name}", context=context)
    data = replace(data, targets=result.target_summary(),  # time to the declared target, its fits and flags
                   target_scaling=_target_panels(result, data.fd_info))
    try:
        data = replace(data, analysis=analysis_sections(result))
    except ScalingError as exc:  # said on the page, which stands without these sections
        notes.append(f"the controls, claims, diagnostics and tuning budgets left out: {exc}")
    if notes:
        data = replace(data, notes=(*data.notes, *notes))
    return data


def analysis_sections(result: Any) -> dict[str, Any]:
    """The parts of the transfer's analysis (`TransferResult.analysis()`, the same keys and shapes) that the page
    shows beside its figures: controls, targets (each comparison at both crossings), claims, diagnostics, tuning
    budgets and lr brackets. Taken from the result's answers, not from `analysis()`, which would also refit every
    metric and copy every run's curve."""
    brackets = result.plan.lr_brackets
    return {"searched_arm": result.searched_arm, "controls": result.controls(), "targets": result.targets(),
            "claims": result.claims(), "diagnostics": result.diagnostics(), "tuning_budgets": result.tuning_budgets(),
            "lr_brackets": {"multiples": brackets, "choices": result.lr_choices} if brackets else None}


# Steps and time to the declared target against size: the report's and the README's figure of a transfer.
_TARGET_PANELS = {"steps_to_target": "steps to the declared target",
                  "time_to_target": "time to the declared target (effective s)"}


def _target_panels(result: Any, fd: Any) -> tuple[Any, ...]:
    """One panel per target quantity an arm reached at two rungs or more, each with its fit; where the per-arm fit
    is flagged non_identifiable (three sizes), the alternative that passes the counting rule (alpha shared by the
    arms) is drawn, and the panel's title says which form and flags it carries."""
    from scaling import ScalingError

    from ._scaling import compute_fit_plot

    panels = []
    for metric, ylabel in _TARGET_PANELS.items():
        data = result.fit_data(metric)
        if not data:
            continue
        notes: list[str] = []
        try:
            fit = result.fits(metric)
        except ScalingError as exc:
            fit, notes = None, [f"no {metric} fit: {exc}"]
        if fit is not None and "non_identifiable" in fit.flags and fit.alternative is not None:
            fit = fit.alternative
        panel = compute_fit_plot(metric, ylabel, data, fit, fd=fd, notes=notes)
        over = result.undertrained_fitted(fit) if fit is not None else []
        if over and panel.fit is not None:  # the title's flags say what the analysis says of this fit
            panel = replace(panel, fit=replace(panel.fit, flags=tuple(sorted({*panel.fit.flags, "undertrained"}))))
        panels.append(panel)
    return tuple(panels)
