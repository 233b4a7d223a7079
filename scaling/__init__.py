"""Scaling studies from run records: time to best quality and to a target, savings between arms, statistics,
scaling-law fits, exports and the verification verdict. Pure functions: they take numbers (checkpoints, sizes and
values) or records already read (`TransferRun`) and return typed results; figures live elsewhere. `scaling` imports
only `trials`: no Ray, MLflow, Optuna, sweeper, service or figures, not even inside a function
(tests/test_layout.py).

Rooms, one concept each (each face names what the others may use; Optuna's package per concept):

    targets      time to best quality and to a target on one run's checkpoints, savings, the plateau check
    survival     steps to target as a survival time: first and sustained crossings and the steps spent above the
                 target, the Kaplan-Meier restricted mean and the paired ratio of restricted means over censored
                 seeds, censored fit data
    controls     the controls' expected outcomes and the injection simulation that measures the intervals' coverage
    claims       one alpha budget, power at the claim's level, P(best) text, choice warnings, the comparisons judged
    rounds       seeds added in rounds until the saving is shown (looks at alpha / L)
    rungs        the transfer's per-rung report against its declared target, timing and step-time ratios
    fits         scaling-law fits (`fit_scaling`) and their forms
    export       hyperparameters carried to a target size by stated rules, and the export written from them
    verify       the verification stage's design and verdict
    stats        the project's statistics (paired differences, Student-t intervals, the paired bootstrap of P(best)),
                 which the sweep's selection uses too
    records      `TransferRun`, one trial of a transfer as the analysis reads it; errors: the error classes

This face lists what other packages use from `scaling` itself (the errors and `TransferRun`) and the functions the
docs show a user (`from scaling import time_to_best`, as docs/guide.md does). Every other name is imported from its
room (`from scaling.survival import restricted_ratio`); a name no room lists on its face is not there. Code in this
project imports from the room too (`from scaling.fits import fit_scaling`). Nothing heavy loads with `import
scaling`.

The transfer job that produces the runs, its spec (the target, horizon, timing and plateau sections included),
its error (`TransferError`) and its result over the runs (`TransferResult`, `TransferPlan`) live in `sweeper.transfer`.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports below are this package's face: `lazy_face` reads them)

from __future__ import annotations

from typing import TYPE_CHECKING

from trials.core import lazy_face

if TYPE_CHECKING:
    from . import claims, controls, export, fits, records, rounds, rungs, stats, survival, targets, verify
    from .claims import alpha_budget, judge_claims, power_at_alpha
    from .controls import control_outcome, injection_coverage
    from .errors import ExtrapolationRefused, FitFailed, ScalingError, ScalingInputError
    from .export import Export, build_export
    from .fits import fit_scaling
    from .records import TransferRun
    from .survival import crossings
    from .targets import plateau, time_to_best, time_to_target
    from .verify import verification_design, verify_transfer

__all__, __getattr__, __dir__ = lazy_face(__name__, globals())
