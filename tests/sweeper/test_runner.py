"""The job runner under the sweep and the transfer (`sweeper.jobs`) and the figure hook its finish stage calls
(`sweeper.set_figure_hook`), with stub jobs and hooks: no Ray, no MLflow."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import sweeper
from sweeper.jobfiles import REPORT_FILE, driver_running, stored_transfer_report
from sweeper.jobs import JobRun, log_transfer_figures, run_locked_job, run_stages
from sweeper.jobs._figures import log_sweep_figures
from trials import JobFailedError


class _Spec:
    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint

    def fingerprint(self) -> str:
        return self._fingerprint


@dataclass
class _Result:
    state: str

    def table(self) -> str:
        return f"table of a {self.state} job"


@dataclass
class _Job:
    """A job kind as the runner sees it, recording what the runner asked of it."""

    outcome: str | Exception = "SUCCEEDED"
    stored_as: tuple[str, str | None] | None = None
    spec: _Spec = field(default_factory=lambda: _Spec("fp-1"))
    kind: str = "stub"
    refused: type[Exception] = ValueError
    may_change: str = "`execution`"
    calls: list[str] = field(default_factory=list)

    def stored(self, workdir: Path) -> tuple[str, str | None] | None:
        return self.stored_as

    def run(self, run: JobRun) -> _Result:
        self.calls.append(f"run locked={driver_running(run.workdir)}")
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return _Result(self.outcome)

    def failed(self, run: JobRun, exc: JobFailedError) -> None:
        self.calls.append(f"failed {exc}")

    def finished(self, run: JobRun, result: _Result) -> None:
        self.calls.append("finished")


def test_the_runner_holds_the_lock_prints_the_table_and_finishes_a_succeeded_job(tmp_path: Path) -> None:
    job, out = _Job(), io.StringIO()
    result = run_locked_job(job, tmp_path / "w", resume=False, show_progress=True, stream=out)
    assert result.state == "SUCCEEDED" and job.calls == ["run locked=True", "finished"]
    assert out.getvalue() == "table of a SUCCEEDED job\n" and not driver_running(tmp_path / "w")


def test_a_failed_or_quiet_job_has_no_finish_stage_and_no_table(tmp_path: Path) -> None:
    job = _Job(outcome="FAILED")
    run_locked_job(job, tmp_path, resume=False, show_progress=False)
    assert job.calls == ["run locked=True"]


def test_a_broken_driver_is_recorded_by_its_job_then_raised(tmp_path: Path) -> None:
    job = _Job(outcome=JobFailedError("Ray went away"))
    with pytest.raises(JobFailedError, match="Ray went away"):
        run_locked_job(job, tmp_path, resume=False, show_progress=False)
    assert job.calls == ["run locked=True", "failed Ray went away"]


def test_a_job_already_in_the_folder_runs_again_only_resumed_with_the_same_spec(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="already holds stub s-1; pass resume=True"):
        run_locked_job(_Job(stored_as=("s-1", "fp-1")), tmp_path, resume=False, show_progress=False)
    with pytest.raises(ValueError, match=r"the spec changed since stub s-1 .*only `execution` may change"):
        run_locked_job(_Job(stored_as=("s-1", "fp-0")), tmp_path, resume=True, show_progress=False)
    resumed = run_locked_job(_Job(stored_as=("s-1", "fp-1")), tmp_path, resume=True, show_progress=False)
    assert resumed.state == "SUCCEEDED"


def test_an_inner_job_shows_no_table_and_no_figures_of_its_own(tmp_path: Path) -> None:
    out = io.StringIO()
    outer = JobRun(workdir=tmp_path, stream=out)
    job = _Job()
    run_stages(job, outer.inner(), resume=True)
    assert job.calls == ["run locked=False"] and out.getvalue() == ""


def test_a_second_driver_for_the_folder_is_refused(tmp_path: Path) -> None:
    inner = _Job()

    @dataclass
    class _Nested(_Job):
        def run(self, run: JobRun) -> _Result:
            return run_locked_job(inner, run.workdir, resume=False, show_progress=False)

    with pytest.raises(ValueError, match="a driver is already running"):
        run_locked_job(_Nested(), tmp_path, resume=False, show_progress=False)


# ---------------------------------------------------------------------------------------------------------------
# The figure hook


class _Hook:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[Any] = []

    def sweep_figures(self, result: Any) -> list[str]:
        if self.fail:
            raise RuntimeError("no matplotlib here")
        self.calls.append(("sweep", result.name))
        return ["figures/heatmap.png"]

    def transfer_figures(self, result: Any, *, transfer_id: str | None, sweep_id: str | None,
                         store_page: Any) -> list[str]:
        self.calls.append(("transfer", transfer_id, sweep_id))
        store_page("<!DOCTYPE html><p>page</p>")
        return ["figures/scaling.png"]


@pytest.fixture
def hook() -> Iterator[_Hook]:
    made = _Hook()
    previous = sweeper.set_figure_hook(lambda: made)
    yield made
    sweeper.set_figure_hook(previous)


def test_without_a_hook_a_finished_job_logs_no_figures_and_says_nothing() -> None:
    previous = sweeper.set_figure_hook(None)
    try:
        out = io.StringIO()
        assert log_sweep_figures(SimpleNamespace(name="s"), out) == [] and out.getvalue() == ""  # type: ignore[arg-type]
    finally:
        sweeper.set_figure_hook(previous)


def test_the_hook_draws_a_sweeps_figures(hook: _Hook) -> None:
    out = io.StringIO()
    assert log_sweep_figures(SimpleNamespace(name="s"), out) == ["figures/heatmap.png"]  # type: ignore[arg-type]
    assert hook.calls == [("sweep", "s")] and "figures logged to the MLflow parent run" in out.getvalue()


def test_a_hook_that_fails_is_one_warning_line_never_a_failed_job() -> None:
    previous = sweeper.set_figure_hook(lambda: _Hook(fail=True))
    try:
        out = io.StringIO()
        assert log_sweep_figures(SimpleNamespace(name="s"), out) == []  # type: ignore[arg-type]
        assert out.getvalue().startswith("warning: figures not logged to MLflow: RuntimeError: no matplotlib here")
    finally:
        sweeper.set_figure_hook(previous)


def test_the_hook_stores_a_transfers_page_named_by_the_services_ids(hook: _Hook, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALESWEEP_TRANSFER_ID", "tr-1")
    monkeypatch.setenv("SCALESWEEP_SOURCE_SWEEP_ID", "sw-1")
    result = SimpleNamespace(parent_run_id="run-1", workdir=str(tmp_path))
    out = io.StringIO()
    assert log_transfer_figures(result, out) == ["figures/scaling.png"]  # type: ignore[arg-type]
    assert hook.calls == [("transfer", "tr-1", "sw-1")]
    assert stored_transfer_report(tmp_path) == "<!DOCTYPE html><p>page</p>"
    assert f"report: {tmp_path / REPORT_FILE}" in out.getvalue()


def test_the_command_line_registers_the_dashboards_hook() -> None:
    import scalesweep_cli
    from dashboards import JobFigures

    previous = sweeper.set_figure_hook(None)
    try:
        scalesweep_cli._register_figures()
        factory = sweeper.set_figure_hook(previous)
        assert factory is not None and isinstance(factory(), JobFigures)
    finally:
        sweeper.set_figure_hook(previous)
