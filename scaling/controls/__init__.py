"""The controls' expected outcomes (`control_outcome`: did the negative control show nothing, the positive one its
known saving and the steps control its known steps ratio, each at the level it is given) and the injection
simulation that measures how often the analysis's intervals cover a known truth injected into recorded curves
(`injection_coverage`, `control_simulation`)."""

from __future__ import annotations

from ._controls import CONTROL_KINDS, ControlCheck, ControlKind, ControlOutcome, control_outcome, null_reading
from ._injection import (
    ControlSimulation,
    InjectionCoverage,
    RecordedCurve,
    control_simulation,
    grid_crossings,
    injection_coverage,
    study_log_ratios,
)

__all__ = [
    "CONTROL_KINDS",
    "ControlCheck",
    "ControlKind",
    "ControlOutcome",
    "ControlSimulation",
    "InjectionCoverage",
    "RecordedCurve",
    "control_outcome",
    "control_simulation",
    "grid_crossings",
    "injection_coverage",
    "null_reading",
    "study_log_ratios",
]
