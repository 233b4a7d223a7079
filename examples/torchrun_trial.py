"""The built-in trial as a torchrun command trainer: every rank trains the MMDiT with FSDP2, rank 0 reports each
checkpoint to scalesweep through `trials.progress`.

A sweep or transfer runs it on the workers Ray reserved for the trial (`execution.workers_per_trial`):

    backend:
      name: command
      command: >-
        python -m torch.distributed.run --nproc-per-node {workers} --master-addr {master_addr}
        --master-port {master_port} examples/torchrun_trial.py {config_file}

and by hand: `torchrun --nproc-per-node 2 examples/torchrun_trial.py trial.json` (a TrialConfig as JSON; without
scalesweep's progress file the reports are validated and dropped). Its `workers` must equal the ranks started.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from trials import run_trial
from trials.progress import report_checkpoint, report_divergence


def main(config_file: str) -> None:
    cfg = json.loads(Path(config_file).read_text())
    cfg.pop("tracking", None)  # the command backend logs the run from the progress reports
    cfg.pop("checkpoint_dir", None)
    dist.init_process_group("nccl" if cfg.get("device") == "cuda" else "gloo")  # torchrun's MASTER_ADDR/PORT
    cfg["workers"] = dist.get_world_size()
    torch.set_num_threads(int(cfg.get("threads", 1)))

    def progress(record: dict) -> None:  # called on rank 0 at each eval step
        per_rank = {k: float(v) for k, v in record.items() if k.startswith("comm_") or "_rank" in k}
        report_checkpoint(record["step"], fd=record["fd"], val_loss=record["val_loss"],
                          effective_time_s=record["effective_time_s"], step_time_s=record["step_time_s"],
                          optimizer_time_s=record["optimizer_time_s"], metric_name=record["metric_name"],
                          metrics=per_rank)

    try:
        result = run_trial(cfg, progress=progress)
        if result.status == "DIVERGED" and result.diverged_at is not None:
            report_divergence(result.diverged_at)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
