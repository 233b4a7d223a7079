"""How a transfer did against the target its spec declared: the per-rung report (`scaling.rung_report`) and the
rungs still improving fast at their end."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from scaling.rungs import PlateauSpec, TargetSpec, rung_report

from ._savings import SavingsAnswers

__all__ = ["TargetAnswers"]


class TargetAnswers(SavingsAnswers):
    """The target report and the undertrained rungs."""

    def targets(self) -> dict[str, Any]:
        """The per-rung report against the target declared in the spec (`scaling.rung_report`): target
        value and its source, fraction of seeds reaching it per arm, steps and time to target, the paired
        steps-to-target ratio, the per-step time ratio measured in isolation and the time saving, time to best
        (the paper's definition) beside them, and the plateau flag per rung. Computed once per result (the
        analysis, the export and the fits each ask for it); callers get their own top-level copy."""
        return dict(self._target_report)

    @cached_property
    def _target_report(self) -> dict[str, Any]:
        ttb = {rid: t.best_time_s for rid, t in self.time_to_best().items()}
        plan = self.plan
        # Transfers planned before targets existed get the default rule, applied now (and said so in the text).
        return rung_report(
            self.runs, rungs=plan.rungs, arms=plan.arms, searched_arm=self.searched_arm,
            seeds=plan.seeds, target=TargetSpec.model_validate(plan.target or {}),
            step_times=self.step_timing.get("seconds_per_step"), time_to_best=ttb,
            step_time_runs=self.step_timing.get("seconds_per_step_runs"),
            plateau_spec=PlateauSpec.model_validate(plan.plateau or {}),
            horizons=plan.horizon_of())

    def undertrained_rungs(self) -> list[str]:
        """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
        return [r for r, e in self.targets()["rungs"].items() if e["plateau"]["undertrained"]]
