"""The power a transfer states for its claims: the first crossing's alone (`claims.power`, as before) and the pair's a
claim needs (`claims.power_co_primary`), each co-primary endpoint from its own seed spread, printed side by side on
the report page and in the text table."""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any

import numpy as np
import pytest

from dashboards import ReportData, build_report
from scaling import TransferRun
from sweeper.transfer import TransferResult

from .test_transfer_controls import HORIZON, RUNGS, SEEDS, _runs, _timing


def _bumped(run: TransferRun, height: float) -> TransferRun:
    """The run with a bump of `height` in its curve around step 44, after it first crossed the target (about 13.7):
    a bump above 3 takes it back above the target for a few steps, so its steps above exceed its first crossing."""
    track = tuple((s, t, fd + height * math.exp(-(((s - 44) / 6) ** 2))) for s, t, fd in run.track)
    return dataclasses.replace(run, track=track, checkpoints=track[-3:])


def _result() -> TransferResult:
    """periodic against muon and adamw with its own seed-to-seed spread (10 % log sd on its curve's time scale) and
    a bump of its own per seed after its first crossing, so the first crossing and the steps above the target have
    spreads of their own."""
    rng = np.random.default_rng(3)
    base = [float(s) for s in 10 * np.exp(rng.normal(0, 0.05, len(SEEDS)))]
    periodic = [0.9 * s * float(np.exp(rng.normal(0, 0.1))) for s in base]
    bumps = dict(zip(SEEDS, rng.uniform(0, 8, len(SEEDS)), strict=True))
    arms = ["periodic", "muon", "adamw"]
    plan = {"rungs": list(RUNGS), "horizon": HORIZON, "seeds": list(SEEDS), "arms": arms, "searched_arm": "periodic",
            "chosen": {"K": 3, "gamma": 0.15}, "eval_steps": [52, 56, 60],
            "runs": [{"rung": g, "arm": a, "parameters": 1000} for g in RUNGS for a in arms]}
    runs = [_bumped(r, float(bumps[r.seed])) if r.arm == "periodic" else r
            for r in _runs({"periodic": periodic, "muon": base, "adamw": [1.1 * s for s in base]})]
    return TransferResult(transfer_id="t-1", name="t", state="SUCCEEDED", workdir="/nowhere", tracking_uri="x",
                          experiment="e", parent_run_id="p", source={"sweep_id": "s-1"}, plan=plan, runs=runs,
                          step_timing=_timing(1.3))


def _claims_section(analysis: dict[str, Any]) -> str:
    page = build_report(ReportData(title="transfer t", analysis=analysis), figures={})
    start = page.index('<section id="claims">')
    return page[start:page.index("</section>", start)]


def test_the_claims_power_is_the_pairs_beside_the_first_crossings() -> None:
    result = _result()
    analysis: dict[str, Any] = result.analysis(n_boot=0)
    claims = analysis["claims"]
    # 2 rungs x 2 baselines, one look: every claim must pass 0.05 / 4.
    assert set(claims["power"]) == set(claims["power_co_primary"]) == {
        f"{g} vs {b}" for g in RUNGS for b in ("muon", "adamw")}
    section = _claims_section(analysis)
    table = result.table()
    for key, pair in claims["power_co_primary"].items():
        rung, base = key.split(" vs ")
        comp = analysis["targets"]["rungs"][rung]["comparisons"][base]
        # The first crossing's own statement is the `power` entry, unchanged, at the claim's level.
        assert pair["endpoints"]["first"] == claims["power"][key] and pair["alpha"] == pytest.approx(0.0125)
        # Steps above the target are stated from their own spread: seeds' bootstrap se and the timing rounds' se
        # in quadrature.
        above = comp["steps_above"]
        se_steps = above["steps_to_target_ratio"]["log_se"]
        se_timing = above["time_saving_pct"]["se_timing_log"]
        assert se_steps != pytest.approx(comp["first"]["steps_to_target_ratio"]["log_se"])
        assert pair["endpoints"]["steps_above"]["se_log"] == pytest.approx(math.hypot(se_steps, se_timing))
        # The pair's bounds from the two endpoints' powers in the saving's direction, never above either one.
        toward = pair["toward"]
        assert pair["lo"] == pytest.approx(max(0.0, toward["first"] + toward["steps_above"] - 1))
        assert pair["hi"] == pytest.approx(min(toward.values()))
        assert pair["hi"] <= claims["power"][key]["power_for_effect"] + 1e-12
        assert pair["seeds_for_effect"] >= claims["power"][key]["seeds_for_effect"]
        # Page and text table print both, saying which is which.
        assert f"{html.escape(pair['text'])}<br>first crossing alone: {claims['power'][key]['text']}" in section
        line = next(x for x in table.splitlines() if x.strip().startswith(key))
        assert line.endswith(f"; {pair['text']}; first crossing alone {claims['power'][key]['text']}")
    assert "the claim (both co-primary endpoints), then the first crossing alone" in section
    # An analysis whose claims were judged on another pair (stored before the steps above were an endpoint) gets
    # the first crossing's power alone: the pair's stated here does not describe its claims.
    analysis["claims"]["co_primary"] = ["first", "sustained"]
    earlier = _claims_section(analysis)
    assert "the claim (first crossing" not in earlier and "first crossing alone" not in earlier
    assert all(p["text"] in earlier for p in claims["power"].values())
