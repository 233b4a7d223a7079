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
  x (a / b) must be detected (p below alpha, above 0), the steps ratio must not be shown to differ from 1 and, when
  the extra work's cost was measured apart (`expected_step_time_ratio`), the timing stage must recover it (its
  interval at 1 - alpha includes it). A null on the searched arm is interpretable only when the positive control's
  saving was detected: the pipeline then sees a saving of that size.
- **steps control**: Muon (arm a) against Muon stretched by a null step after every `stretch` steps (arm b,
  `muon_stretched`): Muon's trajectory relabelled, so b needs (stretch + 1) / stretch of a's steps and the true
  steps ratio a / b is stretch / (stretch + 1) (8/9 at the default 8), per-step cost Muon's. The steps ratio must be
  shown below 1 (p below alpha) with its interval at 1 - alpha including the expected ratio, and, when timed, the
  saving it implies detected. A null steps ratio on the searched arm is evidence of equal steps only beside it.

Every check is made at the `alpha` it is given, intervals included (recomputed at 1 - alpha from the standard
errors the comparison carries): a transfer gives the level its strongest claim must pass (Holm's first step over
every comparison and look, `scaling.claims.AlphaBudget.first_step`), so a control is held to what a claim is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from ..errors import ScalingInputError
from ..stats import t_quantile
from ..survival import RestrictedRatio, SurvivalSaving

__all__ = ["CONTROL_KINDS", "ControlCheck", "ControlOutcome", "control_outcome", "null_reading"]

ControlKind = Literal["negative", "positive", "steps"]
CONTROL_KINDS: tuple[ControlKind, ...] = ("negative", "positive", "steps")


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
    level: float | None = None  # the interval's level (1 - the alpha the check is made at)

    def text(self) -> str:
        interval = "no interval" if self.lo is None else f"[{self.lo:.4g}, {self.hi:.4g}]"
        if self.lo is not None and self.level is not None:
            interval += f" ({100 * self.level:.4g} %)"
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


def _shown(p: float | None, level: float, right_side: bool) -> bool:
    """Shown at `level`, on the side the control must show (p below it, the estimate on `right_side`)."""
    return p is not None and p < level and right_side


def _ratio_interval(center_log: float, se_log: float | None, df: float | None, alpha: float
              ) -> tuple[float | None, float | None]:
    """exp(center +- t(1 - alpha, df) x se): a ratio's two-sided interval at 1 - alpha (None without a spread)."""
    if se_log is None or df is None or df <= 0:
        return None, None
    half = t_quantile(1 - alpha, df) * se_log
    return math.exp(center_log - half), math.exp(center_log + half)


def _steps_interval(steps: RestrictedRatio, alpha: float) -> tuple[float | None, float | None]:
    return _ratio_interval(math.log(steps.ratio), steps.log_se, steps.n - 1, alpha)


def _step_time_interval(saving: SurvivalSaving, alpha: float) -> tuple[float | None, float | None]:
    return _ratio_interval(math.log(saving.step_time_ratio), saving.se_timing_log, saving.timing_rounds - 1, alpha)


def _saving_interval(saving: SurvivalSaving, alpha: float) -> tuple[float | None, float | None]:
    """The saving's interval in % at 1 - alpha (a larger product is a smaller saving: the ends swap)."""
    if saving.se_seeds_log is None:
        return None, None
    se = math.sqrt(saving.se_seeds_log**2 + (saving.se_timing_log or 0.0) ** 2)
    lo, hi = _ratio_interval(math.log(1 - saving.pct / 100), se, saving.df, alpha)
    return (None, None) if lo is None or hi is None else (100 * (1 - hi), 100 * (1 - lo))


def _negative_checks(saving: SurvivalSaving, alpha: float) -> list[ControlCheck]:
    each = alpha / 3
    rule = f"not shown to differ (p >= {each:.3g}: alpha {alpha:.3g} over 3 checks)"
    steps, level = saving.steps, 1 - each
    return [
        ControlCheck("steps_ratio", f"1, {rule}", steps.ratio, *_steps_interval(steps, each),
                     _null(steps.p_value, each), steps.p_value, level),
        ControlCheck("step_time_ratio", f"1, {rule}", saving.step_time_ratio, *_step_time_interval(saving, each),
                     _null(saving.step_time_p_value, each), saving.step_time_p_value, level),
        ControlCheck("time_saving_pct", f"0, {rule}", saving.pct, *_saving_interval(saving, each),
                     _null(saving.p_value, each), saving.p_value, level),
    ]


def _positive_checks(saving: SurvivalSaving, alpha: float,
                     expected_step_time_ratio: float | None) -> list[ControlCheck]:
    steps, level = saving.steps, 1 - alpha
    checks = [
        ControlCheck("steps_ratio", f"1, not shown to differ (p >= {alpha:.3g}: Muon's update rule)", steps.ratio,
                     *_steps_interval(steps, alpha), _null(steps.p_value, alpha), steps.p_value, level),
        ControlCheck("time_saving_pct", f"above 0, shown at p < {alpha:.3g} (the known saving detected)",
                     saving.pct, *_saving_interval(saving, alpha), _shown(saving.p_value, alpha, saving.pct > 0),
                     saving.p_value, level),
    ]
    if expected_step_time_ratio is not None:
        if not 0 < expected_step_time_ratio:
            raise ScalingInputError(f"expected_step_time_ratio must be > 0, got {expected_step_time_ratio!r}")
        lo, hi = _step_time_interval(saving, alpha)
        checks.append(ControlCheck(
            "step_time_ratio", f"includes {expected_step_time_ratio:.4g} (the extra work's cost measured apart)",
            saving.step_time_ratio, lo, hi, _includes(expected_step_time_ratio, lo, hi), level=level))
    return checks


