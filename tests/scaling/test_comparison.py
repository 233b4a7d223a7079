"""A steps-to-target comparison from run records at every endpoint (`first`, `steps_above`, `sustained`), with
every seed kept, the claims judged on the co-primary pair (`first`, `steps_above`), and the `controls` section built
from the controls' comparisons."""

from __future__ import annotations

import math

import pytest

from scaling import ScalingInputError, TransferRun
from scaling.claims import CrossingComparison, alpha_budget, compare_crossings, controls_section, judge_claims
from scaling.survival import Crossing, run_crossings, run_steps_above

STEPS = (100, 200, 300, 400)


def _run(arm: str, seed: int, values: tuple[float, ...], state: str = "SUCCEEDED", rung: str = "cpu-m") -> TransferRun:
    steps = STEPS[: len(values)]
    return TransferRun(rung=rung, parameters=1_000, arm=arm, seed=seed, lr=None, lr_rule=None, lr_base=None, K=None,
                       gamma=None, run_id=f"{arm}-{seed}", state=state, trial_key=f"{arm}-{seed}", attempt=0,
                       checkpoints=(), track=tuple((s, s / 10, v) for s, v in zip(steps, values, strict=True)),
                       horizon=400)


def test_first_and_sustained_differ_when_the_faster_arm_comes_back_above() -> None:
    # The cpu-m: muon crosses 50 first (at 200) and is back above at the end; periodic crosses later and holds.
    runs = [_run("muon", s, (80, 50, 45, 60)) for s in (0, 1, 2)]
    runs += [_run("periodic", s, (90, 60 + s, 40, 35)) for s in (0, 1, 2)]
    c = compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0,
                          step_time_log_ratios=[math.log(0.85)] * 2 + [math.log(0.86)])
    # First: periodic at 200 + 100 x (60 + s - 50) / (60 + s - 40), muon at 200.
    first = sum(200 + 100 * (10 + s) / (20 + s) for s in (0, 1, 2)) / 3 / 200
    assert c.steps["first"].ratio == pytest.approx(first)
    # Sustained: muon never holds (censored at 400), periodic holds from its first crossing.
    assert c.steps["sustained"].ratio == pytest.approx(first * 200 / 400)
    assert c.steps["sustained"].censoring == {"periodic": {"reached": 3, "right_censored": 0, "left_censored": 0},
                                              "muon": {"reached": 0, "right_censored": 3, "left_censored": 0}}
    # Steps above: periodic holds, so its first crossing; muon adds the 2/3 of 300-400 it is back above 50 (45 -> 60)
    # to its 200, where the sustained crossing jumps to the horizon.
    assert c.steps["steps_above"].ratio == pytest.approx(first * 200 / (200 + 200 / 3))
    assert c.steps["steps_above"].censoring["muon"] == {"reached": 3, "right_censored": 0, "left_censored": 0}
    doc = c.to_dict()
    assert set(doc) == {"rung", "searched", "baseline", "target", "horizon", "first", "sustained", "steps_above"}
    assert doc["steps_above"]["steps_to_target_ratio"]["endpoint"] == "steps_above"
    assert doc["first"]["steps_to_target_ratio"]["mean"] == pytest.approx(first)
    assert doc["sustained"]["time_saving_pct"]["mean"] == pytest.approx(
        100 * (1 - first / 2 * math.exp((2 * math.log(0.85) + math.log(0.86)) / 3)))


def test_a_diverged_run_keeps_its_seed_censored_at_the_horizon_and_a_failed_one_at_its_last_point() -> None:
    runs = [_run("muon", 0, (80, 40, 30, 30)), _run("muon", 1, (80, 40, 30, 30)), _run("muon", 2, (80, 40, 30, 30))]
    runs += [_run("periodic", 0, (80, 40, 30, 30)), _run("periodic", 1, (90, 70), state="DIVERGED"),
             _run("periodic", 2, (90, 70, 60), state="FAILED")]
    c = compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0)
    # muon: 100 + 100 x 30/40 = 175 on every seed. periodic: 175; diverged -> 400; failed at 300, censored there:
    # Kaplan-Meier: 1 to 175, then 2/3 (seed 0 reached among 3 at risk) to 400: 175 + 2/3 x 225 = 325.
    assert c.steps["first"].a.mean == pytest.approx(175 + 2 / 3 * 225)
    assert c.steps["first"].censoring["periodic"] == {"reached": 1, "right_censored": 2, "left_censored": 0}
    assert c.steps["first"].ratio == pytest.approx((175 + 2 / 3 * 225) / 175)
    assert c.savings == {}


