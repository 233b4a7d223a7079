"""Ending everything a trainer (or a job) started, wherever it went.

A trainer started in a session of its own can start children that call `setsid` again, double-fork, or outlive
their parent (re-parented to PID 1): neither its process group nor its parent links find them all. What every
descendant keeps is its environment at exec time (`/proc/<pid>/environ`, which `unsetenv` does not change), so each
trainer is started with a tag variable, `SCALESWEEP_TRIAL_TAG=<uuid>`, and each driver the service starts with
`SCALESWEEP_JOB_TAG=<job id>`; ending a tag is: SIGTERM to every process that carries it, a grace period, SIGKILL to
what is left, scanning again each round (a child forked during the grace period is found too). Jenkins' process
tree killer rests on the same property. A process that re-executes itself with a cleared environment escapes it,
and one that writes its title over its environment block may (Ray's agents: they exit with their raylet, which
keeps the tag): full containment is a cgroup, a container or a user of its own (docs/security.md).

`python -m trials.core.proctree --watch PID --tag TAG --grace S` is the trainer's reaper: started beside a trainer in
a session of its own, it ends the tag once PID (the process that runs the trial: a Ray worker) is gone, so a trial
whose worker is SIGKILLed (a cancel, a lost driver) leaves no trainer behind.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

__all__ = ["JOB_TAG_ENV", "TRIAL_TAG_ENV", "adopt_orphans", "descendants", "die_with_parent", "end_tagged", "family",
           "free_port", "members", "new_tag", "process_alive", "process_table", "reap_children", "start_reaper",
           "start_time", "tag_values", "tagged_pids"]

TRIAL_TAG_ENV = "SCALESWEEP_TRIAL_TAG"
JOB_TAG_ENV = "SCALESWEEP_JOB_TAG"


def new_tag() -> str:
    return uuid.uuid4().hex


def _environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:  # gone, or another user's
        return b""


def tagged_pids(name: str, value: str) -> list[int]:
    """Live processes (not zombies, not this one) whose exec-time environment holds `name=value`."""
    needle = f"{name}={value}".encode()
    me = os.getpid()
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        if needle in _environ(pid).split(b"\0") and process_alive(pid):
            out.append(pid)
    return out


def tag_values(name: str) -> set[str]:
    """The values of tag `name` that live processes on this machine carry (one scan of /proc)."""
    prefix = f"{name}=".encode()
    me, out = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me:
            for item in _environ(int(entry.name)).split(b"\0"):
                if item.startswith(prefix) and process_alive(int(entry.name)):
                    out.add(item[len(prefix):].decode(errors="replace"))
    return out


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ..., starttime at 19);
    None when it is gone (or there is no /proc). The name may hold spaces and parentheses: cut at the last `)`."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of `pid`; None when it is gone."""
    fields = _stat_fields(pid)
    try:
        return (int(fields[1]), fields[0]) if fields is not None else None
    except (IndexError, ValueError):
        return None


