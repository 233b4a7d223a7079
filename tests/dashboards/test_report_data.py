"""What `compute_report` hands each section: one checked table of records, and a note where a panel cannot be drawn
(the page itself, drawn in a browser, is test_report.py's)."""

from __future__ import annotations

from typing import Any

import pytest

import dashboards._records as records_module
from dashboards import DashboardInputError, RunRecord, build_report, compute_report
from dashboards._scaling import scaling_fit_data
from scaling.fits import fit_scaling


@pytest.mark.parametrize("fixture", ["sweep_records", "transfer_records"])
def test_a_report_checks_each_record_once(
    fixture: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report checks its records into one table that every section takes as it is (each of nine sections once
    checked and sorted them again)."""
    records = request.getfixturevalue(fixture)
    checked: list[int] = []
    check = records_module._checked

    def counted(item: Any, index: int) -> RunRecord:
        checked.append(index)
        return check(item, index)

    monkeypatch.setattr(records_module, "_checked", counted)
    build_report(compute_report(records), dpi=20)
    assert sorted(checked) == list(range(len(records)))


def test_a_fit_panel_that_cannot_be_drawn_is_a_note_not_a_failure(transfer_records: list[dict[str, Any]]) -> None:
    fit = fit_scaling(scaling_fit_data(transfer_records, "best_fd"), "A*N^-alpha", alpha_bounds=(-3.0, 3.0), n_boot=0)
    other = dict(transfer_records[-1], gamma=0.25, run_id="other")  # a second configuration of one arm
    data = compute_report([*transfer_records, other], fits={"best_fd": fit})
    assert data.scaling == () and data.fd_curves is not None and data.timing is not None  # the rest is drawn
    notes = [n.split(":")[0] for n in data.notes]
    assert notes == ["scaling panels left out", "scaling plot of time_to_best_s left out"]
    with pytest.raises(DashboardInputError, match="unknown metrics \\['fd_at_end'\\]"):
        compute_report(transfer_records, fits={"fd_at_end": fit})
