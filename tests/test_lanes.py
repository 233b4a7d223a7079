"""tests/lanes.py, which runs `make test` as two pytest sessions at once: counts add up, a failing lane fails the
suite and shows its failure, an empty lane is no failure, a stop reaches both lanes and their teardown runs, and the
suite's own split keeps a shared session fixture's modules in one lane. The lanes here are tiny pytest sessions of
their own (a file of tests and an ini in a temporary folder), run for real."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scalesweep_test_lanes", ROOT / "tests" / "lanes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


lanes = _module()


def _lane(tmp: Path, name: str, body: str, *extra: str) -> object:
    folder = tmp / name
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / f"test_{name}.py").write_text(body)
    return lanes.Lane(name, ["-c", str(folder / "pytest.ini"), "--rootdir", str(folder), "-p", "no:cacheprovider",
                             str(folder / f"test_{name}.py"), *extra], tmp / "logs" / f"{name}.log")


PASSING = "def test_one():\n    assert 1 + 1 == 2\n\ndef test_two():\n    assert [2] * 2 == [2, 2]\n"


def test_two_lanes_pass_and_their_counts_add_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    skipping = "import pytest\n\ndef test_three():\n    pass\n\ndef test_skip():\n    pytest.skip('not here')\n"
    code = lanes.run([_lane(tmp_path, "a", PASSING), _lane(tmp_path, "b", skipping)], every_s=0.5)
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"^the suite: 3 passed, 1 skipped in 0 min \d\d s \(lanes: a 0 min \d\d s, b 0 min \d\d s\)$",
                     out, re.M), out
    assert "lane a: exit 0" in out and "lane b: exit 0" in out


def test_a_failing_lane_fails_the_suite_and_shows_its_failure(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    failing = "def test_broken():\n    assert 'lane-b-broke' == 'fine'\n"
    code = lanes.run([_lane(tmp_path, "a", PASSING), _lane(tmp_path, "b", failing)], every_s=0.5)
    out = capsys.readouterr().out
    assert code == 1, out
    assert "the suite: 2 passed, 1 failed in" in out and "failed lanes: b (exit 1)" in out
    assert "lane-b-broke" in out and "FAILURES" in out  # the failure itself is printed, not only its lane's name


def test_a_lane_that_selects_nothing_is_no_failure_but_two_are(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert lanes.run([_lane(tmp_path, "a", PASSING), _lane(tmp_path, "b", PASSING, "-k", "nothing_matches")]) == 0
    assert "the suite: 2 passed, 2 deselected in" in capsys.readouterr().out
    empty = [_lane(tmp_path, name, PASSING, "-k", "nothing_matches") for name in ("c", "d")]
    assert lanes.run(empty) == 5  # pytest's own status for "no tests ran"


SLEEPING = """import os, time
import pytest

@pytest.fixture
def marker():
    yield
    open(os.environ["LANE_MARKERS"] + "/" + os.path.basename(__file__) + ".teardown", "w").close()

def test_sleeps(marker):
    open(os.environ["LANE_MARKERS"] + "/" + os.path.basename(__file__) + ".started", "w").close()
    time.sleep(120)
"""

RUNNER = """import sys
sys.path.insert(0, sys.argv[1])
import lanes
from pathlib import Path
tmp = Path(sys.argv[2])
made = [lanes.Lane(n, ["-c", str(tmp / n / "pytest.ini"), "--rootdir", str(tmp / n), "-p", "no:cacheprovider",
                       str(tmp / n / f"test_{n}.py")], tmp / "logs" / f"{n}.log") for n in ("a", "b")]
sys.exit(lanes.run(made, every_s=0.5, grace_s=20))
"""


def _pytests_in(folder: Path) -> list[int]:
    """Live pytest processes whose command line names `folder` (the lanes of the test below)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pytest" in argv and {str(folder / "a").encode(), str(folder / "b").encode()} & set(argv):
            found.append(int(cmdline.parent.name))
    return found


def test_sigterm_stops_both_lanes_and_their_teardown_runs(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    for name in ("a", "b"):
        _lane(tmp_path, name, SLEEPING)
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(ROOT / "tests"), str(tmp_path)],
                              env={**os.environ, "LANE_MARKERS": str(markers)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    while len(list(markers.glob("*.started"))) < 2 and time.time() < deadline and runner.poll() is None:
        time.sleep(0.2)
    assert sorted(p.name for p in markers.glob("*.started")) == ["test_a.py.started", "test_b.py.started"]
    pids = _pytests_in(tmp_path)
    assert len(pids) == 2  # one pytest per lane
    stopped_at = time.time()
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, out
    assert time.time() - stopped_at < 15, out  # at once, not after the tests' 120 s
    assert sorted(p.name for p in markers.glob("*.teardown")) == ["test_a.py.teardown", "test_b.py.teardown"]
    assert _pytests_in(tmp_path) == []


TAKES_THE_STUDY = re.compile(r"def \w+\([^)]*\bservice_study\s*:")  # a test or fixture taking it as an argument


def test_the_suites_split_keeps_each_shared_session_fixture_in_one_lane(tmp_path: Path) -> None:
    made = lanes.default_lanes(["-q"], tmp_path)
    assert [lane.name for lane in made] == ["studies", "rest"]
    studies = set(lanes.STUDIES)
    assert all((ROOT / f).is_file() for f in studies)
    assert {f"--ignore={f}" for f in studies} <= set(made[1].args) and "tests" in made[1].args
    # The live service's study (tests/api/conftest.py) is session-scoped: every module that takes it must be in
    # the studies lane, or each lane would run the study once.
    users = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
             if TAKES_THE_STUDY.search(p.read_text(encoding="utf-8")) and "deploy" not in p.parts}
    assert users == {"tests/api/test_live_service.py", "tests/api/test_transfers.py", "tests/api/test_load.py",
                     "tests/api/test_bounds.py"}
    assert users <= studies


def test_named_tests_run_in_one_session_of_just_those() -> None:
    assert lanes.named_paths(["-k", "flow", "--durations=20", "-q"]) == []
    assert lanes.named_paths(["tests/trials/test_flow.py::test_flow_loss_of_the_exact_velocity_is_zero", "-q"]) == [
        "tests/trials/test_flow.py::test_flow_loss_of_the_exact_velocity_is_zero"]
    assert lanes.named_paths(["tests/trials", "-x"]) == ["tests/trials"]
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "lanes.py"), "-q", "-p", "no:cacheprovider",
                           "tests/trials/test_flow.py::test_flow_loss_of_the_exact_velocity_is_zero"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "one pytest session, on what was named" in done.stdout
    assert re.search(r"^1 passed", done.stdout, re.M), done.stdout[-2000:]  # that test only, not the studies lane
