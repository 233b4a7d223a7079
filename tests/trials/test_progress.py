"""`trials.progress`: a trainer's checkpoint reports, checked on the spot, written on rank 0 only, read by the real
command backend (the example trainer's end-to-end run is tests/trials/test_run.py's command-backend test)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trials import InputError, TrialError
from trials.progress import (
    EVAL_STEPS_ENV,
    PROGRESS_FILE_ENV,
    ProgressReporter,
    report_checkpoint,
    report_divergence,
)

ROOT = Path(__file__).resolve().parents[2]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def backend_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment the command backend gives its trainer: a progress file and the eval steps."""
    path = tmp_path / "progress.jsonl"
    monkeypatch.setenv(PROGRESS_FILE_ENV, str(path))
    monkeypatch.setenv(EVAL_STEPS_ENV, "400,800,1200")
    monkeypatch.delenv("RANK", raising=False)
    return path


def test_one_line_per_checkpoint_in_the_backends_format(backend_env: Path) -> None:
    written = report_checkpoint(400, 52.5, effective_time_s=31.0, optimizer_time_s=4.5, val_loss=0.031,
                                metrics={"loss": 0.04, "comm/bytes_per_step": 1.5e6}, metric_name="fd_dinov2")
    report_checkpoint(800, 41, effective_time_s=62.25)  # an int FD is a number too
    assert _lines(backend_env) == [
        {"step": 400, "fd": 52.5, "effective_time_s": 31.0, "optimizer_time_s": 4.5, "val_loss": 0.031,
         "loss": 0.04, "comm/bytes_per_step": 1.5e6, "metric_name": "fd_dinov2"},
        {"step": 800, "fd": 41.0, "effective_time_s": 62.25},
    ]
    assert written == _lines(backend_env)[0]
    report_divergence(1000)  # any later step, not only an eval step
    last = _lines(backend_env)[-1]
    assert last["step"] == 1000 and math.isnan(last["fd"])  # the backend marks a non-finite FD as DIVERGED


