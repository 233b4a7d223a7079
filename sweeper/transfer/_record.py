"""What a transfer's result holds (`ResultRecord`: its identity, plan and runs, read back) and the facts every
answer asks of it: the searched arm, the chosen pair, each rung's parameter count and what that count means; which
runs an lr bracket judges (`choose_lr_multiples`); and `memo`, how an answer several others share is worked out once
per record."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scaling import TransferRun
from scaling.fits import ScalingFit

from ._plan import TransferPlan, _rung_shape

__all__ = ["ResultRecord", "choose_lr_multiples", "memo"]

_T = TypeVar("_T")


def memo(record: ResultRecord, key: Hashable, compute: Callable[[], _T]) -> _T:
    """`compute()` once per record and key: what several answers share (the per-rung report, the comparisons, the
    claims, the fits per level), kept on the record beside its fields (never a field: a copy of the fields is a new
    record with nothing worked out yet)."""
    answers: dict[Hashable, _T] = record.__dict__.setdefault("_answers", {})
    if key not in answers:
        answers[key] = compute()
    return answers[key]


@dataclass
class ResultRecord:
    """A transfer's runs and plan, as read back: the one record every answer of `TransferResult` is worked out from
    (each answer a function of the module that owns its concept, taking this record)."""

    transfer_id: str
    name: str
    state: str
    workdir: str
    tracking_uri: str
    experiment: str
    parent_run_id: str | None
    source: dict[str, Any]
    plan: TransferPlan  # a mapping in the plan's stored form is validated into one
    runs: list[TransferRun]
    counts: dict[str, int] = field(default_factory=dict)
    source_objectives: dict[str, Any] = field(default_factory=dict)
    verification_runs: list[TransferRun] = field(default_factory=list)  # the bracket's, kept out of the analysis
    step_timing: dict[str, Any] = field(default_factory=dict)  # per-step time per rung and arm, in isolation
    _fits: dict[tuple[Any, ...], ScalingFit] = field(default_factory=dict, repr=False)
    # An lr bracket's runs at the multiples not chosen (`lr_choices`), kept out of the analysis.
    tuning_runs: list[TransferRun] = field(default_factory=list)
    lr_choices: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.plan, TransferPlan):
            self.plan = TransferPlan.model_validate(dict(self.plan))
        if self.plan.lr_brackets:
            self.runs, self.tuning_runs, self.lr_choices = choose_lr_multiples(self.runs, self.plan.lr_brackets)

    @property
    def searched_arm(self) -> str:
        return self.plan.searched_arm

    @property
    def chosen(self) -> dict[str, Any]:
        return dict(self.plan.chosen)

    def parameters(self, rung: str) -> int:
        """A rung's parameter count: as the runs logged it (tag `model.parameters`), else the plan's."""
        for run in self.runs:
            if run.rung == rung and run.parameters:
                return run.parameters
        for row in self.plan.runs:
            if row.rung == rung and row.parameters is not None:
                return int(row.parameters)
        # A rung this transfer did not run: counted on the study's basis (a transfer planned before the basis was
        # recorded falls back to the rung's default model).
        return _rung_shape(rung, (self.plan.size_basis or {}).get("trial"))[1]

    @property
    def seeds_note(self) -> str | None:
        """Said when the transfer runs on seeds that also chose the point in the sweep: its comparisons are then
        judged on the seeds that selected (a winner's curse can flatter the searched arm). None when the seeds are
        fresh or the sweep's seeds were not recorded (a transfer planned before they were)."""
        chose = self.source.get("selection_seeds")
        if not chose:
            return None
        shared = sorted(set(self.plan.seeds) & set(chose))
        if not shared:
            return None
        return (f"the transfer runs on seeds {shared}, which also selected the point in the sweep (its seeds "
                f"{sorted(chose)}): its comparisons are judged on seeds that chose, so a winner's curse can flatter "
                f"{self.searched_arm}; give the transfer fresh seeds (seeds: [...]) for an unbiased check")

    @property
    def rounds_lines(self) -> list[str]:
        """One line per look of a transfer that added seeds in rounds (`rounds:` in its spec); empty without."""
        from scaling.rounds import look_line

        return [look_line(look, i) for i, look in enumerate((self.plan.rounds or {}).get("looks") or [], start=1)]

    @property
    def extension_lines(self) -> list[str]:
        """One line per extension of a finished transfer (`transfer extend`); empty without."""
        return [f"extension {i} at {e.get('at')}: seeds {e.get('added')} added to {e.get('seeds_before')} after a "
                "look at their results (one more look in the claims' alpha budget)"
                for i, e in enumerate(self.plan.get("extensions") or [], start=1)]

    @property
    def size_basis(self) -> str:
        """What `parameters` counts, in words (one basis per study)."""
        basis = self.plan.size_basis or {}
        return str(basis.get("text") or "parameters of each rung's default model (a transfer planned before the "
                   "size basis was recorded)")



def _final_quality(run: TransferRun) -> float | None:
    points = run.track or run.checkpoints
    return points[-1][2] if points and math.isfinite(points[-1][2]) else None


def choose_lr_multiples(runs: list[TransferRun], brackets: dict[str, list[float]]
                        ) -> tuple[list[TransferRun], list[TransferRun], dict[str, dict[str, Any]]]:
    """(the runs the analysis judges, the bracket's other runs, rung -> arm -> the choice): per rung and bracketed
    arm, the multiple of its carried lr whose runs finished on the most seeds, then with the lowest mean final
    quality (the last point of its quality curve); its runs are judged as the arm. Chosen on the transfer's own
    seeds, alike for every bracketed arm: equal tuning, and a winner's curse shared by those arms."""
    named = {(arm if f == 1 else f"{arm}@lr_x{f:g}"): (arm, float(f)) for arm, fs in brackets.items() for f in fs}
    groups: dict[tuple[str, str], dict[float, list[TransferRun]]] = {}
    for run in runs:
        if run.arm in named:
            arm, factor = named[run.arm]
            groups.setdefault((run.rung, arm), {}).setdefault(factor, []).append(run)
    choices: dict[str, dict[str, Any]] = {}
    chosen_ids: set[str] = set()
    for (rung, arm), by_factor in groups.items():
        scores: dict[float, dict[str, Any]] = {}
        for factor, group in by_factor.items():
            finals = [q for r in group if r.state == "SUCCEEDED" and (q := _final_quality(r)) is not None]
            scores[factor] = {"runs": len(group), "finished": len(finals),
                              "mean_final": statistics.fmean(finals) if finals else None}
        best = min(scores, key=lambda f: (-scores[f]["finished"], scores[f]["mean_final"] or math.inf, f))
        chosen_ids |= {r.run_id for r in by_factor[best]}
        choices.setdefault(rung, {})[arm] = {"chosen": best, "multiples": {f"{f:g}": d for f, d in
                                                                           sorted(scores.items())}}
    judged = [dataclasses.replace(r, arm=named[r.arm][0]) if r.arm in named and r.run_id in chosen_ids else r
              for r in runs if r.arm not in named or r.run_id in chosen_ids]
    others = [r for r in runs if r.arm in named and r.run_id not in chosen_ids]
    return judged, others, choices
