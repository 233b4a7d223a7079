"""Reading a sweep's or transfer's trial runs from MLflow into records, and logging figures back as artifacts.

Names are the README's ("MLflow names"): params ``optimizer.name``, ``optimizer.refresh_every``,
``optimizer.gamma``, ``seed``, ``rung``, ``eval.fd_samples``; metrics at step ``fd``, ``val_loss``, ``loss``,
``effective_time_s``, ``optimizer_time_s``, ``step_time_s``, ``optimizer_step_time_s``, ``alignment`` and
``alignment.<attribute>`` (scenes-cnn runs), and ``objective`` at the end; tags ``fd.metric_name``,
``fd.samples``, ``model.parameters``, ``scalesweep.status``; and the sweeper's ``scalesweep.trial_key``/
``scalesweep.attempt`` on children and ``scalesweep.best.K``/``.gamma`` on the parent.
Everything goes through an explicit ``MlflowClient`` and run id, never a global active run (trials/_tracking.py
says why).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from trials.optim import ARMS_WITH_GAMMA
from trials.record import (
    LINEAGE,
    METRIC,
    PARENT_TAG,
    TAG,
    TRIAL_TAG,
    StoredRun,
    parse_float,
    parse_int,
    read_run,
    read_runs,
)

from ._draw import png_bytes
from ._errors import DashboardInputError
from ._records import SERIES, Records, RunRecord, as_records

__all__ = ["load_chosen", "load_run", "load_runs", "log_figures"]

FIGURES_DIR = "figures"
# Run ids are hex; anything else would be pasted into a filter string.
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PAGE = 1000


def _client(tracking_uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def _record(run: StoredRun) -> RunRecord:
    """The dashboards' view of a trial's run. Its status is the run's state (`trials.record.run_state`: the
    sweeper's own reading), with DIVERGED told apart from other failures."""
    params, tags = run.params, run.tags
    arm = params.get("optimizer.name", "unknown")
    return RunRecord(
        run_id=run.run_id,
        arm=arm,
        rung=params.get("rung", ""),
        seed=parse_int(params.get("seed")) or 0,
        # Every trial logs its whole config, so a baseline carries K and γ params it never used: keep them only
        # for the arms they shape.
        K=parse_int(params.get("optimizer.refresh_every", params.get("K"))) if arm == "periodic" else None,
        gamma=parse_float(params.get("optimizer.gamma", params.get("gamma"))) if arm in ARMS_WITH_GAMMA
        else None,
        status=run.status,
        objective=run.metrics.get("objective"),
        parameters=parse_int(tags.get(TRIAL_TAG.PARAMETERS)),
        metric_name=tags.get(TRIAL_TAG.FD_METRIC_NAME),
        fd_samples=parse_int(tags.get(TRIAL_TAG.FD_SAMPLES) or params.get("eval.fd_samples")),
        eval_steps=_eval_steps(params.get("eval_steps")),
        updates={k: float(v) for k, v in run.metrics.items() if k.startswith(("update_rms.", "update_spec."))},
        # each attribute's latest share: the last eval step's (MLflow keeps a metric's value at its largest step)
        alignment_attributes={k.removeprefix(f"{METRIC.ALIGNMENT}."): float(v) for k, v in run.metrics.items()
                              if k.startswith(f"{METRIC.ALIGNMENT}.")},
        **{key: run.history(key) for key in SERIES if key in run.histories},
    )


def _eval_steps(text: str | None) -> tuple[int, ...]:
    """The trial's declared eval steps (its `eval_steps` param, a JSON list); none when it logged none, or a list
    MLflow cut short (a param keeps 6,000 characters): the figures then bound what they draw by themselves."""
    try:
        steps = json.loads(text or "null")
    except ValueError:
        return ()
    if not isinstance(steps, list) or not all(type(s) is int and s >= 0 for s in steps):
        return ()
    return tuple(sorted(set(steps)))


def _check_run_id(run_id: str) -> None:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise DashboardInputError(f"not a run id: {run_id!r}")


def load_run(tracking_uri: str, run_id: str) -> RunRecord:
    """One trial run as a record."""
    _check_run_id(run_id)
    return _record(read_run(_client(tracking_uri), run_id, histories=SERIES))


def load_runs(tracking_uri: str, parent_run_id: str, *, all_attempts: bool = False) -> Records:
    """Every (not deleted) child run of a sweep's or transfer's parent run, as checked records (a ``Records``
    table), oldest first; of a retried trial only its last attempt unless ``all_attempts``; a transfer's
    verification bracket left out."""
    _check_run_id(parent_run_id)
    client = _client(tracking_uri)
    parent = client.get_run(parent_run_id)
    runs = read_runs(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = '{parent_run_id}'",
                     histories=SERIES, latest=not all_attempts, order_by=["attributes.start_time ASC"],
                     page_size=_PAGE)
    # A transfer's verification bracket (runs tagged with a verify point) answers one question of its own
    # (scaling.verify_transfer); drawn with the transfer's runs it would pass for more seeds of the searched arm.
    return as_records(_record(run) for run in runs if LINEAGE.VERIFY_POINT not in run.tags)


def load_chosen(tracking_uri: str, parent_run_id: str) -> tuple[int, float] | None:
    """The (K, γ) a sweep chose, from its parent run's ``scalesweep.best.K`` and ``scalesweep.best.gamma`` tags
    (sweeper/_ledger.py); None while the sweep has not chosen."""
    _check_run_id(parent_run_id)
    tags = _client(tracking_uri).get_run(parent_run_id).data.tags
    k, gamma = parse_int(tags.get(f"{TAG.BEST}K")), parse_float(tags.get(f"{TAG.BEST}gamma"))
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
