"""A registered trainer that will not stop: it ignores SIGTERM, starts a child that leaves its session (setsid)
and ignores SIGTERM too, writes both pids to --pids, reports its first eval step and then sleeps."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

CHILD = "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--progress", required=True)
    parser.add_argument("--eval-steps", required=True)
    parser.add_argument("--pids", required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", CHILD])
    with open(args.pids, "a") as handle:
        handle.write(f"{os.getpid()} {child.pid}\n")
    step = int(args.eval_steps.split(",")[0])
    with open(args.progress, "a") as handle:
        handle.write(json.dumps({"step": step, "fd": 10.0, "effective_time_s": 0.1}) + "\n")
    time.sleep(3600)


if __name__ == "__main__":
    main()