def test_ranks_other_than_zero_validate_but_write_nothing(backend_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    monkeypatch.setenv("RANK", "1")
    assert report_checkpoint(400, 52.5, effective_time_s=31.0) is None
    assert report_divergence(900) is None
    assert not backend_env.exists()
    with pytest.raises(InputError, match="fd must be finite"):  # a bad record fails on every rank alike
        report_checkpoint(1200, math.nan)
    # An explicit rank wins over the environment; torch.distributed's rank would win over both.
    other = ProgressReporter(tmp_path / "other.jsonl", rank=3)
    assert not other.writes and other.checkpoint(400, 1.0) is None and not (tmp_path / "other.jsonl").exists()
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(InputError, match="RANK='zero' in the environment is not an integer rank"):
        ProgressReporter(tmp_path / "x.jsonl")


@pytest.mark.parametrize(
    ("step", "fd", "kwargs", "message"),
    [
        (400, math.nan, {}, r"fd must be finite, got nan; a diverged run reports report_divergence\(step\)"),
        (400, math.inf, {}, "fd must be finite, got inf"),
        (400, -0.5, {}, "fd must be >= 0, got -0.5"),
        (400, True, {}, "fd must be a real number, got bool True"),
        (400, "41.2", {}, "fd must be a real number, got str '41.2'"),
        (True, 41.2, {}, "step must be an int > 0, got bool True"),
        (400.0, 41.2, {}, "step must be an int > 0, got float 400.0"),
        (0, 41.2, {}, "step must be an int > 0, got 0"),
        (-400, 41.2, {}, "step must be an int > 0, got -400"),
        (500, 41.2, {}, r"step 500 is not one of the trial's eval steps \[400, 800, 1200\] \(SCALESWEEP_EVAL_STEPS\)"),
        (400, 41.2, {"effective_time_s": -1.0}, "effective_time_s must be >= 0, got -1.0"),
        (400, 41.2, {"step_time_s": math.nan}, "step_time_s must be finite, got nan"),
        (400, 41.2, {"val_loss": math.inf}, "val_loss must be finite"),
        (400, 41.2, {"metrics": {"loss": math.nan}}, r"metrics\['loss'\] must be finite"),
        (400, 41.2, {"metrics": {"fd": 3.0}}, "metrics: 'fd' is set by its own argument"),
        (400, 41.2, {"metrics": {"bad name": 3.0}}, "metrics: name 'bad name' must be letters, digits"),
        (400, 41.2, {"metric_name": ""}, "metric_name must name what the FD was computed on"),
    ],
)
def test_bad_records_are_refused_naming_the_field(backend_env: Path, step: Any, fd: Any, kwargs: dict[str, Any],
                                                  message: str) -> None:
    with pytest.raises(InputError, match=message):
        report_checkpoint(step, fd, **kwargs)
    assert not backend_env.exists()  # nothing half-written


def test_steps_must_grow_and_a_tensor_gets_a_hint(backend_env: Path) -> None:
    report_checkpoint(800, 40.0)
    for step in (800, 400):
        with pytest.raises(InputError, match=rf"step must grow from call to call: {step} after 800"):
            report_checkpoint(step, 39.0)
    with pytest.raises(InputError, match=r"step must grow from call to call: 700 after 800"):
        report_divergence(700)

    class Scalar:  # stands in for a 0-d tensor
        def item(self) -> float:
            return 1.0

    with pytest.raises(InputError, match=r"fd must be a real number, got Scalar .* \(a tensor: pass \.item\(\)\)"):
        report_checkpoint(1200, Scalar())
    assert [r["step"] for r in _lines(backend_env)] == [800]


def test_without_eval_steps_any_step_goes_and_without_a_file_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PROGRESS_FILE_ENV, raising=False)
    monkeypatch.delenv(EVAL_STEPS_ENV, raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert report_checkpoint(7, 1.0) is None  # outside scalesweep: checked, not written
    with pytest.raises(InputError, match="fd must be >= 0"):
        report_checkpoint(8, -1.0)
    reporter = ProgressReporter(tmp_path / "p.jsonl")
    assert reporter.checkpoint(7, 1.0) == {"step": 7, "fd": 1.0}
    with pytest.raises(InputError, match=r"SCALESWEEP_EVAL_STEPS='10,x' is not a comma-separated list of steps"):
        monkeypatch.setenv(EVAL_STEPS_ENV, "10,x")
        ProgressReporter(tmp_path / "q.jsonl")


def test_the_light_install_is_enough() -> None:
    """No Ray, MLflow, FastAPI (absent, as on a light install), and not even torch is imported."""
    code = """
import sys, os, tempfile
sys.modules.update(dict.fromkeys(("ray", "mlflow", "fastapi", "optuna", "sqlalchemy")))
path = os.path.join(tempfile.mkdtemp(), "p.jsonl")
os.environ["SCALESWEEP_PROGRESS_FILE"] = path
from trials.progress import report_checkpoint
report_checkpoint(3, 2.5, effective_time_s=1.0)
loaded = sorted(m for m in ("torch", "ray", "mlflow", "fastapi") if sys.modules.get(m) is not None)
print(loaded, open(path).read().strip())
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == '[] {"step": 3, "fd": 2.5, "effective_time_s": 1.0}'


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_command_backend_reads_what_the_helper_writes(tiny_trial_config: Callable[..., dict[str, Any]]) -> None:
    """A trainer that only calls the helper, run by the real command backend: checkpoints and a divergence."""
    from trials import run_command_trial

    cfg = tiny_trial_config(steps=20, eval_steps=[10, 20])
    trainer = ("from trials.progress import report_checkpoint as r; "
               "r(10, 41.5, effective_time_s=2.0, val_loss=0.5); r(20, 30.25, effective_time_s=4.0, val_loss=0.4)")
    result = run_command_trial(cfg, {"command": _python(trainer), "poll_s": 0.1})
    assert result.status == "SUCCEEDED" and result.fd == {10: 41.5, 20: 30.25}
    assert result.effective_time_s == {10: 2.0, 20: 4.0} and result.val_loss == {10: 0.5, 20: 0.4}
    assert result.best_step == 20

    diverging = "from trials.progress import report_checkpoint as r, report_divergence as d; r(10, 41.5); d(13)"
    result = run_command_trial(cfg, {"command": _python(diverging), "poll_s": 0.1})
    assert result.status == "DIVERGED" and result.diverged_at == 13 and result.fd == {10: 41.5}

    # On rank 1 (torchrun's RANK) the same trainer writes nothing: the backend sees no FD at all.
    silent = {"command": _python(trainer), "poll_s": 0.1, "env": {"RANK": "1"}}
    with pytest.raises(TrialError, match="without reporting any 'fd'"):
        run_command_trial(cfg, silent)
