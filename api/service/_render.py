"""A heavy page drawn in a worker process of its own, with a time and a memory limit (issue 53, H1).

One anonymous `GET /v1/sweeps/{id}/report` once drew for 323 s and took the service from 530 MB to 1,834 MB, and
kept it, drawing on after its client had left. The sweep report is now drawn in a fresh process (spawned: nothing
of the service's threads or connections is inherited) whose data segment is capped (`RLIMIT_DATA`: heap and
private mappings, what a figure grows) and which is killed when it passes its time limit; the page is then kept per
version of the job's files (`ResultCache`), so it is drawn once. What the worker held goes back to the system
with it, and the service's own memory does not grow with a figure. Only `Settings.analysis_workers` draw at once
(`api.service._gate`).
"""

from __future__ import annotations

import multiprocessing
import resource
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["RenderFailed", "render_bounded", "sweep_page"]


class RenderFailed(Exception):
    """The worker passed its time or memory limit, or failed; the message says which."""


def _work(conn: Connection, memory_bytes: int, fn: Callable[..., str], args: tuple[Any, ...]) -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))
    try:
        conn.send((True, fn(*args)))
    except MemoryError:
        conn.send((False, f"it needed more than its {memory_bytes / 1e6:,.0f} MB"))
    except Exception as exc:  # the page's own error, said in one line
        conn.send((False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]))
    finally:
        conn.close()


def render_bounded(fn: Callable[..., str], *args: Any, timeout_s: float, memory_bytes: int) -> str:
    """`fn(*args)` in a spawned process with at most `memory_bytes` of data and `timeout_s` seconds; `RenderFailed`
    when it passes either (the process is killed) or raises. `fn` is a module-level function (it is pickled)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_work, args=(send, memory_bytes, fn, args), daemon=True, name="scalesweep-render")
    proc.start()
    send.close()
    try:
        if not receive.poll(timeout_s):
            raise RenderFailed(f"it took longer than its {timeout_s:g} s")
        try:
            ok, value = receive.recv()
        except EOFError:  # killed (the kernel's OOM killer, a signal) before it could answer
            raise RenderFailed(f"its worker ended without an answer (exit {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(10)
        receive.close()
    if not ok:
        raise RenderFailed(value)
    return str(value)


def sweep_page(tracking_uri: str, parent_run_id: str, title: str, context: Mapping[str, str]) -> str:
    """The sweep's HTML report (`dashboards.sweep_report`, then `build_report`): what the worker runs."""
    from dashboards import build_report, sweep_report

    return build_report(sweep_report(tracking_uri, parent_run_id, title=title, context=dict(context)))
