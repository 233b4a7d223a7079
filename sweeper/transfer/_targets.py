"""How a transfer did against the target its spec declared: the per-rung report (`scaling.rung_report`), each
steps-to-target comparison at the first and the sustained crossing (`scaling.compare_crossings`: restricted-mean
ratio over every seed, censoring counted), the controls' outcomes (`scaling.controls_section`), and the rungs still
improving fast at their end."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from scaling import (
    ControlOutcome,
    CrossingComparison,
    PlateauSpec,
    ScalingInputError,
    TargetSpec,
    compare_crossings,
    control_outcome,
    controls_section,
    null_reading,
    rung_report,
)

from ._savings import SavingsAnswers
from ._timing import round_log_ratios

# The controls are judged, and a null read, at the first crossing: the endpoint the earlier studies reported, and
# the one whose interval coverage the injection simulation holds to 95 % at every steps ratio (docs/targets.md).
CONTROL_ENDPOINT = "first"
CONTROL_ALPHA = 0.05

__all__ = ["TargetAnswers"]


class TargetAnswers(SavingsAnswers):
    """The target report and the undertrained rungs."""

    def targets(self) -> dict[str, Any]:
        """The per-rung report against the target declared in the spec (`scaling.rung_report`): target
        value and its source, fraction of seeds reaching it per arm, steps and time to target, the paired
        steps-to-target ratio, the per-step time ratio measured in isolation and the time saving, time to best
        (the paper's definition) beside them, and the plateau flag per rung; each comparison also at the `first` and
        the `sustained` crossing (restricted-mean steps ratio over every seed with its censoring counts, the time
        saving on it, and how to read a null: interpretable only when the positive control's saving was
        detected). Computed once per result (the analysis, the export and the fits each ask for it); callers get
        their own top-level copy."""
        return dict(self._target_report)

    @cached_property
    def _rung_report(self) -> dict[str, Any]:
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

    @cached_property
    def _target_report(self) -> dict[str, Any]:
        report = self._rung_report
        # Both crossings beside the complete-case numbers, every seed kept; a null read against the positive control.
        positive = self._control_outcomes.get("positive", {})
        for rung, entry in report["rungs"].items():
            for base, comp in entry["comparisons"].items():
                crossing = self._crossing(rung, self.searched_arm, base, entry["target"])
                if not isinstance(crossing, CrossingComparison):
                    comp.update(first={"error": crossing}, sustained={"error": crossing})
                    continue
                doc = crossing.to_dict()
                for endpoint in ("first", "sustained"):
                    saving = crossing.savings.get(endpoint)
                    comp[endpoint] = doc[endpoint]
                    if saving is not None:
                        comp[endpoint]["reading"] = null_reading(saving, positive.get(rung))
        return report

    def _crossing(self, rung: str, searched: str, base: str, target: float | None) -> CrossingComparison | str:
        """`searched` against `base` at `rung` at both crossings (with the saving when both were timed), or why
        there is none."""
        if target is None:
            return f"no target at {rung}"
        logs = round_log_ratios((self.step_timing.get("seconds_per_step_runs") or {}).get(rung) or {}, searched,
                                base)
        try:
            return compare_crossings(self.runs, rung=rung, searched=searched, baseline=base, target=target,
                                     horizon=self.plan.horizon_of().get(rung), step_time_log_ratios=logs)
        except ScalingInputError as exc:  # e.g. a seed one arm has not run yet
            return str(exc)

    @cached_property
    def _control_comparisons(self) -> dict[str, dict[str, CrossingComparison | str]]:
        """Control kind -> rung -> Muon against the control arm (negative: muon_twin; positive: muon_extra_ns),
        on the rung's declared target, or why there is none."""
        if not self.plan.controls:
            return {}
        rungs = self._rung_report["rungs"]  # the same target and curve the arms are judged on
        return {kind: {rung: self._crossing(rung, c["against"], c["arm"], rungs[rung]["target"])
                       for rung in self.plan.rungs}
                for kind, c in self.plan.controls.items()}

    def _expected_step_time_ratio(self) -> dict[str, float]:
        """Rung -> Muon / muon_extra_ns per-step ratio as the redundant work's own clock predicts it."""
        rungs: Mapping[str, Any] = self.step_timing.get("rungs") or {}
        return {rung: float(d["expected_step_time_ratio"]["muon_extra_ns"]) for rung, d in rungs.items()
                if "muon_extra_ns" in (d.get("expected_step_time_ratio") or {})}

    @cached_property
    def _control_outcomes(self) -> dict[str, dict[str, ControlOutcome]]:
        """Control kind -> rung -> its outcome (`scaling.control_outcome`), where it could be judged."""
        expected = self._expected_step_time_ratio()
        out: dict[str, dict[str, ControlOutcome]] = {}
        for kind, per in self._control_comparisons.items():
            for rung, comp in per.items():
                saving = comp.savings.get(CONTROL_ENDPOINT) if isinstance(comp, CrossingComparison) else None
                if saving is not None:
                    out.setdefault(kind, {})[rung] = control_outcome(
                        kind, saving, alpha=CONTROL_ALPHA,  # type: ignore[arg-type]
                        expected_step_time_ratio=expected.get(rung) if kind == "positive" else None)
        return out

    def controls(self) -> dict[str, Any] | None:
        """The analysis' `controls` section (`scaling.controls_section`, judged at the first crossing): per control
        its outcome per rung and `passed`, the comparisons behind them at both crossings, the verdict lines the
        report prints first, and rungs that could not be judged; None for a transfer without controls."""
        if not self.plan.controls:
            return None
        comps = self._control_comparisons
        judged = {kind: [c for c in per.values() if isinstance(c, CrossingComparison)] for kind, per in comps.items()}
        doc = controls_section(judged, endpoint=CONTROL_ENDPOINT, alpha=CONTROL_ALPHA,  # type: ignore[arg-type]
                               expected_step_time_ratio=self._expected_step_time_ratio())
        for kind, c in self.plan.controls.items():
            section = doc.setdefault(kind, {"passed": False, "rungs": {}})
            section.update(arm=c["arm"], against=c["against"])
            section["comparisons"] = {rung: comp.to_dict() if isinstance(comp, CrossingComparison) else
                                      {"error": comp} for rung, comp in comps[kind].items()}
            missing = {rung: comp for rung, comp in comps[kind].items() if not isinstance(comp, CrossingComparison)}
            for rung, why in missing.items():
                section["rungs"][rung] = {"control": kind, "passed": False, "checks": [],
                                          "verdict": f"{kind} control not judged: {why}"}
                doc["lines"].append(f"{rung}: {kind} control not judged: {why}")
            section["passed"] = bool(section["rungs"]) and all(r["passed"] for r in section["rungs"].values())
        doc["summary"] = controls_summary(doc)
        return doc

    def undertrained_rungs(self) -> list[str]:
        """Rungs whose runs are mostly still improving fast at their end (the plateau check)."""
        return [r for r, e in self.targets()["rungs"].items() if e["plateau"]["undertrained"]]


def controls_summary(doc: Mapping[str, Any]) -> list[str]:
    """The report's first lines: whether each control came out as it must, over every rung, then each rung's
    verdict; a failed positive control first of all (a null elsewhere in the study is then not evidence)."""
    lines = []
    positive = doc.get("positive")
    if positive is not None and not positive["passed"]:
        lines.append("POSITIVE CONTROL FAILED: a known per-step saving was not detected at every rung, so no null "
                     "in this study is evidence of no saving (the study finished; its numbers follow)")
    for kind in ("negative", "positive"):
        section = doc.get(kind)
        if section is None:
            continue
        state = "came out as it must at every rung" if section["passed"] else "did NOT come out as it must"
        lines.append(f"{kind} control ({section.get('arm')} against {section.get('against')}): {state}")
    return lines + [f"  {line}" for line in doc.get("lines", [])]