def test_steps_above_equal_a_held_first_crossing_add_a_return_and_are_censored_by_how_a_run_ended() -> None:
    # Crosses 50 three quarters of the way from 100 to 200 and holds: its steps above are its first crossing.
    held = _run("periodic", 0, (80, 40, 30, 30))
    assert run_steps_above(held, 50.0, 400) == Crossing(175.0, "reached")
    assert run_crossings(held, 50.0, 400)["first"].step == 175.0
    # First crossing 30/35 of the way from 100 to 200; back above from 250 (45 -> 55) to 333.3 (55 -> 40).
    first = 100 + 100 * 30 / 35
    back = run_steps_above(_run("periodic", 1, (80, 45, 55, 40)), 50.0, 400)
    assert (back.step, back.status) == (pytest.approx(first + 50 + 100 / 3), "reached")
    # Failed at step 300, above since 250: 50 steps above so far, a lower bound, right-censored there.
    failed = run_steps_above(_run("periodic", 2, (80, 45, 55), state="FAILED"), 50.0, 400)
    assert (failed.step, failed.status) == (pytest.approx(first + 50), "right_censored")
    # Diverged after step 200: above from there to the horizon, known.
    diverged = run_steps_above(_run("periodic", 3, (80, 45), state="DIVERGED"), 50.0, 400)
    assert (diverged.step, diverged.status) == (pytest.approx(first + 200), "reached")
    # Cancelled at 400 with a horizon of 300: observed through it, the curve cut at 300 (40 there: not above).
    cut = run_steps_above(_run("periodic", 4, (80, 40, 30, 30), state="CANCELLED"), 50.0, 300)
    assert (cut.step, cut.status) == (pytest.approx(175.0), "reached")
    assert run_steps_above(_run("periodic", 5, ()), 50.0, 400) == Crossing(0.0, "right_censored")

    # In a comparison, the failed seed is at risk until 235.7: Kaplan-Meier 1 to 175, 2/3 from there to the
    # back-above seed's 269.0, then 0 (the only seed left at risk reached).
    runs = [_run("periodic", 0, (80, 40, 30, 30)), _run("periodic", 1, (80, 45, 55, 40)),
            _run("periodic", 2, (80, 45, 55), state="FAILED")]
    runs += [_run("muon", s, (80, 40, 30, 30)) for s in range(3)]
    c = compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0)
    assert c.steps["steps_above"].a.mean == pytest.approx(175 + 2 / 3 * (first + 50 + 100 / 3 - 175))
    assert c.steps["steps_above"].censoring["periodic"] == {"reached": 2, "right_censored": 1, "left_censored": 0}
    assert c.steps["first"].a.mean == pytest.approx((175 + 2 * first) / 3)  # every seed crossed before it stopped


def test_compare_crossings_refuses_a_seed_only_one_arm_ran() -> None:
    runs = [_run("muon", 0, (80, 40)), _run("periodic", 0, (80, 40)), _run("periodic", 1, (80, 40))]
    with pytest.raises(ScalingInputError, match=r"only in a \['1'\]"):
        compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0)
    with pytest.raises(ScalingInputError, match="no run of periodic or muon at cpu-l"):
        compare_crossings(runs, rung="cpu-l", searched="periodic", baseline="muon", target=50.0)


def test_no_seed_reaching_in_either_arm_is_refused_not_read_as_equal_steps() -> None:
    # Every seed of both arms stays above 50: both restricted means would be the horizon, a ratio of 1 by
    # construction (and a "saving" that is only the per-step ratio); one seed reaching makes it a measurement.
    above = [_run(a, s, (80, 70, 60, 55)) for a in ("periodic", "muon") for s in range(3)]
    with pytest.raises(ScalingInputError, match=r"no seed of periodic or muon reached the target 50 at cpu-m "
                       r"within its horizon .*1 by construction"):
        compare_crossings(above, rung="cpu-m", searched="periodic", baseline="muon", target=50.0,
                          step_time_log_ratios=[math.log(0.85)] * 4)
    one = [*above[:-1], _run("muon", 2, (80, 60, 45, 40))]
    c = compare_crossings(one, rung="cpu-m", searched="periodic", baseline="muon", target=50.0)
    assert c.steps["first"].ratio > 1  # periodic censored throughout, Muon reached once: periodic is slower


