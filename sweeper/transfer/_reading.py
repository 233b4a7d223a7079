"""Reading a transfer back: its runs from MLflow (`read_runs`, each as `scaling`'s `TransferRun`) into
`TransferResult` (`load_transfer_result`), and a sweep's choice carried to a rung without transfer runs
(`export_from_sweep`). Works while the transfer runs and after it ended, from any process.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scaling import TransferRun
from scaling.export import Export, build_export, refuse_losing_choice
from trials.optim import ARMS_WITH_GAMMA
from trials.record import LINEAGE, METRIC, PROVENANCE, TAG, TRIAL_TAG, StoredRun, parse_float, parse_int, trials_tagged
from trials.record import read_runs as read_stored_runs

from ..jobfiles import STATE_FILE, is_sweep_folder, read_json
from ._plan import _clean, _rung_shape, size_basis
from ._planning import ARM_TAG, load_source
from ._result import TransferResult
from ._state import read_head, transfer_status
from ._verification import is_verification_run

__all__ = ["export_from_sweep", "load_transfer_result", "read_runs", "stored_uri"]

# The step series a transfer's analysis reads from each run.
_HISTORIES = (METRIC.FD, METRIC.EFFECTIVE_TIME_S, METRIC.FD_TRACK, METRIC.TRACK_EFFECTIVE_TIME_S, METRIC.FD_BIAS,
              METRIC.ALIGNMENT)


def load_transfer_result(workdir: str | Path, tracking_uri: str | None = None) -> TransferResult:
    """The transfer in `workdir`, its runs read from MLflow (`tracking_uri` overrides the stored one, e.g. when
    the store moved). Works while it runs and after it ended, from any process."""
    path = Path(workdir).resolve()
    state = read_head(path)
    tracking = state.tracking
    uri = tracking_uri or stored_uri(path) or tracking["tracking_uri"]
    runs = read_runs(uri, tracking["experiment"], LINEAGE.TRANSFER_ID, state.transfer_id)
    verification_runs = [r for r in runs if is_verification_run(r)]
    runs = [r for r in runs if not is_verification_run(r)]
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.state] = counts.get(run.state, 0) + 1
    status: dict[str, Any] = {}
    if is_sweep_folder(path):
        status = transfer_status(path)
    return TransferResult(
        transfer_id=state.transfer_id, name=state.name, state=str(status.get("state", "PENDING")),
        workdir=str(path), tracking_uri=uri, experiment=tracking["experiment"],
        parent_run_id=status.get("parent_run_id"), source=dict(state.source), plan=state.plan,
        runs=runs, counts=counts, source_objectives=dict(state.source_objectives),
        verification_runs=verification_runs, step_timing=dict(state.step_timing or {}),
    )


def stored_uri(path: Path) -> str | None:
    sweep = read_json(path / STATE_FILE)
    return str(sweep["tracking_uri"]) if sweep else None


def export_from_sweep(sweep_workdir: str | Path, target_rung: str, tracking_uri: str | None = None, *,
                      allow_losing: bool = False) -> Export:
    """The sweep's choice carried to `target_rung` by the default lr rules alone, without transfer runs (every
    arm `verified_at_target` False), with the sweep's objectives and run ids as evidence. Refused
    (`ScalingInputError`) when the choice is worse than a baseline with confidence, unless `allow_losing`; the
    export then carries the warning in its provenance."""
    from trials.models import check_rung

    check_rung(target_rung)
    source = load_source(sweep_workdir, tracking_uri)
    refuse_losing_choice(source.warnings, allow_losing)
    optimizers = source.base_optimizers()
    arms = [source.searched_arm, *(a for a in ("muon", "adamw") if a != source.searched_arm)]
    return build_export(
        {a: optimizers[a] for a in arms},
        base_width=_rung_shape(source.spec.rung)[0],
        target_width=_rung_shape(target_rung)[0],
        target={"rung": target_rung, "parameters": _rung_shape(target_rung, source.spec.trial)[1],
                "size_basis": size_basis(source.spec.trial)[1], "base_rung": source.spec.rung},
        verified={a: False for a in arms},
        evidence={a: _clean({"sweep": source.objectives.get(a, {})}) for a in arms},
        provenance=source.provenance(),
    )


def _num(text: str | None) -> float | None:
    """A finite number from a tag or param; None otherwise (e.g. "None": an lr left to the arm's default)."""
    value = parse_float(text)
    return value if value is not None and math.isfinite(value) else None


def _transfer_run(run: StoredRun) -> TransferRun:
    """The analysis's record of one stored run (its histories read for `_HISTORIES`)."""
    params, tags = run.params, run.tags
    arm = tags.get(ARM_TAG) or run.arm
    fd, times = run.history(METRIC.FD), run.history(METRIC.EFFECTIVE_TIME_S)
    checkpoints = tuple((int(s), float(times[s]), float(fd[s])) for s in sorted(fd) if s in times)
    track_fd, track_times = run.history(METRIC.FD_TRACK), run.history(METRIC.TRACK_EFFECTIVE_TIME_S)
    track = tuple((int(s), float(track_times[s]), float(track_fd[s])) for s in sorted(track_fd) if s in track_times)
    bias = run.history(METRIC.FD_BIAS)
    aligned = run.history(METRIC.ALIGNMENT)  # read as FD is: at the eval steps, with their effective time
    return TransferRun(
        rung=params.get("rung", ""),
        parameters=parse_int(tags.get(TRIAL_TAG.PARAMETERS)),
        arm=arm,
        seed=parse_int(params.get("seed", tags.get(TAG.SEED))) or 0,
        lr=_num(params.get("optimizer.lr")) or _num(tags.get(LINEAGE.LR)),
        lr_rule=tags.get(LINEAGE.LR_RULE),
        lr_base=_num(tags.get(LINEAGE.LR_BASE)),
        # Every trial logs its whole config, so a baseline carries K and gamma params it never used.
        K=parse_int(params.get("optimizer.refresh_every")) if run.arm == "periodic" else None,
        gamma=_num(params.get("optimizer.gamma")) if run.arm in ARMS_WITH_GAMMA else None,
        run_id=run.run_id,
        state=run.status,
        trial_key=run.trial_key if run.trial_key is not None else (run.run_name or run.run_id),
        attempt=run.attempt,
        checkpoints=checkpoints,
        metric_name=tags.get(TRIAL_TAG.FD_METRIC_NAME),
        fd_samples=parse_int(tags.get(TRIAL_TAG.FD_SAMPLES) or params.get("eval.fd_samples")),
        git_sha=tags.get(PROVENANCE.GIT_SHA),
        track=track,
        horizon=parse_int(params.get("steps")),
        track_samples=parse_int(tags.get(TRIAL_TAG.FD_TRACK_SAMPLES)) or None,
        fd_bias=tuple((int(s), float(bias[s])) for s in sorted(bias)),
        alignment=tuple((int(s), float(times[s]), float(aligned[s])) for s in sorted(aligned) if s in times),
    )


def read_runs(tracking_uri: str, experiment: str, tag: str, value: str) -> list[TransferRun]:
    """The trial runs whose tag `tag` equals `value` (e.g. a transfer's id), last attempt per trial, ordered by
    trial key. Read with `trials.record.read_runs`, so a run's state is the run record's (`run_state`)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    stored = read_stored_runs(client, [exp.experiment_id], trials_tagged(tag, value), histories=_HISTORIES)
    stored.sort(key=lambda r: r.trial_key if r.trial_key is not None else r.run_id)
    return [_transfer_run(run) for run in stored]
