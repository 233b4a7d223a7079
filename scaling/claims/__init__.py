"""What a study may claim, and at which level: one alpha budget over every comparison and look (`alpha_budget`,
`holm_in_budget`), the power stated at the level a claim must pass (`power_at_alpha`; for the co-primary pair a claim
needs, bounds on the power of both: `co_primary_power`), P(best) printed only where the bootstrap can say it
(`p_best_text`), the warning a losing choice gets (`choice_warning`), and the steps-to-target comparisons judged
under that budget (`compare_crossings`, `judge_claims`, the controls' section)."""

from __future__ import annotations

from ._claims import (
    MIN_SEEDS_P_BEST,
    AlphaBudget,
    ChoiceWarning,
    CoPrimaryPower,
    PowerStatement,
    alpha_budget,
    choice_warning,
    co_primary_power,
    holm_in_budget,
    p_best_text,
    pair_power_bounds,
    power_at_alpha,
)
from ._comparison import (
    CO_PRIMARY,
    ENDPOINTS,
    ClaimFamily,
    CrossingComparison,
    compare_crossings,
    control_not_judged,
    controls_section,
    judge_claims,
)

__all__ = [
    "CO_PRIMARY",
    "ENDPOINTS",
    "MIN_SEEDS_P_BEST",
    "AlphaBudget",
    "ChoiceWarning",
    "ClaimFamily",
    "CoPrimaryPower",
    "CrossingComparison",
    "PowerStatement",
    "alpha_budget",
    "choice_warning",
    "co_primary_power",
    "compare_crossings",
    "control_not_judged",
    "controls_section",
    "holm_in_budget",
    "judge_claims",
    "p_best_text",
    "pair_power_bounds",
    "power_at_alpha",
]
