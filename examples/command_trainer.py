"""An example external trainer for scalesweep's command backend.

A team's own trainer (FSDP2, its data, DINOv2 FD) plugs in the same way: take the hyperparameters on the command
line, train, and append one JSON line per checkpoint to the progress file. This one trains scalesweep's built-in
MMDiT so the example runs anywhere; replace the body of `main` with your trainer.

    scalesweep's sweep spec: backend: {name: command, command: "python examples/command_trainer.py --optimizer
    {optimizer} --K {K} --gamma {gamma} --lr {lr} --rung {rung} --steps {steps} --seed {seed}
    --eval-steps {eval_steps} --progress {progress_file}"}
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


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

    progress_file = Path(args.progress)

    def report(record: dict) -> None:
        keep = ("fd", "val_loss", "effective_time_s", "optimizer_time_s", "step_time_s")
        line = {"step": record["step"], **{k: record[k] for k in keep if k in record}}
        line["metric_name"] = record["metric_name"]  # what the FD was computed on, e.g. fd_shapes_cnn
        with progress_file.open("a") as handle:  # one line per checkpoint, flushed on close
            handle.write(json.dumps(line) + "\n")

    config = {
        "rung": args.rung,
        "steps": args.steps,
        "seed": args.seed,
        "optimizer": {"name": args.optimizer, "refresh_every": args.K, "gamma": args.gamma, "lr": args.lr},
        "eval": {"fd_samples": args.fd_samples, "extractor": args.extractor},
    }
    if args.eval_steps:
        config["eval_steps"] = [int(s) for s in args.eval_steps.split(",")]
    if args.batch_size is not None:
        config["batch_size"] = args.batch_size
    if args.track_points is not None:
        config["eval"]["track_points"] = args.track_points
    if args.text_encoder is not None:
        config["text_encoder"] = args.text_encoder
    run_trial(config, progress=report)


if __name__ == "__main__":
    main()
