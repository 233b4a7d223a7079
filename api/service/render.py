"""A heavy page drawn in a worker process of its own, with a time and a memory limit, ended when its client leaves
or the service dies (issue 53, H1).

One anonymous `GET /v1/sweeps/{id}/report` once drew for 323 s and took the service from 530 MB to 1,834 MB, and
kept it, drawing on after its client had left. The reports (a sweep's, a comparison's, a running transfer's) are
now drawn in a fresh process (spawned: nothing of the service's threads or connections is inherited) whose data
segment is capped (`RLIMIT_DATA`: heap and private mappings, what a figure grows) and which is killed when it passes
its time limit, or as soon as the route sees its client gone (`client_left`, asked every `POLL_S` while the worker
draws); the page is then kept per version of the job's files (`ResultCache`), so it is drawn once. The worker asks
the kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`), so a SIGKILLed service leaves no worker drawing.
What the worker held goes back to the system with it, and the service's own memory does not grow with a figure.
Only `Settings.analysis_workers` draw at once (`api.service.gate`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["POLL_S", "ClientLeft", "RenderFailed", "client_left", "comparison_page", "render_bounded", "sweep_page",
           "transfer_page"]

POLL_S = 0.5  # how often a waiting route asks whether its client left: a worker outlives its client by about this

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class RenderFailed(Exception):
    """The worker passed its time or memory limit, or failed; the message says which. `error` names the page's own
    exception class when the page raised one (None when a limit ended it)."""

    def __init__(self, message: str, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


class ClientLeft(RenderFailed):
    """The request's client disconnected while its page was drawn: the worker was killed, nobody reads an answer."""


def _die_with(parent: int) -> None:
    """SIGKILL this process when its parent ends. The kernel sends it when the *thread* that started this process
    ends: `render_bounded`'s caller waits in that thread until the worker has ended, so it outlives the worker in
    every case but the whole service dying, which is the case this is for. Linux only; elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl (not Linux)
        return
    if os.getppid() != parent:  # the parent died before the request above: nobody will send the signal
        os._exit(1)


def _work(conn: Connection, parent: int, memory_bytes: int, fn: Callable[..., str], args: tuple[Any, ...]) -> None:
    _die_with(parent)
    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    try:
        conn.send((True, fn(*args), None))
    except MemoryError:
        conn.send((False, f"it needed more than its {memory_bytes / 1e6:,.0f} MB", None))
    except Exception as exc:  # the page's own error, said in one line
        message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
        conn.send((False, message, type(exc).__name__))
    finally:
        conn.close()


def render_bounded(fn: Callable[..., str], *args: Any, timeout_s: float, memory_bytes: int,
                   left: Callable[[], bool] | None = None) -> str:
    """`fn(*args)` in a spawned process with at most `memory_bytes` of data and `timeout_s` seconds; `RenderFailed`
    when it passes either (the process is killed) or raises; `ClientLeft` (the process killed) as soon as `left()`,
    asked every `POLL_S`, says the client is gone. `fn` is a module-level function (it is pickled)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_work, args=(send, os.getpid(), memory_bytes, fn, args), daemon=True,
                       name="scalesweep-render")
    proc.start()
    send.close()
    deadline = time.monotonic() + timeout_s
    try:
        while not receive.poll(min(POLL_S, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                raise RenderFailed(f"it took longer than its {timeout_s:g} s")
            if left is not None and left():
                raise ClientLeft("its client left before it was drawn")
        try:
            ok, value, error = receive.recv()
        except EOFError:  # killed (the kernel's OOM killer, a signal) before it could answer
            raise RenderFailed(f"its worker ended without an answer (exit {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        receive.close()
    if not ok:
        raise RenderFailed(value, error)
    return str(value)


def client_left(request: Any) -> Callable[[], bool]:
    """`left()` for `render_bounded`: whether `request`'s client disconnected (Starlette's `is_disconnected`, run
    on the event loop from the route's thread). A synchronous route runs on a thread anyio started, which is what
    `anyio.from_thread.run` needs; anywhere else the answer is False (the worker then runs to its limits)."""
    import anyio.from_thread

    def left() -> bool:
        try:
            return bool(anyio.from_thread.run(request.is_disconnected))
        except RuntimeError:  # not on a thread of anyio's, or its event loop has ended
            return False

    return left


def sweep_page(tracking_uri: str, parent_run_id: str, title: str, context: Mapping[str, str]) -> str:
    """The sweep's HTML report (`dashboards.sweep_report`, then `build_report`): what the worker runs."""
    from dashboards import build_report, sweep_report

    return build_report(sweep_report(tracking_uri, parent_run_id, title=title, context=dict(context)))


def comparison_page(doc: Mapping[str, Any]) -> str:
    """Two sweeps' comparison (`sweeper.analysis.compare_sweeps(...).to_dict()`) as one HTML page."""
    from dashboards import build_report, comparison_report

    return build_report(comparison_report(dict(doc)))


def transfer_page(result: Any, transfer_id: str, sweep_id: str | None) -> str:
    """A transfer's HTML report (`dashboards.transfer_page`) from its runs (`sweeper.TransferResult`, pickled)."""
    from dashboards import transfer_page as page

    return page(result, transfer_id=transfer_id, sweep_id=sweep_id)
