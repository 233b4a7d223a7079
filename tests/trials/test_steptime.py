"""Interleaved per-step timing (`trials.steptime`) and the positive control arm (`muon_extra_ns`).

No assertion here depends on how fast this machine is: the structure of a measurement, the statistics on given
numbers, bit-identical updates, and one effect (the positive control's extra Newton-Schulz at shapes where it
roughly doubles the optimizer's work) far larger than any timing noise.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from trials.models import build_model
from trials.optim import CONTROL_ARMS, build_optimizer, route_parameters
from trials.optim._control import MuonExtraNS, PeriodicMuonExtraNS
from trials.steptime import (
    PHASES,
    StepTimingConfig,
    balanced_rounds,
    block_order,
    check_block_steps,
    interleaved_step_times,
    paired_ratio,
    refresh_period,
)

from ..conftest import tiny_trial

PERIODIC = {"name": "periodic", "refresh_every": 3, "gamma": 0.15}
ROOT = Path(__file__).resolve().parents[2]


# --- the pure pieces -------------------------------------------------------------------------------------------


def test_blocks_interleave_arm_by_arm_in_each_order() -> None:
    assert block_order(["a", "b", "c"], 4) == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert block_order(["a", "b"], 3, "cyclic") == [["a", "b"], ["a", "b"], ["a", "b"]]
    assert block_order(["a", "b", "c"], 3, "alternate") == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]
    assert block_order(["a", "b"], 2, "alternate", start=1) == [["b", "a"], ["a", "b"]]
    assert [balanced_rounds(3, o) for o in ("rotate", "alternate", "cyclic")] == [3, 2, 1]
    with pytest.raises(ValueError, match=r"order must be one of \['rotate', 'cyclic', 'alternate'\]"):
        block_order(["a"], 1, "random")


def test_blocks_are_whole_refresh_periods() -> None:
    periods = {"muon": refresh_period({"name": "muon"}), "periodic": refresh_period(PERIODIC),
               "k2": refresh_period({"name": "periodic", "refresh_every": 2})}
    assert periods == {"muon": 1, "periodic": 3, "k2": 2}
    assert check_block_steps(None, periods) == 6  # the least common multiple
    assert check_block_steps(12, periods) == 12
    for bad in (3, 4, 0, 7):
        with pytest.raises(ValueError, match=r"block_steps must be a whole number .*periodic: 3.*\(6, 12, 18, "):
            check_block_steps(bad, periods)
    assert check_block_steps(None, {"muon": 1}) == 1


def test_bad_timing_options_name_the_field_and_the_allowed_values() -> None:
    trial = tiny_trial()
    with pytest.raises(ValueError, match=r"block_steps must be a whole number .*a multiple of 3"):
        interleaved_step_times(trial, {"muon": {"name": "muon"}, "periodic": PERIODIC}, {"block_steps": 4})
    with pytest.raises(ValueError, match=r"timing.local_batch must be between 1 and the trial's batch_size \(16\)"):
        interleaved_step_times(trial, {"muon": {"name": "muon"}}, {"local_batch": 32})
    with pytest.raises(ValueError, match=r"clock 'thread' needs threads=1.*Allowed: clock 'wall'"):
        interleaved_step_times(tiny_trial(threads=2), {"muon": {"name": "muon"}})
    with pytest.raises(ValueError, match=r"reference 'adamw' is not an arm; allowed: \['muon'\]"):
        interleaved_step_times(trial, {"muon": {"name": "muon"}}, reference="adamw")
    for bad in ({"local_batch": 0}, {"clock": "cpu"}, {"rounds": 1}, {"target_halfwidth": 0}, {"blocks": 3}):
        with pytest.raises(ValidationError):
            StepTimingConfig.model_validate(bad)


def test_the_paired_ratio_is_the_hand_calculation() -> None:
    # Per-round log ratios 0.1, 0.2, 0.3: mean 0.2, SD 0.1, t(0.975, 2) = 4.302653, half-width 4.302653 x 0.1 /
    # sqrt(3) = 0.248414; too few rounds (3 < 6) for a 95 % sign-test interval on the median.
    r = paired_ratio([math.exp(0.1) * 2, math.exp(0.2) * 3, math.exp(0.3) * 5], [2.0, 3.0, 5.0])
    assert r.n == 3
    assert r.mean == pytest.approx(math.exp(0.2))
    assert r.log_sd == pytest.approx(0.1)
    assert r.lo == pytest.approx(math.exp(0.2 - 0.248414), rel=1e-5)
    assert r.hi == pytest.approx(math.exp(0.2 + 0.248414), rel=1e-5)
    assert r.halfwidth == pytest.approx(math.exp(0.248414) - 1, rel=1e-5)
    assert r.median == pytest.approx(math.exp(0.2)) and r.median_lo is None and r.median_hi is None
    # Ten rounds, logs 0.01 ... 0.10: P(Bin(10, 1/2) <= 1) = 11/1024 <= 0.025 < P(<= 2) = 56/1024, so the median's
    # interval is the 2nd to the 9th order statistic (coverage 1 - 22/1024 = 97.9 %).
    logs = [0.01 * i for i in range(1, 11)]
    r = paired_ratio([math.exp(x) for x in logs], [1.0] * 10)
    assert r.median == pytest.approx(math.exp(0.055))
    assert r.median_lo == pytest.approx(math.exp(0.02)) and r.median_hi == pytest.approx(math.exp(0.09))
    # Six rounds is the fewest with a 95 % sign-test interval: the extremes (coverage 1 - 2/64).
    r = paired_ratio([math.exp(x) for x in logs[:6]], [1.0] * 6)
    assert r.median_lo == pytest.approx(math.exp(0.01)) and r.median_hi == pytest.approx(math.exp(0.06))
    with pytest.raises(ValueError, match="at least 2 rounds"):
        paired_ratio([1.0], [1.0])


def test_the_options_and_the_statistics_load_no_torch() -> None:
    """A spec validates timing options and an analysis reads ratios without torch; the measurement loads it."""
    code = ("import sys; from trials.steptime import StepTimingConfig, check_block_steps, paired_ratio; "
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr[-2000:]


# --- the positive control arm ----------------------------------------------------------------------------------


@pytest.mark.parametrize("ns_dtype", ["bfloat16", "float32"])
def test_the_positive_control_updates_exactly_as_muon(ns_dtype: str) -> None:
    """Muon plus a discarded Newton-Schulz: bit-identical weights to Muon after several steps from one seed."""
    models, optimizers = [], []
    for name in ("muon", "muon_extra_ns"):
        torch.manual_seed(0)
        model = build_model("cpu-xs", image_size=8, in_channels=3, context_dim=32, pooled_dim=32)
        models.append(model)
        optimizers.append(build_optimizer(model, {"name": name, "ns_dtype": ns_dtype}))
    control = optimizers[1].matrix
    assert isinstance(control, MuonExtraNS if ns_dtype == "bfloat16" else PeriodicMuonExtraNS)
    assert "muon_extra_ns" in CONTROL_ARMS
    steps = 4
    for step in range(steps):
        gen = torch.Generator().manual_seed(step)
        x, ctx, pooled = torch.randn(4, 3, 8, 8, generator=gen), torch.randn(4, 5, 32, generator=gen), torch.randn(
            4, 32, generator=gen)
        t = torch.rand(4, generator=gen)
        for model, opt in zip(models, optimizers, strict=True):
            opt.zero_grad()
            model(x, t, ctx, pooled).square().mean().backward()
            opt.step()
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        assert torch.equal(a, b)
    matrices = len(optimizers[0].routing.muon)
    assert control.redundant_ns5_calls == steps * matrices
    assert optimizers[1].ns5_calls == optimizers[0].ns5_calls == steps * matrices  # the update's own NS5 only
    assert control.redundant_thread_s > 0 and control.redundant_wall_s > 0


def test_the_positive_control_trains_as_muon_through_a_whole_trial() -> None:
    """Through `run_trial` (the pipeline's trainer): the same FD and validation loss as Muon, bit for bit."""
    from trials import run_trial

    muon, control = (run_trial(tiny_trial(steps=6, eval_steps=[6], optimizer={"name": name}))
                     for name in ("muon", "muon_extra_ns"))
    assert control.status == muon.status == "SUCCEEDED"
    assert control.fd == muon.fd and control.val_loss == muon.val_loss
    assert control.ns5_calls == muon.ns5_calls > 0


# --- a measurement ---------------------------------------------------------------------------------------------


def test_an_interleaved_measurement_records_rounds_clocks_phases_and_detects_a_known_extra_cost() -> None:
    """At batch 1 on 8 x 8 images the optimizer is most of a step, so the positive control's extra Newton-Schulz
    costs far more than any noise (here its step is about 1.5x Muon's): the interval must exclude 1."""
    arms = {"muon": {"name": "muon"}, "periodic": PERIODIC, "muon_extra_ns": {"name": "muon_extra_ns"},
            "muon copy": {"name": "muon"}}
    seen: list[int] = []
    timing = {"rounds": 6, "warmup_rounds": 1, "local_batch": 1, "order": "alternate"}
    result = interleaved_step_times(tiny_trial(data={"image_size": 8}), arms, timing,
                                    progress=lambda r: seen.append(r.rounds))
    assert seen == [1, 2, 3, 4, 5, 6] and result.rounds == 6 and result.stopped == "rounds"
    assert result.block_steps == 3 and result.local_batch == 1 and result.batch_size == 16
    assert result.blocks == block_order(list(arms), 6, "alternate", start=1)  # after one warm-up round
    for arm in arms:
        for clock in ("thread", "wall"):
            for phase in PHASES:
                values = result.costs[arm][clock][phase]
                assert len(values) == 6 and all(v > 0 for v in values)
        # A thread cannot use more CPU time than time passes: the thread clock is at most the wall clock (up to
        # the microseconds between reading one clock and the other).
        for cpu, wall in zip(result.step(arm, "thread"), result.step(arm, "wall"), strict=True):
            assert cpu <= wall * 1.01 + 1e-5
    assert result.thread_coverage is not None and result.thread_coverage > 0.9  # one thread did the work
    assert set(result.redundant) == {"muon_extra_ns"}
    positive = result.ratio("muon_extra_ns")
    assert positive.n == 6 and positive.lo > 1.1
    assert result.expected_ratio("muon_extra_ns") > 1.1
    assert result.optimizer_share("muon_extra_ns") > result.optimizer_share("muon")
    negative = result.ratio("muon copy")
    assert abs(math.log(negative.mean)) < math.log(positive.mean) / 2  # identical arms: far from the control's
    by_arm = result.rounds_by_arm()
    assert list(by_arm) == list(arms) and by_arm["muon"] == result.step("muon")
    summary = result.summary()
    assert summary["rounds"] == 6 and summary["arms"]["periodic"]["thread"]["ratio"]["n"] == 6
    assert "ratio" not in summary["arms"]["muon"]["thread"]


def test_rounds_are_added_until_the_interval_is_tight_or_the_cap() -> None:
    # A +-0.1 % interval is out of reach in 4 rounds on any machine: the cap stops it.
    timing = {"rounds": 2, "max_rounds": 4, "target_halfwidth": 0.001, "warmup_rounds": 0, "local_batch": 2}
    result = interleaved_step_times(tiny_trial(data={"image_size": 8}), {"muon": {"name": "muon"},
                                    "copy": {"name": "muon"}}, timing)
    assert result.rounds == 4 and result.stopped == "max_rounds" and result.block_steps == 1
    # A +-90 % interval is met at the first whole rotation from 3 rounds on: 4 rounds of 2 arms (A B, B A, ...).
    timing = {"rounds": 3, "max_rounds": 50, "target_halfwidth": 0.9, "warmup_rounds": 1, "local_batch": 2}
    result = interleaved_step_times(tiny_trial(data={"image_size": 8}), {"muon": {"name": "muon"},
                                    "copy": {"name": "muon"}}, timing)
    assert result.rounds == 4 and result.stopped == "target"
    assert result.blocks == [["copy", "muon"], ["muon", "copy"], ["copy", "muon"], ["muon", "copy"]]


# --- on N workers ----------------------------------------------------------------------------------------------


def test_on_two_gloo_ranks_the_step_is_the_sharded_trials_with_its_communication() -> None:
    """2 spawned gloo ranks at cpu-xs (batch 8: 4 per rank): each round's cost is the slower rank's, every rank's
    cost is kept, and the bytes per rank per step are counted exactly: Muon (replicated) sends AdamW's bytes (FSDP2's
    gathers and reduce-scatters, the loss all-reduce: the same model) plus the all-gather of every block matrix in
    fp32 each step, (W - 1) / W x 4 bytes x 237,568 elements = 475,136 bytes at W = 2; periodic K=3 distributed sends
    less than Muon (a refresh one step in three)."""
    fp32 = {"ns_dtype": "float32"}
    arms = {"muon": {"name": "muon", **fp32}, "adamw": {"name": "adamw"},
            "periodic": {**PERIODIC, **fp32, "ns_placement": "distributed"}}
    model = build_model("cpu-xs", image_size=8, in_channels=3, context_dim=32, pooled_dim=32)
    elements = sum(p.numel() for _, p in route_parameters(model).muon)
    assert elements == 237_568
    result = interleaved_step_times(tiny_trial(data={"image_size": 8}, batch_size=8, workers=2), arms,
                                    {"rounds": 3, "warmup_rounds": 1})
    assert (result.workers, result.cpu_clock, result.local_batch, result.block_steps, result.rounds) == (
        2, "process", 4, 3, 3)
    for arm in arms:
        for clock in ("thread", "wall"):
            per_rank = result.rank_steps[arm][clock]
            assert len(per_rank) == 3 and all(len(r) == 2 and min(r) > 0 for r in per_rank)
            # the round's cost is the slower rank's step (its phases, summed)
            assert result.step(arm, clock) == pytest.approx([max(r) for r in per_rank], rel=1e-12)
    sent = {arm: statistics.median(b) for arm, b in result.comm_bytes.items()}
    assert sent["adamw"] > 0
    assert sent["muon"] - sent["adamw"] == pytest.approx(0.5 * 4 * elements, rel=1e-9)
    assert sent["periodic"] < sent["muon"]
    summary = result.summary()
    assert summary["workers"] == 2 and set(summary["rank_step_s"]) == set(arms)
    with pytest.raises(ValueError, match=r"timing.local_batch is the one-process stand-in .* Allowed: unset"):
        interleaved_step_times(tiny_trial(batch_size=8, workers=2), arms, {"local_batch": 4})
