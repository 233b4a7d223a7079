"""A trial's objective is the mean FD over the sweep's declared eval steps only, each one required (issue 53 M3):
whatever a backend reported besides them neither counts nor rescues a missing one."""

from __future__ import annotations

import math

import pytest

from sweeper.search._trainable import declared_objective
from trials import TrialError


def test_steps_the_sweep_did_not_declare_do_not_count() -> None:
    # A trainer that reported FD 0.0 at undeclared steps 1 and 3 would have pulled a mean of every reported step
    # from 15.0 down to 7.5.
    assert declared_objective({1: 0.0, 2: 10.0, 3: 0.0, 4: 20.0}, [2, 4]) == 15.0


def test_a_missing_or_non_finite_declared_step_fails_the_trial_naming_it() -> None:
    with pytest.raises(TrialError, match=r"declared eval step\(s\) 4: it cannot be scored"):
        declared_objective({2: 10.0, 3: 1.0}, [2, 4])
    with pytest.raises(TrialError, match=r"step\(s\) 2, 4"):
        declared_objective({2: math.nan, 4: math.inf}, [2, 4])
    many = list(range(1, 101))
    with pytest.raises(TrialError, match=r"1, 2, .*, 12, \.\.\. \(100 steps\)"):
        declared_objective({}, many)


def test_the_mean_of_huge_finite_fds_does_not_overflow() -> None:
    # A live check: FD 1e308 at both steps failed the trial with "OverflowError: intermediate overflow in fsum"
    # (statistics.fmean sums first); the mean of finite values is finite.
    assert declared_objective({2: 1e308, 4: 1e308}, [2, 4]) == 1e308
    assert declared_objective({2: 1.7e308, 4: 1.7e308, 6: 1.7e308}, [2, 4, 6]) == pytest.approx(1.7e308)
