"""The HTML report: self-contained, honest about the FD it shows, the numbers of the figures in tables, and it
renders in a real (headless) browser."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from dashboards import ReportData, build_report, compute_report, report_figures, write_report
from dashboards._scaling import scaling_fit_data
from scaling.fits import fit_scaling

IMG = re.compile(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)">')


@pytest.fixture
def sweep_report(sweep_records: list[dict[str, Any]], synth: SimpleNamespace) -> ReportData:
    return compute_report(
        sweep_records,
        title="sweep <cpu-xs>",
        gammas=synth.SWEEP_GAMMAS,
        context={"parent run": "abc123", "tracking URI": "sqlite:///x.db"},
    )


@pytest.fixture
def transfer_report(transfer_records: list[dict[str, Any]]) -> ReportData:
    fit = fit_scaling(
        scaling_fit_data(transfer_records, "time_to_best_s"),
        "A*N^-alpha",
        alpha_bounds=(-3.0, 3.0),
        n_boot=20,
        bootstrap="parametric",
    )
    return compute_report(transfer_records, title="transfer", fits={"time_to_best_s": fit})


def test_sections_follow_the_records(sweep_report: ReportData, transfer_report: ReportData) -> None:
    assert set(report_figures(sweep_report)) == {"heatmap", "fd_curves"}  # the sweep logged no loss or timing
    assert set(report_figures(transfer_report)) == {"fd_curves", "loss", "scaling", "timing"}
    assert transfer_report.heatmap is None  # one (K, γ) cell is a transfer, not a sweep
    assert [p.metric for p in transfer_report.scaling] == ["time_to_best_s"]


def test_report_is_self_contained_and_names_the_fd_honestly(sweep_report: ReportData, synth: SimpleNamespace) -> None:
    page = build_report(sweep_report)
    header = page[page.index("<header>") : page.index("</header>")]
    assert "FD on shapes_cnn features (metric fd_shapes_cnn)" in header
    assert "not FD-DINO" in header and "256 generated samples per FD" in header
    assert "FD-DINOv2" not in page
    assert "parent run" in header and "abc123" in header
    # Everything inline: no fetched scripts, styles or images.
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<link" not in page
    # Escaped, not interpreted.
    assert "<title>sweep &lt;cpu-xs&gt;</title>" in page
    images = IMG.findall(page)
    assert [name for name, _ in images] == ["heatmap", "fd_curves"]
    for _, data in images:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    # The table under the heatmap holds the figure's numbers, the chosen pair starred.
    best = np.mean([synth.sweep_fd(3, 0.15, s, seed) for s in synth.SWEEP_STEPS for seed in (0, 1)])
    assert f'<strong class="chosen">{best:.4g} ★</strong>' in page
    assert "Chosen pair: <strong>K=3, γ=0.15</strong> (lowest objective)" in page
    assert "<td>missing</td>" in page and "<td>FAILED</td>" in page
    assert "45.67 (1/2 seeds)" in page


def test_transfer_report_tables(transfer_report: ReportData) -> None:
    page = build_report(transfer_report)
    assert "by effective time: arm" in page
    assert "the fit refuses to predict above 1.28e+08 parameters" in page
    assert "fit A*N^-alpha of time_to_best_s" in page
    assert page.count("<img ") == 4


def test_dinov2_runs_are_called_fd_dino(transfer_records: list[dict[str, Any]], tmp_path: Path) -> None:
    records = [dict(r, metric_name="fd_dinov2", fd_samples=1024) for r in transfer_records[:3]]
    path = write_report(tmp_path / "report.html", compute_report(records))
    header = path.read_text(encoding="utf-8").split("</header>")[0]
    assert "FD-DINOv2 (metric fd_dinov2" in header and "1024 generated samples" in header


def test_report_renders_its_figures_in_headless_chromium(transfer_report: ReportData, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        # CI (.ci/run sets SCALESWEEP_CI=1) installs it: there a missing browser is a failure, not a skip.
        missing = pytest.fail if os.environ.get("SCALESWEEP_CI") == "1" else pytest.skip
        missing("no chromium binary on PATH (apt-get install -y chromium): the browser render is not checked")
    path = write_report(tmp_path / "report.html", transfer_report, dpi=60)
    expected = len(IMG.findall(path.read_text(encoding="utf-8")))
    assert expected == 4
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        path.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", done.stdout)
    assert body is not None, done.stdout[:500]
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1)))
    # The inline script ran after load and found every image decoded (naturalWidth > 0).
    assert attrs.get("images-total") == str(expected)
    assert attrs.get("images-loaded") == str(expected)


def test_drawing_leaves_global_matplotlib_state_alone(transfer_report: ReportData) -> None:
    import matplotlib
    import matplotlib.pyplot as plt

    rc = dict(matplotlib.rcParams)
    before = plt.get_fignums()
    figures = report_figures(transfer_report)
    assert len(figures) == 4
    assert plt.get_fignums() == before  # no figure in pyplot's registry
    assert dict(matplotlib.rcParams) == rc
