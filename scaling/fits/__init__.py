"""Scaling-law fits of a metric against parameter count (`fit_scaling`: log-space Huber loss, several starting
points, bootstrap intervals, extrapolation refused past `DEFAULT_MAX_EXTRAPOLATION`), over the forms in `FORMS`."""

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

__all__ = [
    "DEFAULT_ALPHA_BOUNDS",
    "DEFAULT_HUBER_DELTA",
    "DEFAULT_MAX_EXTRAPOLATION",
    "DEFAULT_N_BOOT",
    "FORMS",
    "ScalingFit",
    "fit_scaling",
]
