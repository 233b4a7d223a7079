"""A trainer's command line: the placeholders a command template may use and the one validated type every spec
that declares a command uses (pydantic and the standard library only, so specs validate without torch)."""

from __future__ import annotations

import shlex
import string
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

__all__ = ["PLACEHOLDERS", "CommandLine"]

PLACEHOLDERS = (
    "optimizer",
    "K",
    "gamma",
    "lr",
    "aux_lr",
    "weight_decay",
    "momentum",
    "rung",
    "steps",
    "seed",
    "batch_size",
    "eval_steps",
    "progress_file",
    "config_file",
    "run_id",
    "tracking_uri",
    # the trial's workers (execution.workers_per_trial) and a rendezvous on the node Ray reserved them on, for
    # `torchrun --nproc-per-node {workers} --master-addr {master_addr} --master-port {master_port} ...`
    "workers",
    "master_addr",
    "master_port",
)


def _split_command(value: Any) -> Any:
    return shlex.split(value) if isinstance(value, str) else value


def _known_placeholders(command: list[str]) -> list[str]:
    for arg in command:
        for _, name, _, _ in string.Formatter().parse(arg):
            if name is not None and name not in PLACEHOLDERS:
                raise ValueError(f"unknown placeholder {{{name}}} in {arg!r}; allowed: {list(PLACEHOLDERS)}")
    return command


# A trainer's command line wherever one is declared (a trial's command backend, a sweep's backend, the operator's
# registry): an argument list or one shell-like string, with only the placeholders above.
CommandLine = Annotated[list[str], BeforeValidator(_split_command), AfterValidator(_known_placeholders)]
