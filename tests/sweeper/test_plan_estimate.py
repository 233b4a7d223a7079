"""The planner without training: the calibration cache (hit, miss, key), the estimate's arithmetic, the refusals
(memory, budget) and `scalesweep sweep plan` / `transfer plan` errors as one line. The real calibration and the
estimate against real runs are tests/sweeper/test_plan_real.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scalesweep_cli import main
from sweeper.demand import JobEstimate, StepCost, calibration_dir, step_cost, sweep_estimate
from sweeper.specs import load_spec

from .conftest import TINY_TRIAL, write_spec

STEP_S, EVAL_S, SETUP_S, WORKER_S = 0.05, 0.4, 0.2, 3.0


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """A fresh calibration folder and a stand-in for the real measurement (tests/sweeper/test_plan_real.py runs
    it): records each trial it was asked to time."""
    import sweeper.demand._calibration as calibration
    import sweeper.demand._estimate as estimate

    monkeypatch.setenv("SCALESWEEP_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[dict[str, Any]] = []

    def fake(cfg: Any, key: str, shape: dict[str, Any]) -> StepCost:
        calls.append(shape)
        return StepCost(rung=cfg.rung, key=key, step_s=STEP_S, eval_s=EVAL_S, track_s=EVAL_S, setup_s=SETUP_S,
                        source="measured now", measured_at="2026-12-07T00:00:00+00:00", shape=shape)

    monkeypatch.setattr(calibration, "_measure", fake)
    monkeypatch.setattr(estimate, "worker_start", lambda measure=True: (WORKER_S, "cache"))
    return calls


def _spec(**fields: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": "plan", "rung": "cpu-xs", "horizon": 24,
                            "search": {"space": {"K": [2, 3], "gamma": [0.15]}}, "baselines": ["adamw"],
                            "seeds": [0, 1], "execution": {"concurrency": 2, "num_cpus": 2},
                            "trial": json.loads(json.dumps(TINY_TRIAL))}
    spec.update(fields)
    return spec


def test_a_calibration_is_measured_once_then_read_from_the_cache(measured: list[dict[str, Any]]) -> None:
    trial = {**TINY_TRIAL, "rung": "cpu-xs", "steps": 24, "optimizer": {"name": "periodic"}}
    first = step_cost(trial)
    assert first is not None and first.source == "measured now" and len(measured) == 1
    again = step_cost({**trial, "steps": 600, "seed": 7, "optimizer": {"name": "periodic", "lr": 0.5}})
    assert again is not None and again.source == "cache" and len(measured) == 1  # steps, seed, lr: same cost
    assert again.step_s == first.step_s and again.key == first.key
    assert list(calibration_dir().glob("cpu-xs-*.json")) == [calibration_dir() / f"{first.key}.json"]
    # The batch, the optimizer family and the rung change the cost: each a calibration of its own.
    for other in ({**trial, "batch_size": 8}, {**trial, "optimizer": {"name": "adamw"}}, {**trial, "rung": "cpu-s"}):
        assert step_cost(other, measure=False) is None
        got = step_cost(other)
        assert got is not None and got.source == "measured now" and got.key != first.key
    assert len(measured) == 4


def test_the_estimate_packs_trials_on_the_slots(measured: list[dict[str, Any]]) -> None:
    from sweeper.demand._estimate import JOB_OVERHEAD_PER_START, JOB_OVERHEAD_S, TRIAL_OVERHEAD_S

    est = sweep_estimate(load_spec(_spec()))
    # Two search points and AdamW on two seeds: 6 trials of 24 steps, 3 evaluations and 3 tracking evaluations
    # each (the tiny trial's 4 tracking points and its eval steps, 16, 20 and 24: the tracking point at 24 and the
    # eval steps reuse the full evaluation's images).
    assert [(s.stage, s.arm, s.trials, s.steps, s.evals, s.tracks) for s in est.stages] == [
        ("search", "periodic", 4, 24, 3, 3), ("baseline", "adamw", 2, 24, 3, 3)]
    one = TRIAL_OVERHEAD_S + SETUP_S + 24 * STEP_S + 6 * EVAL_S
    assert est.stage_seconds(0) == pytest.approx(one)
    driver = JOB_OVERHEAD_S + JOB_OVERHEAD_PER_START * WORKER_S  # the driver's own time moves with a worker's start
    assert est.wall_s == pytest.approx(driver + WORKER_S + 3 * one)  # 6 like trials on 2 slots
    assert est.machine_hours == pytest.approx(est.wall_s / 3600)
    assert est.detectable == ["unknown until a pilot"]
    doc = est.to_dict()
    assert doc["trials"] == 6 and doc["memory"]["cpu-xs"]["how"] == "modelled"
    assert {c["source"] for c in doc["calibration"].values()} == {"measured now"}


def test_a_prior_spread_gives_the_smallest_detectable_saving(measured: list[dict[str, Any]]) -> None:
    from scaling.claims import power_at_alpha

    est = sweep_estimate(load_spec(_spec(seeds=[0, 1, 2, 3])), spread={"periodic vs adamw at cpu-xs": 0.1})
    expected = power_at_alpha(sd_seed_log=0.1, n=4, alpha=0.05).detectable_pct
    assert est.detectable == [f"periodic vs adamw at cpu-xs: {expected:.0f} % (seed sd of the log ratio 0.100, "
                              "from the prior study)"]


def test_cli_plan_prints_stages_costs_and_sources(measured: list[dict[str, Any]], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path / "s.yaml", _spec())
    assert main(["sweep", "plan", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "search     cpu-xs     periodic" in out and "; measured now" in out
    assert "machine-hours" in out and "peak memory per trial at cpu-xs" in out and "unknown until a pilot" in out
    assert main(["sweep", "plan", str(spec), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {c["source"] for c in doc["calibration"].values()} == {"cache"} and doc["machine_hours"] > 0
    assert not (tmp_path / "out").exists()  # nothing started, no work folder


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(n in err for n in needles), err
    return err


def test_refusals_are_one_line_naming_the_rung_and_the_figure(measured: list[dict[str, Any]], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec(tmp_path / "s.yaml", _spec())
    _one_line(capsys, ["sweep", "plan", str(spec), "--budget-hours", "0.0001"],
              "sweep plan: error: rung cpu-xs:", "machine-hours", "over budget_hours 0.0001", "nothing started")
    _one_line(capsys, ["sweep", "plan", str(spec), "--budget-hours", "soon"], "--budget-hours", "'soon'")
    _one_line(capsys, ["sweep", "plan", str(spec), "--budget-hours", "-1"], "--budget-hours", "positive")
    # A trial larger than the machine's available memory (here made 1 GiB): refused before anything is measured.
    import sweeper.demand._estimate as estimate

    monkeypatch.setattr(estimate, "available_memory", lambda: 2**30)
    big = write_spec(tmp_path / "big.yaml", _spec(rung="cpu-m", trial={**TINY_TRIAL, "batch_size": 512}))
    calls = len(measured)
    _one_line(capsys, ["sweep", "plan", str(big)], "rung cpu-m: a trial needs an estimated", "GiB (modelled)",
              "available memory, 1.00 GiB")
    assert len(measured) == calls


def test_transfer_plan_prices_every_stage(measured: list[dict[str, Any]], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from sweeper.jobfiles import SPEC_FILE, write_json
    from sweeper.transfer import TransferSpec, transfer_estimate

    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    write_json(sweep_dir / SPEC_FILE, load_spec(_spec()).model_dump(mode="json"))
    spec = TransferSpec.model_validate({
        "name": "t", "sweep": str(sweep_dir), "rungs": ["cpu-xs", "cpu-s"], "arms": ["periodic", "muon"],
        "controls": ["negative", "positive"], "timing": {"method": "isolated", "steps": 4, "warmup": 1},
        "target": {"rule": "pilot", "arm": "muon", "pilot": {"seeds": [100]}}, "verify": {"rung": "cpu-s"}})
    est = transfer_estimate(spec)
    stages = {(s.stage, s.rung, s.arm): s for s in est.stages}
    assert stages["pilot", "cpu-xs", "muon"].phase == 0 and stages["pilot", "cpu-xs", "muon"].trials == 1
    # the isolated timing: the two arms and the positive control, one short run each per rung, one at a time
    timing = stages["timing", "cpu-s", "every arm"]
    assert (timing.trials, timing.steps, timing.slots, timing.in_ray) == (3, 5, 1, False)
    assert stages["run", "cpu-s", "periodic"].trials == 2 and stages["control", "cpu-s", "muon_extra_ns"].trials == 2
    assert spec.verify is not None and len(spec.verify.knobs) >= 2
    assert stages["verify", "cpu-s", "periodic"].trials == 2 * len(spec.verify.knobs) * 2  # 2 settings a knob, 2 seeds
    assert est.wall_s is not None and est.wall_s > 0
    path = write_spec(tmp_path / "t.yaml", spec.model_dump(mode="json", exclude_unset=True))
    assert main(["transfer", "plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "pilot      cpu-xs" in out and "timing     cpu-s" in out and "verify     cpu-s" in out
    _one_line(capsys, ["transfer", "plan", str(path), "--budget-hours", "0.00001"], "transfer plan: error: rung ")
    # A prior study's records: each comparison's spread over seeds, at this plan's 2 seeds and alpha over its 2
    # comparisons (periodic vs muon at two rungs).
    from scaling.claims import power_at_alpha
    from sweeper.transfer import prior_spread

    records = Path(__file__).resolve().parents[1] / "data" / "transfer_records"
    spread = prior_spread(records)
    assert set(spread) == {"periodic vs muon at cpu-xs", "periodic vs adamw at cpu-xs"}
    assert main(["transfer", "plan", str(path), "--prior", str(records), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    sd = spread["periodic vs adamw at cpu-xs"]
    pct = power_at_alpha(sd_seed_log=sd, n=2, alpha=0.05 / 2).detectable_pct
    assert f"periodic vs adamw at cpu-xs: {pct:.0f} % (seed sd of the log ratio {sd:.3f}, from the prior study)" in \
        doc["detectable_saving"]
    _one_line(capsys, ["transfer", "plan", str(path), "--prior", str(tmp_path / "none")], "--prior: no folder")
    nowhere = write_spec(tmp_path / "n.yaml", {"name": "n", "sweep": str(tmp_path / "missing")})
    # `plan` beside the transfer's other commands: each still reaches its own (status of a folder that is none)
    _one_line(capsys, ["transfer", "status", str(tmp_path)], "transfer status: error:", "not a transfer work folder")
    _one_line(capsys, ["transfer", "plan", str(nowhere)], "sweep:", "holds no sweep spec")


def test_no_estimate_without_a_cached_calibration(measured: list[dict[str, Any]]) -> None:
    est = sweep_estimate(load_spec(_spec()), measure=False)
    assert isinstance(est, JobEstimate) and est.wall_s is None and not measured
    assert "no cached calibration for rung cpu-xs" in (est.no_estimate() or "")
    assert "sweep plan SPEC" in "\n".join(est.lines())


def test_a_worker_start_that_fails_to_import_is_refused_not_cached(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """A start measured from processes that died at once would price every job's workers at nothing."""
    import sweeper.demand._calibration as calibration
    from sweeper import SweepError

    worker_start = calibration.worker_start
    monkeypatch.setenv("SCALESWEEP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "_WORKER_IMPORTS", "raise SystemExit(3)")
    with pytest.raises(SweepError, match=r"measuring a trial worker's start: .* exited 3"):
        worker_start()
    assert worker_start(measure=False) == (None, None)  # nothing cached
