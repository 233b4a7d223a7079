"""Carry hyperparameters from the sweep rung to a larger one, and export them for a team's own trainer.

The learning-rate and weight-decay rules live in `_lr_rules` (the transfer's runs use the same ones): the Muon
family keeps its lr (`unchanged`) under the 'original' shape adjustment and scales like AdamW (`width`) under
`match_rms_adamw`; AdamW's lr scales with 1/width; weight decay keeps lr x wd by default (`keep_lr_wd`). Every
exported arm carries the rule, the base width and block shapes it was derived at, and the `adjust_lr_fn` mode
(`ArmExport.transfer`), so a team's trainer can apply the rule to its own widths.
K and gamma are always carried unchanged (the paper's point: tune once at the smallest size).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from trials.core import parse_mapping

from ..errors import ScalingInputError
from ._lr_rules import WD_RULES, carry_optimizer

if TYPE_CHECKING:  # trials.optim imports torch: seconds that `scalesweep --help` should not pay
    from trials.optim import OptimizerConfig

__all__ = ["ArmExport", "Export", "build_export", "export_snippet", "refuse_losing_choice"]


@dataclass(frozen=True)
class ArmExport:
    """One arm's optimizer config at the target size, with where each value came from."""

    optimizer: dict[str, Any]
    rules: dict[str, str]
    verified_at_target: bool
    evidence: dict[str, Any] = field(default_factory=dict)
    # lr and weight-decay rules, formulas, adjust_lr_fn mode, base and target widths, base block shapes
    transfer: dict[str, Any] = field(default_factory=dict)


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
        return cls.from_dict(parse_mapping(text, "export", what="an export (target, arms, provenance)",
                                           error=ScalingInputError))


def refuse_losing_choice(warnings: Sequence[str], allow_losing: bool) -> None:
    """An export of a choice that is worse than a baseline with confidence (`warnings`, one line per baseline it
    loses to) needs the caller to ask for it; the export then carries the warnings in its provenance."""
    if warnings and not allow_losing:
        raise ScalingInputError(f"{warnings[0]}; exporting it anyway needs allow_losing (--allow-losing, "
                                "?allow_losing=true), and the export then carries this warning")


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
    weight_decay_rule: str = "keep_lr_wd",
    base_shapes: Mapping[str, Any] | None = None,
) -> Export:
    """Transfer each arm's config from `base_width` to `target_width` and record the rule behind every value.

    `lr_rules[arm]` overrides an arm's default lr rule (`default_lr_rule`: it follows the config's `adjust_lr_fn`);
    `weight_decay_rule` says what happens to weight decay (`keep_lr_wd` or `keep_wd`); `base_shapes` (default: the
    block shapes of `target["base_rung"]` when it is a built-in rung) is recorded with each arm. `arms` holds the
    configs chosen at the sweep rung (for `periodic`, the selected K and gamma); `verified[arm]`
    says whether a run at the target size confirmed them; `evidence[arm]` carries objective values and MLflow run
    ids; `provenance` the sweep id, code version and anything else to trace the numbers back.
    """
    from trials.optim import OptimizerConfig

    if weight_decay_rule not in WD_RULES:
        raise ScalingInputError(f"unknown weight decay rule {weight_decay_rule!r}; allowed: {list(WD_RULES)}")
    shapes = dict(base_shapes) if base_shapes is not None else _base_shapes(target.get("base_rung"))
    out: dict[str, ArmExport] = {}
    for name, raw in arms.items():
        cfg = raw if isinstance(raw, OptimizerConfig) else OptimizerConfig.model_validate(dict(raw))
        base = {**cfg.model_dump(mode="json"), "lr": cfg.resolved_lr}
        carried, how = carry_optimizer(base, base_width=base_width, target_width=target_width,
                                       lr_rule=(lr_rules or {}).get(name) or (lr_rules or {}).get(cfg.name),
                                       wd_rule=weight_decay_rule)
        exported = cfg.model_copy(update={"lr": carried["lr"], "weight_decay": carried["weight_decay"]}).model_dump(
            mode="json")
        lr, wd = carried["lr"], carried["weight_decay"]
        rules = {
            "lr": f"{how['lr_rule']}: {cfg.resolved_lr:g} at width {base_width} -> {lr:g} at width {target_width} "
                  f"(adjust_lr_fn {how['adjust_lr_fn']})",
            "aux_lr": "unchanged (the paper's AdamW lr for non-matrix parameters)",
            "weight_decay": f"{weight_decay_rule}: {cfg.weight_decay:g} -> {wd:g}"
                            + (" (lr x wd kept)" if weight_decay_rule == "keep_lr_wd" else " (wd kept)"),
            "momentum": "unchanged",
        }
        if cfg.name == "periodic":
            rules["refresh_every"] = "chosen by the sweep at the base rung, carried without re-tuning"
            rules["gamma"] = "chosen by the sweep at the base rung, carried without re-tuning"
        exported["aux_lr"], rules["aux_lr"] = _aux_lr(cfg.aux_lr, target)
        how["base_shapes"] = shapes
        out[name] = ArmExport(
            optimizer=exported,
            rules=rules,
            verified_at_target=bool((verified or {}).get(name, False)),
            evidence=dict((evidence or {}).get(name, {})),
            transfer=how,
        )
    prov = {"created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), **dict(provenance or {})}
    return Export(target={**dict(target), "width": target_width, "base_width": base_width}, arms=out, provenance=prov)


# The paper's AdamW lr for the non-matrix parameters (biases, norms, embeddings) at its sizes.
PAPER_AUX_LR = 1e-4


def _aux_lr(aux_lr: float, target: Mapping[str, Any]) -> tuple[float, str]:
    """(value, rule) of the non-matrix AdamW lr at the target. The CPU ladder trains its tiny non-matrix group at
    `trials.CPU_AUX_LR` (3e-3); that override is not carried to the paper's sizes, which get the paper's 1e-4."""
    from trials import CPU_AUX_LR

    base, rung = str(target.get("base_rung") or ""), str(target.get("rung") or "")
    if aux_lr == CPU_AUX_LR and base.startswith("cpu-") and rung and not rung.startswith("cpu-"):
        return PAPER_AUX_LR, (f"the paper's AdamW lr for non-matrix parameters ({PAPER_AUX_LR:g}); the sweep's "
                              f"{aux_lr:g} is the CPU ladder's default (trials.CPU_AUX_LR), not carried to {rung}")
    if aux_lr == PAPER_AUX_LR:
        return aux_lr, f"unchanged: {aux_lr:g}, the paper's AdamW lr for non-matrix parameters"
    if aux_lr == CPU_AUX_LR:
        return aux_lr, (f"unchanged: {aux_lr:g}, the CPU ladder's default for non-matrix parameters "
                        f"(trials.CPU_AUX_LR; the paper uses {PAPER_AUX_LR:g} at its sizes)")
    return aux_lr, f"unchanged: {aux_lr:g}, as the sweep set it (the paper uses {PAPER_AUX_LR:g})"


def _base_shapes(rung: Any) -> dict[str, Any]:
    """Block matrix shapes of a built-in base rung ({} for a rung this package does not know)."""
    from ._lr_rules import block_shapes

    try:
        return block_shapes(str(rung)) if rung else {}
    except Exception:  # a team's own rung name: no shapes to state
        return {}


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
