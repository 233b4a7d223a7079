"""Run a trainer as another, unprivileged user (docs/security.md, "A trainer as another user").

    python -m trials.core.runas --user nobody --progress {progress_file} --config {config_file} \
        -- python3 /srv/train.py --progress {progress_file} ...

is a registered trainer's command when the drivers run as root (the service's container does) and the trainer must
not: a trainer that is compromised, or simply careless, then cannot read the service's databases, its token or
another job's files, nor signal the drivers. Plain `setpriv --reuid=nobody` in front of the trainer is not enough:
the command backend's trial folder (progress file, trial config) is private to the user running the trial (0700),
so every trial failed with PermissionError. This wrapper, still root, grants the user exactly what the protocol
needs, then drops to it and executes the trainer:

- the trial folder (the progress file's): group-owned by the user's group, mode 0710 (enter, not list or create);
- the progress file: created for the user (0600), so it can append and no one else but root can;
- the trial config: readable by the group (0640);
- the working directory, when it is the trial's own scratch folder (inside the trial folder): owned by the user.

The exec keeps the environment, so the trainer and all it starts still carry the trial's and the job's tags, and a
cancel (root's `end_tagged`, which reads any user's /proc/PID/environ and signals any user's process) ends them
like any other trainer. Supplementary groups are cleared, and HOME, USER and LOGNAME are the user's.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from pathlib import Path

__all__ = ["grant_trial_files", "main"]


def grant_trial_files(progress_file: Path, config_file: Path, uid: int, gid: int, cwd: Path) -> None:
    """Give user `uid` (group `gid`) what the command backend's protocol needs of the trial folder (see the module's
    docstring), nothing more."""
    folder = progress_file.parent
    os.chown(folder, -1, gid)
    os.chmod(folder, 0o710)
    # O_EXCL | O_NOFOLLOW: the file is made here, for the user; a link planted in its place is refused.
    fd = os.open(progress_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
    os.chown(config_file, -1, gid)
    os.chmod(config_file, 0o640)
    if cwd.resolve().is_relative_to(folder.resolve()) and cwd.resolve() != folder.resolve():
        os.chown(cwd, uid, gid)  # the trial's own scratch folder: the trainer's to write in


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trials.core.runas", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", required=True, help="the user the trainer runs as (a name or a numeric uid)")
    parser.add_argument("--progress", required=True, type=Path, help="the trial's progress file: {progress_file}")
    parser.add_argument("--config", required=True, type=Path, help="the trial's config file: {config_file}")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the trainer's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no trainer command after --")
    try:
        entry = pwd.getpwuid(int(args.user)) if args.user.isdigit() else pwd.getpwnam(args.user)
    except KeyError:
        parser.error(f"--user {args.user!r}: no such user")
    if entry.pw_uid == 0:
        parser.error("--user: the trainer must run as an unprivileged user, not root")
    try:
        grant_trial_files(args.progress, args.config, entry.pw_uid, entry.pw_gid, Path.cwd())
        os.setgroups([])
        os.setresgid(entry.pw_gid, entry.pw_gid, entry.pw_gid)
        os.setresuid(entry.pw_uid, entry.pw_uid, entry.pw_uid)
    except PermissionError as exc:
        sys.exit(f"trials.core.runas: cannot run the trainer as {entry.pw_name}: {exc}. The process running the "
                 "trial must be root (or hold CAP_SETUID, CAP_SETGID and CAP_CHOWN, and, for a cancel to find and "
                 "end the trainer, CAP_KILL and CAP_SYS_PTRACE)")
    os.environ.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.exit(f"trials.core.runas: could not start {command[0]!r} as {entry.pw_name}: {exc}")


if __name__ == "__main__":
    main()
