"""The export: the chosen hyperparameters carried to a target size by stated rules (`LR_RULES`, `WD_RULES`,
`carry_optimizer`), written as a config and a snippet (`build_export`, `export_snippet`), and refused when the
chosen point lost to a baseline (`refuse_losing_choice`)."""

from __future__ import annotations

from ._export import ArmExport, Export, build_export, export_snippet, refuse_losing_choice
from ._lr_rules import (
    DEFAULT_LR_RULE,
    LR_RULES,
    WD_RULES,
    LrRule,
    WdRule,
    carry_optimizer,
    default_lr_rule,
    transfer_lr,
)

__all__ = [
    "DEFAULT_LR_RULE",
    "LR_RULES",
    "WD_RULES",
    "ArmExport",
    "Export",
    "LrRule",
    "WdRule",
    "build_export",
    "carry_optimizer",
    "default_lr_rule",
    "export_snippet",
    "refuse_losing_choice",
    "transfer_lr",
]
