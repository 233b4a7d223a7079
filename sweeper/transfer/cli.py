"""`scalesweep transfer ...`, `scalesweep fit` and `scalesweep export`: the transfer from the command line.

    scalesweep transfer plan SPEC [--budget-hours H] [--prior DIR] [--json]
                                          price it before it runs (pilot, timing, runs, controls, verification;
                                          machine-hours, memory, smallest detectable saving); starts nothing
    scalesweep transfer run SPEC [--workdir DIR] [--resume] [--quiet]
                                          run (or resume) a transfer in this process; exit 0 when it succeeded,
                                          1 when it failed, 130 when it was cancelled
    scalesweep transfer extend SPEC --workdir DIR [--quiet]
                                          add seeds to a finished transfer (SPEC: its spec with the seeds added)
                                          and run only the new seeds' runs; exit status as for run
    scalesweep transfer status DIR [--json]
    scalesweep transfer cancel DIR [--grace S]
    scalesweep transfer records DIR --out FOLDER
                                          the transfer's raw records (plan, timing, runs, curves) as plain files
                                          that `scalesweep fit FOLDER` reads back without the MLflow store
    scalesweep transfer fits DIR [--against ARM] [--n-boot N] [--json]
                                          the time ratio at equal quality per rung, its line against size, the
                                          largest rung held out (pass/MISS) and the extrapolation to the paper's
                                          rungs; exit 2 when the fit is refused (fewer than 3 rungs), with why
    scalesweep fit DIR [--metric time_to_best|best_fd|endpoint_fd|steps_to_target|time_to_target|alignment]
                       [--form F] [--share P ...] [--n-boot N] [--json]
                                          fits with intervals, flags and the savings table of a transfer
                                          (alignment: fitted on 1 - alignment, for runs that carry it)
    scalesweep export DIR --rung RUNG [--format yaml|json] [--out FILE] [--from-sweep]
                                          the transferred hyperparameters for RUNG (DIR a transfer folder, or a
                                          sweep folder with --from-sweep: rules only, not verified)

Errors are one line on stderr, never a traceback: exit 2 for bad input (a spec that does not validate, an
unknown rung, metric or format, a folder in the wrong state), 1 when the driver itself failed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "run"]

_FORMATS = ("yaml", "json")


def add_commands(sub: Any) -> None:
    """Add `transfer`, `fit` and `export` to the top-level subparsers (argparse only: nothing heavy imported)."""
    from ..cli import add_cancel, add_plan, add_run_and_status  # the transfer job's driver is the sweeper's

    p = sub.add_parser("transfer", help="carry a sweep's chosen (K, gamma) to larger rungs beside the baselines")
    tsub = p.add_subparsers(dest="transfer_command", required=True)
    plan = add_plan(tsub, "transfer")
    plan.add_argument("--prior", metavar="DIR", help="a prior transfer's work folder or records folder: the "
                      "spread over seeds of its time ratios gives the smallest saving this plan's seeds can detect")
    add_run_and_status(tsub, "transfer")
    add_cancel(tsub, "transfer")
    e = tsub.add_parser("extend", help="add seeds to a finished transfer and run only the new seeds' runs")
    e.add_argument("spec", help="the transfer's spec with the seeds added (.yaml, .yml or .json)")
    e.add_argument("--workdir", required=True, help="the transfer's work folder")
    e.add_argument("--quiet", action="store_true", help="no progress lines, only the final table")
    r = tsub.add_parser("records", help="write a transfer's raw records (runs, curves, plan, timing) as plain files")
    r.add_argument("workdir", help="the transfer's work folder")
    r.add_argument("--out", required=True, help="folder for transfer_record.json, runs.csv and curves.csv")
    r.add_argument("--tracking-uri", help="MLflow tracking URI, when the store moved")
    f = tsub.add_parser("fits", help="the time ratio at equal quality against size: held-out rung, extrapolation")
    f.add_argument("workdir", help="the transfer's work folder, or a folder of its records (transfer records)")
    f.add_argument("--against", help="the baseline arm (default: muon where it ran, else the first baseline)")
    f.add_argument("--n-boot", type=int, help="seed-bootstrap replicates of the fit (default 2000; 0: residual only)")
    f.add_argument("--json", action="store_true", help="print the time_ratio section as JSON")
    f.add_argument("--tracking-uri", help="MLflow tracking URI, when the store moved")
    p.set_defaults(func=run)

    p = sub.add_parser("fit", help="scaling fits, intervals, flags and savings of a transfer")
    p.add_argument("workdir", help="the transfer's work folder, or a folder of its records (transfer records)")
    p.add_argument("--metric", help="time_to_best (default), best_fd, endpoint_fd, steps_to_target, "
                   "time_to_target or alignment (fitted on 1 - alignment at each run's last eval step; scenes-cnn "
                   "runs only); all of them with --json")
    p.add_argument("--form", help="A*N^-alpha or E+A*N^-alpha (default: A*N^-alpha for time, E+A*N^-alpha for FD)")
    p.add_argument("--share", nargs="*", default=[], help="parameters tied across arms, e.g. alpha E")
    p.add_argument("--n-boot", type=int, help="bootstrap replicates (default 500)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI, when the store moved")
    p.add_argument("--json", action="store_true", help="print the whole analysis as JSON")
    p.set_defaults(func=run)

    p = sub.add_parser("export", help="the transferred hyperparameters for a rung, as YAML or JSON")
    p.add_argument("workdir", help="a transfer's work folder (or a sweep's, with --from-sweep)")
    p.add_argument("--rung", required=True, help="target rung (scalesweep trial rungs: cpu-xs ... paper-15b)")
    p.add_argument("--format", default="yaml", help="yaml (default) or json")
    p.add_argument("--out", help="write here instead of stdout")
    p.add_argument("--from-sweep", action="store_true", help="DIR is a sweep: carry its choice by rules only")
    p.add_argument("--allow-losing", action="store_true",
                   help="export a choice that is worse than a baseline with confidence (refused without it)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI, when the store moved")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run `scalesweep transfer|fit|export`; returns the exit status (errors are worded by the CLI's dispatch)."""
    name = args.command if args.command != "transfer" else f"transfer {args.transfer_command}"
    return int(_COMMANDS[name](args))


