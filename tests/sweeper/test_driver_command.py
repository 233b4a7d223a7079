"""The driver's command line comes from the sweeper (`sweeper.jobs.driver_command`), and the spec file a driver
reads keeps numbers as numbers (`trials.core.read_mapping` reads JSON first)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sweeper.jobs import driver_command
from trials.core import read_mapping


def test_the_driver_command_names_the_verb_the_spec_and_the_folder(tmp_path: Path) -> None:
    spec, folder = tmp_path / "spec.yaml", tmp_path
    assert driver_command("sweep", spec, folder) == [sys.executable, "-m", "scalesweep_cli", "sweep", "run",
                                                      str(spec), "--workdir", str(folder)]
    resumed = driver_command("transfer", spec, folder, resume=True, python="python")
    assert resumed[:5] == ["python", "-m", "scalesweep_cli", "transfer", "run"] and resumed[-1] == "--resume"
    with pytest.raises(ValueError, match=r"unknown job kind 'verify'; allowed: \['sweep', 'transfer'\]"):
        driver_command("verify", spec, folder)


def test_a_spec_written_as_json_reads_back_with_its_numbers(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e-08 as a string; the service writes the driver's spec as JSON and the reader tries JSON first
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps({"search": {"optimizer": {"adamw_eps": 1e-08}}, "seeds": [0, 1]}, indent=1))
    assert read_mapping(path) == {"search": {"optimizer": {"adamw_eps": 1e-08}}, "seeds": [0, 1]}
    path.write_text("adamw_eps: 1e-08\n")  # the same number written as YAML: why the service writes JSON
    assert read_mapping(path) == {"adamw_eps": "1e-08"}
