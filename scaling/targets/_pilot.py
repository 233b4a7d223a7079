"""One target for a whole study, read off a reference trained to a plateau (a transfer's target rule `pilot`).

The pilot's plateau quality is the mean over its seeds of each seed's mean quality over the last `PILOT_TAIL` of
its horizon (the last third): a mean over several points, so one noisy evaluation at the end does not move the line
as a single final value would. The target is (1 + slack) x that. The plateau check (`plateau`) runs on every seed's
curve; the pilot has plateaued only when every checked seed's fitted drop over the check's window is within
`max_drop` (a target drawn on a curve still falling would be easier for longer runs: a flag, never a silent pass).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ScalingInputError
from ._target import DEFAULT_PLATEAU_MAX_DROP, DEFAULT_PLATEAU_WINDOW, plateau

__all__ = ["PILOT_TAIL", "PilotTarget", "pilot_target"]

Curve = tuple[Sequence[float], Sequence[float]]  # (steps, values) of one seed
PILOT_TAIL = 1 / 3  # the last third of the pilot's horizon: the plateau, at 3 x the judged horizon


@dataclass(frozen=True)
class PilotTarget:
    """The target a pilot gives: its value, the plateau quality behind it, per seed, and the plateau verdict."""

    value: float  # (1 + slack) x quality
    quality: float  # the mean over seeds of each seed's mean over the tail
    slack: float
    per_seed: dict[str, float]  # seed -> its mean quality over the tail
    tail_points: dict[str, int]  # seed -> points in its tail
    tail_from: float  # first step of the tail
    drops: dict[str, float | None]  # seed -> the plateau check's fitted drop over its window (None: not checked)
    plateaued: bool
    window: float
    max_drop: float
    definition: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pilot_target(
    curves: Mapping[int, Curve] | Mapping[str, Curve],
    *,
    horizon: float,
    slack: float,
    window: float = DEFAULT_PLATEAU_WINDOW,
    max_drop: float = DEFAULT_PLATEAU_MAX_DROP,
) -> PilotTarget:
    """The target from the pilot's quality curves (seed -> (steps, values), lower is better) at `horizon` steps."""
    if not curves:
        raise ScalingInputError("the pilot has no finished run to set the target from")
    if not (math.isfinite(slack) and 0 <= slack < 1):
        raise ScalingInputError(f"slack must be in [0, 1), got {slack!r}")
    if not (math.isfinite(horizon) and horizon > 0):
        raise ScalingInputError(f"horizon must be a positive number of steps, got {horizon!r}")
    start = horizon * (1 - PILOT_TAIL)
    per_seed: dict[str, float] = {}
    points: dict[str, int] = {}
    drops: dict[str, float | None] = {}
    checked_ok: list[bool] = []
    for seed, (steps, values) in sorted(curves.items(), key=lambda kv: str(kv[0])):
        tail = [v for s, v in zip(steps, values, strict=True) if s >= start - 1e-9 and math.isfinite(v) and v > 0]
        if not tail:
            raise ScalingInputError(f"the pilot's seed {seed} has no finite quality over the last "
                                    f"third of its {horizon:g} steps (from step {start:g})")
        per_seed[str(seed)] = statistics.fmean(tail)
        points[str(seed)] = len(tail)
        check = plateau(steps, values, horizon=horizon, window=window, max_drop=max_drop)
        drops[str(seed)] = check.drop
        # A seed the check could not judge (too few points in the window) does not show a plateau.
        checked_ok.append(check.checked and not check.undertrained)
    quality = statistics.fmean(per_seed.values())
    return PilotTarget(
        value=(1 + slack) * quality, quality=quality, slack=slack, per_seed=per_seed, tail_points=points,
        tail_from=start, drops=drops, plateaued=all(checked_ok), window=window, max_drop=max_drop,
        definition=(f"(1 + {slack:g}) x {quality:.6g}: the mean over the pilot's {len(per_seed)} seeds of each "
                    f"seed's mean quality over the last third of its {horizon:g} steps (from step "
                    f"{start:g}); plateaued when every seed's fitted drop over the last {window:.2g} of the horizon "
                    f"is within {100 * max_drop:.0f} %"),
    )
