"""Transfer rules that follow the optimizer's scaling: lr by adjust_lr_fn, weight decay stated, export provenance."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from scaling import ScalingInputError
from scaling.export import WD_RULES, Export, build_export, carry_optimizer, default_lr_rule
from scaling.export._lr_rules import transfer_weight_decay
from sweeper import SweepSpec
from sweeper.transfer import TransferSpec
from sweeper.transfer._planning import _plan, _Source

from ..conftest import TINY_TRIAL


def test_the_muon_family_transfers_like_adamw_under_match_rms_adamw() -> None:
    assert default_lr_rule("adamw") == "width" and default_lr_rule("adamw", "match_rms_adamw") == "width"
    for arm in ("muon", "periodic", "rownorm"):
        assert default_lr_rule(arm) == "unchanged" and default_lr_rule(arm, "original") == "unchanged"
        assert default_lr_rule(arm, "match_rms_adamw") == "width"


def test_weight_decay_keeps_lr_times_wd_or_wd_as_stated() -> None:
    lr_base, lr = 3e-3, 3e-3 * 64 / 160  # AdamW's width rule from cpu-xs to cpu-l: lr falls 2.5x
    kept = transfer_weight_decay(0.1, lr_base, lr, "keep_lr_wd")
    assert kept == pytest.approx(0.25) and kept * lr == pytest.approx(0.1 * lr_base)
    assert transfer_weight_decay(0.1, lr_base, lr, "keep_wd") == 0.1
    assert WD_RULES == ("keep_lr_wd", "keep_wd")
    with pytest.raises(ScalingInputError, match="keep_lr_wd"):
        transfer_weight_decay(0.1, lr_base, lr, "scale")
    cfg, how = carry_optimizer({"name": "periodic", "lr": 0.02, "weight_decay": 0.1}, base_width=64,
                               target_width=160)
    assert cfg["lr"] == 0.02 and cfg["weight_decay"] == 0.1 and how["lr_rule"] == "unchanged"  # nothing to keep


def test_the_export_carries_the_rule_the_base_shapes_and_the_mode() -> None:
    arms = {"periodic": {"name": "periodic", "lr": 4e-3, "adjust_lr_fn": "match_rms_adamw", "refresh_every": 3},
            "adamw": {"name": "adamw", "lr": 3e-3}}
    export = build_export(arms, base_width=64, target_width=160, target={"rung": "cpu-l", "base_rung": "cpu-xs"})
    periodic = export.arms["periodic"]
    assert periodic.optimizer["lr"] == pytest.approx(4e-3 * 64 / 160)  # match_rms_adamw: width, like AdamW
    assert periodic.optimizer["weight_decay"] == pytest.approx(0.1 * 160 / 64)  # lr x wd kept
    t = periodic.transfer
    assert t["lr_rule"] == "width" and t["adjust_lr_fn"] == "match_rms_adamw" and t["weight_decay_rule"] == "keep_lr_wd"
    assert t["base_width"] == 64 and t["target_width"] == 160 and t["lr_formula"] == "lr(w) = lr_base * base_width / w"
    assert t["base_shapes"]["qkv"] == [192, 64] and t["base_shapes"]["mlp_out"] == [64, 256]
    assert "match_rms_adamw" in periodic.rules["lr"] and "lr x wd kept" in periodic.rules["weight_decay"]
    assert export.arms["adamw"].transfer["adjust_lr_fn"] == "original"
    back = Export.from_text(export.to_json())
    assert back.arms["periodic"].transfer == t
    old = build_export(arms, base_width=64, target_width=160, target={"rung": "cpu-l"}, weight_decay_rule="keep_wd")
    assert old.arms["adamw"].optimizer["weight_decay"] == 0.1 and old.arms["periodic"].transfer["base_shapes"] == {}


def test_the_transfer_plan_follows_adjust_lr_fn_and_records_the_weight_decay_rule() -> None:
    sweep = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0],
                                      "search": {"optimizer": {"name": "periodic", "adjust_lr_fn": "match_rms_adamw",
                                                               "lr": 4e-3}},
                                      "baselines": ["adamw"], "trial": dict(TINY_TRIAL)})
    source = _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:////tmp/x.db",
                     experiment="e", spec=sweep, best={"K": 3, "gamma": 0.15}, objectives={}, searched_arm="periodic")
    plan, spec = _plan(TransferSpec(name="t", sweep="/w", arms=["periodic", "adamw"], rungs=["cpu-xs", "cpu-l"]),
                       source, "t-1")
    rows = {(r["rung"], r["arm"]): r for r in plan["runs"]}
    assert rows[("cpu-l", "periodic")]["lr_rule"] == "width"
    assert rows[("cpu-l", "periodic")]["lr"] == pytest.approx(4e-3 * 64 / 160)
    assert rows[("cpu-l", "adamw")]["weight_decay"] == pytest.approx(0.25) and plan["weight_decay_rule"] == "keep_lr_wd"
    cpu_l = next(b for b in spec.model_dump(mode="json")["baselines"] if b["label"] == "adamw.cpu-l")
    assert cpu_l["optimizer"]["weight_decay"] == pytest.approx(0.25)
    assert cpu_l["tags"]["scalesweep.wd_rule"] == "keep_lr_wd"
    keep = TransferSpec(name="t", sweep="/w", arms=["periodic", "adamw"], rungs=["cpu-xs", "cpu-l"],
                        weight_decay_rule="keep_wd")
    assert {r["weight_decay"] for r in _plan(keep, source, "t-2")[0]["runs"]} == {0.1}
    # The new field leaves the fingerprint of a default spec as it was, so older transfers still resume.
    assert TransferSpec(name="t", sweep="/w").fingerprint() == TransferSpec(
        name="t", sweep="/w", weight_decay_rule="keep_lr_wd").fingerprint() != keep.fingerprint()
    with pytest.raises(ValidationError, match="weight_decay_rule"):
        TransferSpec(name="t", sweep="/w", weight_decay_rule="scale")  # type: ignore[arg-type]


def test_the_transfer_carries_each_arms_best_lr_from_its_bracket() -> None:
    sweep = SweepSpec.model_validate({"name": "s", "rung": "cpu-xs", "horizon": 30, "seeds": [0],
                                      "baselines": [{"arm": "adamw", "lr_factors": [0.5, 1, 2]}, "muon"],
                                      "trial": dict(TINY_TRIAL)})

    def source(adamw_point: str) -> _Source:
        return _Source(workdir="/w", sweep_id="s-1", name="s", parent_run_id="p-1", tracking_uri="sqlite:////x.db",
                       experiment="e", spec=sweep, best={"K": 3, "gamma": 0.15}, searched_arm="periodic",
                       objectives={"adamw": {"point": adamw_point}, "muon": {"point": "muon"}})

    assert source("adamw.lr_x2").base_optimizers()["adamw"]["lr"] == pytest.approx(6e-3)
    assert source("adamw.lr_x0.5").base_optimizers()["adamw"]["lr"] == pytest.approx(1.5e-3)
    plan, _ = _plan(TransferSpec(name="t", sweep="/w", rungs=["cpu-xs", "cpu-l"]), source("adamw.lr_x2"), "t-1")
    lr = {(r["rung"], r["arm"]): r["lr"] for r in plan["runs"]}
    assert lr[("cpu-l", "adamw")] == pytest.approx(6e-3 * 64 / 160) and lr[("cpu-l", "muon")] == 0.02