def test_controls_section_says_per_rung_whether_each_control_came_out_as_it_must() -> None:
    same = [_run(arm, s, (80, 60 - s, 40, 35)) for arm in ("muon", "muon2") for s in range(4)]
    negative = compare_crossings(same, rung="cpu-m", searched="muon2", baseline="muon", target=50.0,
                                 step_time_log_ratios=[0.01, -0.01, 0.0, 0.005])
    slow = [_run(arm, s, (80, 60 - s, 40, 35)) for arm in ("muon", "muon_extra") for s in range(4)]
    positive = compare_crossings(slow, rung="cpu-m", searched="muon", baseline="muon_extra", target=50.0,
                                 step_time_log_ratios=[math.log(1 / 1.15) + d for d in (0.01, -0.01, 0.0, 0.02)])
    untimed = compare_crossings([_run(r.arm, r.seed, (80, 60, 40, 35), rung="cpu-s") for r in slow], rung="cpu-s",
                                searched="muon", baseline="muon_extra", target=50.0)
    doc = controls_section({"negative": [negative], "positive": [positive, untimed]})
    assert doc["negative"]["passed"] is True
    assert doc["negative"]["rungs"]["cpu-m"]["verdict"] == "negative control: null, as it must be"
    assert doc["positive"]["rungs"]["cpu-m"]["passed"] is True
    assert doc["positive"]["rungs"]["cpu-s"]["verdict"] == "positive control not judged: its comparison has no " \
        "per-step timing"
    assert doc["positive"]["passed"] is False
    assert doc["lines"][0] == "cpu-m: negative control: null, as it must be"
    # 1 - 1 x exp(log(1 / 1.15) + 0.005): the known 13.0 % less the timing rounds' mean offset.
    saving = 100 * (1 - math.exp(math.log(1 / 1.15) + 0.005))
    assert doc["lines"][1].startswith(f"cpu-m: positive control: saving {saving:+.1f} % detected")


def _timed(rung: str, slow: float, seeds: int = 6) -> CrossingComparison:
    """periodic needs `slow` x muon's steps to 50 on every seed (a little seed noise), 0.85 x its time per step."""
    runs = [_run("muon", s, (80, 50 - s / 10, 45, 40), rung=rung) for s in range(seeds)]
    # periodic crosses 50 at 100 + 100 x slow (between 80 at step 100 and its value at 200, interpolated).
    runs += [_run("periodic", s, (80, 80 - 30 / (slow + s / 100), 40, 35), rung=rung) for s in range(seeds)]
    return compare_crossings(runs, rung=rung, searched="periodic", baseline="muon", target=50.0,
                             step_time_log_ratios=[math.log(0.85) + d for d in (0.01, -0.01, 0.005, 0.0)])


def test_judge_claims_holds_the_family_to_one_budget_and_needs_both_co_primary_endpoints() -> None:
    comps = {"cpu-s vs muon": _timed("cpu-s", 1.0), "cpu-m vs muon": _timed("cpu-m", 1.0)}
    budget = alpha_budget(0.05, comparisons=2, looks=2)
    family = judge_claims(comps, budget)
    assert set(family.p_holm) == {"first", "sustained", "steps_above"}  # the sustained crossing's p reported too
    assert family.to_dict()["co_primary"] == ["first", "steps_above"]
    for key in comps:
        # Holm over two comparisons: the smaller p doubled, the larger kept (then the running max).
        raw = {k: c.savings["first"].p_value for k, c in comps.items()}
        ordered = sorted(raw, key=lambda k: raw[k])  # type: ignore[arg-type, return-value]
        assert family.p_holm["first"][ordered[0]] == pytest.approx(min(1.0, 2 * raw[ordered[0]]))  # type: ignore[operator]
        assert family.stands[key] == (family.p_holm["first"][key] <= 0.025
                                      and family.p_holm["steps_above"][key] <= 0.025)
    with pytest.raises(ScalingInputError, match="budget must count every comparison"):
        judge_claims(comps, alpha_budget(0.05, comparisons=1))


def test_a_claim_stands_only_where_both_co_primary_endpoints_show_it_in_one_direction() -> None:
    # cpu-s: the same steps, 0.85 the time per step: faster at every endpoint. cpu-m: 1.3x the steps: slower.
    # cpu-l: as fast at the first crossing, but back above the target at its end on every seed: it spends 2/3 of
    # its last 100 steps above, 1.33x Muon's steps above (slower), so the claim at the first crossing alone falls.
    back_up = [_run("muon", s, (80, 50 - s / 10, 45, 40), rung="cpu-l") for s in range(6)]
    back_up += [_run("periodic", s, (80, 50 - s / 10, 45, 60), rung="cpu-l") for s in range(6)]
    comps = {"cpu-s vs muon": _timed("cpu-s", 1.0), "cpu-m vs muon": _timed("cpu-m", 1.3),
             "cpu-l vs muon": compare_crossings(back_up, rung="cpu-l", searched="periodic", baseline="muon",
                                                target=50.0, step_time_log_ratios=[math.log(0.85), math.log(0.86)])}
    family = judge_claims(comps, alpha_budget(0.05, comparisons=3, looks=2))
    assert comps["cpu-l vs muon"].savings["first"].pct > 10 > comps["cpu-l vs muon"].savings["sustained"].pct
    assert comps["cpu-l vs muon"].steps["steps_above"].ratio == pytest.approx((200 + 200 / 3) / 200, rel=0.01)
    assert comps["cpu-l vs muon"].savings["steps_above"].pct < -10
    assert family.stands == {"cpu-s vs muon": True, "cpu-m vs muon": True, "cpu-l vs muon": False}
    assert family.direction == {"cpu-s vs muon": "faster", "cpu-m vs muon": "slower", "cpu-l vs muon": None}


