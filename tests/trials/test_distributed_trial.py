"""The built-in trial on 2 gloo ranks (`TrialConfig.workers = 2`, FSDP2) under torchrun: it trains, rank 0 reports
per-rank communication, and a run stopped after its first checkpoint resumes from the torch.distributed.checkpoint
it wrote to exactly the uninterrupted run's numbers.

The ranks are torchrun's (`python -m torch.distributed.run --nproc-per-node 2 <this file> CONFIG OUT [STOP]`):
rank 0 writes the trial's result to OUT, and with STOP raises SystemExit from its progress callback at that step,
after the checkpoint, as Tune stops a trial.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]


def _torchrun(tmp: Path, cfg: dict[str, Any], name: str, stop: int | None = None) -> dict[str, Any] | None:
    config, out = tmp / f"{name}.json", tmp / f"{name}-out.json"
    config.write_text(json.dumps(cfg))
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
            str(HERE), str(config), str(out)] + ([str(stop)] if stop else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400, check=False)
    if stop is None and done.returncode != 0:
        pytest.fail(f"torchrun failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text()) if out.exists() else None


def test_two_ranks_train_report_comm_and_resume_exactly(tmp_path: Path) -> None:
    from ..conftest import tiny_trial

    cfg = tiny_trial(workers=2, eval={"track_points": 0})
    straight = _torchrun(tmp_path, {**cfg, "checkpoint_dir": str(tmp_path / "a")}, "straight")
    assert straight is not None and straight["status"] == "SUCCEEDED" and sorted(straight["fd"]) == ["12", "24"]
    for rank in (0, 1):
        assert straight["records"][1][f"comm_bytes_per_step_rank{rank}"] > 1e5  # FSDP2's gathers and scatters
        assert straight["records"][1][f"comm_time_s_per_step_rank{rank}"] > 0
    assert (tmp_path / "a" / "latest").read_text() == "dcp-000000024"

    stopped = _torchrun(tmp_path, {**cfg, "checkpoint_dir": str(tmp_path / "b")}, "stopped", stop=12)
    assert stopped is None and (tmp_path / "b" / "latest").read_text() == "dcp-000000012"
    resumed = _torchrun(tmp_path, {**cfg, "checkpoint_dir": str(tmp_path / "b")}, "resumed")
    assert resumed is not None and [r["step"] for r in resumed["records"]] == [24]  # step 12 came from the checkpoint
    # Weights, EMA, optimizer state and both ranks' random streams restored: the same numbers as never stopping.
    assert resumed["fd"] == pytest.approx(straight["fd"], rel=1e-6)
    assert resumed["val_loss"] == pytest.approx(straight["val_loss"], rel=1e-6)
    assert resumed["ns5_calls"] == straight["ns5_calls"] and resumed["steps_done"] == 24


def _rank_main(config: str, out: str, stop: int | None) -> None:
    import torch
    import torch.distributed as dist

    from trials import run_trial

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    records: list[dict[str, Any]] = []

    def progress(record: dict[str, Any]) -> None:
        records.append(record)
        if record["step"] == stop:
            raise SystemExit(3)

    result = run_trial(json.loads(Path(config).read_text()), progress=progress)
    if dist.get_rank() == 0:
        Path(out).write_text(json.dumps({**result.to_dict(), "records": records}))
    dist.destroy_process_group()


if __name__ == "__main__":
    _rank_main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)