def _run(args: argparse.Namespace) -> int:
    from ..cli import run_job_command
    from ._estimate import transfer_estimate
    from ._job import run_transfer
    from ._spec import default_transfer_workdir, load_transfer_spec

    return run_job_command(args, load_transfer_spec, run_transfer,
                           lambda spec: transfer_estimate(spec, measure=False), default_transfer_workdir)


def _plan(args: argparse.Namespace) -> int:
    from ..cli import budget_hours, print_document
    from ._estimate import prior_spread, transfer_estimate
    from ._spec import load_transfer_spec

    spec = load_transfer_spec(args.spec)
    hours = budget_hours(args.budget_hours)
    spread = prior_spread(args.prior) if args.prior else None
    return print_document(args, transfer_estimate(spec, budget_hours=hours, spread=spread))


def _extend(args: argparse.Namespace) -> int:
    from ..cli import EXIT_STATUS
    from ._extend import extend_transfer
    from ._spec import load_transfer_spec

    result = extend_transfer(load_transfer_spec(args.spec), args.workdir, show_progress=not args.quiet)
    if args.quiet:
        print(result.table())
    return EXIT_STATUS.get(result.state, 1)


def _status(args: argparse.Namespace) -> int:
    from ..cli import print_status
    from ._state import transfer_status

    status = transfer_status(args.workdir)

    def headline(driver: str) -> str:
        counts = ", ".join(f"{v} {k.lower()}" for k, v in (status.get("counts") or {}).items() if v)
        return (f"{status['transfer_id']}: {status['state']} (driver {driver}); {status['runs_planned']} runs "
                "planned" + (f"; {counts}" if counts else ""))

    return print_status(args, status, job="transfer", headline=headline, details=list)


def _cancel(args: argparse.Namespace) -> int:
    from ..cli import cancel_job
    from ._job import cancel_transfer

    return cancel_job(args, cancel_transfer, "transfer")


def _load(args: argparse.Namespace) -> Any:
    """The transfer in `args.workdir`: read from its records where the folder holds them, else from MLflow."""
    from ._reading import load_transfer_result
    from ._records import is_records_folder, read_transfer_records

    if is_records_folder(args.workdir):
        return read_transfer_records(args.workdir)
    return load_transfer_result(args.workdir, tracking_uri=args.tracking_uri)


def _records(args: argparse.Namespace) -> int:
    from ._records import write_transfer_records

    result = _load(args)
    paths = write_transfer_records(result, args.out)
    runs = len(result.runs) + len(result.tuning_runs) + len(result.verification_runs)
    print(f"wrote {', '.join(str(p) for p in paths)} ({result.transfer_id}: {result.state}, {runs} runs); "
          f"re-read with `scalesweep fit {args.out}`")
    return 0


def _fits(args: argparse.Namespace) -> int:
    from scaling import ScalingInputError

    from ._time_ratio import time_ratio_of

    if args.n_boot is not None and args.n_boot < 0:
        raise ScalingInputError(f"--n-boot: must be >= 0, got {args.n_boot}")
    doc = time_ratio_of(_load(args), against=args.against, n_boot=args.n_boot)
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        rows = doc.get("per_rung") or {}
        if rows:
            print(f"time ratio at equal quality, {doc['searched']} / {doc['against']} (steps to the target x per "
                  "step):")
        for rung, row in rows.items():
            print(f"  {rung:<10} {row['block_parameters']:>14,} block parameters  ratio {row['ratio_mean']:.3f} "
                  f"(n={len(row['seeds'])})")
        for rung, why in (doc.get("rungs_without_ratio") or {}).items():
            print(f"  {rung:<10} no ratio: {why}")
        for line in doc.get("lines") or []:
            print(line)
    if "error" in doc:
        raise ScalingInputError(doc["error"])
    return 0


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, fmt)


