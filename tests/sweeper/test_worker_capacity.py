"""Issue 64, N3 at run time: a sweep whose one trial its own Ray can never place fails at once, naming the field and
the figures. A module of its own: tests/sweeper/test_workers.py keeps a 2-CPU Ray up for its module, which a sweep
in the same process would join instead of starting its own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sweeper import load_spec, run_sweep

from .conftest import make_spec


@pytest.mark.integration
def test_a_sweep_whose_trial_its_own_ray_cannot_hold_fails_at_once(store_uri: str, tmp_path: Path) -> None:
    """The local CLI on `num_cpus: 1` with 2 workers of 1 CPU: Tune would hold the trial PENDING forever (Ray's
    "insufficient resources" every 60 s); the driver fails the sweep at once with the figures."""
    from sweeper.errors import SweepFailedError

    spec = load_spec(make_spec("too-wide", store_uri, search={"space": {"K": [3], "gamma": [0.15]}}, baselines=[],
                               execution={"workers_per_trial": 2, "cpus_per_trial": 1, "num_cpus": 1}))
    start = time.monotonic()
    with pytest.raises(SweepFailedError, match=r"execution.workers_per_trial 2: one trial needs 2 CPUs \(1 per "
                                               r"worker\); the cluster has 1 in all, 1 on its largest node"):
        run_sweep(spec, workdir=tmp_path / "wd")
    assert time.monotonic() - start < 120
