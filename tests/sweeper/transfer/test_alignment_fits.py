"""The alignment score in a transfer's fits and records: fitted on 1 - alignment against size where the runs carry
it, refused naming the allowed metrics where they do not, kept by the records as FD is. Synthetic runs: no Ray, no
MLflow, the numbers known in advance."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import scalesweep_cli
from scaling import ScalingInputError, TransferRun
from sweeper.transfer import TransferResult, read_transfer_records, write_transfer_records
from sweeper.transfer._fits import FIT_METRICS, fit_docs_of

from .test_transfer_analysis import ARMS, SIZES, _result, _run

# Alignment's error falls with size as E + A N^-alpha; periodic's is a little higher than Muon's.
ERR_E, ERR_A, ERR_ALPHA = 0.05, 60.0, 0.5
OFFSET = {"periodic": 0.02, "muon": 0.0, "adamw": 0.05}


def _error(rung: str, arm: str) -> float:
    return ERR_E + OFFSET[arm] + ERR_A * SIZES[rung] ** -ERR_ALPHA


def _aligned(run: TransferRun) -> TransferRun:
    """`run` with an alignment share at each checkpoint, 1 - the error of its rung and arm at the last one."""
    end = 1.0 - _error(run.rung, run.arm)
    shares = (end - 0.2, end - 0.1, end)
    return dataclasses.replace(run, alignment=tuple((s, t, a) for (s, t, _), a in zip(run.checkpoints, shares,
                                                                                     strict=True)))


def _scenes_result(arms: tuple[str, ...] = ARMS) -> TransferResult:
    """Every rung and seed of `arms` with alignment (the plan keeps all three arms: fits cover the arms with runs)."""
    return _result([_aligned(_run(g, a, s)) for g in SIZES for a in arms for s in (0, 1, 2)])


def test_alignment_is_fitted_on_its_error_against_size() -> None:
    result = _scenes_result()
    assert result.fit_metrics() == FIT_METRICS and "alignment" in FIT_METRICS
    data = result.fit_data("alignment")
    sizes, values = data["muon"]
    assert set(data) == set(ARMS) and sizes == [float(SIZES[g]) for g in SIZES for _ in range(3)]
    assert values == pytest.approx([_error(g, "muon") for g in SIZES for _ in range(3)])
    # One arm's runs only: the fit (a few seconds an arm on a loaded machine) is the same for each.
    periodic = _scenes_result(("periodic",))
    fit = periodic.fits("alignment", n_boot=0)
    assert fit.form == "E+A*N^-alpha" and list(fit.arms) == ["periodic"]
    point, _, _ = fit.predict("periodic", SIZES["cpu-m"])
    assert point == pytest.approx(_error("cpu-m", "periodic"), rel=0.02)  # exact data, a fit through it
    doc = fit_docs_of(periodic, ["alignment"], 0, [])["alignment"]  # as the analysis and /fits show it
    assert doc["fitted_on"].startswith("1 - alignment")
    assert doc["arms"]["periodic"]["sizes"] == sorted(float(n) for n in SIZES.values())


def test_the_analysis_shows_each_runs_endpoint_alignment_and_omits_it_without() -> None:
    rungs = ("cpu-xs", "cpu-s")
    aligned = _result([_aligned(_run(g, a, 0)) for g in rungs for a in ARMS], rungs=rungs, seeds=(0,))
    row = next(r for r in aligned.analysis(n_boot=0)["runs"] if r["run_id"] == "cpu-s-adamw-0")
    assert row["endpoint_alignment"] == pytest.approx(1 - _error("cpu-s", "adamw"))
    plain = _result([_run(g, a, 0) for g in rungs for a in ARMS], rungs=rungs, seeds=(0,))  # shapes, pixels
    doc = plain.analysis(n_boot=0)
    assert "alignment" not in doc["fits"] and "best_fd" in doc["fits"]  # left out, not an error entry
    assert all(r["endpoint_alignment"] is None for r in doc["runs"])


def test_alignment_is_refused_by_name_where_no_run_carries_it() -> None:
    result = _result([_run(g, a, s) for g in SIZES for a in ARMS for s in (0, 1)])  # FD only (shapes, pixels)
    allowed = [m for m in FIT_METRICS if m != "alignment"]
    assert result.fit_metrics() == tuple(allowed)
    with pytest.raises(ScalingInputError) as info:
        result.fits("alignment")
    assert "no run of this transfer carries an alignment score" in str(info.value)
    assert f"allowed: {allowed}" in str(info.value)


def test_the_records_keep_alignment_as_mlflow_gave_it(tmp_path: Path) -> None:
    result = _scenes_result(("muon",))
    write_transfer_records(result, tmp_path / "rec")
    back = read_transfer_records(tmp_path / "rec")
    assert [r.alignment for r in back.runs] == [r.alignment for r in result.runs]
    assert back.fit_data("alignment") == result.fit_data("alignment")
    assert fit_docs_of(back, ["alignment"], 0, []) == fit_docs_of(result, ["alignment"], 0, [])


def test_the_fit_command_refuses_alignment_on_runs_without_it_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_transfer_records(_result([_run(g, a, 0) for g in SIZES for a in ARMS]), tmp_path / "rec")
    code = scalesweep_cli.main(["fit", str(tmp_path / "rec"), "--metric", "alignment", "--n-boot", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "--metric 'alignment': no run of this transfer carries an alignment score" in err
    assert "allowed: ['time_to_best', 'best_fd', 'endpoint_fd', 'steps_to_target', 'time_to_target']" in err

    write_transfer_records(_scenes_result(("muon",)), tmp_path / "scenes")
    assert scalesweep_cli.main(["fit", str(tmp_path / "scenes"), "--metric", "alignment", "--n-boot", "0"]) == 0
    out = capsys.readouterr().out
    assert "alignment vs parameter count:" in out and "fitted on 1 - alignment" in out
