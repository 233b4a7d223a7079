"""The service keeps its secrets out of its own environment once it has read them (docs/security.md, "The
service's own environment"): a process of the same user reading `/proc/<pid>/environ` of a running `scalesweep
serve` finds neither the token nor the database URL, and the service still checks the token."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from api.service.security import forget_secret_env

from .conftest import free_port

TOKEN = "tok-environ-Qw83-secret"


def test_a_running_service_has_no_secret_in_its_proc_environ(tmp_path: Path) -> None:
    port = free_port()
    db = f"sqlite:///{tmp_path / 'records-Db77.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SCALESWEEP_API_TOKEN": TOKEN,
           "SCALESWEEP_DATABASE_URL": db, "SCALESWEEP_WORKDIR": str(tmp_path / "work")}
    proc = subprocess.Popen([sys.executable, "-m", "scalesweep_cli", "serve", "--port", str(port),
                             "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/v1/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert TOKEN.encode() not in environ and b"records-Db77" not in environ
        assert b"SCALESWEEP_WORKDIR=" in environ  # the rest of the environment is as it was
        # The token still works (a 422 for an empty spec: past the token check); a wrong one does not.
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/v1/sweeps", json={}, headers=headers, timeout=30).status_code == 422
        assert httpx.post(f"{url}/v1/sweeps", json={}, headers={"Authorization": "Bearer wrong-token-1"},
                          timeout=30).status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_forget_secret_env_erases_the_exec_time_block(tmp_path: Path) -> None:
    code = ("import os, sys; from api.service.security import forget_secret_env; "
            "print(forget_secret_env()); "
            "print(b'tok-Zx1' in open('/proc/self/environ', 'rb').read(), 'SCALESWEEP_API_TOKEN' in os.environ)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
                              "SCALESWEEP_API_TOKEN": "tok-Zx1-secret"})
    assert out.stdout.split("\n")[:2] == ["['SCALESWEEP_API_TOKEN']", "False False"], out.stderr
    assert forget_secret_env(("SCALESWEEP_NOT_SET_ANYWHERE",)) == []
