"""How an arm's learning rate and weight decay are carried from the sweep's width to another width: the one place
the rules live (the transfer's runs and the exports both use them).

Learning rate (`LR_RULES`):
- `unchanged`: the lr is kept. Right for the Muon family under `adjust_lr_fn` None / "original": its update is an
  (approximately) orthogonal matrix scaled by lr x sqrt(max(1, m/n)), whose spectral norm is what muP asks to keep
  fixed, so one lr serves every width (the paper's protocol: K, gamma and lr carried without re-tuning).
- `width`: lr x base_width / target_width (muP's rule for Adam on hidden matrices). AdamW's default; and the Muon
  family's under `adjust_lr_fn="match_rms_adamw"`, which scales the step by 0.2 sqrt(max(m, n)) so that the update
  RMS matches AdamW's (about 0.2 lr) whatever the width: such an update then widens like AdamW's and needs its rule.
- `sqrt_width`: lr x sqrt(base_width / target_width), a gentler compromise some teams use.

Weight decay (`WD_RULES`), for decoupled decay `W <- W (1 - lr wd)`, whose per-step shrink is lr x wd:
- `keep_lr_wd` (default): wd x lr_base / lr_target, so lr x wd, the decay's time scale 1 / (lr wd) in steps, is the
  same at every width. With the `width` rule AdamW's lr falls 2.5x from width 64 to 160; keeping wd would weaken the
  decay by the same 2.5x.
- `keep_wd`: wd unchanged (what the first transfers did): lr x wd then shrinks with the lr.
Under `unchanged` both rules leave wd as it is.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Literal

from trials.optim import MUON_FAMILY

from ..errors import ScalingInputError

__all__ = [
    "DEFAULT_LR_RULE",
    "LR_RULES",
    "WD_RULES",
    "LrRule",
    "WdRule",
    "block_shapes",
    "carry_optimizer",
    "default_lr_rule",
    "transfer_lr",
    "transfer_weight_decay",
]

LrRule = Literal["unchanged", "width", "sqrt_width"]
WdRule = Literal["keep_lr_wd", "keep_wd"]
LR_RULES: tuple[str, ...] = ("unchanged", "width", "sqrt_width")
WD_RULES: tuple[str, ...] = ("keep_lr_wd", "keep_wd")
# Default rule per arm under the 'original' shape adjustment (see `default_lr_rule` for match_rms_adamw).
DEFAULT_LR_RULE: dict[str, LrRule] = {"adamw": "width", "muon": "unchanged", "periodic": "unchanged",
                                      "rownorm": "unchanged"}


def default_lr_rule(arm: str, adjust_lr_fn: str | None = None) -> LrRule:
    """The lr rule an arm transfers by when none is given: AdamW `width`; the Muon family `unchanged`, or `width`
    under `adjust_lr_fn="match_rms_adamw"` (its update RMS is then AdamW's, independent of width)."""
    if arm in MUON_FAMILY and adjust_lr_fn == "match_rms_adamw":
        return "width"
    return DEFAULT_LR_RULE.get(arm, "unchanged")


def transfer_lr(lr: float, rule: str, base_width: int, target_width: int) -> float:
    """The learning rate carried from a model of `base_width` to one of `target_width` by `rule`."""
    if rule not in LR_RULES:
        raise ScalingInputError(f"unknown lr rule {rule!r}; allowed: {list(LR_RULES)}")
    if base_width <= 0 or target_width <= 0 or not lr > 0:
        raise ScalingInputError(f"lr and widths must be > 0, got lr={lr}, {base_width} -> {target_width}")
    ratio = base_width / target_width
    return {"unchanged": lr, "width": lr * ratio, "sqrt_width": lr * math.sqrt(ratio)}[rule]


def transfer_weight_decay(weight_decay: float, lr_base: float, lr_target: float, rule: str) -> float:
    """Decoupled weight decay at the target width: `keep_lr_wd` keeps lr x wd, `keep_wd` keeps wd."""
    if rule not in WD_RULES:
        raise ScalingInputError(f"unknown weight decay rule {rule!r}; allowed: {list(WD_RULES)}")
    if not (lr_base > 0 and lr_target > 0) or weight_decay < 0:
        raise ScalingInputError(f"lrs must be > 0 and weight decay >= 0, got {lr_base}, {lr_target}, {weight_decay}")
    return weight_decay * lr_base / lr_target if rule == "keep_lr_wd" else weight_decay


@cache
def block_shapes(rung: str) -> dict[str, list[int]]:
    """Shape (rows, cols) of each block matrix kind of a built-in rung's model (the first block's image stream),
    counted on the meta device: the shapes the lr was tuned at, for a team mapping the rule onto its own model."""
    from trials.models import build_model
    from trials.optim import matrix_kind

    model = build_model(rung, device="meta")
    out: dict[str, list[int]] = {}
    for name, p in model.named_parameters():
        kind = matrix_kind(name)
        if p.ndim == 2 and name.startswith("blocks.0.") and kind is not None and kind not in out:
            out[kind] = [int(p.shape[0]), int(p.shape[1])]
    return out


def carry_optimizer(
    cfg: dict[str, Any],
    *,
    base_width: int,
    target_width: int,
    lr_rule: str | None = None,
    wd_rule: str = "keep_lr_wd",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the optimizer config at `target_width`, the record of how) for one arm's config `cfg` (with `lr` resolved).

    `lr_rule` None = the arm's default (`default_lr_rule`, which follows the config's `adjust_lr_fn`). The record
    holds the rules, the base and target widths and values, and the formulas, so a team can apply them itself."""
    arm, mode = str(cfg.get("name", "periodic")), cfg.get("adjust_lr_fn")
    rule = lr_rule or default_lr_rule(arm, mode)
    lr_base = float(cfg["lr"])
    lr = transfer_lr(lr_base, rule, base_width, target_width)
    wd_base = float(cfg.get("weight_decay", 0.1))
    wd = transfer_weight_decay(wd_base, lr_base, lr, wd_rule)
    formula = {"unchanged": "lr(w) = lr_base", "width": "lr(w) = lr_base * base_width / w",
               "sqrt_width": "lr(w) = lr_base * sqrt(base_width / w)"}[rule]
    record = {
        "lr_rule": rule,
        "lr_rule_default": rule == default_lr_rule(arm, mode),
        "lr_formula": formula,
        "weight_decay_rule": wd_rule,
        "weight_decay_formula": "wd(w) = wd_base * lr_base / lr(w)" if wd_rule == "keep_lr_wd" else "wd(w) = wd_base",
        "adjust_lr_fn": mode or "original",
        "base_width": base_width,
        "target_width": target_width,
        "lr_base": lr_base,
        "lr": lr,
        "weight_decay_base": wd_base,
        "weight_decay": wd,
    }
    return {**cfg, "lr": lr, "weight_decay": wd}, record
