"""Reading a sweep's or transfer's trial runs from MLflow into records, and logging figures back as artifacts.

Names are the README's ("MLflow names"): params ``optimizer.name``, ``optimizer.refresh_every``,
``optimizer.gamma``, ``seed``, ``rung``, ``eval.fd_samples``; metrics at step ``fd``, ``val_loss``, ``loss``,
``effective_time_s``, ``optimizer_time_s``, ``step_time_s``, ``optimizer_step_time_s``, and ``objective`` at the
end; tags ``fd.metric_name``, ``fd.samples``, ``model.parameters``, ``scalesweep.status``; and the sweeper's
``scalesweep.trial_key``/``scalesweep.attempt`` on children and ``scalesweep.best.K``/``.gamma`` on the parent.
Everything goes through an explicit ``MlflowClient`` and run id, never a global active run (trials/_tracking.py
says why).
"""

from __future__ import annotations

import math
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ._draw import png_bytes
from ._errors import DashboardInputError
from ._records import SERIES, RunRecord

__all__ = ["load_chosen", "load_run", "load_runs", "log_figures"]

PARENT_TAG = "mlflow.parentRunId"
# The sweeper's tags (sweeper/_ledger.py): a trial's identity across retries, and the choice on the parent run.
TRIAL_KEY_TAG = "scalesweep.trial_key"
ATTEMPT_TAG = "scalesweep.attempt"
BEST_TAG = "scalesweep.best."
FIGURES_DIR = "figures"
# MLflow's run status when a trial never set scalesweep.status (e.g. it was killed before its first log).
_MLFLOW_STATUS = {
    "FINISHED": "SUCCEEDED",
    "FAILED": "FAILED",
    "KILLED": "CANCELLED",
    "RUNNING": "RUNNING",
    "SCHEDULED": "PENDING",
}
# Run ids are hex; anything else would be pasted into a filter string.
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PAGE = 1000


def _client(tracking_uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value == int(value) else None


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _record(client: Any, run: Any) -> RunRecord:
    params: dict[str, str] = run.data.params
    tags: dict[str, str] = run.data.tags
    metrics: dict[str, float] = run.data.metrics
    arm = params.get("optimizer.name", "unknown")
    series: dict[str, dict[int, float]] = {}
    for key in SERIES:
        if key in metrics:
            # A resumed trial may log a step twice; the later value (by timestamp) is the one that counts.
            history = sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: (m.step, m.timestamp))
            series[key] = {int(m.step): float(m.value) for m in history}
    status = tags.get("scalesweep.status") or _MLFLOW_STATUS.get(run.info.status, run.info.status)
    return RunRecord(
        run_id=run.info.run_id,
        arm=arm,
        rung=params.get("rung", ""),
        seed=_int(params.get("seed")) or 0,
        # Every trial logs its whole config, so a baseline carries K and γ params it never used: keep them only
        # for the arms they shape.
        K=_int(params.get("optimizer.refresh_every", params.get("K"))) if arm == "periodic" else None,
        gamma=_float(params.get("optimizer.gamma", params.get("gamma"))) if arm in ("periodic", "rownorm") else None,
        status=status.upper(),
        objective=metrics.get("objective"),
        parameters=_int(tags.get("model.parameters")),
        metric_name=tags.get("fd.metric_name"),
        fd_samples=_int(tags.get("fd.samples") or params.get("eval.fd_samples")),
        updates={k: float(v) for k, v in metrics.items() if k.startswith(("update_rms.", "update_spec."))},
        **series,
    )


def _check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise DashboardInputError(f"not a run id: {run_id!r}")


def load_run(tracking_uri: str, run_id: str) -> RunRecord:
    """One trial run as a record."""
    _check_run_id(run_id)
    client = _client(tracking_uri)
    return _record(client, client.get_run(run_id))


def _latest_attempts(runs: list[Any]) -> list[Any]:
    """One run per trial: the sweeper retries a failed trial as a new child run with the same
    ``scalesweep.trial_key`` and a higher ``scalesweep.attempt``; the last attempt is the trial's outcome, and
    counting the earlier ones would show a retried seed as a failed one. Runs without a trial key are kept."""

    def rank(run: Any) -> tuple[int, int]:
        return (_int(run.data.tags.get(ATTEMPT_TAG)) or 0, run.info.start_time or 0)

    latest: dict[str, Any] = {}
    for run in runs:
        key = run.data.tags.get(TRIAL_KEY_TAG)
        if key is not None and (key not in latest or rank(run) > rank(latest[key])):
            latest[key] = run
    last = {run.info.run_id for run in latest.values()}
    return [run for run in runs if run.data.tags.get(TRIAL_KEY_TAG) is None or run.info.run_id in last]


def load_runs(tracking_uri: str, parent_run_id: str, *, all_attempts: bool = False) -> list[RunRecord]:
    """Every (not deleted) child run of a sweep's or transfer's parent run, as records, oldest first; of a
    retried trial only its last attempt unless ``all_attempts``; a transfer's verification bracket left out."""
    _check_run_id(parent_run_id)
    client = _client(tracking_uri)
    parent = client.get_run(parent_run_id)
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            experiment_ids=[parent.info.experiment_id],
            filter_string=f"tags.`{PARENT_TAG}` = '{parent_run_id}'",
            max_results=_PAGE,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            break
    if not all_attempts:
        runs = _latest_attempts(runs)
    # A transfer's verification bracket (runs tagged scalesweep.verify_point) answers one question of its own
    # (scaling.verify_transfer); drawn with the transfer's runs it would pass for more seeds of the searched arm.
    runs = [r for r in runs if "scalesweep.verify_point" not in r.data.tags]
    return [_record(client, run) for run in runs]


def load_chosen(tracking_uri: str, parent_run_id: str) -> tuple[int, float] | None:
    """The (K, γ) a sweep chose, from its parent run's ``scalesweep.best.K`` and ``scalesweep.best.gamma`` tags
    (sweeper/_ledger.py); None while the sweep has not chosen."""
    _check_run_id(parent_run_id)
    tags = _client(tracking_uri).get_run(parent_run_id).data.tags
    k, gamma = _int(tags.get(f"{BEST_TAG}K")), _float(tags.get(f"{BEST_TAG}gamma"))
    return None if k is None or gamma is None else (k, gamma)


def log_figures(tracking_uri: str, run_id: str, figures: Mapping[str, Figure], *, dpi: float = 100) -> list[str]:
    """Save each figure as ``figures/<name>.png`` in the run's artifacts; returns the artifact paths. Names are
    file names without extension (letters, digits, ``_``, ``-``, ``.``)."""
    _check_run_id(run_id)
    for name in figures:
        if not isinstance(name, str) or not _FIGURE_NAME.match(name):
            raise DashboardInputError(f"figure name {name!r} is not a safe file name (letters, digits, _ - .)")
    if not figures:
        return []
    client = _client(tracking_uri)
    paths: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, figure in figures.items():
            path = Path(tmp) / f"{name}.png"
            path.write_bytes(png_bytes(figure, dpi=dpi))
            paths.append(f"{FIGURES_DIR}/{path.name}")
        # One call for the folder: one round trip to a remote artifact store instead of one per figure.
        client.log_artifacts(run_id, tmp, FIGURES_DIR)
    return paths