def _steps_checks(steps: RestrictedRatio, saving: SurvivalSaving | None, alpha: float,
                  expected_steps_ratio: float) -> list[ControlCheck]:
    if not 0 < expected_steps_ratio < 1:
        raise ScalingInputError(f"expected_steps_ratio must be in (0, 1) (Muon / the stretched arm), got "
                                f"{expected_steps_ratio!r}")
    level = 1 - alpha
    lo, hi = _steps_interval(steps, alpha)
    checks = [
        ControlCheck("steps_ratio", f"below 1, shown at p < {alpha:.3g} (the known steps penalty detected)",
                     steps.ratio, lo, hi, _shown(steps.p_value, alpha, steps.ratio < 1), steps.p_value, level),
        ControlCheck("steps_ratio", f"includes {expected_steps_ratio:.4g} (the null steps' known ratio recovered)",
                     steps.ratio, lo, hi, _includes(expected_steps_ratio, lo, hi), level=level),
    ]
    if saving is not None:
        checks.append(ControlCheck("time_saving_pct", f"above 0, shown at p < {alpha:.3g} (the steps' saving "
                                   "detected)", saving.pct, *_saving_interval(saving, alpha),
                                   _shown(saving.p_value, alpha, saving.pct > 0), saving.p_value, level))
    return checks


def control_outcome(kind: ControlKind, saving: SurvivalSaving | RestrictedRatio, *, alpha: float = 0.05,
                    expected_step_time_ratio: float | None = None,
                    expected_steps_ratio: float | None = None) -> ControlOutcome:
    """The outcome of the `kind` control from its comparison (`restricted_saving` of arm a against arm b, which
    carries the steps ratio and the per-step ratio; for `steps` the steps ratio alone will do), every check at
    `alpha` (the module docstring). negative: each of the three tests at `alpha` / 3; positive: the saving shown
    above 0, the steps ratio not shown to differ from 1; steps: the steps ratio shown below 1 with its interval
    including `expected_steps_ratio` (stretch / (stretch + 1); default 8/9), the saving shown when timed. A
    quantity without a spread (one seed, one timing round) fails the check that needs it: a control without an
    interval shows nothing."""
    if kind not in CONTROL_KINDS:
        raise ScalingInputError(f"unknown control {kind!r}; allowed: {', '.join(CONTROL_KINDS)}")
    if not 0 < alpha < 0.5:
        raise ScalingInputError(f"alpha must be in (0, 0.5), got {alpha!r}")
    timed = saving if isinstance(saving, SurvivalSaving) else None
    if kind == "steps":
        steps = saving.steps if isinstance(saving, SurvivalSaving) else saving
        expected = 8 / 9 if expected_steps_ratio is None else expected_steps_ratio
        checks = _steps_checks(steps, timed, alpha, expected)
    elif timed is None:
        raise ScalingInputError(f"the {kind} control is judged on a time saving (steps and per-step ratio), not on a "
                                "steps ratio alone")
    elif kind == "negative":
        checks = _negative_checks(timed, alpha)
    else:
        checks = _positive_checks(timed, alpha, expected_step_time_ratio)
    passed = all(c.passed for c in checks)
    failed = sorted({c.quantity for c in checks if not c.passed}, key=[c.quantity for c in checks].index)
    return ControlOutcome(control=kind, passed=passed, checks=tuple(checks),
                          verdict=_verdict(kind, passed, failed, saving, alpha))


def _verdict(kind: ControlKind, passed: bool, failed: list[str], saving: SurvivalSaving | RestrictedRatio,
             alpha: float) -> str:
    at = f" at alpha {alpha:.3g}"
    if kind == "negative":
        return ("negative control: null, as it must be" if passed else
                f"negative control FAILED ({', '.join(failed)} not null){at}: the pipeline shows a difference "
                "between arms that differ in nothing systematic")
    if kind == "steps":
        ratio = saving.steps.ratio if isinstance(saving, SurvivalSaving) else saving.ratio
        return (f"steps control: steps ratio {ratio:.3g} shown below 1{at}, the known ratio recovered, as it must be"
                if passed else
                f"steps control FAILED ({', '.join(failed)}){at}: a known steps penalty of this size is not seen, so "
                "a null steps ratio elsewhere in this study is not evidence of equal steps")
    pct = saving.pct if isinstance(saving, SurvivalSaving) else float("nan")
    return (f"positive control: saving {pct:+.1f} % detected{at}, steps ratio consistent with 1, as it must be"
            if passed else
            f"positive control FAILED ({', '.join(failed)}){at}: a known saving of this size is not seen, so a "
            "null elsewhere in this study is not evidence of no saving")


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
