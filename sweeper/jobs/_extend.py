"""Extending a finished sweep: more seeds, more grid points, a larger search budget or more baselines, running only
what is missing, in the same work folder and MLflow parent run, with the selection recomputed over all of it.

    scalesweep sweep extend SPEC --workdir DIR      SPEC = the sweep's spec with the additions

An extension may only add: `seeds` (the old ones kept), values to a grid's `search.space` lists (the old ones
kept, no new parameter), a larger `search.budget` for tpe/random (the same space), and `baselines` (the old ones
kept); `execution` (but its `workers_per_trial`) and `retries` may change as on any resume. `workers_per_trial`
stays: one selection would otherwise mix trials trained on one worker and on several (issue 64, N10). Anything else
changed (rung, horizon, eval steps, optimizer, trial, selection, ...) would make the old trials measure something
else: refused, naming the field.
A sweep with a confirmation (`confirm.top > 0`) is refused too: its choice was made on fresh seeds numbered after
the sweep's, which added seeds would reuse; run a new sweep with `search.warm_start` instead.

The planner needs nothing special: given the extended spec and the ledger's records, finished trials are not run
again and the missing (point, seed) pairs, new points and new baselines are queued (`sweeper.search.Planner`).
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..errors import SweepError
from ..jobfiles import SPEC_FILE, STATE_FILE, driver_lock, read_json, read_state, write_json
from ..specs import SweepSpec, load_spec

if TYPE_CHECKING:
    from ..analysis import SweepResult

__all__ = ["apply_extension", "changed_paths", "check_extension", "extend_held", "extend_sweep"]

# What an extension may change; every other field must be equal.
_EXTENSIBLE = ("seeds", "baselines", "execution", "retries")


def _rest(spec: SweepSpec) -> dict[str, Any]:
    dump = spec.model_dump(mode="json", exclude=set(_EXTENSIBLE))
    dump["search"].pop("space")
    dump["search"].pop("budget")
    return dump


def changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON-like values (two specs' dumps) differ: what an extension names when it refuses."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            out += changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    return [] if old == new else [path]


def check_extension(old: SweepSpec, new: SweepSpec) -> list[str]:
    """What `new` adds to `old`, in words (empty when nothing); `SweepError` naming the field when `new` changes
    anything an extension may not (see the module's docstring)."""
    if old.confirm.top > 0:
        raise SweepError(f"sweep {old.name} confirmed its choice on fresh seeds (confirm.top={old.confirm.top}): "
                         "it cannot be extended; start a new sweep with search.warm_start instead")
    if new.execution.workers_per_trial != old.execution.workers_per_trial:
        raise SweepError(f"execution.workers_per_trial: an extension keeps the sweep's "
                         f"{old.execution.workers_per_trial} (got {new.execution.workers_per_trial}); its selection "
                         "compares trials run alike; start a new sweep with search.warm_start to train on another "
                         "worker count")
    changed = changed_paths(_rest(old), _rest(new))
    if changed:
        raise SweepError(f"an extension may only add seeds, grid values, search budget or baselines; "
                         f"{', '.join(changed)} changed")
    added: list[str] = []
    lost = [s for s in old.seeds if s not in new.seeds]
    if lost:
        raise SweepError(f"seeds: an extension keeps the sweep's seeds {old.seeds}; {lost} are missing")
    if extra := [s for s in new.seeds if s not in old.seeds]:
        added.append(f"seeds {extra}")
    old_space = old.model_dump(mode="json")["search"]["space"]
    new_space = new.model_dump(mode="json")["search"]["space"]
    if set(old_space) != set(new_space):
        raise SweepError(f"search.space: an extension keeps the searched parameters {sorted(old_space)}; got "
                         f"{sorted(new_space)}")
    if old.search.method == "grid":
        for name, values in old_space.items():
            grown = new_space[name]
            if not isinstance(grown, list) or any(v not in grown for v in values):
                raise SweepError(f"search.space.{name}: an extension keeps the grid's values {values} and may add "
                                 f"to them; got {grown}")
            if extra_values := [v for v in grown if v not in values]:
                added.append(f"{name} values {extra_values}")
    else:
        if new_space != old_space:
            raise SweepError(f"search.space: a {old.search.method} search is extended by its budget; the space "
                             f"must stay {old_space}")
        if (new.search.budget or 0) < (old.search.budget or 0):
            raise SweepError(f"search.budget: an extension may raise it from {old.search.budget}, not lower it "
                             f"to {new.search.budget}")
        if (new.search.budget or 0) > (old.search.budget or 0):
            added.append(f"budget {old.search.budget} -> {new.search.budget} points")
    old_baselines = [b.model_dump(mode="json") for b in old.baselines]
    new_baselines = [b.model_dump(mode="json") for b in new.baselines]
    if missing := [b["arm"] for b in old_baselines if b not in new_baselines]:
        raise SweepError(f"baselines: an extension keeps the sweep's baselines; {missing} missing or changed")
    if extra_baselines := [b.name for b, d in zip(new.baselines, new_baselines, strict=True)
                           if d not in old_baselines]:
        added.append(f"baselines {extra_baselines}")
    return added


def apply_extension(spec: SweepSpec, workdir: str | Path) -> list[str]:
    """Make the sweep in `workdir` the extended `spec` without running anything: its spec file, state and MLflow
    parent run (`spec.json`, the fingerprint tag, and the `scalesweep.extensions` history) say what it is now, so
    the next resume runs what is missing. Returns what was added (empty: nothing changed). Refused (`SweepError`)
    without a sweep in `workdir`, while its driver runs, or for a change an extension may not make."""
    folder = Path(workdir).resolve()
    with driver_lock(folder, SweepError):
        return extend_held(spec, folder)


def extend_held(spec: SweepSpec, folder: Path) -> list[str]:
    """`apply_extension` for a caller that holds the folder's driver lock already (a transfer adding seeds to its
    own sweep between rounds)."""
    from trials.record import TAG

    from ..ledger import SweepLedger
    from ._driver import _with_trainer as with_trainer

    new = with_trainer(spec)  # as its driver will see it: a registered trainer's command filled in
    state = read_state(folder)
    stored = read_json(folder / SPEC_FILE)
    if state is None or stored is None:
        raise SweepError(f"{folder} holds no sweep to extend (no {STATE_FILE}); start one with sweep run")
    old = SweepSpec.model_validate(stored)
    if old.name != new.name:
        raise SweepError(f"name: the sweep in {folder} is {old.name!r}; the spec names {new.name!r}")
    added = check_extension(old, new)
    if not added:
        return []
    ledger = SweepLedger(state["tracking_uri"], state["experiment"])
    parent = ledger.client.get_run(state["parent_run_id"])
    history = json.loads(parent.data.tags.get(TAG.EXTENSIONS, "[]"))
    history.append({"at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "added": added,
                    "fingerprint": new.fingerprint()})
    # MLflow's params are write-once: they keep the spec the sweep started with; spec.json and this tag say
    # what it is now.
    ledger.log_spec(state["parent_run_id"], new)
    ledger.set_tags(state["parent_run_id"], {TAG.FINGERPRINT: new.fingerprint(),
                                             TAG.EXTENSIONS: json.dumps(history)})
    write_json(folder / SPEC_FILE, new.model_dump(mode="json"))
    write_json(folder / STATE_FILE, {**state, "fingerprint": new.fingerprint()})
    return added


def extend_sweep(spec: SweepSpec | str | Path | Mapping[str, Any], workdir: str | Path, *,
                 show_progress: bool = False, stream: IO[str] | None = None) -> SweepResult:
    """Extend the sweep in `workdir` to `spec` (`apply_extension`) and run what is missing in this process;
    returns the result over all of its trials."""
    from ._driver import run_sweep

    new = spec if isinstance(spec, SweepSpec) else load_spec(spec)
    added = apply_extension(new, workdir)
    out = (stream or sys.stdout) if show_progress else None
    if out is not None:
        print(f"extending {Path(workdir)}: " + ("; ".join(added) if added else "nothing to add"), file=out,
              flush=True)
    return run_sweep(new, workdir=workdir, resume=True, show_progress=show_progress, stream=stream)
