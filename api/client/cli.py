"""`scalesweep remote ...`: the service from the command line, through `api.client`.

    scalesweep remote submit SPEC [--follow] [--idempotency-key KEY]    a sweep; --follow shows live progress
    scalesweep remote list [--transfers] [--state S] [--limit N] [--json]   sweeps (or transfers), newest first
    scalesweep remote status ID [--json]                                 a sweep (sw-...) or transfer (tr-...)
    scalesweep remote trials SWEEP_ID [--json]                           each trial: state, objective, error
    scalesweep remote best SWEEP_ID [--json]                             the chosen point and its rank table
    scalesweep remote cancel ID
    scalesweep remote resume ID [--follow]                               a FAILED or CANCELLED sweep or transfer
    scalesweep remote transfer SWEEP_ID --rungs R [R ...] [--arms A ...] [--horizon-factor F] [--seeds S ...]
                               [--timing-steps N] [--timing-warmup N] [--follow]
    scalesweep remote fits TRANSFER_ID [--json]
    scalesweep remote export (TRANSFER_ID | --sweep SWEEP_ID) [--rung R] [--format yaml|json] [--out FILE]
                             [--allow-losing]                    a choice worse than a baseline needs the flag
    scalesweep remote importance SWEEP_ID [--evaluator fanova|ped-anova] [--n-boot N] [--json]
    scalesweep remote front SWEEP_ID [--json]                           the quality-cost front
    scalesweep remote compare SWEEP_ID OTHER_ID [--json]                two sweeps, OTHER - SWEEP where seeds match
    scalesweep remote optuna SWEEP_ID                                   the sweep as a study in the service's storage
    scalesweep remote extend SWEEP_ID SPEC [--follow]                   more seeds, grid values or baselines
    scalesweep remote extend-transfer TRANSFER_ID --seeds S [S ...] [--follow]
                                                               a finished transfer's seeds and the new ones

The server is `--server` (before or after the subcommand) or $SCALESWEEP_SERVER (default http://127.0.0.1:8000);
the bearer token is $SCALESWEEP_API_TOKEN. `fits` prints tables (--json: the whole document). Errors are one line
on stderr, never a traceback: exit 2 when the service refused the request or could not be reached; a followed job
exits 0 only when it SUCCEEDED (1 FAILED, 130 CANCELLED).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._progress import counts_line, sweep_line, transfer_line, watch_sweep, watch_transfer
from ._settings import ClientSettings

if TYPE_CHECKING:
    from ._client import ScalesweepClient

__all__ = ["add_arguments", "run"]

_EXIT = {"SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 130}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `remote` subcommands (argparse only: nothing heavy is imported to build them)."""
    parser.add_argument("--server", default=ClientSettings.from_env().server,
                        help="the service's base URL (default $SCALESWEEP_SERVER or http://127.0.0.1:8000)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer")
    sub = parser.add_subparsers(dest="remote_command", required=True)

    p = sub.add_parser("submit", help="submit a sweep spec (YAML/JSON)")
    p.add_argument("spec", help="sweep spec file")
    p.add_argument("--idempotency-key", help="retries with the same key return the first sweep")
    _follow_options(p)

    p = sub.add_parser("list", help="sweeps (or --transfers), newest first, as a table")
    p.add_argument("--transfers", action="store_true", help="list transfers instead of sweeps")
    p.add_argument("--state", choices=["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"])
    p.add_argument("--limit", type=int, default=50, help="at most this many (1-200; default 50)")
    p.add_argument("--json", action="store_true", help="print the page as JSON")

    # One job (or a sweep) read by id, printed as a table or with --json as the resource.
    for name, ident, what, as_json in (
        ("status", "id", "state and progress of a sweep (sw-...) or a transfer (tr-...)", "the resource"),
        ("trials", "sweep_id", "a sweep's trials: key, state, attempt, objective, error", "the trials"),
        ("best", "sweep_id", "a sweep's chosen point, with its rank table", "the whole selection document"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument(ident)
        p.add_argument("--json", action="store_true", help=f"print {as_json} as JSON")

    p = sub.add_parser("cancel", help="cancel a sweep (sw-...) or a transfer (tr-...)")
    p.add_argument("id")

    p = sub.add_parser("resume", help="resume a FAILED or CANCELLED sweep (sw-...) or transfer (tr-...)")
    p.add_argument("id")
    _follow_options(p)

    _transfer_commands(sub)
    _sweep_analysis_commands(sub)

    for command in sub.choices.values():  # `remote status ID --server URL` as well as `remote --server URL status`
        command.add_argument("--server", default=argparse.SUPPRESS, help="the service's base URL")
        command.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help="seconds to wait for each answer")


def _transfer_commands(sub: Any) -> None:
    """`remote transfer`, `fits` and `export`."""
    p = sub.add_parser("transfer", help="transfer a SUCCEEDED sweep's choice to larger rungs")
    p.add_argument("sweep_id")
    p.add_argument("--rungs", nargs="+", required=True, help="rungs to run at, e.g. cpu-s cpu-m")
    p.add_argument("--arms", nargs="+", help="arms (default: all of the transfer spec's)")
    p.add_argument("--horizon-factor", type=float, help="training steps = factor x the sweep's (default 2)")
    p.add_argument("--seeds", nargs="+", type=int, help="seeds (default: the sweep's)")
    p.add_argument("--timing-steps", type=int, help="timed steps per arm and rung in the timing stage before the "
                   "runs, 0 to 10,000 (default 20; 0: no timing, no time saving)")
    p.add_argument("--timing-warmup", type=int, help="untimed steps before them, 1 to 1,000 (default 5)")
    p.add_argument("--idempotency-key", help="retries with the same key return the first transfer")
    _follow_options(p)

    p = sub.add_parser("fits", help="time to best, savings and scaling fits of a transfer")
    p.add_argument("transfer_id")
    p.add_argument("--json", action="store_true", help="print the whole fits document as JSON")

    p = sub.add_parser("export", help="the transferred hyperparameters for a rung, as YAML or JSON")
    p.add_argument("transfer_id", nargs="?", help="a transfer (tr-...); or --sweep")
    p.add_argument("--sweep", dest="sweep_id", help="export from a SUCCEEDED sweep alone (needs --rung)")
    p.add_argument("--rung", help="target rung (default for a transfer: its largest)")
    p.add_argument("--format", choices=["yaml", "json"], default="yaml")
    p.add_argument("--out", help="write to this file instead of stdout")
    p.add_argument("--allow-losing", action="store_true",
                   help="export a choice that is worse than a baseline with confidence (refused without it)")


def _sweep_analysis_commands(sub: Any) -> None:
    """`remote importance`, `front`, `compare`, `optuna`, `extend` and `extend-transfer`."""
    p = sub.add_parser("importance", help="which searched parameter mattered in a sweep")
    p.add_argument("sweep_id")
    p.add_argument("--evaluator", choices=["fanova", "ped-anova"], default="fanova")
    p.add_argument("--n-boot", type=int, default=100, help="paired bootstrap resamples of the seeds")
    p.add_argument("--json", action="store_true", help="print the importance document as JSON")
    p = sub.add_parser("front", help="a sweep's quality-cost front")
    p.add_argument("sweep_id")
    p.add_argument("--json", action="store_true", help="print the front document as JSON")
    p = sub.add_parser("compare", help="two sweeps side by side (B - A, paired where seeds match)")
    p.add_argument("sweep_id")
    p.add_argument("other_id")
    p.add_argument("--json", action="store_true", help="print the comparison document as JSON")
    p = sub.add_parser("optuna", help="write a sweep to the service's Optuna storage (for optuna-dashboard)")
    p.add_argument("sweep_id")
    p = sub.add_parser("extend", help="add seeds, grid values, budget or baselines to a finished sweep")
    p.add_argument("sweep_id")
    p.add_argument("spec", help="the sweep's spec with the additions")
    _follow_options(p)
    p = sub.add_parser("extend-transfer", help="add seeds to a finished transfer: only the new seeds' runs run")
    p.add_argument("transfer_id")
    p.add_argument("--seeds", type=int, nargs="+", required=True,
                   help="the transfer's seeds (all kept) and the new ones, e.g. 0 1 2")
    _follow_options(p)


def _follow_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--follow", action="store_true", help="show live progress until it ends; exit 0 only on success")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between polls with --follow")


