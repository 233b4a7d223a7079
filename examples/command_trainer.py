"""An example external trainer for scalesweep's command backend.

A team's own trainer (FSDP2, its data, DINOv2 FD) plugs in the same way: take the hyperparameters on the command
line, train, and call `trials.progress.report_checkpoint` once per checkpoint (it appends the JSON line the backend
reads, on rank 0 only, and checks it on the spot). This one trains scalesweep's built-in MMDiT so the example runs
anywhere; replace the body of `main` with your trainer.

    scalesweep's sweep spec: backend: {name: command, command: "python examples/command_trainer.py --optimizer
    {optimizer} --K {K} --gamma {gamma} --lr {lr} --rung {rung} --steps {steps} --seed {seed}
    --eval-steps {eval_steps} --progress {progress_file}"}
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", default="periodic", choices=["adamw", "muon", "periodic", "rownorm"])
    parser.add_argument("--K", type=int, default=3)
    parser.add_argument("--gamma", type=float, default=0.15)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--rung", default="cpu-xs")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-steps", default="", help="comma-separated steps at which to report FD")
    parser.add_argument("--progress", default=os.environ.get("SCALESWEEP_PROGRESS_FILE"), help="JSON-lines output")
    parser.add_argument("--fd-samples", type=int, default=1024)
    parser.add_argument("--extractor", default="shapes-cnn")
    # Sizes a quick check can shrink; unset, each keeps the trial's default (scalesweep's TrialConfig)
    parser.add_argument("--batch-size", type=int, help="training batch size")
    parser.add_argument("--track-points", type=int, help="cheap tracking evaluations (0: none)")
    parser.add_argument("--text-encoder", choices=["minilm", "learned"], help="caption encoder")
    args = parser.parse_args()
    if not args.progress:
        parser.error("--progress (or SCALESWEEP_PROGRESS_FILE) is required")

    from trials import run_trial
    from trials.progress import ProgressReporter

    eval_steps = [int(s) for s in args.eval_steps.split(",")] if args.eval_steps else None
    reporter = ProgressReporter(args.progress, eval_steps=eval_steps)

    def report(record: dict[str, Any]) -> None:
        # Outside this example, the one line is: report_checkpoint(step, fd=..., effective_time_s=..., ...)
        reporter.checkpoint(
            record["step"],
            record["fd"],
            effective_time_s=record.get("effective_time_s"),
            optimizer_time_s=record.get("optimizer_time_s"),
            step_time_s=record.get("step_time_s"),
            val_loss=record.get("val_loss"),
            metric_name=record["metric_name"],  # what the FD was computed on, e.g. fd_shapes_cnn
        )

    config = {
        "rung": args.rung,
        "steps": args.steps,
        "seed": args.seed,
        "optimizer": {"name": args.optimizer, "refresh_every": args.K, "gamma": args.gamma, "lr": args.lr},
        "eval": {"fd_samples": args.fd_samples, "extractor": args.extractor},
    }
    if eval_steps:
        config["eval_steps"] = eval_steps
    if args.batch_size is not None:
        config["batch_size"] = args.batch_size
    if args.track_points is not None:
        config["eval"]["track_points"] = args.track_points
    if args.text_encoder is not None:
        config["text_encoder"] = args.text_encoder
    result = run_trial(config, progress=report)
    if result.status == "DIVERGED" and result.diverged_at is not None:
        reporter.divergence(result.diverged_at)  # the backend marks the trial DIVERGED at that step


if __name__ == "__main__":
    main()
