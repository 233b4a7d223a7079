"""A job's progress as one line on stdout, rewritten in place on a terminal: what `scalesweep remote ... --follow`
and the demo show while a sweep or a transfer runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from api.schemas import SweepPublic, TransferPublic

    from ._client import ScalesweepClient

__all__ = ["counts_line", "sweep_line", "transfer_line", "watch_sweep", "watch_transfer"]


def watch_sweep(client: ScalesweepClient, sweep_id: str, interval: float = 2.0) -> SweepPublic:
    """Follow a sweep until it ends, showing its progress line; its last state."""
    return _follow(client.follow(sweep_id, interval=interval), sweep_line)


def watch_transfer(client: ScalesweepClient, transfer_id: str, interval: float = 2.0) -> TransferPublic:
    """Follow a transfer until it ends, showing its progress line; its last state."""
    return _follow(client.follow_transfer(transfer_id, interval=interval), transfer_line)


def counts_line(progress: dict[str, int], noun: str) -> str:
    total = sum(progress.values())
    done = progress.get("SUCCEEDED", 0)
    text = f"{noun} {done} done, {progress.get('RUNNING', 0)} running, {progress.get('FAILED', 0)} failed of {total}"
    pruned = progress.get("PRUNED", 0)
    return text + (f" ({pruned} pruned)" if pruned else "")


def sweep_line(s: Any) -> str:
    line = f"{s.id} {s.state}: {counts_line(s.progress, 'trials')}"
    best = s.best_so_far or {}
    if best.get("point_key") is not None:
        line += f" | best so far {best['point_key']} (objective {best.get('objective', float('nan')):.4g})"
    return line


def transfer_line(t: Any) -> str:
    return f"{t.id} {t.state}: {counts_line(t.progress, 'runs')}"


class _Display:
    """One line rewritten in place on a terminal; elsewhere (a log, a pipe) a new line only when it changes."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = ""

    def show(self, line: str) -> None:
        if line == self.last:
            return
        self.last = line
        if self.tty:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def end(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


def _follow(snapshots: Iterable[Any], line: Callable[[Any], str]) -> Any:
    display = _Display(sys.stdout)
    last = None
    try:
        for last in snapshots:
            display.show(line(last))
    finally:
        display.end()
    return last
