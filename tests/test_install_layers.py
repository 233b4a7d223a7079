"""`pip install scalesweep` is the optimizer, the models and the metrics on a light core; the sweeper, the service
and the figures come with extras, and a command that needs a missing extra says which one to install."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import scalesweep_cli

ROOT = Path(__file__).resolve().parents[1]
CORE = {"torch", "numpy", "scipy", "pydantic", "pyyaml"}
HEAVY = ("ray", "mlflow", "fastapi", "optuna", "matplotlib", "sqlalchemy", "uvicorn", "httpx", "tqdm")


def _name(requirement: str) -> str:
    for mark in "[<>=!~; ":
        requirement = requirement.split(mark)[0]
    return requirement.lower()


def test_the_core_dependencies_are_exactly_the_light_list() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {_name(r) for r in project["dependencies"]} == CORE
    extras = project["optional-dependencies"]
    assert {"ray", "optuna", "mlflow"} <= {_name(r) for r in extras["sweep"]}
    assert {"fastapi", "uvicorn", "sqlalchemy"} <= {_name(r) for r in extras["service"]}
    assert {_name(r) for r in extras["figures"]} == {"matplotlib"}
    assert extras["all"] == ["scalesweep[sweep,service,figures]"]
    assert "all" in (ROOT / "Makefile").read_text().split("EXTRAS ?= ")[1].split()[0].split(",")


# Every heavy module absent (None in sys.modules is what Python reports as not installed); then the core's public
# surface is used.
_WITHOUT_EXTRAS = f"""
import sys
sys.modules.update(dict.fromkeys({HEAVY!r}))
import torch
import trials.optim, trials.models, trials.metrics
from trials import ScalesweepError, TrialError
model = trials.models.build_model("cpu-xs")
opt = trials.optim.build_optimizer(model, trials.optim.OptimizerConfig(name="periodic"))
print(sorted(m for m, v in sys.modules.items() if v is not None and m.partition(".")[0] in {HEAVY!r}))
"""


def test_the_optimizer_models_and_metrics_import_without_any_extra() -> None:
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_EXTRAS], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("module", ["trials.optim", "trials.models", "trials.metrics"])
def test_importing_the_core_loads_no_sweeper_or_service_module(module: str) -> None:
    code = f"import sys, {module}; print(sorted({{m.partition('.')[0] for m in sys.modules}} & set({HEAVY[:4]!r})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]", f"import {module} loaded {proc.stdout.strip()}"


def test_a_command_whose_extra_is_missing_names_the_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_API_TOKEN", "a-real-token-123")
    monkeypatch.setenv("SCALESWEEP_WORKDIR", str(tmp_path / "work"))
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # `import uvicorn` now fails as if it were not installed
    code = scalesweep_cli.main(["serve", "--port", "1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err == ("scalesweep serve: error: uvicorn is not installed; this command needs the 'service' extra: "
                   "pip install 'scalesweep[service]'")


def test_a_missing_module_of_no_extra_is_an_unexpected_failure(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> int:
        raise ModuleNotFoundError("No module named 'nosuch'", name="nosuch")

    assert scalesweep_cli.dispatch("scalesweep x", broken) == 1
    assert capsys.readouterr().err.strip() == "scalesweep x: error: ModuleNotFoundError: No module named 'nosuch'"
