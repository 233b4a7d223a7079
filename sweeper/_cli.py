"""`scalesweep sweep ...`: run, resume, watch, cancel and read sweeps from the command line.

    scalesweep sweep validate SPEC                      check a spec; print it with every default filled in
    scalesweep sweep run SPEC [--workdir DIR] [--resume] [--quiet]
                                                        run (or resume) a sweep in this process; exit 0 when it
                                                        succeeded, 1 when it failed, 130 when it was cancelled
    scalesweep sweep status DIR [--json]                live state of the sweep in a work folder
    scalesweep sweep result (DIR | SWEEP --tracking-uri URI [--experiment NAME]) [--json]
                                                        the rank table and the choice, read from MLflow
    scalesweep sweep cancel DIR [--grace S]             stop it (cancel file, SIGTERM, then kill its group)

Errors are one line on stderr, never a traceback: exit 2 for bad input or a sweep in the wrong state (a spec that
does not validate, a work folder already running or holding another sweep), 1 when the driver itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["add_arguments", "run"]

_EXIT = {"SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 130}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `sweep` subcommands (argparse only: building the parser imports nothing heavy)."""
    parser.set_defaults(error_subject="sweep spec")  # a ValidationError reads "invalid sweep spec: ..."
    sub = parser.add_subparsers(dest="sweep_command", required=True)
    p = sub.add_parser("validate", help="check a sweep spec and print it with its defaults")
    p.add_argument("spec", help="sweep spec file (.yaml, .yml or .json)")
    p = sub.add_parser("run", help="run or resume a sweep (the driver runs in this process)")
    p.add_argument("spec", help="sweep spec file (.yaml, .yml or .json)")
    p.add_argument("--workdir", help="the sweep's state folder (default out/sweeps/<name>)")
    p.add_argument("--resume", action="store_true", help="continue the sweep in --workdir (or start it)")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the final table")
    p = sub.add_parser("status", help="live state of a sweep")
    p.add_argument("workdir", help="the sweep's work folder")
    p.add_argument("--json", action="store_true", help="print the status document as JSON")
    p = sub.add_parser("result", help="the rank table and the chosen point, from MLflow")
    p.add_argument("sweep", help="a work folder, or a sweep id / sweep name / parent run id with --tracking-uri")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (when SWEEP is not a work folder)")
    p.add_argument("--experiment", help="MLflow experiment (default: scalesweep)")
    p.add_argument("--json", action="store_true", help="print the selection document as JSON")
    p = sub.add_parser("cancel", help="stop a running sweep; it can be resumed later")
    p.add_argument("workdir", help="the sweep's work folder")
    p.add_argument("--grace", type=float, default=60.0, help="seconds to wait before killing the driver")


def run(args: argparse.Namespace) -> int:
    """Run `scalesweep sweep <command>`; returns the exit status (errors are worded by the CLI's dispatch)."""
    return int(_COMMANDS[args.sweep_command](args))


def _validate(args: argparse.Namespace) -> int:
    from ._spec import load_spec

    spec = load_spec(args.spec)
    print(json.dumps({**spec.model_dump(mode="json"), "resolved_eval_steps": spec.resolved_eval_steps}, indent=2))
    n = spec.search.grid_size if spec.search.method == "grid" else spec.search.budget
    print(f"# {spec.name}: {n} points x {len(spec.seeds)} seeds + {len(spec.baselines)} baselines x "
          f"{len(spec.seeds)} seeds, {spec.horizon} steps each", file=sys.stderr)
    return 0


def _run(args: argparse.Namespace) -> int:
    from ._driver import run_sweep
    from ._spec import load_spec

    spec = load_spec(args.spec)  # validate before anything starts
    result = run_sweep(spec, workdir=args.workdir, resume=args.resume, show_progress=not args.quiet)
    if args.quiet:
        print(result.table())
    return _EXIT.get(result.state, 1)


def _status(args: argparse.Namespace) -> int:
    from ._driver import sweep_status

    status = sweep_status(args.workdir)
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    driver = f"alive, pid {status.get('pid')}" if status["driver_alive"] else "not running"
    print(f"{status.get('sweep_id')}: {status.get('state')} (driver {driver})")
    if status.get("summary"):
        print(status["summary"])
    for trial in status.get("running") or []:
        print(f"  running {trial['trial_key']} (attempt {trial['attempt'] + 1}) at step {trial.get('step') or 0}")
    for line in (status.get("events") or [])[-5:]:
        print(f"  {line}")
    if status.get("state") == "INTERRUPTED":
        print("the driver stopped mid-sweep; continue it with: scalesweep sweep run SPEC --workdir "
              f"{args.workdir} --resume")
    return 0


def _result(args: argparse.Namespace) -> int:
    from ._result import load_sweep_result

    result = load_sweep_result(args.sweep, tracking_uri=args.tracking_uri, experiment=args.experiment)
    if args.json:
        print(json.dumps(result.selection_document(), indent=2, default=str))
    else:
        print(result.table())
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from ._driver import cancel_sweep

    status = cancel_sweep(args.workdir, grace_s=args.grace)
    print(f"{status.get('sweep_id')}: {status.get('state')}")
    return 0


_COMMANDS: dict[str, Any] = {
    "validate": _validate,
    "run": _run,
    "status": _status,
    "result": _result,
    "cancel": _cancel,
}
