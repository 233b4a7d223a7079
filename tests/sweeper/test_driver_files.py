"""What a sweep driver leaves and holds on disk (issue 53): the driver lock, which a trainer removing `driver.lock`
must not free (M7), and the session folder of the local Ray it started, removed when it ends (L1)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sweeper.jobfiles import LOCK_FILE, driver_lock, driver_running

from .conftest import REPO, fake_backend, make_spec, write_spec


def _driver(spec: Path, workdir: Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`scalesweep sweep run`, as the service starts it, to its end."""
    return subprocess.run([sys.executable, "-m", "scalesweep_cli", "sweep", "run", str(spec), "--workdir",
                           str(workdir)], cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.integration
def test_a_second_driver_is_refused_after_the_lock_file_was_removed(store_uri: str, tmp_path: Path) -> None:
    """A trainer in the job's folder removed `driver.lock` while its driver ran; a second driver on the sweep then
    created a new file, locked it and ran beside the first. The folder's own lock still refuses it."""
    workdir = tmp_path / "wd"
    spec = write_spec(tmp_path / "spec.yaml", make_spec("locked", store_uri, search={"space": {"K": [3]}},
                                                        baselines=[], backend=fake_backend()))
    with driver_lock(workdir, RuntimeError):  # the first driver, holding the lock as every driver does
        (workdir / LOCK_FILE).unlink()
        assert driver_running(workdir)
        second = _driver(spec, workdir, timeout=120)
        assert second.returncode != 0, second.stdout[-2000:]
        assert f"a driver is already running the sweep in {workdir.resolve()}" in second.stdout + second.stderr
        assert not (workdir / "sweep.json").exists()  # it started nothing
    assert not driver_running(workdir)  # released with the block


@pytest.mark.integration
def test_a_driver_removes_the_session_folder_of_its_own_ray(store_uri: str, tmp_path: Path) -> None:
    """A driver that started a local Ray removes that Ray's `session_*` folder when it ends, keeping its workers'
    logs in the job's folder; another session folder beside it stays."""
    # short: Ray's socket paths (under the session folder) must stay under 107 bytes
    root = Path(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
    other = root / "ray" / "session_2000-01-01_00-00-00_000000_1"  # another driver's, still running
    (other / "logs").mkdir(parents=True)
    (other / "logs" / "raylet.out").write_text("not ours")
    spec = write_spec(tmp_path / "spec.yaml", make_spec("session", store_uri, horizon=4, eval_steps=[2, 4],
                                                        search={"space": {"K": [3], "gamma": [0.15]}}, baselines=[],
                                                        execution={"concurrency": 1, "num_cpus": 1},
                                                        backend=fake_backend()))
    try:
        done = _driver(spec, tmp_path / "wd", env={"RAY_TMPDIR": str(root)})
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        kept = list((tmp_path / "wd" / "ray" / "worker-logs").iterdir())
        assert len(kept) == 1 and kept[0].name.startswith("session_")  # the one session this driver's Ray had
        assert list(kept[0].glob("worker-*.err"))  # where a trial's warnings go, kept
        assert sorted(p.name for p in (root / "ray").glob("session_*")) == [other.name]  # its own gone
        assert (other / "logs" / "raylet.out").read_text() == "not ours"
    finally:
        subprocess.run(["rm", "-rf", str(root)], check=False)
