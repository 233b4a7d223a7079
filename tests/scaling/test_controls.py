"""The controls' expected outcomes: a negative control must come out null, a positive control (identical updates,
known per-step cost) must show steps ratio 1 and the known saving; a null is interpretable only after the latter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scaling import ScalingInputError
from scaling.controls import control_outcome, null_reading
from scaling.survival import Crossing, restricted_ratio, restricted_saving

HORIZON = 480.0


def _arms(rng: np.random.Generator, ratio: float, n: int = 6) -> tuple[dict[int, Crossing], dict[int, Crossing]]:
    base = 250 * np.exp(0.1 * rng.standard_normal(n))
    a = {s: Crossing(float(min(base[s] * ratio * math.exp(0.05 * rng.standard_normal()), HORIZON)),
                     "reached" if base[s] * ratio < HORIZON else "right_censored") for s in range(n)}
    b = {s: Crossing(float(base[s] * math.exp(0.05 * rng.standard_normal())), "reached") for s in range(n)}
    return a, b


def test_identical_arms_come_out_null() -> None:
    a, b = _arms(np.random.default_rng(1), 1.0)
    saving = restricted_saving(restricted_ratio(a, b, horizon=HORIZON), [0.01, -0.02, 0.005, 0.0, -0.01])
    out = control_outcome("negative", saving)
    assert out.passed, out.to_dict()
    assert [c.quantity for c in out.checks] == ["steps_ratio", "step_time_ratio", "time_saving_pct"]
    assert out.verdict == "negative control: null, as it must be"


def test_a_negative_control_that_shows_a_difference_fails_and_names_it() -> None:
    a, b = _arms(np.random.default_rng(1), 1.3)
    out = control_outcome("negative", restricted_saving(restricted_ratio(a, b, horizon=HORIZON), [0.0, 0.01, -0.01]))
    assert not out.passed
    assert out.verdict.startswith("negative control FAILED (steps_ratio, time_saving_pct not null)")
    assert out.to_dict()["checks"][0]["passed"] is False


def test_positive_control_identical_updates_shows_steps_ratio_one_and_the_known_saving() -> None:
    # Identical updates: the same crossings in both arms (bit-identical training); arm b does 1.15x the work per
    # step, so a / b per step is 1 / 1.15 and the saving is 1 - 1 / 1.15 = 13.0 %.
    rng = np.random.default_rng(2)
    a, _ = _arms(rng, 1.0)
    logs = math.log(1 / 1.15) + 0.025 * rng.standard_normal(9)
    saving = restricted_saving(restricted_ratio(a, dict(a), horizon=HORIZON), logs)
    out = control_outcome("positive", saving, expected_step_time_ratio=1 / 1.15)
    assert out.passed, out.to_dict()
    assert saving.steps.ratio == 1.0 and (saving.steps.lo, saving.steps.hi) == (1.0, 1.0)
    assert saving.pct == pytest.approx(100 * (1 - 1 / 1.15), abs=2.0)
    assert out.verdict.startswith(f"positive control: saving {saving.pct:+.1f} % detected")
    assert null_reading(restricted_saving(restricted_ratio(*_arms(rng, 1.0), horizon=HORIZON), [0.0, 0.01]),
                        out).startswith("null, interpretable")


def test_a_positive_control_whose_saving_is_not_seen_makes_a_null_uninterpretable() -> None:
    rng = np.random.default_rng(3)
    a, _ = _arms(rng, 1.0)
    # The timing cannot tell 1 / 1.02 from 1 with two noisy rounds: the saving is not detected.
    saving = restricted_saving(restricted_ratio(a, dict(a), horizon=HORIZON), [math.log(1 / 1.02) + 0.05, -0.06])
    out = control_outcome("positive", saving)
    assert not out.passed and "time_saving_pct" in out.verdict
    null = restricted_saving(restricted_ratio(*_arms(rng, 1.0), horizon=HORIZON), [0.0, 0.01])
    assert null_reading(null, out) == "null, not interpretable: the positive control's known saving was not detected"
    assert null_reading(null, None) == "null, not interpretable: no positive control ran"
    shown = restricted_saving(restricted_ratio(*_arms(rng, 0.7), horizon=HORIZON), [0.0, 0.01, -0.01])
    assert shown.lo is not None and shown.lo > 0 and shown.verdict == "saving"
    assert null_reading(shown, None) == (f"saving shown: the interval lies above 0 ({shown.pct:+.1f} % "
                                         f"[{shown.lo:+.1f}, {shown.hi:+.1f}])")


def test_a_saving_wholly_below_zero_reads_as_a_cost_not_a_saving_shown() -> None:
    """Exact crossings: a needs 1.3 x b's steps on every seed (the paired log ratio has no spread), per-step times
    equal: saving 1 - 1.3 = -30 % with a point interval, wholly below zero: a cost shown, whatever the controls."""
    b = {s: Crossing(float(step), "reached") for s, step in enumerate((200.0, 220.0, 240.0, 260.0))}
    a = {s: Crossing(1.3 * c.step, "reached") for s, c in b.items()}
    cost = restricted_saving(restricted_ratio(a, b, horizon=HORIZON), [0.01, -0.01, 0.02, -0.02])
    assert cost.pct == pytest.approx(-30.0)
    assert cost.hi is not None and cost.hi < 0 and cost.lo is not None and cost.lo < -30
    assert (cost.verdict, cost.detected, cost.to_dict()["verdict"]) == ("cost", False, "cost")
    reading = null_reading(cost, None)
    assert reading == (f"cost shown: the interval lies below 0 (-30.0 % [{cost.lo:+.1f}, {cost.hi:+.1f}]): the "
                       "searched arm takes longer, no saving")
    positive = control_outcome("positive", restricted_saving(restricted_ratio(b, dict(b), horizon=HORIZON),
                                                             [math.log(1 / 1.15)] * 2 + [math.log(1 / 1.14)]))
    assert positive.passed and null_reading(cost, positive) == reading
    # Straddling zero: neither a saving nor a cost.
    null = restricted_saving(restricted_ratio(b, dict(b), horizon=HORIZON), [0.02, -0.02, 0.01])
    assert null.lo is not None and null.lo < 0 < null.hi and null.verdict == "null"  # type: ignore[operator]


def test_a_control_without_an_interval_shows_nothing_and_a_wrong_kind_is_refused() -> None:
    one = {0: Crossing(100.0, "reached")}
    saving = restricted_saving(restricted_ratio(one, one, horizon=HORIZON), [math.log(0.8)])
    assert not control_outcome("positive", saving).passed
    with pytest.raises(ScalingInputError, match="unknown control 'sham'"):
        control_outcome("sham", saving)  # type: ignore[arg-type]
    with pytest.raises(ScalingInputError, match="positive control's outcome"):
        null_reading(saving, control_outcome("negative", saving))


def _shifted(shift: float) -> tuple[dict[int, Crossing], dict[int, Crossing]]:
    """Arm a's crossings exp(-shift) of arm b's over six seeds, with a fixed per-seed spread."""
    noise = [0.05, -0.04, 0.06, -0.03, 0.02, -0.05]
    b = {s: Crossing(200.0 + 10 * s, "reached") for s in range(6)}
    a = {s: Crossing((200.0 + 10 * s) * math.exp(-shift + noise[s]), "reached") for s in range(6)}
    return a, b


def test_the_steps_control_must_show_the_known_ratio_and_is_judged_at_the_level_it_is_given() -> None:
    # Muon against Muon stretched by a null step after every 16th: a steps ratio near 16/17 = 0.941. Its p (0.025)
    # lies between 0.05 and a claim's level 0.05 / 4: detected at the family's alpha, not at the claim's.
    steps = restricted_ratio(*_shifted(0.06), horizon=HORIZON)
    assert 0.05 / 4 < steps.p_value < 0.05  # the premise: a p between the two levels
    loose = control_outcome("steps", steps, alpha=0.05, expected_steps_ratio=16 / 17)
    strict = control_outcome("steps", steps, alpha=0.05 / 4, expected_steps_ratio=16 / 17)
    assert loose.passed and not strict.passed
    assert [c.passed for c in strict.checks] == [False, True]  # not shown below 1; the known ratio still inside
    assert strict.verdict.startswith("steps control FAILED (steps_ratio) at alpha 0.0125")
    # Each check's interval is at 1 - alpha: wider at the claim's level, and said so.
    assert strict.checks[0].lo < loose.checks[0].lo and strict.checks[0].level == pytest.approx(1 - 0.0125)
    assert "(98.75 %)" in strict.checks[0].text()
    # The positive control's saving flips the same way (one timing round per ratio, no spread: the steps' alone).
    saving = restricted_saving(steps, [0.0, 0.0])
    assert control_outcome("positive", saving, alpha=0.05).checks[1].passed
    assert not control_outcome("positive", saving, alpha=0.05 / 4).checks[1].passed
    # A steps ratio the size of the known one, never shown: identical arms fail the steps control.
    a, _ = _shifted(0.0)
    assert not control_outcome("steps", restricted_ratio(a, dict(a), horizon=HORIZON)).passed
    with pytest.raises(ScalingInputError, match="judged on a time saving"):
        control_outcome("positive", steps)
    with pytest.raises(ScalingInputError, match=r"expected_steps_ratio must be in \(0, 1\)"):
        control_outcome("steps", steps, expected_steps_ratio=9 / 8)