def process_alive(pid: int) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie), from /proc."""
    stat = _stat(pid)
    return stat is not None and stat[1] not in ("Z", "X")


def process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state letter) of every process; empty where there is no /proc."""
    table: dict[int, tuple[int, str]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
                table[int(entry.name)] = stat
    return table


def start_time(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot, /proc/PID/stat's 22nd field): with the pid, it names one process
    even after the pid is reused. None when it is gone."""
    fields = _stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def members(*, group: int | None = None, session: int | None = None) -> list[int]:
    """The processes (zombies included) in process group `group`, or in session `session`: what a signal to a
    group reaches, and what a session leader started whatever groups its children made."""
    if (group is None) == (session is None):
        raise ValueError("members() takes one of group= or session=")
    index, wanted = (2, group) if group is not None else (3, session)
    found = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
                with contextlib.suppress(IndexError, ValueError):
                    if int(fields[index]) == wanted:
                        found.append(int(entry.name))
    return sorted(found)


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """The live (not zombie) processes below `root` in the process tree. Unlike a tag, this holds for a process
    that rewrote its environment block, but an orphan leaves the tree unless an ancestor is its subreaper
    (`adopt_orphans`)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return sorted(pid for pid in found if table[pid][1] not in ("Z", "X"))


def family(root: int) -> set[int]:
    """`root` while it lives, the live members of its process group, and every live descendant of any of them (a
    Ray job's driver runs in a session of its own under a Ray worker: the tree finds it where the group does not)."""
    table = process_table()
    found = {root} | set(members(group=root))
    for pid in list(found):
        found.update(descendants(pid, table))
    return {pid for pid in found if pid in table and table[pid][1] not in ("Z", "X")}


def free_port(host: str = "") -> int:
    """A TCP port nothing listens on now on `host` ("" binds every interface, as a rendezvous a moment later
    does; "127.0.0.1" a loopback service)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def adopt_orphans() -> bool:
    """Make this process the child subreaper of everything it starts (Linux 3.4+ prctl PR_SET_CHILD_SUBREAPER):
    a descendant whose parent dies is re-parented here, not to PID 1, and stays among `descendants(os.getpid())`.
    Its zombies are this process's to collect (`reap_children`). False where that is refused or there is no
    prctl."""
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)) == 0  # 36: PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int) -> bool:
    """Have the kernel SIGKILL this process when the thread that started it ends (Linux prctl PR_SET_PDEATHSIG),
    and exit now if `parent` (its starter's pid) is already gone: a worker a job spawned must not outlive a job
    that was SIGKILLed, which runs no cleanup of its own. The starting thread must wait on the worker (a thread that
    ends first takes the worker with it). False where there is no prctl (the worker then relies on its starter)."""
    try:
        armed = int(ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the starter died before the signal was armed: re-parented already
        os._exit(1)
    return armed


def reap_children(keep: frozenset[int] = frozenset()) -> None:
    """Collect the exit status of this process's ended children but those in `keep` (a `Popen` reads its own)."""
    me = os.getpid()
    for pid, (ppid, state) in process_table().items():
        if ppid == me and state == "Z" and pid not in keep:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_tagged(name: str, value: str, grace_s: float = 10.0) -> int:
    """SIGTERM every process tagged `name=value`, wait up to `grace_s` for them (new ones included) to exit, then
    SIGKILL the rest until none is left. Returns how many processes were signalled."""
    seen: set[int] = set()
    deadline = time.monotonic() + grace_s
    while True:
        pids = tagged_pids(name, value)
        if not pids:
            return len(seen)
        fresh = [p for p in pids if p not in seen]
        seen.update(fresh)
        if time.monotonic() >= deadline:
            _signal(pids, signal.SIGKILL)
            time.sleep(0.05)
            if time.monotonic() > deadline + 10:  # a process in uninterruptible sleep: do not hang the caller
                return len(seen)
        else:
            _signal(fresh, signal.SIGTERM)
            time.sleep(0.1)


def start_reaper(watch_pid: int, tag: str, grace_s: float, remove: Path | None = None) -> subprocess.Popen[bytes]:
    """Start the trainer's reaper (in its own session, without the tags: it ignores SIGTERM, and a job's cancel
    must not wait out its grace period for it): it ends `tag` when `watch_pid` is gone, then removes `remove` (the
    trial's scratch folder, which a killed worker cannot remove itself). The process returned exits at once,
    leaving the reaper detached (`main`): not a child of the caller."""
    env = {k: v for k, v in os.environ.items() if k not in (TRIAL_TAG_ENV, JOB_TAG_ENV)}
    extra = ["--remove", str(remove)] if remove is not None else []
    return subprocess.Popen([sys.executable, "-m", "trials.core.proctree", "--watch", str(watch_pid), "--tag", tag,
                             "--grace", repr(grace_s), *extra], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _reap(watch_pid: int, tag: str, grace_s: float, poll_s: float = 0.2, remove: Path | None = None) -> None:
    """Wait while the trial's process lives; end the tag once it is gone. Started after the trainer, so no tagged
    process left while the trial lives means the trainer and all it started ended: nothing to watch."""
    while process_alive(watch_pid):
        if not tagged_pids(TRIAL_TAG_ENV, tag):
            return
        time.sleep(poll_s)
    end_tagged(TRIAL_TAG_ENV, tag, grace_s)
    if remove is not None:
        shutil.rmtree(remove, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trials.core.proctree", description=__doc__)
    parser.add_argument("--watch", type=int, required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--remove", type=Path, default=None)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a group-wide SIGTERM must not take the reaper first
    # Detach from the process that started it (the trial's Ray worker): a Ray worker that exits (its driver was
    # SIGKILLed) kills its direct children, and the reaper was one of them, so the trainer's `setsid` child
    # outlived the trial. Re-parented (to init, or to the nearest subreaper), it is nobody's child to kill; the
    # starter's `wait()` returns at once.
    if hasattr(os, "fork") and os.fork() > 0:
        os._exit(0)
    _reap(args.watch, args.tag, args.grace, remove=args.remove)


if __name__ == "__main__":
    main()
