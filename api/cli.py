"""`scalesweep remote ...` under its historical name: the command line lives in `api.client.cli`."""

from .client.cli import add_arguments, run

__all__ = ["add_arguments", "run"]