def _fit(args: argparse.Namespace) -> int:
    from scaling import ScalingError, ScalingInputError

    from ._fits import ALIGNMENT_FIT
    from ._result import FIT_METRICS

    if args.metric is not None and args.metric not in FIT_METRICS:
        raise ScalingInputError(f"--metric: unknown metric {args.metric!r}; allowed: {list(FIT_METRICS)}")
    if args.n_boot is not None and args.n_boot < 0:
        raise ScalingInputError(f"--n-boot: must be >= 0, got {args.n_boot}")
    result = _load(args)
    if args.metric is not None and args.metric not in result.fit_metrics():  # alignment on runs without it
        try:
            result.fits(args.metric)
        except ScalingInputError as exc:  # the refusal, naming the metrics these runs can fit
            raise ScalingInputError(f"--{exc}") from None
    extra: dict[str, Any] = {} if args.n_boot is None else {"n_boot": args.n_boot}
    if args.json:
        doc = result.analysis(**extra)
        if args.form or args.share:  # the asked form replaces the default one of that metric
            metric = args.metric or "time_to_best"
            doc["fits"][metric] = _fit_json(result.fits(metric, form=args.form, share=args.share, **extra))
        print(json.dumps(doc, indent=2, allow_nan=False))
        return 0
    print(result.table())
    undertrained = result.undertrained_rungs()
    metrics = [args.metric] if args.metric else list(result.fit_metrics())
    for metric in metrics:
        print(f"\n{metric} vs parameter count:")
        try:
            fit = result.fits(metric, form=args.form, share=args.share, **extra)
        except ScalingInputError as exc:
            if args.form or args.share:
                raise  # the user's form or share is wrong: say so and exit 2
            print(f"  no fit: {exc}")
            continue
        except ScalingError as exc:
            print(f"  no fit: {exc}")
            continue
        if metric == "alignment":
            print(f"  fitted on {ALIGNMENT_FIT}")
        share = f", shared {list(fit.share)}" if fit.share else ""
        print(f"  form {fit.form}{share}; {fit.level:.0%} intervals ({fit.bootstrap} bootstrap, "
              f"{fit.n_boot_ok} replicates); loss {fit.loss_reason or fit.loss_function}")
        for arm in fit.arms:
            params = ", ".join(f"{p}={_num(v)} [{_num(fit.intervals[arm][p][0])}, {_num(fit.intervals[arm][p][1])}]"
                               for p, v in fit.params[arm].items())
            loo, carry = fit.loo_error.get(arm), fit.loo_baseline_error.get(arm)
            print(f"  {arm:<9} {params}; leave-largest-out error {_num(loo, '.1%')} (carry forward "
                  f"{_num(carry, '.1%')})")
        for flag in sorted(fit.flags):
            print(f"  flag {flag}: {fit.flag_details.get(flag, '')}")
        if metric in ("steps_to_target", "time_to_target"):
            report = result.targets()
            if report["targets_differ"]:
                print(f"  flag targets_differ: fitted across rungs whose targets differ ({report['target_values']}): "
                      "the exponent mixes model size with target difficulty")
        fitted = {s for a in fit.arms for s in fit.sizes[a]}
        over = [r for r in undertrained if float(result.parameters(r)) in fitted]
        if over:
            print(f"  flag undertrained: fitted over rungs whose runs were still improving fast at their end: {over}")
        if fit.suggestion:
            print(f"  suggestion: {fit.suggestion}")
    return 0


def _fit_json(fit: Any) -> Any:
    from ._result import _clean, _fit_doc

    return _clean(_fit_doc(fit))


def _export(args: argparse.Namespace) -> int:
    from scaling import ScalingInputError

    from ._reading import export_from_sweep

    if args.format not in _FORMATS:
        raise ScalingInputError(f"--format: unknown format {args.format!r}; allowed: {list(_FORMATS)}")
    from trials.models import check_rung

    try:
        check_rung(args.rung)
    except ValueError as exc:
        raise ScalingInputError(f"--rung: {exc}") from None
    if args.from_sweep:
        export = export_from_sweep(args.workdir, args.rung, tracking_uri=args.tracking_uri,
                                   allow_losing=args.allow_losing)
    else:
        export = _load(args).export(
            args.rung, allow_losing=args.allow_losing)
    text = export.to_yaml() if args.format == "yaml" else export.to_json() + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        verified = ", ".join(f"{a} verified={e.verified_at_target}" for a, e in export.arms.items())
        print(f"wrote {args.out} ({args.rung}: {verified})")
    else:
        sys.stdout.write(text)
    return 0


_COMMANDS: dict[str, Any] = {
    "transfer plan": _plan,
    "transfer run": _run,
    "transfer extend": _extend,
    "transfer status": _status,
    "transfer cancel": _cancel,
    "transfer records": _records,
    "transfer fits": _fits,
    "fit": _fit,
    "export": _export,
}
