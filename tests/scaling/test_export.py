"""Transfer rules and the export: values, recorded rules, YAML/JSON round trip, and the factory round trip."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from scaling import ScalingInputError
from scaling.export import Export, build_export, export_snippet, transfer_lr
from trials.optim import OptimizerConfig, build_optimizer


def test_lr_rules() -> None:
    assert transfer_lr(0.02, "unchanged", 64, 256) == 0.02
    assert transfer_lr(3e-3, "width", 64, 256) == pytest.approx(7.5e-4)
    assert transfer_lr(3e-3, "sqrt_width", 64, 256) == pytest.approx(1.5e-3)
    with pytest.raises(ScalingInputError, match=r"allowed: \['unchanged', 'width', 'sqrt_width'\]"):
        transfer_lr(0.02, "mup", 64, 256)
    with pytest.raises(ScalingInputError, match="must be > 0"):
        transfer_lr(0.02, "width", 0, 256)


def _export() -> Export:
    return build_export(
        {
            "periodic": {"name": "periodic", "refresh_every": 4, "gamma": 0.25, "lr": 0.03},
            "muon": OptimizerConfig(name="muon"),
            "adamw": {"name": "adamw", "lr": 4e-3},
        },
        base_width=64,
        target_width=128,
        target={"rung": "cpu-m"},
        verified={"periodic": True},
        evidence={"periodic": {"objective": 41.5, "run_ids": ["abc"]}},
        provenance={"sweep_id": "s-1", "git_sha": "deadbeef"},
    )


def test_export_records_values_rules_and_provenance() -> None:
    exp = _export()
    periodic = exp.arms["periodic"]
    assert periodic.optimizer["refresh_every"] == 4 and periodic.optimizer["gamma"] == 0.25
    assert periodic.optimizer["lr"] == 0.03  # Muon family: unchanged
    assert "without re-tuning" in periodic.rules["gamma"] and periodic.verified_at_target
    assert exp.arms["adamw"].optimizer["lr"] == pytest.approx(2e-3)  # width rule: 4e-3 * 64/128
    assert exp.arms["adamw"].rules["lr"].startswith("width: 0.004 at width 64 -> 0.002 at width 128")
    assert not exp.arms["muon"].verified_at_target and exp.arms["muon"].optimizer["lr"] == 0.02
    assert exp.target == {"rung": "cpu-m", "width": 128, "base_width": 64}
    assert exp.provenance["sweep_id"] == "s-1" and "created" in exp.provenance


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_round_trips_and_builds_the_same_optimizer(fmt: str) -> None:
    exp = _export()
    text = exp.to_yaml() if fmt == "yaml" else exp.to_json()
    back = Export.from_text(text)
    assert back.to_dict() == exp.to_dict()
    model = nn.Module()
    model.blocks = nn.ModuleList([nn.Linear(8, 8)])
    model.head = nn.Linear(8, 2)
    opt = build_optimizer(model, back.optimizer_config("periodic"))
    group = opt.matrix.param_groups[0]
    assert (group["refresh_every"], group["gamma"], group["lr"]) == (4, 0.25, 0.03)
    assert opt.aux is not None and opt.aux.param_groups[0]["lr"] == 1e-4
    assert back.optimizer_config("periodic") == OptimizerConfig(
        name="periodic", refresh_every=4, gamma=0.25, lr=0.03
    )


def test_snippet_runs_and_builds_the_exported_optimizer() -> None:
    exp = _export()
    code = export_snippet(exp, "periodic")
    model = nn.Module()
    model.transformer_blocks = nn.ModuleList([nn.Linear(8, 8)])
    namespace: dict = {"model": model}
    exec(compile(code, "<snippet>", "exec"), namespace)  # the snippet as a user would paste it
    opt = namespace["optimizer"]
    assert opt.config == exp.optimizer_config("periodic")
    model.transformer_blocks[0].weight.grad = torch.ones(8, 8)
    opt.step()
    assert opt.ns5_calls == 1
    with pytest.raises(ScalingInputError, match="no arm 'rownorm'"):
        export_snippet(exp, "rownorm")
