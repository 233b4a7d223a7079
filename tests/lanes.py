"""The whole suite in two lanes at once: two pytest sessions side by side on disjoint test files (`make test`).

Run serially, the suite keeps a 2-core machine's cores about 62 % busy: its heavy tests wait on processes starting
(drivers, Ray, an MLflow server, the service), and most of its small tests use one core. Two sessions at once fill
that gap: the `studies` lane takes the files that train for real or run whole studies through the service, the
`rest` lane everything else (docs/testing.md has the
current figures, docs/history.md the earlier ones). Each lane is an ordinary pytest session with
its own session fixtures; a fixture shared by several files (the live service's study in tests/api/conftest.py)
is used only by files of one lane. Both lanes share one feature cache (the label CNN trains once; its writes are
atomic).

    python tests/lanes.py [--lanes 1|2] [--logs DIR] [pytest arguments ...]

Every lane gets the same pytest arguments (a `-k` that selects nothing in one lane leaves that lane empty, which is
not a failure); arguments that name test files, folders or node ids run one session of just those. Each lane's
output goes to DIR/<lane>.log (default out/test-lanes/); a line per lane says how far it is every 30 s, and at the
end each lane's failures, durations and short summary are printed, then one line with the whole suite's counts.
The exit status is non-zero when a lane failed. `--lanes 1` runs plain pytest, in this process's terminal. SIGINT
or SIGTERM reaches both lanes as SIGINT, so their teardown runs; what is left after 60 s is killed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent

# The files that train or run whole studies, longest chains first. Seconds are what each file's slowest tests took
# in the lane in the full two-lane run at d56d647 (2-core Intel Xeon with AMX-BF16, 2026-12-06: this lane 972 s, the
# other 827 s), then what changed after it; busy cores are from one serial run (2-core AMD EPYC, 2026-12-04).
STUDIES = (
    "tests/sweeper/transfer/test_transfer_run.py",  # about 365 s at d56d647, 1.44 cores: a sweep and its transfers
    # trained for real (case 80, one rung on 2 workers 69, rounds 55, pilot 47, 2 workers 38, per-parameter horizons 34,
    # controls 29, resume 9); then the 2-worker and horizons transfers went into the one-rung-on-2-workers one and
    # the rounds test to two arms: about 75 s less (two Tune runs fewer, and one wave fewer per round)
    "tests/api/test_live_service.py",  # 96 s at d56d647, 1.69: the shared service's study (tests/api/conftest.py) ...
    "tests/api/test_transfers.py",  # 85 s, 1.42: ... read by these three modules (its own real transfer over HTTP)
    "tests/api/test_load.py",  # 20 s, 1.03
    "tests/api/test_bounds.py",  # reads the shared service's study too (its served reports' headers)
    "tests/api/test_driver_end.py",  # 14 + 9 s and three short ones at d56d647: drivers killed under a live queue
    "tests/api/test_demo.py",  # 112 + 28 s at d56d647, 1.21: the whole demo, and one stopped by SIGTERM
    "tests/api/test_end_to_end.py",  # 41 s at d56d647, 1.47
    "tests/trials/test_run.py",  # 60 s, 1.02: real trials (63 s alone on 2026-12-06, 24 s of it MiniLM
    # and shapes-cnn)
    "tests/sweeper/test_plan_real.py",  # about 145 s under load: a real calibration, sweep and transfer against
    # their estimates; moved here on 2026-12-07, when the rest lane ended 4 min 24 s after this one (26:07, 21:43)
    "tests/sweeper/test_workers.py",  # 21 + 16 + 15 s at d56d647: 2-worker sweeps; the plain one's checks then went
    # into the killed rank's sweep (59 s alone for the file, 2026-12-06, under load 3)
    # tests/api/test_cancel_tree.py (24 s and a short one at d56d647, 0.91 cores: a service restarted under a
    # stubborn trainer) moved to the rest lane on 2026-12-06, when this lane ended 145 s after it (16 min 12 s against
    # 13 min 47 s): the trims above take about 90 s off this lane (estimated), which would still end about 55 s
    # after the other without the move
    # tests/sweeper/test_deployment.py (33 s: a two-node Ray cluster) moved to the rest lane on 2026-12-06, when
    # this lane ended 1 min 42 s after it (14 min 55 s against 13 min 13 s)
)

SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)")
MARKS = re.compile(r"^(?:\S+\.py )?([.sFExX]+)\s*(?:\[\s*(\d+)%\])?$")  # a progress line of pytest's
SECTION = re.compile(r"^=+ (ERRORS|FAILURES|slowest|short test summary info|warnings summary)")


@dataclass
class Lane:
    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None
    started: float = 0.0
    ended: float | None = None
    counts: dict[str, int] = field(default_factory=dict)

    def start(self, env: dict[str, str]) -> None:
        self.out = self.log.open("wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "pytest", *self.args], cwd=ROOT, env=env,
                                     stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def progress(self) -> str:
        """How far pytest's progress lines say the lane is, and how many tests failed so far."""
        marks, percent = "", None
        for line in self.text().splitlines():
            if m := MARKS.match(line.strip()):
                marks += m.group(1)
                percent = m.group(2) or percent
        failed = marks.count("F") + marks.count("E")
        return (f"{percent}% ({len(marks)} tests" + (f", {failed} failed" if failed else "") + ")"
                if percent else "no test finished yet")

    def poll(self) -> int | None:
        assert self.proc is not None
        code = self.proc.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
            if self.out is not None:
                self.out.close()
            for line in reversed(self.text().splitlines()):
                if m := SUMMARY.match(line.strip()):
                    self.counts = {kind.rstrip("s") if kind.startswith(("error", "warning")) else kind: int(n)
                                   for n, kind in COUNT.findall(m.group(1))}
                    break
        return code

    def stop(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def report(self) -> str:
        """The lane's failures, durations and short summary: its log from the first such section on."""
        lines = self.text().splitlines()
        start = next((i for i, line in enumerate(lines) if SECTION.match(line)), max(0, len(lines) - 40))
        return "\n".join(lines[start:])


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


def default_lanes(pytest_args: list[str], logs: Path) -> list[Lane]:
    """The suite's two lanes: STUDIES, and every other file of tests/."""
    missing = [f for f in STUDIES if not (ROOT / f).is_file()]
    if missing:
        raise SystemExit(f"tests/lanes.py: STUDIES names files that do not exist: {', '.join(missing)}")
    rest = ["tests", *(f"--ignore={f}" for f in STUDIES)]
    return [Lane("studies", [*STUDIES, *pytest_args], logs / "studies.log"),
            Lane("rest", [*rest, *pytest_args], logs / "rest.log")]


def run(lanes: list[Lane], every_s: float = 30.0, grace_s: float = 60.0) -> int:
    """Run the lanes at once; 0 when every lane passed (or collected nothing), 1 when one failed, 130 when stopped.
    SIGINT or SIGTERM reaches each lane as SIGINT (pytest then runs its teardown), SIGKILL after `grace_s`."""
    for lane in lanes:
        lane.log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    cache = None
    if "SCALESWEEP_CACHE_DIR" not in env:  # one feature cache for both lanes, not ~/.cache
        cache = tempfile.TemporaryDirectory(prefix="scalesweep-test-cache-")
        env["SCALESWEEP_CACHE_DIR"] = cache.name
    stopped: list[float] = []

    def on_signal(signum: int, frame: object) -> None:
        stopped.append(time.monotonic())
        for lane in lanes:
            lane.stop(signal.SIGINT)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    t0 = time.monotonic()
    print(f"the suite in {len(lanes)} lanes at once; logs: " + ", ".join(str(lane.log) for lane in lanes), flush=True)
    try:
        for lane in lanes:
            lane.start(env)
        last = time.monotonic()
        while None in [lane.poll() for lane in lanes]:  # every lane polled, so each one's end is its own
            time.sleep(0.2)
            if stopped and time.monotonic() - stopped[0] > grace_s:
                break  # the finally below kills what is left
            if time.monotonic() - last >= every_s:
                last = time.monotonic()
                state = "   ".join(f"{lane.name} {'done' if lane.ended else lane.progress()}" for lane in lanes)
                print(f"[{_clock(last - t0)}] {state}", flush=True)
    finally:
        for lane in lanes:
            lane.stop(signal.SIGKILL)
            if lane.proc is not None:
                lane.proc.wait()
                lane.poll()
        for s, handler in old.items():
            signal.signal(s, handler)
        if cache is not None:
            cache.cleanup()
    wall = time.monotonic() - t0
    codes = {lane.name: lane.proc.returncode for lane in lanes if lane.proc is not None}
    for lane in lanes:
        print(f"\n{'=' * 30} lane {lane.name}: exit {codes[lane.name]}, "
              f"{_clock((lane.ended or time.monotonic()) - lane.started)} ({lane.log}) {'=' * 30}")
        print(lane.report())
    total: dict[str, int] = {}
    for lane in lanes:
        for kind, n in lane.counts.items():
            total[kind] = total.get(kind, 0) + n
    order = ("passed", "failed", "error", "skipped", "xfailed", "xpassed", "deselected", "warning")
    counts = ", ".join(f"{total[kind]} {kind}{'s' if kind in ('error', 'warning') and total[kind] != 1 else ''}"
                       for kind in order if kind in total) or "no counts"
    lane_times = ", ".join(f"{lane.name} {_clock((lane.ended or time.monotonic()) - lane.started)}" for lane in lanes)
    print(f"\nthe suite: {counts} in {_clock(wall)} (lanes: {lane_times})")
    if stopped:
        return 130
    # 5 is pytest's "no tests collected": a selection that leaves one lane empty is not a failure.
    bad = {name: code for name, code in codes.items() if code not in (0, 5)}
    if bad:
        print("failed lanes: " + ", ".join(f"{name} (exit {code})" for name, code in bad.items()))
        return 1
    return 5 if all(code == 5 for code in codes.values()) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/lanes.py", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--lanes", type=int, choices=(1, 2), default=2, help="2 (default) or 1 (plain pytest)")
    parser.add_argument("--logs", type=Path, default=ROOT / "out" / "test-lanes", help="where the lanes' logs go")
    known, pytest_args = parser.parse_known_args(argv)
    named = named_paths(pytest_args)
    if known.lanes == 1 or named:
        if named and known.lanes != 1:
            print(f"tests/lanes.py: {', '.join(named)} named: one pytest session, on what was named", flush=True)
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT)
    return run(default_lanes(pytest_args, known.logs))


def named_paths(pytest_args: list[str]) -> list[str]:
    """The test files, folders or node ids among pytest's arguments (`make test PYTEST_ARGS=tests/trials`): the
    lanes split the whole suite, so a run of named tests is one session of just those."""
    return [a for a in pytest_args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]


if __name__ == "__main__":
    sys.exit(main())
