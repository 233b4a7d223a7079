"""Scaling-law fits of a metric against parameter count (`fit_scaling`: log-space Huber loss, several starting
points, bootstrap intervals, extrapolation refused past `DEFAULT_MAX_EXTRAPOLATION`), over the forms in `FORMS`; and
steps-to-target fits per declared target level (`fit_target_levels`) where the rungs' targets differ; and the size
trend of a ratio between arms (`fit_time_ratio`: a line in log-log space, the largest rung held out and predicted,
then extrapolated with its interval)."""

from __future__ import annotations

from ._fit import (
    DEFAULT_ALPHA_BOUNDS,
    DEFAULT_HUBER_DELTA,
    DEFAULT_MAX_EXTRAPOLATION,
    DEFAULT_N_BOOT,
    ScalingFit,
    fit_scaling,
)
from ._forms import FORMS
from ._levels import HEADLINE_RULE, LevelFit, TargetLevelFits, fit_target_levels, target_levels
from ._time_ratio import TimeRatioFit, fit_time_ratio

__all__ = [
    "DEFAULT_ALPHA_BOUNDS",
    "DEFAULT_HUBER_DELTA",
    "DEFAULT_MAX_EXTRAPOLATION",
    "DEFAULT_N_BOOT",
    "FORMS",
    "HEADLINE_RULE",
    "LevelFit",
    "ScalingFit",
    "TargetLevelFits",
    "TimeRatioFit",
    "fit_scaling",
    "fit_target_levels",
    "fit_time_ratio",
    "target_levels",
]
