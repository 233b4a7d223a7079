"""What a job asks of the workers, estimated from its typed spec before anything runs: its work in training-step
units (`sweep_work`, `trial_work`) and what one trial holds in memory (`trial_memory_bytes`, `trial_memory`,
`sweep_memory`). The service refuses a submission over its limits with these figures."""

from __future__ import annotations

from ._memory import TrialMemory, sweep_memory, trial_memory, trial_memory_bytes
from ._work import sweep_work, trial_work

__all__ = ["TrialMemory", "sweep_memory", "sweep_work", "trial_memory", "trial_memory_bytes", "trial_work"]
