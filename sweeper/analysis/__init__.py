"""A sweep's analysis: its result read back from MLflow, and what is computed from it.

- `_result`: `SweepResult` (`load_sweep_result`, `build_result`): the trials, the points over seeds, the baselines
  and the selection (`sweeper.selection`), with the confirmation applied;
- `_confirm`: the confirmation: the top points re-run on fresh seeds, and the rule applied to those runs alone;
- `_importance`: which searched parameter mattered (fANOVA or PED-ANOVA over the points, bootstrapped);
- `_front`: the quality-cost front (objective against Newton-Schulz calls or optimizer seconds per step);
- `_compare`: two sweeps side by side (paired differences over common seeds);
- `_optuna_study`: a finished sweep written as an Optuna study, for Optuna's own tools.

MLflow and Optuna are imported inside the calls that need them.
"""

from __future__ import annotations

from ._compare import ComparedPoint, SweepComparison, compare_sweeps
from ._confirm import confirmation_spec, controls_of, top_points
from ._front import FrontPoint, QualityCostFront, non_dominated, quality_cost_front
from ._importance import EVALUATORS, ParamImportance, SweepImportance, sweep_importance
from ._optuna_study import default_optuna_storage, optuna_study_name, write_optuna_study
from ._result import SweepResult, build_result, load_sweep_result

__all__ = [
    "EVALUATORS",
    "ComparedPoint",
    "FrontPoint",
    "ParamImportance",
    "QualityCostFront",
    "SweepComparison",
    "SweepImportance",
    "SweepResult",
    "build_result",
    "compare_sweeps",
    "confirmation_spec",
    "controls_of",
    "default_optuna_storage",
    "load_sweep_result",
    "non_dominated",
    "optuna_study_name",
    "quality_cost_front",
    "sweep_importance",
    "top_points",
    "write_optuna_study",
]
