"""Extending a finished transfer with more seeds: only the new seeds' runs run, in the same work folder, sweep and
MLflow parent run; the pilot's target and the timing stage are kept, and the analysis is recomputed over all seeds.

    scalesweep transfer extend SPEC --workdir DIR      SPEC = the transfer's spec with the seeds added

Why it exists: a study found underpowered at its first seeds (a positive control not detected, a power line asking
for more seeds) is continued rather than run again, which would repeat every finished run.

An extension is decided after looking at the results, so it counts as a look: each one is recorded in the plan
(`plan.extensions`: when, the seeds before and the seeds added) and the claims' alpha budget divides by one more
look (`_targets`: Holm at alpha / looks), as the rounds' looks do. The added seeds must be fresh: not the sweep's
selection seeds (the choice was made on them) and not the pilot's (the target was derived from them).

Only `seeds` (the old ones kept) and `execution` may change. Refused, naming the field: any other change, a
transfer whose seeds are managed by its `rounds` rule (raise `rounds.max_seeds` in a new transfer instead), one
with a `verify` stage (it ran on the seeds the transfer had), and a transfer that has not finished its first runs.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..jobfiles import OUTCOME_FILE, driver_lock, is_transfer_folder
from ..jobs import changed_paths, extend_held
from ._errors import TransferError
from ._job import run_transfer
from ._pilot import pilot_seeds
from ._spec import TransferSpec, load_transfer_spec
from ._state import read_state, revised

if TYPE_CHECKING:
    from ._result import TransferResult

__all__ = ["apply_transfer_extension", "extend_transfer"]

_EXTENSIBLE = ("seeds", "execution")


def apply_transfer_extension(spec: TransferSpec, workdir: str | Path) -> list[int]:
    """Make the finished transfer in `workdir` the extended `spec` without running anything: its state, plan,
    fingerprint and its sweep's seeds, so that the next resume runs only the new seeds. Returns the seeds added
    (empty: nothing to add). `TransferError` naming the field for a change an extension may not make."""
    folder = Path(workdir).resolve()
    if not is_transfer_folder(folder):
        raise TransferError(f"{folder} holds no transfer to extend; start one with `scalesweep transfer run`")
    with driver_lock(folder, TransferError):
        state = read_state(folder)
        if not state.spec:
            raise TransferError(f"{folder}: the transfer predates stored specs; it cannot be extended")
        stored = TransferSpec.model_validate(state.spec)
        if stored.name != spec.name:
            raise TransferError(f"name: the transfer in {folder} is {stored.name!r}; the spec names {spec.name!r}")
        if stored.rounds is not None:
            raise TransferError("rounds: this transfer adds its own seeds by its rounds rule; an extension would "
                                "add looks its alpha budget did not plan: start a new transfer with a larger "
                                "rounds.max_seeds instead")
        if stored.verify is not None:
            raise TransferError("verify: this transfer's verification ran on the seeds it had; an extension cannot "
                                "carry it: start a new transfer with the seeds you need instead")
        changed = changed_paths(stored.model_dump(mode="json", exclude=set(_EXTENSIBLE)),
                                spec.model_dump(mode="json", exclude=set(_EXTENSIBLE)))
        if changed:
            raise TransferError(f"an extension may only add seeds (and change execution); {', '.join(changed)} "
                                "changed")
        before = [int(s) for s in state.plan.seeds]
        new_seeds = [int(s) for s in (spec.seeds or [])]
        if lost := [s for s in before if s not in new_seeds]:
            raise TransferError(f"seeds: an extension keeps the transfer's seeds {before}; {lost} are missing")
        added = [s for s in new_seeds if s not in before]
        if not added:
            return []
        outcome = folder / OUTCOME_FILE
        if not outcome.is_file():
            raise TransferError(f"{folder}: the transfer has not finished its runs; resume it with `scalesweep "
                                "transfer run SPEC --workdir DIR --resume` before extending it")
        selection = [int(s) for s in state.source.get("selection_seeds") or []]
        if reused := [s for s in added if s in selection]:
            raise TransferError(f"seeds: {reused} are the sweep's selection seeds {selection} (its choice was made "
                                "on them); add seeds the study has not used")
        pilot = pilot_seeds(state.plan)
        if reused := [s for s in added if s in pilot]:
            raise TransferError(f"seeds: {reused} are the pilot's seeds {pilot} (the target came from them); add "
                                "seeds the study has not used")
        seeds = before + added
        history = [*(state.plan.get("extensions") or []),
                   {"at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "seeds_before": before,
                    "added": added}]
        state.plan = state.plan.model_copy(update={"seeds": seeds, "extensions": history})
        state.sweep_spec = revised(state.sweep_spec, seeds=seeds)
        state.spec = spec.model_dump(mode="json")
        state.fingerprint = spec.fingerprint()
        extend_held(state.sweep_spec, folder)  # the sweep's own record first
        state.write(folder)
        outcome.unlink()  # running again: the status reads RUNNING / INTERRUPTED until the new runs end
        return added


def extend_transfer(spec: TransferSpec | str | Path | Mapping[str, Any], workdir: str | Path, *,
                    show_progress: bool = False, stream: IO[str] | None = None) -> TransferResult:
    """Extend the finished transfer in `workdir` to `spec` (`apply_transfer_extension`) and run the new seeds in
    this process; returns the result over all of its seeds."""
    new = spec if isinstance(spec, TransferSpec) else load_transfer_spec(spec)
    added = apply_transfer_extension(new, workdir)
    out = (stream or sys.stdout) if show_progress else None
    if out is not None:
        print(f"extending {Path(workdir)}: " + (f"seeds {added} (one more look: the claims' alpha is divided by it)"
                                                if added else "nothing to add"), file=out, flush=True)
    return run_transfer(new, workdir=workdir, resume=True, show_progress=show_progress, stream=stream)
