"""The GPU paths of the distributed benchmarks (`--device cuda`: NCCL ranks, one GPU each) refuse a machine without
the GPUs they need up front, in one line that names the flag and what is allowed, before any rank starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() >= 2, reason="this host has 2 GPUs")
@pytest.mark.parametrize("script", ["ns_placement.py", "worker_step_ratio.py"])
def test_device_cuda_without_two_gpus_is_refused_in_one_line(script: str) -> None:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--device", "cuda"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith(f"{script}: error: --device cuda"), message
    assert f"this machine has {gpus} GPU" in message and "Allowed: --device cpu" in message, message
    assert "Traceback" not in done.stderr and done.stdout == ""
