"""A registered trainer for the security tests: dumps its environment and its ancestors' (up to the service's
process) to --dump, then reports FD at each eval step, or fails with exit code 3 and a stderr line on --fail."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def ancestors(stop_at: int) -> list[dict[str, object]]:
    """Each process above this one (Ray worker, raylet, driver, ...) up to, not including, `stop_at`."""
    out: list[dict[str, object]] = []
    pid = os.getppid()
    while pid > 1 and pid != stop_at:
        proc = Path(f"/proc/{pid}")
        try:
            raw = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
            ppid = int((proc / "stat").read_text().split(")")[-1].split()[1])
        except OSError:
            break
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        out.append({"pid": pid, "cmdline": cmdline, "environ": env})
        pid = ppid
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--progress", required=True)
    parser.add_argument("--eval-steps", required=True)
    parser.add_argument("--dump", required=True)
    parser.add_argument("--fail", action="store_true")
    args = parser.parse_args()
    if args.fail:
        print("loading shards", file=sys.stderr)
        print("RuntimeError: CUDA out of memory (fake)", file=sys.stderr)
        sys.exit(3)
    stop_at = int(os.environ.get("ENV_TRAINER_STOP_AT", "1"))
    Path(args.dump).write_text(json.dumps({"environ": dict(os.environ), "ancestors": ancestors(stop_at)}))
    for step in (int(s) for s in args.eval_steps.split(",")):
        with open(args.progress, "a") as handle:
            handle.write(json.dumps({"step": step, "fd": 30.0 - step, "effective_time_s": 0.01 * step}) + "\n")


if __name__ == "__main__":
    main()
