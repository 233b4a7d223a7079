"""The transfer job: carry a finished sweep's chosen pair, unchanged, to larger rungs beside the baseline arms
(`run_transfer`) and stop it (`cancel_transfer`); its status (`transfer_status`) and its runs read back
(`load_transfer_result`) are beside it.

The paper's second stage. The plan and the one typed sweep spec that runs it are `_planning`'s (every (rung, arm,
seed) once, at `horizon_factor` x the sweep's horizon, lr carried by a stated rule per arm; K and gamma never
re-tuned); the state they are stored in and the status are `_state`'s; reading the runs back is `_reading`'s; the
timing stage is `_timing`'s. This module is the job: plan once, time once, run the sweep, read it back.

How it runs (one sweep that holds every rung). The whole rung x arm table is one sweeper sweep: the chosen pair at
the first rung is its (single-point) search, every other (rung, arm) a baseline with its own `rung`, optimizer and
tags (`sweeper.BaselineSpec.rung`, `.tags`). One driver, one Ray instance and one Tune run then keep both cores of
a small machine busy across rungs, largest runs first, with the sweeper's resume, retries, cancel and MLflow ledger
as they are. The alternative, one sweeper driver subprocess per rung, would leave a core idle at the end of each
rung, pay Ray's start (4-8 s) and a process per rung, and need its own bookkeeping of which rung finished; two
`Tuner.fit()` in one process interfere, so it could not run them in-process either (docs/design.md).

Work folder (default `out/transfers/<name>`): `transfer.json` (identity, the plan, the sweep spec it runs),
`outcome.json` (the final state once the driver ends), and the sweeper's own files (`sweep.json`, `status.json`,
`driver.lock`, `cancel`, `checkpoints/`, `ray/`), so `scalesweep sweep status DIR` works on it too.

MLflow (the sweep's store and experiment unless `tracking` says otherwise): a parent run `sweep:<transfer name>`,
one child run per (rung, arm, seed) attempt, named `K=3,gamma=0.15,seed=0` (the chosen pair at the first rung) or
`<arm>.<rung>,seed=<seed>`. Lineage tags on the parent and every child: `scalesweep.transfer_id`,
`scalesweep.transfer_name`, `scalesweep.source_sweep_id`, `scalesweep.source_sweep_name`,
`scalesweep.source_parent_run_id`, `scalesweep.transfer.chosen` (JSON of the pair); per child:
`scalesweep.lr_rule`, `scalesweep.lr_base` (the lr at the sweep's rung), `scalesweep.base_rung`,
`scalesweep.base_width`; the lr a run used is its param `optimizer.lr`. With target rule `pilot`, the pilot's runs
come first, a sweep of their own in `pilot/` tagged `scalesweep.transfer.pilot_of` (not `scalesweep.transfer_id`:
they are never judged), and the target they give is on the parent run as `scalesweep.transfer.pilot` (`_pilot`).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from scaling import TransferRun
from trials import JobFailedError

from ..jobfiles import (
    ANALYSIS_FILE,
    OUTCOME_FILE,
    is_sweep_folder,
    is_transfer_folder,
    request_cancel,
    transfer_version,
    write_json,
    write_labelled,
)
from ..jobs import JobRun, SweepJob, cancel_sweep, log_transfer_figures, run_locked_job, run_stages
from ..specs import SweepSpec
from ._errors import TransferError
from ._pilot import PILOT_FOLDER, PILOT_OF_TAG, pilot_sweep_spec, run_pilot
from ._planning import _plan, load_source
from ._reading import load_transfer_result, read_runs, stored_uri
from ._result import TransferResult
from ._rounds import catch_up, run_rounds
from ._sections import PlateauSpec
from ._spec import TransferSpec, default_transfer_workdir, load_transfer_spec
from ._state import TransferHead, TransferState, now, read_head, read_state, revised, transfer_status, validated_sweep
from ._timing import step_timing

__all__ = ["cancel_transfer", "run_transfer"]


@dataclass
class TransferJob:
    """A transfer as the job runner runs it (`sweeper.jobs`' `Job`): plan it (once), time its steps (once), run its
    one multi-rung sweep as an inner job, read its runs back. The lock, the resume check, the table, the outcome of a
    broken driver and the figures are the runner's."""

    spec: TransferSpec
    kind = "transfer"
    refused = TransferError
    may_change = "`execution`"

    def stored(self, workdir: Path) -> tuple[str, str | None] | None:
        if not is_transfer_folder(workdir):
            return None
        head = read_head(workdir)
        return head.transfer_id, head.fingerprint

    def run(self, run: JobRun) -> TransferResult:
        spec, path, out = self.spec, run.workdir, run.stream
        state = read_state(path) if is_transfer_folder(path) else self._planned(path)
        (path / OUTCOME_FILE).unlink(missing_ok=True)
        if out is not None:
            _print_plan(state, out)
        if state.plan.pilot is not None:  # the target, fixed before the timing and the judged runs
            pilot_state = self._pilot(state, run)
            if pilot_state != "SUCCEEDED":
                result = load_transfer_result(path)
                result.state = "CANCELLED" if pilot_state == "CANCELLED" else "FAILED"
                write_json(path / OUTCOME_FILE, {"state": result.state, "finished_at": now(),
                                                 "error": f"the pilot ended {pilot_state}", "counts": {}})
                return result
        # What runs: the stored spec, with the execution a resume may change (the stored one stays as planned).
        sweep = self._with_execution(state.sweep_spec)
        if state.step_timing is None:
            state.step_timing = step_timing(spec.timing, state.plan, sweep, out)
            state.write(path)
        catch_up(state, path)  # a round's seeds recorded before a restart

        def run_round(round_sweep: SweepSpec) -> str:
            return run_stages(SweepJob(round_sweep), run.inner(), resume=True).state

        # The transfer's table and figures, drawn by the runner once it ends, cover the sweep's runs.
        swept_state = run_rounds(state, path, sweep, run_round(sweep), load=lambda: load_transfer_result(path),
                                 run_round=run_round, out=out)
        result = load_transfer_result(path)
        if swept_state == "CANCELLED":
            final = "CANCELLED"
        elif any(r.state == "SUCCEEDED" for r in result.runs) and not any(
                r.state in ("RUNNING", "PENDING", "CANCELLED") for r in result.runs):
            final = "SUCCEEDED"  # failed or diverged runs are data (and counted), as in a sweep
        else:
            final = "FAILED"
        write_json(path / OUTCOME_FILE, {"state": final, "finished_at": now(), "counts": result.counts})
        result.state = final
        return result

    def _planned(self, path: Path) -> TransferState:
        """A new transfer: its source read, its plan and typed sweep specs made (each validated once), stored."""
        spec = self.spec
        transfer_id = f"{spec.name}-{uuid.uuid4().hex[:8]}"
        source = load_source(spec.sweep)
        plan, sweep = _plan(spec, source, transfer_id)
        pilot_sweep = None
        if plan.pilot is not None:
            pilot_sweep = validated_sweep(pilot_sweep_spec(plan.pilot, sweep, name=spec.name,
                                                            transfer_id=transfer_id))
        # Built from parts typed and validated just above: constructing it with validation would run the sweep
        # spec's model validator again (pydantic runs a model's after-validators on an instance too).
        state = TransferState.model_construct(transfer_id=transfer_id, name=spec.name, fingerprint=spec.fingerprint(),
                                              spec=spec.model_dump(mode="json"), source=source.provenance(),
                                              source_objectives=source.objectives, plan=plan, sweep_spec=sweep,
                                              created_at=now(), step_timing=None, pilot_sweep_spec=pilot_sweep)
        state.write(path)
        return state

    def _with_execution(self, sweep: SweepSpec) -> SweepSpec:
        """`sweep` with the spec's execution, where it asks for another than the stored one (execution may change
        between a run and its resume): revalidated then, since the workers must still split the batch."""
        execution = self.spec.execution
        if execution is None or execution == sweep.execution:
            return sweep
        return revised(sweep, execution=execution.model_dump(mode="json"))

    def _pilot(self, state: TransferState, run: JobRun) -> str:
        """The pilot (target rule `pilot`) run, or reused, and its target recorded: how it ended."""

        def run_sweep(pilot_sweep: SweepSpec, folder: Path) -> str:
            folder.mkdir(parents=True, exist_ok=True)
            return run_stages(SweepJob(self._with_execution(pilot_sweep)), replace(run.inner(), workdir=folder),
                              resume=True).state

        def read() -> list[TransferRun]:
            uri = stored_uri(run.workdir / PILOT_FOLDER) or state.tracking["tracking_uri"]
            return read_runs(uri, state.tracking["experiment"], PILOT_OF_TAG, state.transfer_id)

        plateau = PlateauSpec.model_validate(state.plan.plateau or {})
        return run_pilot(state, run.workdir, run_sweep=run_sweep, read=read, plateau_spec=plateau, out=run.stream)

    def failed(self, run: JobRun, exc: JobFailedError) -> None:
        write_json(run.workdir / OUTCOME_FILE, {"state": "FAILED", "error": str(exc), "finished_at": now()})

    def finished(self, run: JobRun, result: TransferResult) -> None:
        _store_analysis(run.workdir, result, run.stream)  # first: its fits are reused by the report's panels
        log_transfer_figures(result, run.stream)


def run_transfer(
    spec: TransferSpec | str | Path | Mapping[str, Any],
    workdir: str | Path | None = None,
    resume: bool = False,
    show_progress: bool = False,
    *,
    stream: IO[str] | None = None,
) -> TransferResult:
    """Run a transfer to its end (or until cancelled) and return its result, read back from MLflow.

    `workdir` holds its state (default `out/transfers/<name>`). With `resume=True` a transfer already there
    continues where it stopped (finished runs are never re-run); without it an existing transfer is an error.
    `show_progress` prints the plan, one line per run event, and the savings at the end, to `stream` (stdout).
    A SUCCEEDED transfer stores its analysis and, through the figure hook (`set_figure_hook`), its report page and
    figures. Blocks; run it in a process of its own (the CLI does): Ray takes over signals and is not safe to share.
    """
    spec = spec if isinstance(spec, TransferSpec) else load_transfer_spec(spec)
    return run_locked_job(TransferJob(spec), Path(workdir or default_transfer_workdir(spec.name)), resume=resume,
                   show_progress=show_progress, stream=stream)


def _store_analysis(path: Path, result: TransferResult, out: IO[str] | None) -> None:
    """The finished transfer's analysis (its bootstrap fits take tens of CPU seconds), computed once here and
    stored beside its state: readers (the service's `/fits`) serve it instead of computing it again. Best effort:
    the runs are stored already, and a reader computes the analysis itself when this file is missing."""
    version = transfer_version(path)  # read before computing: a label never newer than what it labels
    try:
        write_labelled(path / ANALYSIS_FILE, result.analysis(), version)
    except Exception as exc:
        print(f"warning: analysis not stored: {type(exc).__name__}: {exc}", file=out or sys.stderr)



def _print_plan(state: TransferHead, out: IO[str]) -> None:
    plan = state.plan
    horizons = set(plan.horizon_of().values())
    # One number when every rung runs the same steps; otherwise the range (the per-rung steps follow below).
    if len(horizons) <= 1:
        steps, evals = f"{plan.horizon} steps", f"evals at {plan.eval_steps}"
    else:
        steps, evals = (f"{min(horizons)}-{max(horizons)} steps by rung",
                        "evals at the sweep's fractions of each rung's horizon")
    print(f"transfer {state.transfer_id}: {state.source['chosen']} from sweep {state.source['sweep_id']} to "
          f"{', '.join(plan.rungs)}; arms {', '.join(plan.arms)}; {steps} (sweep: "
          f"{plan.source_horizon}), {evals}, seeds {plan.seeds}; "
          f"{plan.planned_runs()} runs", file=out, flush=True)
    for row in [*plan.runs, *plan.bracket_runs, *plan.control_runs]:
        print(f"  {row.rung:<10} {row.arm:<8} lr {row.lr or 0.0:.4g} ({row.lr_rule} from {row.lr_base or 0.0:.4g})",
              file=out, flush=True)
    if plan.controls:
        print("  controls: " + "; ".join(f"{kind}: {c['arm']} against {c['against']}"
                                         for kind, c in plan.controls.items()), file=out, flush=True)
    if plan.get("workers_by_rung"):
        print(f"  workers per trial by rung: {plan['workers_by_rung']} (other rungs: the execution section's)",
              file=out, flush=True)
    if plan.horizons is not None:
        print(f"  horizons per rung: {plan.horizons}; target: {plan.target_text}", file=out, flush=True)
    if plan.pilot is not None:
        p = plan.pilot
        if p.get("per_rung"):
            print(f"  pilot: {p['arm']} at every rung ({p['horizons']} steps), seeds {p['seeds']}, {p['points']} "
                  "tracking points: each rung's own target, derived before the judged runs", file=out, flush=True)
        else:
            print(f"  pilot: {p['arm']} at {p['rung']}, {p['horizon']} steps, seeds {p['seeds']}, {p['points']} "
                  "tracking points: one target for every rung, derived before the judged runs", file=out, flush=True)



def cancel_transfer(workdir: str | Path, *, grace_s: float = 60.0) -> dict[str, Any]:
    """Stop the transfer in `workdir` (the sweeper's cancel: cancel file, SIGTERM, then its process group after
    `grace_s`); no run is left RUNNING and the transfer ends CANCELLED, resumable. Returns its status."""
    path = Path(workdir).resolve()
    read_head(path)
    if is_sweep_folder(path):
        cancel_sweep(path, grace_s=grace_s)  # a finished transfer stays as it ended
    elif is_sweep_folder(path / PILOT_FOLDER):  # still in its pilot: the pilot's driver stops at its next check
        request_cancel(path / PILOT_FOLDER)
    return transfer_status(path)

