"""Scaling-law fits of a metric against parameter count (`fit_scaling`: log-space Huber loss, several starting
points, bootstrap intervals, extrapolation refused past `DEFAULT_MAX_EXTRAPOLATION`), over the forms in `FORMS`; and
steps-to-target fits per declared target level (`fit_target_levels`) where the rungs' targets differ."""

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
    "fit_scaling",
    "fit_target_levels",
    "target_levels",
]
