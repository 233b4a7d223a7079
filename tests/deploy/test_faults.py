"""Faults on the real topology (tests/deploy/conftest.py): a Ray worker node SIGKILLed while it runs a trial."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import httpx

from api.deploy_local import Deployment, _family, stop_pids

from .conftest import SPEC, check_finished, wait_for


def _trial_processes(pids: set[int]) -> set[int]:
    """The Ray workers among `pids` that run a trial (Ray names them after the trainable: ray::ImplicitFunc...)."""
    found = set()
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if name.startswith("ray::ImplicitFunc") or name.startswith("ray::_Inner"):
            found.add(pid)
    return found


def test_a_worker_node_killed_mid_trial_has_its_trial_retried_on_another_node(
        deployment: Deployment, api: httpx.Client) -> None:
    spare = deployment.start_worker("ray-worker-2")  # somewhere for the trial to go
    victim = deployment.components["ray-worker"]
    created = api.post("/v1/sweeps", json={**SPEC, "name": "deploy-node-lost"})
    assert created.status_code == 201, created.text
    sweep = created.json()["id"]
    deadline = time.time() + 180
    while not _trial_processes(victim.pids()) and time.time() < deadline:
        time.sleep(0.5)
    assert _trial_processes(victim.pids()), "no trial started on the first worker node"
    time.sleep(3)  # well inside the trial (16 steps and two evaluations)
    node = _family(victim.proc.pid)  # type: ignore[union-attr]  # ray start, its raylet, the trial's worker, ...
    for pid in node:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not stop_pids(node, grace_s=5), "the node's processes outlived SIGKILL"
    wait_for(api, f"/v1/sweeps/{sweep}", ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=600)
    check_finished(deployment, api, sweep)  # each configuration once, SUCCEEDED, no run left RUNNING
    trials = api.get(f"/v1/sweeps/{sweep}/trials").json()["data"]
    assert any(t["attempt"] > 0 and t["state"] == "SUCCEEDED" for t in trials), trials  # the lost trial ran again
    assert any(t["state"] == "FAILED" for t in trials), trials  # ... after its attempt on the lost node failed
    assert spare.proc is not None and spare.proc.poll() is None
