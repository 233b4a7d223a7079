"""Equal tuning on the judged quantity, as a transfer reports it: each arm's trial budget at the tuning rung, what
the sweep tuned on against what the transfer judges, the selection's standard error and the winner's curse; and the
paper's default (K=3, gamma=0.15) carried as a fixed arm beside the chosen pair at every rung."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scaling import TransferRun
from sweeper import SweepSpec
from sweeper.transfer import TransferSpec

from .test_transfer_controls import RUNGS, SEEDS, _curve, _refused, _result, _sweep_folder


def test_the_paper_default_is_a_fixed_arm_of_a_periodic_sweep_only(tmp_path: Path) -> None:
    sweep = str(_sweep_folder(tmp_path / "sweep"))
    spec = TransferSpec.model_validate({"name": "t", "sweep": sweep, "fixed_arms": ["paper_default"]})
    assert spec.fixed_arms == ["paper_default"]
    assert spec.fingerprint() != spec.model_copy(update={"fixed_arms": []}).fingerprint()
    [(loc, msg)] = _refused({"sweep": sweep, "fixed_arms": ["paper"]})
    assert loc == ("fixed_arms", 0) and "'paper_default'" in msg
    muon_sweep = tmp_path / "muon-sweep"
    _sweep_folder(muon_sweep)
    (muon_sweep / "spec.json").write_text('{"search": {"optimizer": {"name": "muon"}, "space": {"lr": [0.02]}}}')
    [(loc, msg)] = _refused({"sweep": str(muon_sweep), "fixed_arms": ["paper_default"]})
    assert loc == ("fixed_arms",) and "the sweep must search periodic; allowed: [] with this sweep" in msg


def test_the_plan_carries_the_paper_default_beside_the_chosen_pair_at_every_rung() -> None:
    from sweeper.transfer._planning import ARM_TAG, _plan, _Source

    from ..conftest import TINY_TRIAL

    base = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0, 1],
                                     "baselines": ["adamw", "muon"], "trial": dict(TINY_TRIAL)})
    source = _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:///x.db",
                     experiment="e", spec=base, best={"K": 4, "gamma": 0.25}, objectives={}, searched_arm="periodic")
    spec = TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-s"], fixed_arms=["paper_default"])
    plan, typed = _plan(spec, source, "t-1")
    assert plan.fixed_arms == {"paper_default": {"arm": "periodic_paper", "of": "periodic", "refresh_every": 3,
                                                 "gamma": 0.15}}
    assert plan.arms == ["periodic", "muon", "adamw"]  # never among the judged arms
    labels = {b.label: b for b in typed.baselines}
    for rung in ("cpu-xs", "cpu-s"):
        fixed = labels[f"periodic_paper.{rung}"]
        chosen = next(r for r in plan.runs if r.rung == rung and r.arm == "periodic")
        assert fixed.arm == "periodic" and fixed.tags[ARM_TAG] == "periodic_paper"
        assert (fixed.optimizer["refresh_every"], fixed.optimizer["gamma"]) == (3, 0.15)
        assert fixed.optimizer["lr"] == pytest.approx(chosen.lr)  # the chosen point's carried lr
    assert plan.planned_runs() == (6 + 2) * 2
    # timed beside the arms in blocks of whole refresh periods: the chosen K=4 and the paper's K=3 make 12
    from sweeper.transfer import TransferError

    with pytest.raises(TransferError, match=r"a multiple of 12, got 4"):
        _plan(spec.model_copy(update={"timing": spec.timing.model_copy(update={"block_steps": 4})}), source, "t-2")


def _with_fixed_arm(scale: float) -> Any:
    """The controls' synthetic transfer with periodic_paper runs needing `scale` x Muon's steps (timed as periodic)."""
    result = _result(extra_cost=1.3)
    base = [r for r in result.runs if r.arm == "muon"]
    extra = [TransferRun(**{**r.__dict__, "arm": "periodic_paper", "run_id": r.run_id.replace("muon", "paper"),
                            "track": _curve(scale * 10 * math.exp(0.01 * r.seed), 10.0, 0.01),
                            "checkpoints": _curve(scale * 10 * math.exp(0.01 * r.seed), 10.0, 0.01)[-3:]})
             for r in base]
    result.runs.extend(extra)
    for per in result.step_timing["seconds_per_step_runs"].values():
        per["periodic_paper"] = list(per["periodic"])
    result.plan = result.plan.model_copy(update={"fixed_arms": {"paper_default": {
        "arm": "periodic_paper", "of": "periodic", "refresh_every": 3, "gamma": 0.15}}})
    return result


def test_the_fixed_arm_is_compared_with_every_arm_and_kept_out_of_the_claims() -> None:
    result = _with_fixed_arm(1.2)
    doc = result.analysis(n_boot=0)
    fixed = doc["fixed_arms"]["paper_default"]
    assert fixed["judged"] is False and set(fixed["rungs"]) == set(RUNGS)
    for rung in RUNGS:
        assert set(fixed["rungs"][rung]) == {"periodic", "muon", "adamw"}
        vs_muon = fixed["rungs"][rung]["muon"]["first"]["steps_to_target_ratio"]
        assert vs_muon["mean"] == pytest.approx(1.2, rel=0.05) and vs_muon["n"] == len(SEEDS)
    assert not any("periodic_paper" in key for key in doc["claims"]["stands"])
    lines = result.table().splitlines()
    assert any(line.startswith("  cpu-xs: periodic_paper (K=3, gamma=0.15) against muon: steps ratio 1.2")
               and line.endswith("(reported, not judged)") for line in lines)


def test_each_arms_budget_the_objective_the_selection_se_and_the_winners_curse_are_printed() -> None:
    from sweeper.transfer._planning import _selection_doc

    point = SimpleNamespace(point_key="K=3,gamma=0.15")
    confirmation = {"chosen_before": "K=3,gamma=0.15", "points": {"K=3,gamma=0.15": {
        "selected_objective": 100.0, "confirmed_objective": 108.0, "winners_curse": 8.0, "relative_curse": 0.08,
        "controlled_curse": 0.05}}}
    selection = SimpleNamespace(pooled_seed_std=12.0, objective="steps_to_target", objective_definition="steps to 30",
                                target=30.0, confirmation=confirmation, point=point)
    doc = _selection_doc(selection, 4)
    assert doc["selection_se"] == pytest.approx(6.0) and doc["winners_curse"]["winners_curse"] == 8.0
    unconfirmed = _selection_doc(SimpleNamespace(**{**selection.__dict__, "confirmation": None,
                                                    "objective": "mean_fd"}), 4)
    assert unconfirmed["winners_curse"] is None and "not measured" in unconfirmed["winners_curse_note"]

    result = _result(extra_cost=1.3)
    result.source.update(selection_points=36, selection_seeds=[0, 1, 2], selection=doc)
    result.source_objectives.update({"muon": {"lr_tuning": {f"muon.lr_x{i}": 1.0 for i in range(36)}},
                                     "adamw": {"lr_tuning": {f"adamw.lr_x{i}": 1.0 for i in range(36)}}})
    budgets = result.tuning_budgets()
    assert {a: b["sweep_trials"] for a, b in budgets["arms"].items()} == dict.fromkeys(("periodic", "muon",
                                                                                       "adamw"), 108)
    assert budgets["equal_in_sweep"] is True and budgets["selection"]["on_judged_quantity"] is True
    table = result.table().splitlines()
    i = next(k for k, x in enumerate(table) if x.startswith("tuning budget per arm"))
    assert "periodic 36 in the sweep (108 trials)" in table[i] and "(sweep equal, transfer equal)" in table[i]
    assert table[i + 1] == ("  the sweep tuned on steps_to_target: the judged quantity; selection standard error 6; "
                            "winner's curse +8 (confirmed - selected; +5.0 % against the controls' shift)")
    result.source.update(selection=unconfirmed)
    line = next(x for x in result.table().splitlines() if x.startswith("  the sweep tuned on"))
    assert line.startswith("  the sweep tuned on mean_fd: NOT the judged quantity") and "not measured" in line


def test_the_controls_example_transfer_validates_with_every_new_section() -> None:
    from sweeper.transfer import load_transfer_spec

    spec = load_transfer_spec(Path(__file__).parents[3] / "examples" / "transfer-controls.yaml")
    assert spec.controls == ["negative", "positive", "steps"] and spec.control_stretch == 8
    assert spec.fixed_arms == ["paper_default"]
    assert spec.target.rule == "pilot" and spec.target.per_rung and spec.target.slack == 0.05
