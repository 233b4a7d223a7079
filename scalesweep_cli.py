"""The `scalesweep` command: one entry point whose subcommands dispatch to the packages.

Each package keeps its own command-line module; this file only wires them, imports lazily (torch, Ray and MLflow
are slow to import) and turns expected errors into one-line messages instead of tracebacks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _cmd_optimizers(args: argparse.Namespace) -> int:
    from trials.optim import DEFAULT_LR, OptimizerConfig, list_optimizers

    for name in list_optimizers():
        cfg = OptimizerConfig(name=name)  # type: ignore[arg-type]
        extra = f", K={cfg.refresh_every}, gamma={cfg.gamma}" if name == "periodic" else ""
        print(f"{name:10s} lr={DEFAULT_LR[name]:g}{extra}, aux AdamW lr={cfg.aux_lr:g}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalesweep",
        description="Hyperparameter sweeps and scaling studies for Periodic Row-wise Muon on diffusion transformers.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("optimizers", help="list the optimizer arms and their default hyperparameters")
    p.set_defaults(func=_cmd_optimizers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, FileNotFoundError) as exc:  # user input: say it in one line, no traceback
        first = str(exc).strip().splitlines()
        print(f"scalesweep {args.command}: error: {' '.join(first)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
