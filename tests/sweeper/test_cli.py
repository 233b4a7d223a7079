"""`scalesweep sweep ...` on bad input: one line on stderr, exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scalesweep_cli import main

from .conftest import REPO


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], expect: str) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"scalesweep sweep {argv[1]}: error: ") and expect in err, err


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _one_line_error(capsys, ["sweep", "run", str(tmp_path / "nope.yaml")], "no sweep spec at")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsearch: {method: bayes}\nbogus: 1\n")
    _one_line_error(capsys, ["sweep", "run", str(bad)],
                    "invalid sweep spec: search.method: Input should be 'grid', 'tpe' or 'random'; bogus: Extra")
    bad.write_text("name: [x\n")
    _one_line_error(capsys, ["sweep", "validate", str(bad)], "not valid YAML")
    _one_line_error(capsys, ["sweep", "status", str(tmp_path)], "is not a sweep work folder")
    _one_line_error(capsys, ["sweep", "cancel", str(tmp_path)], "is not a sweep work folder")
    _one_line_error(capsys, ["sweep", "result", "some-sweep"], "say where the sweep is recorded")


def test_validate_prints_the_full_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "validate", str(REPO / "examples" / "sweep-tiny.yaml")]) == 0
    out = capsys.readouterr()
    spec = json.loads(out.out)
    assert spec["name"] == "sweep-tiny" and spec["resolved_eval_steps"] == [40, 50, 60]
    assert spec["search"]["space"] == {"K": [2, 3], "gamma": [0.15, 0.25]}
    assert "4 points x 1 seeds + 2 baselines" in out.err


def test_cli_process_exit_status_on_bad_spec(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "horizon": -1}))
    proc = subprocess.run([sys.executable, "-m", "scalesweep_cli", "sweep", "run", str(bad)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "scalesweep sweep run: error: invalid sweep spec: horizon: Input should be greater than or equal to 1"]
