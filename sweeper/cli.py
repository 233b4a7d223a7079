"""`scalesweep sweep ...`: run, resume, watch, cancel and read sweeps from the command line.

    scalesweep sweep validate SPEC                      check a spec; print it with every default filled in
    scalesweep sweep plan SPEC [--budget-hours H] [--json]
                                                        price it before it runs: its trials, machine-hours on
                                                        this machine, peak memory, smallest detectable saving;
                                                        starts nothing (exit 2: over memory or over budget)
    scalesweep sweep run SPEC [--workdir DIR] [--resume] [--quiet]
                                                        run (or resume) a sweep in this process; exit 0 when it
                                                        succeeded, 1 when it failed, 130 when it was cancelled
    scalesweep sweep status DIR [--json]                live state of the sweep in a work folder
    scalesweep sweep result (DIR | SWEEP --tracking-uri URI [--experiment NAME]) [--json]
                                                        the rank table and the choice, read from MLflow
    scalesweep sweep cancel DIR [--grace S]             stop it (cancel file, SIGTERM, then kill its group)
    scalesweep sweep importance SWEEP [--evaluator fanova|ped-anova] [--n-boot N] [--json]
                                                        which searched hyperparameter mattered
    scalesweep sweep front SWEEP [--json]               the quality-cost front (objective vs optimizer cost)
    scalesweep sweep report SWEEP --out DIR             the sweep's report page and each figure as PNG files
    scalesweep sweep compare SWEEP_A SWEEP_B [--json] [--out DIR]
                                                        two sweeps side by side, paired where seeds match
    scalesweep sweep extend SPEC --workdir DIR [--quiet]
                                                        add seeds, grid values, budget or baselines to a finished
                                                        sweep and run only what is missing
    scalesweep sweep optuna SWEEP [--storage URL] [--study NAME]
                                                        write the sweep to an Optuna storage (optuna-dashboard)

SWEEP is a work folder, or a sweep id / name / parent run id with --tracking-uri (and --experiment).

Errors are one line on stderr, never a traceback: exit 2 for bad input or a sweep in the wrong state (a spec that
does not validate, a work folder already running or holding another sweep), 1 when the driver itself failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "run"]

# How a job ended, as the exit status of the commands that run or follow it.
EXIT_STATUS = {"SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 130}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `sweep` subcommands (argparse only: building the parser imports nothing heavy)."""
    parser.set_defaults(error_subject="sweep spec")  # a ValidationError reads "invalid sweep spec: ..."
    sub = parser.add_subparsers(dest="sweep_command", required=True)
    p = sub.add_parser("validate", help="check a sweep spec and print it with its defaults")
    p.add_argument("spec", help="sweep spec file (.yaml, .yml or .json)")
    add_plan(sub, "sweep")
    add_run_and_status(sub, "sweep")
    p = sub.add_parser("result", help="the rank table and the chosen point, from MLflow")
    _sweep_reference(p, "sweep")
    p.add_argument("--json", action="store_true", help="print the selection document as JSON")
    add_cancel(sub, "sweep")
    p = sub.add_parser("importance", help="which searched hyperparameter mattered (Optuna's evaluators)")
    _sweep_reference(p, "sweep")
    p.add_argument("--evaluator", choices=("fanova", "ped-anova"), default="fanova",
                   help="Optuna's importance evaluator (default fanova: reliable on a small grid)")
    p.add_argument("--n-boot", type=int, default=100, help="paired bootstrap resamples of the seeds (default 100)")
    p.add_argument("--json", action="store_true", help="print the importance document as JSON")
    p = sub.add_parser("front", help="the quality-cost front: objective against optimizer cost per point")
    _sweep_reference(p, "sweep")
    p.add_argument("--json", action="store_true", help="print the front document as JSON")
    p = sub.add_parser("compare", help="two sweeps side by side (B - A, paired over common seeds)")
    _sweep_reference(p, "sweep", "SWEEP_A")
    p.add_argument("other", metavar="SWEEP_B", help="the second sweep, given like the first")
    p.add_argument("--json", action="store_true", help="print the comparison document as JSON")
    p.add_argument("--out", help="also write the comparison's report page and figure to this folder")
    p = sub.add_parser("report", help="the sweep's report page and each of its figures as files")
    _sweep_reference(p, "sweep")
    p.add_argument("--out", required=True, help="folder for report.html and <figure>.png (made if missing)")
    p = sub.add_parser("extend", help="add seeds, grid values, budget or baselines to a finished sweep")
    p.add_argument("spec", help="the sweep's spec with the additions (.yaml, .yml or .json)")
    p.add_argument("--workdir", required=True, help="the sweep's work folder")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the final table")
    p = sub.add_parser("optuna", help="write the sweep's trials to an Optuna storage (a study per sweep)")
    _sweep_reference(p, "sweep")
    p.add_argument("--storage", help="Optuna RDB URL (default sqlite:///<work folder>/optuna.db)")
    p.add_argument("--study", help="the study's name (default <sweep name>-<sweep id>)")