def test_a_comparison_without_timing_stays_in_the_family_with_p_one() -> None:
    untimed = compare_crossings([_run(a, s, (80, 40, 30, 30)) for a in ("muon", "periodic") for s in range(3)],
                                rung="cpu-m", searched="periodic", baseline="muon", target=50.0)
    family = judge_claims({"cpu-m vs muon": untimed}, alpha_budget(0.05, comparisons=1))
    assert family.p_holm["first"]["cpu-m vs muon"] == 1.0 and family.stands == {"cpu-m vs muon": False}
    assert family.to_dict()["budget"]["per_look"] == 0.05


def test_a_claim_at_the_first_crossing_and_in_steps_above_stands_whatever_the_sustained_crossing_shows() -> None:
    # periodic dips below 50 early, is back above for a while (45 -> 55 -> 40) and holds from 333: much faster at
    # the first crossing, faster in steps above (it pays the 83 steps it spends back above), slower at the sustained
    # crossing, which moves to 333. Muon crosses once, later (near 280), and holds.
    runs = [_run("muon", s, (80, 70 - s / 10, 45, 40)) for s in range(6)]
    runs += [_run("periodic", s, (80, 45 - s / 10, 55, 40)) for s in range(6)]
    c = compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0,
                          step_time_log_ratios=[math.log(0.85) + d for d in (0.01, -0.01, 0.005, 0.0)])
    muon = [200 + 100 * (20 - s / 10) / (25 - s / 10) for s in range(6)]
    first = [100 + 100 * 30 / (35 + s / 10) for s in range(6)]
    above = [f + 100 * 5 / (10 + s / 10) + 100 / 3 for s, f in enumerate(first)]
    assert c.steps["first"].ratio == pytest.approx(sum(first) / sum(muon))  # 0.662
    assert c.steps["steps_above"].ratio == pytest.approx(sum(above) / sum(muon))  # 0.955
    assert c.steps["sustained"].ratio == pytest.approx(6 * (300 + 100 / 3) / sum(muon))  # 1.19
    family = judge_claims({"cpu-m vs muon": c}, alpha_budget(0.05, comparisons=1, looks=2))
    assert family.stands == {"cpu-m vs muon": True} and family.direction == {"cpu-m vs muon": "faster"}
    # The sustained crossing shows no saving (a 1.4 % cost, p above the 0.025 per look): reported, not judged.
    assert c.savings["sustained"].pct < 0 and family.p_holm["sustained"]["cpu-m vs muon"] > 0.025
    assert c.savings["steps_above"].lo > 15 and c.savings["first"].lo > 40  # type: ignore[operator]


def test_an_endpoint_no_seed_of_either_arm_met_is_refused_and_the_others_kept() -> None:
    """Every run reaches the target once and comes back above it by the end: the first crossing is measured, but
    no seed holds, so the sustained crossing's restricted means are both the horizon (ratio 1 by construction, a
    'saving' that is the per-step ratio alone): refused with its reason, left out of the claims (p = 1)."""
    runs = [_run("periodic", s, (80, 45 - s, 60, 70)) for s in (0, 1, 2, 3)]
    runs += [_run("muon", s, (80, 60, 45 - s, 70)) for s in (0, 1, 2, 3)]
    comp = compare_crossings(runs, rung="cpu-m", searched="periodic", baseline="muon", target=50.0,
                             step_time_log_ratios=[-0.1, -0.12, -0.11])
    assert set(comp.steps) == {"first", "steps_above"} and set(comp.refused) == {"sustained"}
    assert "no seed of periodic or muon met the target 50 at cpu-m by this endpoint (sustained)" in comp.refused[
        "sustained"]
    assert comp.to_dict()["sustained"] == {"error": comp.refused["sustained"]}
    assert comp.steps["first"].ratio < 1  # periodic crosses a checkpoint sooner on every seed
    family = judge_claims({"cpu-m vs muon": comp}, alpha_budget(0.05, comparisons=1, looks=1))
    assert family.p_holm["sustained"]["cpu-m vs muon"] == 1.0
