"""The `scalesweep` command: one entry point whose subcommands dispatch to the packages.

Each package keeps its own command-line module; this file only wires them, imports lazily (torch, Ray and MLflow
are slow to import) and turns expected errors into one-line messages instead of tracebacks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sweeper


def _cmd_optimizers(args: argparse.Namespace) -> int:
    from trials.optim import DEFAULT_LR, OptimizerConfig, list_optimizers

    for name in list_optimizers():
        cfg = OptimizerConfig(name=name)
        extra = f", K={cfg.refresh_every}, gamma={cfg.gamma}" if name == "periodic" else ""
        extra += f", a null step after every {cfg.stretch}" if cfg.stretch is not None else ""
        print(f"{name:14s} lr={DEFAULT_LR[name]:g}{extra}, aux AdamW lr={cfg.aux_lr:g}")
    return 0


def _cmd_rungs(args: argparse.Namespace) -> int:
    from trials.models import RUNGS, build_model, count_parameters

    print(f"{'rung':11s} {'width':>5s} {'depth':>5s} {'heads':>5s} {'parameters':>14s} {'Muon group':>14s}  mirrors")
    for name, rung in RUNGS.items():
        c, count = rung.config, count_parameters(build_model(name, device="meta"))
        print(f"{name:11s} {c.width:5d} {c.depth:5d} {c.heads:5d} {count.total:14,d} {count.block_matrix:14,d}  "
              f"{rung.mirrors}")
    return 0


def _load_mapping(path: str) -> dict:
    """A YAML or JSON file holding one mapping (one line naming the file and where when it is not one)."""
    from trials.core import read_mapping

    return read_mapping(path, what="a mapping of config fields")


def _set_path(config: dict, dotted: str, raw: str) -> None:
    """`optimizer.refresh_every=4` -> config["optimizer"]["refresh_every"] = 4 (value parsed as YAML)."""
    import yaml

    keys = dotted.split(".")
    node = config
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = yaml.safe_load(raw)


def apply_override(config: dict, item: str, option: str = "--set") -> None:
    """Apply one `--set` item (`key.sub=value`) to a config mapping; ValueError naming `option` when it has no `=`."""
    if "=" not in item:
        raise ValueError(f"{option} expects key=value, got {item!r}")
    _set_path(config, *item.split("=", 1))


def _cmd_trial(args: argparse.Namespace) -> int:
    import json

    from trials import TrialConfig, run_trial

    config = _load_mapping(args.config) if args.config else {}
    for item in args.set or []:
        apply_override(config, item)
    cfg = TrialConfig.model_validate(config)  # a ValidationError is worded by dispatch: "invalid trial config: ..."
    result = run_trial(cfg, show_progress=not args.json)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0 if result.status == "SUCCEEDED" else 1
    print(f"status {result.status}; FD on {result.metric_name} features, {result.fd_samples} samples")
    print("| step | FD | val loss | effective time (s) |\n|---|---|---|---|")
    for step in sorted(result.fd):
        print(f"| {step} | {result.fd[step]:.2f} | {result.val_loss[step]:.4f} | {result.effective_time_s[step]:.1f} |")
    if result.objective is not None:
        print(f"objective (mean eval FD) {result.objective:.2f}; best {result.best_fd:.2f} at step {result.best_step} "
              f"({result.time_to_best_s:.1f} s); endpoint {result.endpoint_fd:.2f}; "
              f"optimizer time {result.optimizer_time_s:.1f} s")
    if result.run_id:
        print(f"MLflow run {result.run_id}")
    return 0 if result.status == "SUCCEEDED" else 1


def _cmd_serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from trials.core import validation_error_message

    try:
        from api import Settings

        settings = Settings()  # type: ignore[call-arg]
    except ValidationError as exc:  # each field named by the variable that set it
        raise ValueError(validation_error_message(
            exc, "settings", field=lambda loc: "SCALESWEEP_" + "_".join(map(str, loc)).upper())) from None
    from api import forget_secret_env

    # Read once: from here on the token and database URL are in `settings` only, not in this process's environment
    # (nor in /proc/<pid>/environ, which a trainer of the same user could read).
    forget_secret_env()
    import uvicorn

    from api.service import LeaderError, create_app

    try:
        app = create_app(settings)
    except LeaderError as exc:  # another service runs on this work folder: its pid and host, in one line
        raise ValueError(str(exc)) from None
    except Exception as exc:  # the database or MLflow store refused us: say which, in one line
        first = settings.redact((str(exc).strip().splitlines() or [""])[0])[:300]
        raise ValueError(f"could not start the service ({type(exc).__name__}: {first}); check "
                         f"SCALESWEEP_DATABASE_URL ({settings.redact(settings.db_url)}) and "
                         f"SCALESWEEP_MLFLOW_TRACKING_URI ({settings.redact(settings.tracking_uri)})") from None
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _cmd_sweep(args: argparse.Namespace) -> int:
    from sweeper.cli import run

    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalesweep",
        description="Hyperparameter sweeps and scaling studies for Periodic Row-wise Muon on diffusion transformers.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("optimizers", help="list the optimizer arms and their default hyperparameters")
    p.set_defaults(func=_cmd_optimizers)
    p = sub.add_parser("rungs", help="list the model rungs: shape, parameters, the Muon group, the paper size mirrored")
    p.set_defaults(func=_cmd_rungs)

    p = sub.add_parser("trial", help="train and score one trial from a YAML/JSON config (fields: trials.TrialConfig)")
    p.add_argument("config", nargs="?", help="config file; omitted = all defaults (cpu-xs, periodic K=3, 1800 steps)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a field, e.g. optimizer.gamma=0.25")
    p.add_argument("--json", action="store_true", help="print the result as JSON (no progress bar)")
    p.set_defaults(func=_cmd_trial, error_subject="trial config")

    p = sub.add_parser("serve", help="start the REST service (settings from SCALESWEEP_* environment variables)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=_cmd_serve)

    from sweeper.cli import add_arguments  # argparse only: the sweep machinery is imported when a command runs

    p = sub.add_parser("sweep", help="run, watch, cancel and read K x gamma sweeps (Ray Tune + Optuna, into MLflow)")
    add_arguments(p)
    p.set_defaults(func=_cmd_sweep)

    import api.client.cli

    p = sub.add_parser("remote", help="talk to a running service: submit, status, cancel, transfer, fits, export")
    api.client.cli.add_arguments(p)
    p.set_defaults(func=api.client.cli.run)

    import api.demo

    p = sub.add_parser("demo", help="the whole study on embedded defaults: service, sweep, transfer, fits, report")
    api.demo.add_arguments(p)
    p.set_defaults(func=api.demo.run)

    from sweeper.transfer.cli import add_commands  # transfer, fit, export (argparse only)

    add_commands(sub)
    return parser


# The module a missing extra shows up as, and the extra that installs it (pyproject.toml).
_EXTRA_OF = {
    "ray": "sweep", "optuna": "sweep", "mlflow": "sweep", "tqdm": "sweep", "threadpoolctl": "sweep",
    "fastapi": "service", "fastapi_offline": "service", "uvicorn": "service", "httpx": "service",
    "sqlalchemy": "service", "alembic": "service",
    "matplotlib": "figures",
}


def _label(args: argparse.Namespace) -> str:
    """'scalesweep sweep run', 'scalesweep remote status', 'scalesweep fit': the command as the user typed it."""
    sub = getattr(args, f"{args.command}_command", None)
    return " ".join(("scalesweep", args.command, *([sub] if sub else [])))


def dispatch(label: str, command: Callable[[], int], what: str | None = None) -> int:
    """Run one subcommand; every failure is one line on stderr, never a traceback.

    Exit 2 for bad input, a job in the wrong state, a refused request or a missing extra (the project's own
    errors, `ValueError`, `OSError`); exit 1 when a job's driver broke down mid-run (`JobFailedError`: recorded as
    FAILED, resumable) or on an unexpected failure (Ray, MLflow: details are in their logs); 130 on Ctrl-C. A
    pydantic error is worded as 'invalid <what>: field: message; ...'."""
    try:
        return int(command())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as exc:
        extra = _EXTRA_OF.get((exc.name or "").partition(".")[0])
        if extra is None:
            print(f"{label}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        print(f"{label}: error: {exc.name} is not installed; this command needs the {extra!r} extra: "
              f"pip install 'scalesweep[{extra}]'", file=sys.stderr)
        return 2
    except Exception as exc:
        from pydantic import ValidationError

        from trials.core import JobFailedError, ScalesweepError, validation_error_message, without_credentials

        if isinstance(exc, ValidationError):
            message, code = validation_error_message(exc, what), 2
        else:
            message = " ".join(str(exc).split()) or type(exc).__name__
            expected = isinstance(exc, ScalesweepError | ValueError | OSError)
            code = 1 if isinstance(exc, JobFailedError) or not expected else 2
            if not expected:
                message = f"{type(exc).__name__}: {message}"
        # A driver's error line is its log (driver.log, `ray job logs`): a URI it quotes (MLflow's "API request to
        # http://user:password@host/... failed") is shown without its user information (docs/security.md).
        print(f"{label}: error: {without_credentials(message)}", file=sys.stderr)
        return code


def _job_figures() -> sweeper.FigureHook:
    from dashboards import JobFigures  # matplotlib: imported only when a finished job draws

    return JobFigures()


def _register_figures() -> None:
    """A sweep or transfer driver run from here (the CLI, or the service's drivers, which are CLI processes) draws
    its figures and stored report with `dashboards`, through the sweeper's figure hook (docs/design.md)."""
    import sweeper

    sweeper.set_figure_hook(_job_figures)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    label = _label(args)
    _register_figures()
    return dispatch(label, lambda: args.func(args), getattr(args, "error_subject", None))


if __name__ == "__main__":
    sys.exit(main())