def _sweep_reference(p: argparse.ArgumentParser, dest: str, metavar: str = "SWEEP") -> None:
    """A sweep given by work folder, or by id / name / parent run id in a store named with --tracking-uri."""
    p.add_argument(dest, metavar=metavar,
                   help="a work folder, or a sweep id / sweep name / parent run id with --tracking-uri")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (when a sweep is not a work folder)")
    p.add_argument("--experiment", help="MLflow experiment (default: scalesweep)")


def add_plan(sub: Any, job: str) -> Any:
    """`plan SPEC [--budget-hours H] [--json]` of a sweep or a transfer (the transfer adds `--prior DIR`)."""
    p = sub.add_parser("plan", help=f"price a {job} before it runs (trials, machine-hours, memory, detectable "
                       "saving); starts nothing")
    p.add_argument("spec", help=f"{job} spec file (.yaml, .yml or .json)")
    p.add_argument("--budget-hours", metavar="H",
                   help="refuse (exit 2) a plan whose estimate is over H machine-hours on this machine")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return p


def budget_hours(raw: str | None) -> float | None:
    """`--budget-hours`: a positive number of hours (ValueError in one line otherwise)."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value != float("inf")):
        raise ValueError(f"--budget-hours: expected a positive number of machine-hours, got {raw!r}")
    return value


def print_document(args: argparse.Namespace, found: Any) -> int:
    """A view's or a priced plan's document as JSON under --json, else its text lines."""
    if args.json:
        print(json.dumps(found.to_dict(), indent=2, default=str))
    else:
        print("\n".join(found.lines()))
    return 0


def run_driver_estimate(estimate: Callable[[Any], Any], spec: Any) -> dict[str, Any]:
    """The plan's estimate of a job as its driver starts, from the cached calibration only (a missing one is said,
    not measured: measuring would hold the job); never fails the job."""
    try:
        est = estimate(spec)
    except Exception as exc:  # e.g. a trial over this machine's memory: the service admitted it elsewhere
        return {"estimated_wall_s": None, "machine_hours": None, "no_estimate": " ".join(str(exc).split())}
    doc = est.to_dict()
    return {"estimated_wall_s": doc["estimated_wall_s"], "machine_hours": doc["machine_hours"],
            "no_estimate": doc["no_estimate"], "machine": doc["machine"], "trials": doc["trials"],
            "calibration": sorted({c["source"] for c in doc["calibration"].values() if c})}


def record_actual(workdir: Path, started: dict[str, Any], actual_s: float) -> dict[str, Any]:
    """The estimate (the first driver run's, kept on resume) and every driver run's actual wall time, stored in the
    work folder's estimate file; the document returned."""
    from .jobfiles import ESTIMATE_FILE, read_json, write_json

    path = workdir / ESTIMATE_FILE
    doc = read_json(path) or started
    runs = [*doc.get("driver_runs_s", []), round(actual_s, 3)]
    doc = {**doc, "driver_runs_s": runs, "actual_wall_s": round(sum(runs), 3),
           "actual_machine_hours": sum(runs) / 3600}
    if workdir.is_dir():
        write_json(path, doc)
    return doc


def estimate_line(doc: dict[str, Any]) -> str:
    """'machine-hours: estimated E (plan), actual A (...)': a finished job's estimate beside its actual."""
    actual = f"actual {doc['actual_machine_hours']:.4f} ({doc['actual_wall_s']:.0f} s wall"
    actual += f" over {len(doc['driver_runs_s'])} driver runs)" if len(doc["driver_runs_s"]) > 1 else ")"
    if doc.get("machine_hours") is None:
        return f"machine-hours: {actual}; no estimate: {doc.get('no_estimate')}"
    ratio = doc["actual_wall_s"] / doc["estimated_wall_s"] if doc.get("estimated_wall_s") else float("nan")
    return (f"machine-hours: estimated {doc['machine_hours']:.4f} ({doc['estimated_wall_s']:.0f} s, the plan's, "
            f"from the cached calibration), {actual}; actual / estimate {ratio:.2f}")


def add_run_and_status(sub: Any, job: str) -> None:
    """`run SPEC` and `status WORKDIR` of a job the driver runs in this process (a sweep, a transfer)."""
    p = sub.add_parser("run", help=f"run or resume a {job} (the driver runs in this process)")
    p.add_argument("spec", help=f"{job} spec file (.yaml, .yml or .json)")
    p.add_argument("--workdir", help=f"the {job}'s state folder (default out/{job}s/<name>)")
    p.add_argument("--resume", action="store_true", help=f"continue the {job} in --workdir (or start it)")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the final table")
    p = sub.add_parser("status", help=f"live state of a {job}")
    p.add_argument("workdir", help=f"the {job}'s work folder")
    p.add_argument("--json", action="store_true", help="print the status document as JSON")


def add_cancel(sub: Any, job: str) -> None:
    """`cancel WORKDIR [--grace S]` of a job's driver."""
    p = sub.add_parser("cancel", help=f"stop a running {job}; it can be resumed later")
    p.add_argument("workdir", help=f"the {job}'s work folder")
    p.add_argument("--grace", type=float, default=60.0, help="seconds to wait before killing the driver")


def run(args: argparse.Namespace) -> int:
    """Run `scalesweep sweep <command>`; returns the exit status (errors are worded by the CLI's dispatch)."""
    return int(_COMMANDS[args.sweep_command](args))


def _validate(args: argparse.Namespace) -> int:
    from .specs import load_spec

    spec = load_spec(args.spec)
    print(json.dumps({**spec.model_dump(mode="json"), "resolved_eval_steps": spec.resolved_eval_steps}, indent=2))
    n = spec.search.grid_size if spec.search.method == "grid" else spec.search.budget
    print(f"# {spec.name}: {n} points x {len(spec.seeds)} seeds + {len(spec.baselines)} baselines x "
          f"{len(spec.seeds)} seeds, {spec.horizon} steps each", file=sys.stderr)
    return 0


def run_job_command(args: argparse.Namespace, load: Callable[[Any], Any], run: Callable[..., Any],
                    estimate: Callable[[Any], Any], default_workdir: Callable[[str], Path]) -> int:
    """`scalesweep sweep run` and `scalesweep transfer run`: load the spec (validated before anything starts), price
    it from the cached calibration (`estimate`), run the job's driver, print its table under --quiet (else the
    driver's progress was the output), then its estimate beside the actual machine-hours (stored in the work
    folder's estimate file); the exit status says how it ended (0 succeeded, 1 failed, 130 cancelled)."""
    spec = load(args.spec)
    started = run_driver_estimate(estimate, spec)
    clock = time.perf_counter()
    result = run(spec, workdir=args.workdir, resume=args.resume, show_progress=not args.quiet)
    actual = time.perf_counter() - clock
    if args.quiet:
        print(result.table())
    workdir = Path(args.workdir or default_workdir(spec.name)).resolve()
    print(estimate_line(record_actual(workdir, started, actual)))
    return EXIT_STATUS.get(result.state, 1)


def print_status(args: argparse.Namespace, status: dict[str, Any], *, headline: Callable[[str], str],
                 details: Callable[[], list[str]], job: str) -> int:
    """A job driver's status document: whole as JSON under --json, else a headline (given the driver's liveness
    in words), the job's own detail lines, the last events and, for an interrupted job, how to resume it."""
    if args.json:
        print(json.dumps(status, indent=2, default=str))
        return 0
    driver = f"alive, pid {status.get('pid')}" if status["driver_alive"] else "not running"
    print(headline(driver))
    for line in details():
        print(line)
    for line in (status.get("events") or [])[-5:]:
        print(f"  {line}")
    if status.get("state") == "INTERRUPTED":
        print(f"the driver stopped mid-{job}; continue it with: scalesweep {job} run SPEC --workdir "
              f"{args.workdir} --resume")
    return 0


def _run(args: argparse.Namespace) -> int:
    from .demand import sweep_estimate
    from .jobs import default_workdir, run_sweep
    from .specs import load_spec

    return run_job_command(args, load_spec, run_sweep, lambda spec: sweep_estimate(spec, measure=False),
                           default_workdir)


def _plan(args: argparse.Namespace) -> int:
    from .demand import sweep_estimate
    from .specs import load_spec

    spec = load_spec(args.spec)
    hours = budget_hours(args.budget_hours)
    return print_document(args, sweep_estimate(spec, budget_hours=hours))


def _status(args: argparse.Namespace) -> int:
    from .jobs import sweep_status

    status = sweep_status(args.workdir)

    def details() -> list[str]:
        lines = [status["summary"]] if status.get("summary") else []
        return lines + [f"  running {trial['trial_key']} (attempt {trial['attempt'] + 1}) at step "
                        f"{trial.get('step') or 0}" for trial in status.get("running") or []]

    return print_status(args, status, job="sweep", details=details,
                        headline=lambda driver: f"{status.get('sweep_id')}: {status.get('state')} (driver {driver})")


def _result(args: argparse.Namespace) -> int:
    result = _load(args)
    if args.json:
        print(json.dumps(result.selection_document(), indent=2, default=str))
    else:
        print(result.table())
    return 0


def _load(args: argparse.Namespace, sweep: str | None = None) -> Any:
    from .analysis import load_sweep_result

    return load_sweep_result(sweep or args.sweep, tracking_uri=args.tracking_uri, experiment=args.experiment)


def _importance(args: argparse.Namespace) -> int:
    return print_document(args, _load(args).importance(evaluator=args.evaluator, n_boot=args.n_boot))


def _front(args: argparse.Namespace) -> int:
    return print_document(args, _load(args).front())


def _compare(args: argparse.Namespace) -> int:
    from .analysis import compare_sweeps
    from .jobs import write_comparison_report

    comparison = compare_sweeps(_load(args), _load(args, args.other))
    print_document(args, comparison)
    if args.out:
        _written(write_comparison_report(comparison, args.out))
    return 0


def _report(args: argparse.Namespace) -> int:
    from .jobs import write_sweep_report

    _written(write_sweep_report(_load(args), args.out))
    return 0


def _written(paths: list[str]) -> None:
    """The files written, on stderr: under --json, stdout holds the document alone."""
    print(f"wrote {', '.join(paths)}", file=sys.stderr)


def _optuna(args: argparse.Namespace) -> int:
    from pathlib import Path

    from trials import without_credentials

    from .analysis import default_optuna_storage, write_optuna_study
    from .errors import SweepError

    result = _load(args)
    storage = args.storage
    if storage is None:
        if not (result.workdir and Path(result.workdir).is_dir()):
            raise SweepError("the sweep's work folder is not on this machine: give --storage URL")
        storage = default_optuna_storage(result.workdir)
    name = write_optuna_study(result, storage, study_name=args.study)
    shown = without_credentials(storage)
    print(f"wrote study {name!r} to {shown}\nopen it with: optuna-dashboard {shown}")
    return 0


def _extend(args: argparse.Namespace) -> int:
    from .jobs import extend_sweep

    result = extend_sweep(args.spec, args.workdir, show_progress=not args.quiet)
    if args.quiet:
        print(result.table())
    return EXIT_STATUS.get(result.state, 1)


def cancel_job(args: argparse.Namespace, cancel: Callable[..., dict[str, Any]], job: str) -> int:
    """`scalesweep sweep cancel` and `scalesweep transfer cancel`: stop the job's driver, print how it ended."""
    status = cancel(args.workdir, grace_s=args.grace)
    print(f"{status.get(f'{job}_id')}: {status.get('state')}")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from .jobs import cancel_sweep

    return cancel_job(args, cancel_sweep, "sweep")


_COMMANDS: dict[str, Any] = {
    "validate": _validate,
    "plan": _plan,
    "run": _run,
    "status": _status,
    "result": _result,
    "cancel": _cancel,
    "importance": _importance,
    "front": _front,
    "compare": _compare,
    "report": _report,
    "optuna": _optuna,
    "extend": _extend,
}
