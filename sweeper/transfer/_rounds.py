"""A transfer that adds seeds in rounds (`rounds:` in its spec): after each round, one look at the searched arm's
saving against a baseline at the deciding rung (`scaling.rounds_look`); while the saving is not shown and the
budget allows, the next seeds are added to the transfer's own sweep (an extension: only the new runs run, in the
same MLflow parent run) and run.

Each look is stored in the plan (`transfer.json`, `plan.rounds.looks`) before the next round starts, so a resumed
transfer knows where it stopped: a round whose seeds were recorded but whose extension was not applied is applied
again on resume (an extension that adds nothing is a no-op).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from scaling.rounds import RoundsSpec, next_seeds, planned_looks, rounds_look

from ..jobs import extend_held
from ..specs import SweepSpec
from ._errors import TransferError
from ._pilot import pilot_seeds
from ._plan import TransferPlan
from ._state import revised

if TYPE_CHECKING:
    from ._result import TransferResult


class TransferState(Protocol):
    """What the rounds read and write of a transfer's stored state (`_state.TransferState`)."""

    plan: TransferPlan
    sweep_spec: SweepSpec
    source: dict[str, Any]

    def write(self, path: Path) -> None: ...

__all__ = ["catch_up", "planned_rounds", "run_rounds"]


def planned_rounds(rule: RoundsSpec | None, rungs: list[str], seeds: list[int],
                   searched_arm: str) -> dict[str, Any] | None:
    """The plan's `rounds` document (None without the spec's `rounds` section), checked against the planned rungs
    and arm."""
    if rule is None:
        return None
    if rule.against == searched_arm:
        raise TransferError(f"rounds.against must be a baseline, not the searched arm {searched_arm!r}")
    rung = rule.rung or rungs[-1]
    if rung not in rungs:
        raise TransferError(f"rounds.rung {rung!r} is not one of the transfer's rungs {rungs}")
    if len(seeds) > rule.max_seeds:
        raise TransferError(f"rounds.max_seeds ({rule.max_seeds}) is below the {len(seeds)} seeds the first round "
                            "runs")
    return {"rule": rule.model_dump(mode="json"), "rung": rung, "initial_seeds": list(seeds),
            "looks_planned": planned_looks(rule, len(seeds)), "looks": []}


def catch_up(state: TransferState, path: Path) -> None:
    """On resume: the sweep in `path` made what the state's sweep spec says (a round's seeds recorded in the state
    but not yet applied to the sweep when the driver stopped). Nothing to do before the first round ran."""
    if state.plan.rounds and state.plan.rounds.get("looks"):
        extend_held(state.sweep_spec, path)


def run_rounds(state: TransferState, path: Path, sweep: SweepSpec, swept_state: str, *,
               load: Callable[[], TransferResult], run_round: Callable[[SweepSpec], str],
               out: IO[str] | None) -> str:
    """Look after each round and add seeds until the rule stops; returns how the last round's sweep ended.
    `sweep` is the spec that ran the first round (the stored one, or with the execution a resume asked for)."""
    rounds = state.plan.rounds
    if not rounds:
        return swept_state
    rule = RoundsSpec.model_validate(rounds["rule"])
    # Fresh seeds stay fresh, and the pilot's seeds never become judged ones.
    avoid = [int(s) for s in state.source.get("selection_seeds") or []] + pilot_seeds(state.plan)
    while swept_state == "SUCCEEDED":
        seeds = list(state.plan.seeds)
        looks = rounds.setdefault("looks", [])
        if looks and looks[-1]["seeds"] == seeds:
            look = looks[-1]  # looked at already, before a restart
        else:
            look = rounds_look(load().targets(), rule, seeds=seeds, initial_seeds=len(rounds["initial_seeds"]),
                               rung=rounds["rung"])
            looks.append(look)
        if out is not None:
            shown = "-" if look["mean"] is None else f"{look['mean']:+.3g}"
            print(f"rounds: look {len(looks)} of at most {look['looks_planned']} on {len(seeds)} seeds: "
                  f"{look['measure']} vs {look['against']} at {look['rung']} {shown} -> {look['reason']}",
                  file=out, flush=True)
        added = [] if look["stop"] else next_seeds(seeds, rule, avoid)
        if not added:
            state.write(path)
            return swept_state
        state.plan = state.plan.model_copy(update={"seeds": seeds + added})
        sweep = revised(sweep, seeds=seeds + added)  # the round's spec, validated once for every use below
        state.sweep_spec = state.sweep_spec.model_copy(update={"seeds": sweep.seeds})
        state.write(path)  # the round's seeds first: a restart applies them (`catch_up`)
        extend_held(sweep, path)
        if out is not None:
            print(f"rounds: adding seeds {added}", file=out, flush=True)
        swept_state = run_round(sweep)
    state.write(path)
    return swept_state