def run(args: argparse.Namespace) -> int:
    """Dispatch `scalesweep remote <command>`; returns the exit status."""
    from ._client import DEFAULT_SERVER, ScalesweepClient

    server = args.server or DEFAULT_SERVER
    _check_server(server)  # an ApiError, like every refusal: the CLI's dispatch words it in one line, exit 2
    with ScalesweepClient(server, token=ClientSettings.from_env().api_token or None,
                          timeout=args.timeout) as client:
        return int(_COMMANDS[args.remote_command](client, args))


def _check_server(server: str) -> None:
    """A server URL httpx can use, else one line naming where it came from (httpx's own error is a traceback)."""
    import httpx

    from ._client import ApiError

    try:
        url = httpx.URL(server)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise ApiError("Bad Server URL", None, f"--server / SCALESWEEP_SERVER {server!r} is not a URL: {exc}") \
            from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ApiError("Bad Server URL", None,
                       f"--server / SCALESWEEP_SERVER {server!r} is not an http(s)://host[:port] URL")


# --- display -------------------------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[Any]]) -> str:
    """Plain aligned columns (numbers right-aligned), one line per row."""
    cells = [[_fmt(v) if v is not None else "-" for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in rows) and bool(rows)
               for i in range(len(header))]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in cells)])


# --- commands ------------------------------------------------------------------------------------------------


