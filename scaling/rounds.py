"""Seeds added in rounds until the answer is clear: the rule a transfer follows when its spec has a `rounds`
section, as pure functions of the per-rung table (`rung_report`).

After each round the searched arm's time saving against one baseline at one rung is looked at. The transfer
stops when that saving's interval excludes zero (a saving, or a loss, shown) or when one more round would pass
the seed budget. Looking again after every round and stopping at the first interval that excludes zero is
optional stopping: with five looks at the 5 % level, a saving of exactly zero would be "shown" about 14 % of the
time (measured by `tests/scaling/test_rounds.py`). So each look tests at alpha / L, where L is the number of
looks the budget allows (Bonferroni over the looks: the chance that any look falsely excludes zero stays at most
alpha), and the look's decision says so. The table's own 95 % interval is reported as before; the decision is
the corrected test's.

Only the seeds' part of the saving's spread shrinks with more seeds: the per-step time ratio's spread comes from
the timing rounds (`timing.repeats`). A saving whose interval is wide because its timing is noisy stays wide
however many seeds are added, and the look says which part dominates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RoundsSpec", "look_line", "next_seeds", "planned_looks", "rounds_look"]

# The sweeper's cap on seeds per run (`sweeper.MAX_SEEDS`), spelled here so that importing `scaling` does not
# import the sweeper; tests/test_layout.py keeps the two equal.
MAX_SEEDS = 100


class RoundsSpec(BaseModel):
    """Add seeds in rounds until the searched arm's saving against `against` at `rung` is clear, or the budget
    runs out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    against: Literal["muon", "adamw", "rownorm", "periodic"] = Field(
        "muon", description="The baseline arm whose comparison decides (Muon: the saving the paper claims).")
    rung: str | None = Field(None, description="The rung that decides; None = the transfer's largest rung.")
    measure: Literal["time_saving_pct", "steps_to_target_ratio"] = Field(
        "time_saving_pct",
        description="time_saving_pct: the time saving (steps ratio x per-step time ratio); steps_to_target_ratio: "
        "the steps ratio alone (no timing noise).")
    add: int = Field(3, ge=1, le=MAX_SEEDS, description="Seeds added per round (new numbers, after the largest used).")
    max_seeds: int = Field(9, ge=2, le=MAX_SEEDS,
                           description="The budget: at most this many seeds per run over all rounds.")
    alpha: float = Field(0.05, gt=0, lt=0.5,
                         description="The chance that any look falsely shows a saving when there is none.")


def planned_looks(spec: RoundsSpec, initial_seeds: int) -> int:
    """How many looks the budget allows: one after the first round, one after each round that fits the budget."""
    if initial_seeds >= spec.max_seeds:
        return 1
    return 1 + math.ceil((spec.max_seeds - initial_seeds) / spec.add)


def next_seeds(seeds: Sequence[int], spec: RoundsSpec, avoid: Sequence[int] = ()) -> list[int]:
    """The next round's seeds: `add` new numbers after the largest of `seeds` and `avoid` (e.g. the sweep's
    selection seeds), cut to the budget; empty when the budget is spent."""
    room = spec.max_seeds - len(seeds)
    start = max([*seeds, *avoid], default=-1) + 1
    return list(range(start, start + min(spec.add, max(room, 0))))


def rounds_look(report: Mapping[str, Any], spec: RoundsSpec, *, seeds: Sequence[int], initial_seeds: int,
                rung: str) -> dict[str, Any]:
    """One look at the per-rung table `report` (`rung_report`) after a round run on `seeds`: the saving, its
    p value against the corrected level, and the decision (`stop`, `reason`)."""
    looks = planned_looks(spec, initial_seeds)
    level = spec.alpha / looks
    comp = ((report.get("rungs") or {}).get(rung) or {}).get("comparisons", {}).get(spec.against) or {}
    doc = comp.get(spec.measure) or {}
    look: dict[str, Any] = {"seeds": list(seeds), "rung": rung, "against": spec.against, "measure": spec.measure,
                            "mean": doc.get("mean"), "lo": doc.get("lo"), "hi": doc.get("hi"), "n": doc.get("n"),
                            "p_value": doc.get("p_value"), "looks_planned": looks, "alpha_per_look": level}
    p = doc.get("p_value")
    budget_left = len(seeds) < spec.max_seeds
    if p is not None and math.isfinite(p) and p < level:
        direction = _direction(spec.measure, doc.get("mean"))
        look.update(stop=True, reason=f"shown: {direction} (p {p:.3g} < {level:.3g}, alpha {spec.alpha:g} over "
                                      f"{looks} looks)")
    elif not budget_left:
        look.update(stop=True, reason=f"budget spent: {len(seeds)} of max_seeds {spec.max_seeds} seeds, not shown"
                                      + (f" (p {p:.3g} >= {level:.3g})" if p is not None else
                                         f" ({comp.get('status') or 'no comparison'}: no p value)"))
    else:
        look.update(stop=False, reason="not shown yet" + (f" (p {p:.3g} >= {level:.3g})" if p is not None else
                                                          f" ({comp.get('status') or 'no comparison'})"))
    seed_var, timing_var = _variance_parts(doc)
    if seed_var is not None and timing_var is not None and timing_var > seed_var:
        look["note"] = ("the per-step timing's spread dominates the interval: more seeds narrow it little; more "
                        "timing rounds (timing.repeats) would")
    return look


def look_line(look: Mapping[str, Any], index: int) -> str:
    """One look (`rounds_look`), the `index`-th, as a line of text."""
    interval = "" if look.get("lo") is None else f" [{look['lo']:+.3g}, {look['hi']:+.3g}] (95 %)"
    shown = "no number" if look.get("mean") is None else f"{look['mean']:+.3g}{interval}, n={look.get('n')}"
    return (f"round {index} of at most {look['looks_planned']} ({len(look['seeds'])} seeds): {look['measure']} vs "
            f"{look['against']} at {look['rung']} {shown}; tested at {look['alpha_per_look']:.3g} -> "
            f"{look['reason']}" + (f"; {look['note']}" if look.get("note") else ""))


def _direction(measure: str, mean: float | None) -> str:
    if mean is None:
        return "a difference"
    if measure == "time_saving_pct":
        return "a saving" if mean > 0 else "a loss"
    return "fewer steps" if mean < 1 else "more steps"


def _variance_parts(doc: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(seeds' squared standard error, timing's) of a time saving's log, as `rung_report` recorded them."""
    seeds, timing = doc.get("se_seeds_log"), doc.get("se_timing_log")
    return (None if seeds is None else seeds**2), (None if timing is None else timing**2)
