"""The controls' expected outcomes, as checks on numbers the analysis already made, so the report can say first whether
each control came out as it must.

- **negative control**: Muon against a second Muon arm (on another data order by default, so its steps ratio has the
  spread of a real comparison; on the same order it trains bit-identically on CPU). Nothing systematic differs, so
  neither the steps ratio (1), the per-step time ratio (1) nor the time saving (0) may be shown to differ. The three
  are one family: each is tested at alpha / 3 (Bonferroni), so a sound pipeline fails the control with probability
  at most alpha (three checks at 95 % each failed 10 % of simulated sound studies: tests/scaling/test_injection.py);
  a failure says "look before trusting the study", not "the study is wrong".
- **positive control**: Muon (arm a) against Muon plus redundant work of known cost per step (arm b: e.g. one extra
  Newton-Schulz whose result is discarded). The update rule is Muon's, so the true steps ratio is 1 (exactly, on the
  same data order; in expectation, on another, where the saving must then be seen through the steps' noise as the
  searched arm's would be) and the true per-step ratio a / b is below 1 by the extra work's share; the saving 1 - 1
  x (a / b) must be detected (interval above 0), the steps ratio's interval must include 1 and, when the extra
  work's cost was measured apart (`expected_step_time_ratio`), the timing stage must recover it. A null on the
  searched arm is interpretable only when the positive control's saving was detected: the pipeline then sees a
  saving of that size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..errors import ScalingInputError
from ..survival import SurvivalSaving

__all__ = ["ControlCheck", "ControlOutcome", "control_outcome", "null_reading"]

ControlKind = Literal["negative", "positive"]


@dataclass(frozen=True)
class ControlCheck:
    """One expectation of a control: `quantity`'s interval [lo, hi] against what it must show."""

    quantity: str  # steps_ratio | step_time_ratio | time_saving_pct
    expected: str  # e.g. "not shown to differ from 1 (p >= 0.0167)", "above 0"
    value: float
    lo: float | None
    hi: float | None
    passed: bool
    p_value: float | None = None

    def text(self) -> str:
        interval = "no interval" if self.lo is None else f"[{self.lo:.4g}, {self.hi:.4g}]"
        p = "" if self.p_value is None else f", p {self.p_value:.3g}"
        return (f"{self.quantity} {self.value:.4g} {interval}{p}: {self.expected} -> "
                f"{'ok' if self.passed else 'FAILED'}")


@dataclass(frozen=True)
class ControlOutcome:
    """Whether a control came out as it must (`passed`), its checks, and the line the report prints first."""

    control: ControlKind
    passed: bool
    checks: tuple[ControlCheck, ...]
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return {"control": self.control, "passed": self.passed, "verdict": self.verdict,
                "checks": [{**asdict(c), "text": c.text()} for c in self.checks]}


def _includes(value: float, lo: float | None, hi: float | None) -> bool:
    return lo is not None and hi is not None and lo <= value <= hi


def _null(p: float | None, level: float) -> bool:
    return p is not None and p >= level


def control_outcome(kind: ControlKind, saving: SurvivalSaving, *, alpha: float = 0.05,
                    expected_step_time_ratio: float | None = None) -> ControlOutcome:
    """The outcome of the `kind` control from its comparison's saving (`restricted_saving` of arm a against arm b,
    which carries the steps ratio and the per-step ratio). negative: each of the three tests at `alpha` / 3;
    positive: the saving's interval above 0 and the steps ratio's including 1. A quantity without a spread (one
    seed, one timing round) fails the check that needs it: a control without an interval shows nothing."""
    if kind not in ("negative", "positive"):
        raise ScalingInputError(f"unknown control {kind!r}; allowed: negative, positive")
    if not 0 < alpha < 0.5:
        raise ScalingInputError(f"alpha must be in (0, 0.5), got {alpha!r}")
    steps = saving.steps
    if kind == "negative":
        each = alpha / 3
        rule = f"not shown to differ (p >= {each:.3g}: alpha {alpha:g} over 3 checks)"
        checks = [
            ControlCheck("steps_ratio", f"1, {rule}", steps.ratio, steps.lo, steps.hi,
                         _null(steps.p_value, each), steps.p_value),
            ControlCheck("step_time_ratio", f"1, {rule}", saving.step_time_ratio, saving.step_time_lo,
                         saving.step_time_hi, _null(saving.step_time_p_value, each), saving.step_time_p_value),
            ControlCheck("time_saving_pct", f"0, {rule}", saving.pct, saving.lo, saving.hi,
                         _null(saving.p_value, each), saving.p_value),
        ]
    else:
        checks = [ControlCheck("steps_ratio", "includes 1 (Muon's update rule)", steps.ratio, steps.lo,
                               steps.hi, _includes(1.0, steps.lo, steps.hi), steps.p_value)]
        checks.append(ControlCheck("time_saving_pct", "above 0 (the known saving detected)", saving.pct, saving.lo,
                                   saving.hi, saving.detected, saving.p_value))
        if expected_step_time_ratio is not None:
            if not 0 < expected_step_time_ratio:
                raise ScalingInputError(f"expected_step_time_ratio must be > 0, got {expected_step_time_ratio!r}")
            checks.append(ControlCheck(
                "step_time_ratio", f"includes {expected_step_time_ratio:.4g} (the extra work's cost measured apart)",
                saving.step_time_ratio, saving.step_time_lo, saving.step_time_hi,
                _includes(expected_step_time_ratio, saving.step_time_lo, saving.step_time_hi)))
    passed = all(c.passed for c in checks)
    failed = [c.quantity for c in checks if not c.passed]
    if kind == "negative":
        verdict = ("negative control: null, as it must be" if passed else
                   f"negative control FAILED ({', '.join(failed)} not null): the pipeline shows a difference "
                   "between arms that differ in nothing systematic")
    else:
        verdict = (f"positive control: saving {saving.pct:+.1f} % detected, steps ratio consistent with 1, as it "
                   "must be" if passed else
                   f"positive control FAILED ({', '.join(failed)}): a known saving of this size is not seen, so a "
                   "null elsewhere in this study is not evidence of no saving")
    return ControlOutcome(control=kind, passed=passed, checks=tuple(checks), verdict=verdict)


def null_reading(saving: SurvivalSaving, positive: ControlOutcome | None) -> str:
    """How to read the searched arm's saving, by `saving.verdict`: 'saving shown' when its interval lies above 0,
    'cost shown' when it lies below 0 (the searched arm takes longer: a cost, never a saving shown); a null is
    'interpretable' only when the positive control passed, else 'not interpretable' (no positive control, or it
    failed)."""
    if saving.verdict == "saving":
        return f"saving shown: the interval lies above 0 ({_interval(saving)})"
    if saving.verdict == "cost":
        return f"cost shown: the interval lies below 0 ({_interval(saving)}): the searched arm takes longer, no saving"
    if positive is None:
        return "null, not interpretable: no positive control ran"
    if positive.control != "positive":
        raise ScalingInputError(f"null_reading needs the positive control's outcome, got the {positive.control}")
    if not positive.passed:
        return "null, not interpretable: the positive control's known saving was not detected"
    return "null, interpretable: the positive control's saving was detected by the same pipeline"


def _interval(saving: SurvivalSaving) -> str:
    return f"{saving.pct:+.1f} % [{saving.lo:+.1f}, {saving.hi:+.1f}]"
