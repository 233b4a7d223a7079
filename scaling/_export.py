"""Carry hyperparameters from the sweep rung to a larger one, and export them for a team's own trainer.

Transfer rules for the learning rate (recorded with every transferred value):
- `unchanged`: the lr is kept as is. For the Muon family this is the paper's protocol: Muon's shape adjustment
  (`adjust_lr_fn`) already rescales the step per matrix shape, and K and gamma are carried without re-tuning.
- `width`: lr x base_width / target_width (muP's rule for Adam on hidden matrices): the usual choice for AdamW when
  widening.
- `sqrt_width`: lr x sqrt(base_width / target_width), a gentler compromise some teams use.
K and gamma are always carried unchanged (the paper's point: tune once at the smallest size).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import yaml

from ._errors import ScalingInputError

if TYPE_CHECKING:  # trials.optim imports torch: seconds that `scalesweep --help` should not pay
    from trials.optim import OptimizerConfig

__all__ = [
    "LR_RULES",
    "ArmExport",
    "Export",
    "build_export",
    "export_snippet",
    "transfer_lr",
]

LrRule = Literal["unchanged", "width", "sqrt_width"]
LR_RULES: tuple[str, ...] = ("unchanged", "width", "sqrt_width")
# Default rule per arm: Muon-family lrs are shape-adjusted already; AdamW's scales with 1/width (muP).
DEFAULT_LR_RULE: dict[str, LrRule] = {"adamw": "width", "muon": "unchanged", "periodic": "unchanged",
                                      "rownorm": "unchanged"}


def transfer_lr(lr: float, rule: str, base_width: int, target_width: int) -> float:
    """The learning rate carried from a model of `base_width` to one of `target_width` by `rule`."""
    if rule not in LR_RULES:
        raise ScalingInputError(f"unknown lr rule {rule!r}; allowed: {list(LR_RULES)}")
    if base_width <= 0 or target_width <= 0 or not lr > 0:
        raise ScalingInputError(f"lr and widths must be > 0, got lr={lr}, {base_width} -> {target_width}")
    ratio = base_width / target_width
    return {"unchanged": lr, "width": lr * ratio, "sqrt_width": lr * math.sqrt(ratio)}[rule]


@dataclass(frozen=True)
class ArmExport:
    """One arm's optimizer config at the target size, with where each value came from."""

    optimizer: dict[str, Any]
    rules: dict[str, str]
    verified_at_target: bool
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Export:
    """What a team takes to its own trainer."""

    target: dict[str, Any]
    arms: dict[str, ArmExport]
    provenance: dict[str, Any]
    format_version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def optimizer_config(self, arm: str) -> OptimizerConfig:
        """The exported arm as an `OptimizerConfig` (builds the same optimizer through `build_optimizer`)."""
        from trials.optim import OptimizerConfig

        if arm not in self.arms:
            raise ScalingInputError(f"no arm {arm!r} in this export; arms: {sorted(self.arms)}")
        return OptimizerConfig.model_validate(self.arms[arm].optimizer)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Export:
        arms = {name: ArmExport(**arm) for name, arm in data["arms"].items()}
        return cls(target=dict(data["target"]), arms=arms, provenance=dict(data["provenance"]),
                   format_version=int(data.get("format_version", 1)))

    @classmethod
    def from_text(cls, text: str) -> Export:
        """Read back a YAML or JSON export (JSON first: YAML 1.1 reads JSON's `1e-08` as a string)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = yaml.safe_load(text)
        return cls.from_dict(data)


def build_export(
    arms: Mapping[str, OptimizerConfig | Mapping[str, Any]],
    *,
    base_width: int,
    target_width: int,
    target: Mapping[str, Any],
    lr_rules: Mapping[str, str] | None = None,
    verified: Mapping[str, bool] | None = None,
    evidence: Mapping[str, Mapping[str, Any]] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> Export:
    """Transfer each arm's config from `base_width` to `target_width` and record the rule behind every value.

    `arms` holds the configs chosen at the sweep rung (for `periodic`, the selected K and gamma); `verified[arm]`
    says whether a run at the target size confirmed them; `evidence[arm]` carries objective values and MLflow run
    ids; `provenance` the sweep id, code version and anything else to trace the numbers back.
    """
    from trials.optim import OptimizerConfig

    rules_in = {**DEFAULT_LR_RULE, **(lr_rules or {})}
    out: dict[str, ArmExport] = {}
    for name, raw in arms.items():
        cfg = raw if isinstance(raw, OptimizerConfig) else OptimizerConfig.model_validate(dict(raw))
        rule = rules_in.get(cfg.name, "unchanged")
        lr = transfer_lr(cfg.resolved_lr, rule, base_width, target_width)
        exported = cfg.model_copy(update={"lr": lr}).model_dump(mode="json")
        rules = {
            "lr": f"{rule}: {cfg.resolved_lr:g} at width {base_width} -> {lr:g} at width {target_width}",
            "aux_lr": "unchanged (the paper's AdamW lr for non-matrix parameters)",
            "weight_decay": "unchanged",
            "momentum": "unchanged",
        }
        if cfg.name == "periodic":
            rules["refresh_every"] = "chosen by the sweep at the base rung, carried without re-tuning"
            rules["gamma"] = "chosen by the sweep at the base rung, carried without re-tuning"
        out[name] = ArmExport(
            optimizer=exported,
            rules=rules,
            verified_at_target=bool((verified or {}).get(name, False)),
            evidence=dict((evidence or {}).get(name, {})),
        )
    prov = {"created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), **dict(provenance or {})}
    return Export(target={**dict(target), "width": target_width, "base_width": base_width}, arms=out, provenance=prov)


def export_snippet(export: Export, arm: str = "periodic") -> str:
    """A ready PyTorch snippet that builds the exported optimizer for a team's model."""
    cfg = export.optimizer_config(arm)
    fields = {k: v for k, v in cfg.model_dump(mode="json").items() if v is not None}
    args = ",\n    ".join(f"{k}={v!r}" for k, v in fields.items())
    return (
        "# pip install scalesweep  (or copy trials/optim/ into your project)\n"
        "from trials.optim import OptimizerConfig, build_optimizer\n\n"
        f"config = OptimizerConfig(\n    {args},\n)\n"
        "# 2-D weights inside the transformer blocks -> the matrix rule; everything else -> AdamW (aux_lr).\n"
        'optimizer = build_optimizer(model, config, block_prefixes=("transformer_blocks",))\n'
    )