def _is_transfer(job_id: str) -> bool:
    return job_id.startswith("tr-")


def _submit(client: ScalesweepClient, args: argparse.Namespace) -> int:
    sweep = client.submit_sweep(args.spec, idempotency_key=args.idempotency_key)
    print(f"submitted {sweep.id} ({sweep.name}): {client.base_url}/v1/sweeps/{sweep.id}")
    if not args.follow:
        return 0
    final = watch_sweep(client, sweep.id, args.interval)
    if final.state == "SUCCEEDED":
        best = client.sweep_best(sweep.id)
        pair = ", ".join(f"{k}={v}" for k, v in (best.get("best") or {}).items())
        print(f"chosen: {pair}" if pair else "chosen: (none)")
        _print_warnings(best)
    elif final.error:
        print(f"{final.id} {final.state}: {' '.join(final.error.split())[:300]}", file=sys.stderr)
    return _EXIT.get(final.state, 1)


def _status(client: ScalesweepClient, args: argparse.Namespace) -> int:
    job = client.get_transfer(args.id) if _is_transfer(args.id) else client.get_sweep(args.id)
    if args.json:
        print(job.model_dump_json(indent=2))
        return 0
    print(transfer_line(job) if _is_transfer(args.id) else sweep_line(job))
    if job.error:
        print(f"error: {' '.join(job.error.split())[:500]}")
    return 0


def _cancel(client: ScalesweepClient, args: argparse.Namespace) -> int:
    job = client.cancel_transfer(args.id) if _is_transfer(args.id) else client.cancel_sweep(args.id)
    print(f"{job.id}: {job.state}")
    return 0


def _resume(client: ScalesweepClient, args: argparse.Namespace) -> int:
    job = client.resume_transfer(args.id) if _is_transfer(args.id) else client.resume_sweep(args.id)
    print(f"{job.id}: {job.state} (resumed)")
    if not args.follow:
        return 0
    final = (watch_transfer if _is_transfer(args.id) else watch_sweep)(client, job.id, args.interval)
    if final.state != "SUCCEEDED" and final.error:
        print(f"{final.id} {final.state}: {' '.join(final.error.split())[:300]}", file=sys.stderr)
    return _EXIT.get(final.state, 1)


