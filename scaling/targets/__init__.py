"""Time to best quality and time to a target on one run's checkpoints, the savings between arms, the plateau check.

`time_to_best` reads when a run first reached its best quality (and a robust variant within `DEFAULT_TOL` of it),
`savings` compares two arms' times, `time_to_common_target` the time each arm needs to reach the quality both
reach; `time_to_target` the first crossing of a declared target, `plateau` whether the curve had stopped improving,
`pilot_target` one study's target from a reference trained to a plateau.
`quality_curve` is the checked (steps, times, values) triple every reading of a curve starts from.
"""

from __future__ import annotations

from ._pilot import PilotTarget, pilot_target
from ._target import (
    DEFAULT_PLATEAU_MAX_DROP,
    DEFAULT_PLATEAU_WINDOW,
    Plateau,
    TimeToTarget,
    plateau,
    quality_curve,
    target_value,
    time_to_target,
)
from ._time_to_best import (
    DEFAULT_TOL,
    DEFAULT_VOLATILITY_TOL,
    Checkpoints,
    CommonTarget,
    Savings,
    TimeToBest,
    savings,
    time_to_best,
    time_to_common_target,
)

__all__ = [
    "DEFAULT_PLATEAU_MAX_DROP",
    "DEFAULT_PLATEAU_WINDOW",
    "DEFAULT_TOL",
    "DEFAULT_VOLATILITY_TOL",
    "Checkpoints",
    "CommonTarget",
    "PilotTarget",
    "Plateau",
    "Savings",
    "TimeToBest",
    "TimeToTarget",
    "pilot_target",
    "plateau",
    "quality_curve",
    "savings",
    "target_value",
    "time_to_best",
    "time_to_common_target",
    "time_to_target",
]
