"""Selection: from trial records to the chosen point, with its uncertainty. Pure functions, no MLflow, no Ray.

One concept, three objects, each named for it:

- `sweeper.specs.SelectionSpec`: the rule a sweep asks for (a section of `SweepSpec`: tie tolerance, tie break,
  bootstrap resamples, one-SE or cheapest-within);
- `Selection`: the rule's outcome over any keyed points (`select_point`, `select_points_by_key`: the chosen key,
  every key's probability of being best, paired differences to the best);
- `SweepSelection`: a sweep's selection (`select_best`): the ranked points, the baselines, the runner-up, and the
  rule's outcome as its `uncertainty`.

Every difference it reports is a paired difference over common seeds (`PairedDifference`, `paired_difference`:
`scaling.stats`, shared with the transfer's analysis, and named here for the selection's readers).

- `_rule`: the choice rule, stated once (`select_point`, `select_points_by_key`, `Selection`);
- `_objective`: what one trial scores, the mean FD or the steps to a declared target with censored trials scored
  explicitly (`steps_to_target_score`, `describe_objective`), and a running trial's live value on the curve seen so
  far (`steps_to_target_so_far`);
- `_points`: trial records -> points over seeds -> the sweep's selection (`TrialRecord`, `PointSummary`,
  `summarise_points`, `select_best`, `SweepSelection`).
"""

from __future__ import annotations

from scaling.stats import PairedDifference, paired_difference

from ._objective import describe_objective, steps_to_target_score, steps_to_target_so_far
from ._points import (
    COSTS,
    PointSummary,
    SweepSelection,
    TrialRecord,
    compare_with_baselines,
    front_rule,
    latest_attempts,
    point_cost,
    point_state,
    runner_up_of,
    select_best,
    summarise_points,
)
from ._rule import Selection, select_point, select_points_by_key

__all__ = [
    "COSTS",
    "PairedDifference",
    "PointSummary",
    "Selection",
    "SweepSelection",
    "TrialRecord",
    "compare_with_baselines",
    "describe_objective",
    "front_rule",
    "latest_attempts",
    "paired_difference",
    "point_cost",
    "point_state",
    "runner_up_of",
    "select_best",
    "select_point",
    "select_points_by_key",
    "steps_to_target_score",
    "steps_to_target_so_far",
    "summarise_points",
]