def _list(client: ScalesweepClient, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 200:
        from ._client import ApiError

        raise ApiError("Bad Arguments", None, f"--limit must be in [1, 200], got {args.limit}")
    page: Any = (client.list_transfers(state=args.state, limit=args.limit) if args.transfers
                 else client.list_sweeps(state=args.state, limit=args.limit))
    if args.json:
        print(page.model_dump_json(indent=2))
        return 0
    noun = "runs" if args.transfers else "trials"
    rows = [[j.id, j.state, j.name, j.owner, counts_line(j.progress, noun),
             j.created_at.isoformat(timespec="seconds")] for j in page.data]
    header = ["id", "state", "name", "owner", "progress", "created"]
    if args.transfers:
        header.insert(1, "sweep")
        for row, j in zip(rows, page.data, strict=True):
            row.insert(1, j.sweep_id)
    print(_table(header, rows) if rows else f"no {'transfers' if args.transfers else 'sweeps'}")
    if page.next_cursor:
        print(f"(more: --limit above {args.limit})")
    return 0


def _trials(client: ScalesweepClient, args: argparse.Namespace) -> int:
    trials = client.sweep_trials(args.sweep_id)
    if args.json:
        print(trials.model_dump_json(indent=2))
        return 0
    rows = []
    for t in sorted(trials.data, key=lambda t: (t.role != "search", t.key, t.attempt)):
        last = t.fd[max(t.fd)] if t.fd else None
        error = " ".join((t.error or "").split())[:80] or None
        rows.append([t.key, t.role, t.state, t.attempt, t.objective, last, error])
    print(_table(["trial", "role", "state", "attempt", "objective", "last FD", "error"], rows)
          if rows else f"{args.sweep_id}: no trials yet")
    return 0


def _best(client: ScalesweepClient, args: argparse.Namespace) -> int:
    doc = client.sweep_best(args.sweep_id)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    pair = ", ".join(f"{k}={v}" for k, v in (doc.get("best") or {}).items())
    print(f"{args.sweep_id} {doc.get('state', '')}: chosen {pair or '(none)'}")
    _print_warnings(doc)
    rule = (doc.get("selection") or {}).get("rule")
    if rule:
        print(f"rule: {' '.join(str(rule).split())}")
    points = [p for p in doc.get("points") or [] if isinstance(p, dict)]
    points.sort(key=lambda p: (p.get("rank") is None, p.get("rank") or 0, str(p.get("point_key"))))
    if points:
        keys = [k for k in ("rank", "point_key", "objective", "seed_std", "p_best", "status") if k in points[0]]
        print(_table(keys, [[_cell(p, k) for k in keys] for p in points]))
    baselines = [b for b in doc.get("baselines") or [] if isinstance(b, dict)]
    if baselines:
        print("baselines:")
        print(_table(["arm", "objective", "seed_std", "status"],
                     [[b.get("point_key"), b.get("objective"), b.get("seed_std"), b.get("status")] for b in baselines]))
    return 0


def _print_warnings(best: dict[str, Any]) -> None:
    """Right under the chosen line: a choice worse than every baseline on the mean (with the per-seed count,
    significant or not), or worse than a baseline with confidence (`GET /v1/sweeps/{id}/best`)."""
    for warning in [best.get("choice_warning"), *(best.get("warnings") or [])]:
        if warning:
            print(f"WARNING: {warning}")


def _cell(point: dict[str, Any], key: str) -> Any:
    """A rank-table cell; P(best) as a probability only from 5 seeds (`scaling.claims.p_best_text`)."""
    if key == "p_best" and point.get(key) is not None:
        from scaling.claims import p_best_text

        return p_best_text(point[key], len(point.get("seed_objectives") or {}))
    return point.get(key)


def _transfer(client: ScalesweepClient, args: argparse.Namespace) -> int:
    from ._client import ApiError

    # Only what was given (the service fills in the rest), checked against the spec's own bounds before anything
    # is sent: the service would look the sweep up first and name that instead.
    timing = {k: v for k, v in (("steps", args.timing_steps), ("warmup", args.timing_warmup)) if v is not None}
    if timing:
        from pydantic import ValidationError

        from sweeper.transfer import TimingSpec

        try:
            TimingSpec.model_validate(timing)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ApiError("Bad Arguments", None, f"--timing-{err['loc'][0]}: {err['msg']} (given {err['input']})"
                           ) from None
    transfer = client.submit_transfer(args.sweep_id, args.rungs, arms=args.arms, horizon_factor=args.horizon_factor,
                                      seeds=args.seeds, idempotency_key=args.idempotency_key,
                                      **({"timing": timing} if timing else {}))
    print(f"submitted {transfer.id} ({transfer.name}): {client.base_url}/v1/transfers/{transfer.id}")
    if not args.follow:
        return 0
    final = watch_transfer(client, transfer.id, args.interval)
    if final.state != "SUCCEEDED" and final.error:
        print(f"{final.id} {final.state}: {' '.join(final.error.split())[:300]}", file=sys.stderr)
    elif final.state == "SUCCEEDED":
        print(f"fits: scalesweep remote fits {final.id}")
    return _EXIT.get(final.state, 1)


def _fits(client: ScalesweepClient, args: argparse.Namespace) -> int:
    doc = client.transfer_fits(args.transfer_id)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
        return 0
    print(_fits_tables(doc))
    return 0


def _fits_tables(doc: dict[str, Any]) -> str:
    """The fits document as tables: the study, the rungs, the savings and one row per fitted arm with each
    parameter's interval. The document's structure is the scaling package's (`TransferResult.analysis()`)."""
    out = [f"transfer {doc.get('transfer_id', '')} {doc.get('state', '')}: chosen "
           + ", ".join(f"{k}={v}" for k, v in (doc.get("chosen") or {}).items())]
    details = [f"{k} {_fmt(doc[k])}" for k in ("metric_name", "fd_samples", "horizon", "seeds") if doc.get(k)]
    if details:
        out.append("; ".join(details))
    rungs = doc.get("rungs") or {}
    if isinstance(rungs, dict) and rungs:
        basis = doc.get("size_basis")
        out += ["", _table(["rung", "parameters"], [[r, n] for r, n in rungs.items()])]
        if basis:
            out.append(f"size basis: {basis}")
    savings = doc.get("savings") or {}
    rows = [[rung, arm, s.get("mean_pct"), s.get("std_pct"), s.get("n")]
            for rung, per in savings.items() if isinstance(per, dict)
            for arm, s in per.items() if isinstance(s, dict)]
    if rows:
        out += ["", "time-to-best saving of the chosen pair against each arm (paired over seeds):",
                _table(["rung", "vs arm", "mean %", "std %", "n"], rows)]
    fits = doc.get("fits") or {}
    rows, failed = [], []
    for metric, fit in fits.items():
        if not isinstance(fit, dict):
            continue
        if "error" in fit and "arms" not in fit:
            failed.append(f"{metric}: {' '.join(str(fit['error']).split())}")
            continue
        for arm, a in (fit.get("arms") or {}).items():
            params = a.get("params") or {}
            intervals = a.get("intervals") or {}
            text = "; ".join(f"{p}={_fmt(v)}" + (f" {_fmt(intervals[p])}" if p in intervals else "")
                             for p, v in params.items())
            rows.append([metric, fit.get("form", ""), arm, text, ",".join(fit.get("flags") or []) or None])
    if rows:
        out += ["", "scaling fits (parameter = value [interval]):",
                _table(["metric", "form", "arm", "parameters", "flags"], rows)]
    out += [f"no fit for {line}" for line in failed]
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"
    return str(value)


def _export(client: ScalesweepClient, args: argparse.Namespace) -> int:
    from ._client import ApiError

    if bool(args.transfer_id) == bool(args.sweep_id):
        raise ApiError("Bad Arguments", None, "give a TRANSFER_ID or --sweep SWEEP_ID (one of them)")
    if args.sweep_id:
        if not args.rung:
            raise ApiError("Bad Arguments", None, "--sweep needs --rung (the size to carry the choice to)")
        text = client.export_sweep(args.sweep_id, args.rung, format=args.format, allow_losing=args.allow_losing)
    else:
        text = client.export(args.transfer_id, rung=args.rung, format=args.format, allow_losing=args.allow_losing)
    if args.out:
        Path(args.out).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _view(args: argparse.Namespace, doc: dict[str, Any], kind: Any) -> int:
    """A sweep view's document as JSON under --json, else its text table (`kind.from_dict(doc).lines()`)."""
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(kind.from_dict(doc).lines()))
    return 0


