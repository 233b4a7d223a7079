"""What a job asks of the workers, estimated from its typed spec before anything runs: its work in training-step
units (`sweep_work`, `trial_work`), what one trial holds in memory (`trial_memory_bytes`, `trial_memory`,
`sweep_memory`), and the plan priced on this machine (`sweep_estimate`, `estimate_job` over `PlanStage`s: machine-
hours from step costs measured per rung and trial shape and cached, `step_cost`; peak memory; the smallest saving
its seeds can detect). The service refuses a submission over its limits with these figures; `scalesweep sweep plan`
and `transfer plan` print the estimate."""

from __future__ import annotations

from ._calibration import StepCost, calibration_dir, step_cost
from ._estimate import (
    UNKNOWN_DETECTABLE,
    JobEstimate,
    PlanStage,
    check_budget,
    estimate_job,
    job_slots,
    sweep_estimate,
)
from ._memory import TrialMemory, sweep_memory, trial_memory, trial_memory_bytes
from ._work import sweep_work, trial_work

__all__ = [
    "UNKNOWN_DETECTABLE",
    "JobEstimate",
    "PlanStage",
    "StepCost",
    "TrialMemory",
    "calibration_dir",
    "check_budget",
    "estimate_job",
    "job_slots",
    "step_cost",
    "sweep_estimate",
    "sweep_memory",
    "sweep_work",
    "trial_memory",
    "trial_memory_bytes",
    "trial_work",
]