def _importance(client: ScalesweepClient, args: argparse.Namespace) -> int:
    from sweeper.analysis import SweepImportance

    return _view(args, client.sweep_importance(args.sweep_id, args.evaluator, args.n_boot), SweepImportance)


def _front(client: ScalesweepClient, args: argparse.Namespace) -> int:
    from sweeper.analysis import QualityCostFront

    return _view(args, client.sweep_front(args.sweep_id), QualityCostFront)


def _compare(client: ScalesweepClient, args: argparse.Namespace) -> int:
    from sweeper.analysis import SweepComparison

    return _view(args, client.compare_sweeps(args.sweep_id, args.other_id), SweepComparison)


def _optuna(client: ScalesweepClient, args: argparse.Namespace) -> int:
    doc = client.write_optuna(args.sweep_id)
    print(f"wrote study {doc['study_name']!r} ({doc['trials']} trials) to {doc['storage']}\n"
          f"open it with: {doc['open_with']}")
    return 0


def _extend(client: ScalesweepClient, args: argparse.Namespace) -> int:
    doc = client.extend_sweep(args.sweep_id, args.spec)
    return _extended(f"extending {args.sweep_id}: {'; '.join(doc['added'])}", args,
                     lambda: watch_sweep(client, args.sweep_id, args.interval))


def _extend_transfer(client: ScalesweepClient, args: argparse.Namespace) -> int:
    doc = client.extend_transfer(args.transfer_id, args.seeds)
    return _extended(f"extending {args.transfer_id}: seeds {doc['added']} (one more look for its claims)", args,
                     lambda: watch_transfer(client, args.transfer_id, args.interval))


def _extended(line: str, args: argparse.Namespace, watch: Callable[[], Any]) -> int:
    """An extension's line, then (with --follow) the job followed to its end: the exit status of its state."""
    print(line)
    return _EXIT.get(watch().state, 1) if args.follow else 0


_COMMANDS: dict[str, Callable[[ScalesweepClient, argparse.Namespace], int]] = {
    "submit": _submit,
    "list": _list,
    "status": _status,
    "trials": _trials,
    "best": _best,
    "cancel": _cancel,
    "resume": _resume,
    "transfer": _transfer,
    "fits": _fits,
    "export": _export,
    "importance": _importance,
    "front": _front,
    "compare": _compare,
    "optuna": _optuna,
    "extend": _extend,
    "extend-transfer": _extend_transfer,
}
