"""The compose topology (docker/compose.yaml) as local processes on loopback, for a person and for the tests.

    python -m api.deploy_local          # or: make deploy-local; prints the URLs, stops everything on Ctrl-C

Started in this order, each in its own process group (its own session), each waited for until healthy:

- PostgreSQL: a fresh cluster in a temporary folder (trust authentication, loopback only), with the service's
  database and MLflow's (`scalesweep` and `mlflow`, each owned by a role of that name, as docker/postgres-init.sh);
- `mlflow server` over the `mlflow` database, artifacts served by the server itself (`--serve-artifacts`) from the
  temporary folder (compose uses MinIO; the proxied artifact path is the same for the clients);
- a Ray head (dashboard on, `RAY_HEAD_NUM_CPUS` CPUs: 0 by default, so no trial runs on the head) and one worker
  node (`RAY_WORKER_NUM_CPUS`, default 2), both with Ray's token authentication;
- `scalesweep serve` on PostgreSQL, with drivers as Ray Jobs (`SCALESWEEP_DRIVERS=ray-job`).

Every port is a free loopback port chosen at start (other Ray clusters and services may run on this machine). Each
component is stopped by the process ids it started: its process group and every descendant (Ray's workers and a
job's driver run in sessions of their own), SIGTERM first, SIGKILL after a grace period; never `ray stop`, which
would stop every Ray on the machine. PostgreSQL refuses to run as root: as root its commands run as the `postgres`
user (runuser) on a folder that user owns.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from trials.core import SERVICE_SECRET_ENV
from trials.core.proctree import family, free_port, process_alive

from ._settings import DeploySettings

__all__ = ["Component", "DeployError", "Deployment", "Postgres", "main", "pg_bin",
           "ray_dashboard_missing", "stop_pids"]

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


class DeployError(RuntimeError):
    """A component did not start or become healthy; the message names it and ends with the tail of its log."""


def pg_bin() -> Path:
    """Debian's PostgreSQL server binaries, the newest major version installed (`postgresql` package; 15 here)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                   if p.parent.parent.name.isdigit() else 0)
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


def ray_dashboard_missing() -> str | None:
    """Why Ray's dashboard (and so its Jobs API) cannot run here (`ray[default]`, the deploy extra), or None."""
    try:
        import ray.dashboard.optional_deps  # noqa: F401
    except ImportError as exc:
        return f"{exc} (pip install 'ray[default]', the deploy extra)"
    return None


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"(no log at {path})"
    return f"last lines of {path}:\n" + "\n".join("  " + line for line in text)


# --- processes: groups and trees, by pid ------------------------------------------------------------------------


def stop_pids(pids: set[int], grace_s: float = 20.0) -> set[int]:
    """SIGTERM each of `pids`, wait up to `grace_s` for them to end, SIGKILL what remains; returns the pids that
    still run after that (none, normally)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.time() + (grace_s if sig == signal.SIGTERM else 5)
        while time.time() < deadline and any(process_alive(p) for p in pids):
            time.sleep(0.2)
    return {p for p in pids if process_alive(p)}


def _http_ok(url: str, timeout: float = 3) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= response.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class Component:
    """One long-running process of the topology, started in a session of its own, its output in `log`."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    healthy: Callable[[], bool]
    url: str = ""
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, cwd=REPO, start_new_session=True)

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise DeployError(f"{self.name} exited with status {self.proc.returncode} before it was healthy "
                                  f"({' '.join(self.argv[:3])} ...); {_tail(self.log)}")
            if self.healthy():
                return
            time.sleep(0.5)
        raise DeployError(f"{self.name} not healthy after {timeout_s:.0f} s; {_tail(self.log)}")

    def pids(self) -> set[int]:
        return family(self.proc.pid) if self.proc is not None and self.proc.poll() is None else set()

    def stop(self, grace_s: float = 20.0) -> set[int]:
        if self.proc is None:
            return set()
        left = stop_pids(self.pids() | {self.proc.pid}, grace_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        return left


# --- PostgreSQL -------------------------------------------------------------------------------------------------


@dataclass
class Postgres:
    """A throw-away PostgreSQL cluster in `folder` on a loopback port (trust auth, fsync off). As root its commands
    run as the `postgres` user, which owns the folder. `start()` / `stop()` / `restart()`; `url(db, user)`."""

    folder: Path
    port: int = field(default_factory=lambda: free_port(HOST))
    bin: Path = field(default_factory=pg_bin)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgres.log"

    @property
    def prefix(self) -> list[str]:
        return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    @staticmethod
    def missing() -> str | None:
        """Why a cluster cannot be started here, or None."""
        if not (pg_bin() / "initdb").is_file() or not (pg_bin() / "pg_ctl").is_file():
            return f"PostgreSQL server binaries not found in {pg_bin()} (Debian: apt-get install postgresql)"
        try:
            import psycopg  # noqa: F401
        except ImportError:
            return "psycopg is not installed (pip install 'psycopg[binary]', the deploy extra)"
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                return "running as root and there is no 'postgres' user to run PostgreSQL as"
        return None

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *argv], capture_output=True, text=True, check=False)

    def init(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.prefix:
            shutil.chown(self.folder, user="postgres")
            for parent in self.folder.parents:  # the postgres user must reach its folder (mkdtemp makes 0700)
                if parent == Path(tempfile.gettempdir()) or parent == Path("/"):
                    break
                parent.chmod(parent.stat().st_mode | 0o711)
        done = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                         "--no-sync")
        if done.returncode:
            raise DeployError(f"postgres: initdb failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def start(self) -> None:
        """Start (pg_ctl's postmaster runs in a session of its own) and wait until it accepts connections."""
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses={HOST} -c fsync=off "
                   "-c max_connections=200")
        done = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.log),
                         "-w", "-t", "60", "start")
        if done.returncode:
            raise DeployError(f"postgres: pg_ctl start failed ({done.returncode}): {done.stderr.strip()[-500:]}; "
                              f"{_tail(self.log)}")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    @property
    def pid(self) -> int | None:
        """The postmaster's pid (first line of postmaster.pid), while it runs."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if process_alive(pid) else None

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql+psycopg://{user}@{HOST}:{self.port}/{database}"

    def create_database(self, name: str, owner: str | None = None) -> str:
        """(Re)create database `name`, owned by a login role `owner` (created when missing); returns its URL as
        that role."""
        import psycopg

        with psycopg.connect(f"postgresql://postgres@{HOST}:{self.port}/postgres", autocommit=True) as conn:
            if owner and not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (owner,)).fetchone():
                conn.execute(f'CREATE ROLE "{owner}" LOGIN')
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"' + (f' OWNER "{owner}"' if owner else ""))
        return self.url(name, owner or "postgres")

    def kill(self) -> set[int]:
        """Stop by pid: the postmaster's group and children (a fast shutdown first)."""
        pid = self.pid
        if pid is None:
            return set()
        return stop_pids(family(pid), grace_s=30)


@contextlib.contextmanager
def postgres_server(folder: Path | None = None) -> Iterator[Postgres]:
    """A started throw-away cluster, removed afterwards (the tests' `postgres_server` fixture uses this)."""
    own = folder is None
    pg = Postgres(folder or Path(tempfile.mkdtemp(prefix="scalesweep-pg-")))  # under /tmp: reachable by postgres
    pg.init()
    pg.start()
    try:
        yield pg
    finally:
        pg.stop("immediate")
        pg.kill()
        if own:
            shutil.rmtree(pg.folder, ignore_errors=True)


# --- the whole topology -----------------------------------------------------------------------------------------


class Deployment:
    """PostgreSQL, an MLflow server, a Ray head and a worker node, and `scalesweep serve`, as local processes.

    `start()` starts and health-checks each in turn (a `DeployError` names the one that failed and shows its log's
    tail; what was started is stopped again); `stop()` stops all by pid, newest first. Also a context manager."""

    def __init__(self, folder: Path | None = None, *, worker_cpus: int = 2, head_cpus: int = 0,
                 api_token: str | None = None, extra_env: dict[str, str] | None = None,
                 timeout_s: float = 120.0) -> None:
        self.folder = folder or Path(tempfile.mkdtemp(prefix="ssdeploy-"))  # short: Ray's socket paths
        self.own_folder = folder is None
        self.worker_cpus, self.head_cpus, self.timeout_s = worker_cpus, head_cpus, timeout_s
        self.api_token = api_token or secrets.token_hex(16)
        self.ray_token = secrets.token_hex(32)
        self.extra_env = extra_env or {}
        self.ray_jobs = ray_dashboard_missing() is None  # else the compose file's default: local drivers
        self.postgres = Postgres(self.folder / "postgres")
        self.components: dict[str, Component] = {}
        self.ports = {name: free_port(HOST) for name in ("mlflow", "ray_gcs", "ray_dashboard", "head_agent", "api")}
        self.workdir = self.folder / "work"
        self.database_url = self.postgres.url("scalesweep", "scalesweep")
        self.mlflow_database_url = self.postgres.url("mlflow", "mlflow")

    # URLs a client needs
    @property
    def api_url(self) -> str:
        return f"http://{HOST}:{self.ports['api']}"

    @property
    def mlflow_url(self) -> str:
        return f"http://{HOST}:{self.ports['mlflow']}"

    @property
    def ray_dashboard_url(self) -> str:
        return f"http://{HOST}:{self.ports['ray_dashboard']}"

    @property
    def ray_address(self) -> str:
        return f"{HOST}:{self.ports['ray_gcs']}"

    def _base_env(self) -> dict[str, str]:
        """What every component inherits: this interpreter's bin first on PATH (Ray Jobs run `python -m
        scalesweep_cli`), this checkout importable, Ray's token auth; never the service's secrets."""
        env = {k: v for k, v in os.environ.items() if k not in (*SERVICE_SECRET_ENV, "RAY_ADDRESS")}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.ray_token, RAY_USAGE_STATS_ENABLED="0")
        return env

    def _component(self, name: str, argv: list[str], env: dict[str, str], healthy: Callable[[], bool],
                   url: str = "") -> Component:
        component = Component(name, argv, env, self.folder / "logs" / f"{name}.log", healthy, url)
        self.components[name] = component
        component.start()
        component.wait_healthy(self.timeout_s)
        return component

    def _ray_node(self, name: str, head: bool) -> Component:
        ray = str(Path(sys.executable).parent / "ray")
        common = ["--node-ip-address", HOST, "--num-gpus", "0", "--object-store-memory", "200000000",
                  "--disable-usage-stats", "--block"]
        env = {**self._base_env(), "SCALESWEEP_CACHE_DIR": str(self.folder / "cache")}  # compose's trial-env
        log = self.folder / "logs" / f"{name}.log"

        def started() -> bool:  # what `ray start` prints once its node runs
            return "Ray runtime started" in log.read_text(errors="replace") if log.exists() else False

        if head:
            dashboard = (["--include-dashboard", "true", "--dashboard-host", HOST, "--dashboard-port",
                          str(self.ports["ray_dashboard"]), "--dashboard-agent-listen-port",
                          str(self.ports["head_agent"])] if self.ray_jobs else ["--include-dashboard", "false"])
            argv = [ray, "start", "--head", "--port", str(self.ports["ray_gcs"]), *dashboard,
                    "--num-cpus", str(self.head_cpus), "--temp-dir", str(self.folder / "ray"), *common]
            if self.ray_jobs:
                return self._component(name, argv, env, lambda: started() and _http_ok(
                    f"{self.ray_dashboard_url}/api/gcs_healthz"), self.ray_dashboard_url)
            return self._component(name, argv, env, started, self.ray_address)
        argv = [ray, "start", "--address", self.ray_address, "--num-cpus", str(self.worker_cpus),
                "--dashboard-agent-listen-port", str(self.ports.setdefault(f"{name}_agent", free_port(HOST))), *common]
        return self._component(name, argv, env, started)

    def start_worker(self, name: str) -> Component:
        """One more Ray worker node (`ray start --address ...`), stopped with the rest; its name is its key in
        `components` and its log's name."""
        return self._ray_node(name, head=False)

    def api_env(self) -> dict[str, str]:
        """The service's environment: the compose file's `api` service, on loopback, drivers as Ray Jobs."""
        return {
            **self._base_env(),
            "SCALESWEEP_API_TOKEN": self.api_token,
            "SCALESWEEP_DATABASE_URL": self.database_url,
            "SCALESWEEP_MLFLOW_TRACKING_URI": self.mlflow_url,
            "SCALESWEEP_MLFLOW_UI_URL": self.mlflow_url,
            "SCALESWEEP_WORKDIR": str(self.workdir),
            "SCALESWEEP_RAY_ADDRESS": self.ray_address,
            **({"SCALESWEEP_DRIVERS": "ray-job", "SCALESWEEP_RAY_DASHBOARD_URL": self.ray_dashboard_url}
               if self.ray_jobs else {"SCALESWEEP_DRIVERS": "local"}),
            "SCALESWEEP_MAX_CONCURRENT_SWEEPS": DeploySettings.from_env().max_concurrent_sweeps,
            "SCALESWEEP_RECONCILE": DeploySettings.from_env().reconcile,
            **self.extra_env,
        }

    def start_api(self) -> Component:
        argv = [sys.executable, "-m", "scalesweep_cli", "serve", "--host", HOST, "--port", str(self.ports["api"]),
                "--log-level", "warning"]
        return self._component("api", argv, self.api_env(), self.api_ready, self.api_url)

    def api_ready(self) -> bool:
        """/v1/ready's database and MLflow checks pass (and Ray's, which probes the dashboard, when there is one)."""
        import json

        try:
            with urllib.request.urlopen(f"{self.api_url}/v1/ready", timeout=10) as response:
                checks = json.loads(response.read())["checks"]
        except urllib.error.HTTPError as exc:  # 503: not ready, and which check says so
            checks = json.loads(exc.read()).get("checks", {})
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return False
        needed = ("database", "mlflow", "ray") if self.ray_jobs else ("database", "mlflow")
        return all(str(checks.get(name, "")).startswith("ok") for name in needed)

    def start(self) -> Deployment:
        why = Postgres.missing()
        if why:
            raise DeployError(f"postgres: {why}")
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self.postgres.init()
            self.postgres.start()
            self.postgres.create_database("scalesweep", "scalesweep")
            self.postgres.create_database("mlflow", "mlflow")
            mlflow_env = {
                **self._base_env(),
                "MLFLOW_BACKEND_STORE_URI": self.mlflow_database_url,
                "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
                "MLFLOW_SERVER_ALLOWED_HOSTS": f"localhost,localhost:*,{HOST},{HOST}:*",
            }
            self._component("mlflow", [str(Path(sys.executable).parent / "mlflow"), "server", "--host", HOST,
                                       "--port", str(self.ports["mlflow"]), "--workers", "1",
                                       "--backend-store-uri", self.mlflow_database_url, "--serve-artifacts",
                                       "--artifacts-destination", str(self.folder / "mlartifacts")],
                            mlflow_env, lambda: _http_ok(f"{self.mlflow_url}/health"), self.mlflow_url)
            self._ray_node("ray-head", head=True)
            self._ray_node("ray-worker", head=False)
            self.start_api()
        except BaseException:
            self.stop()
            raise
        return self

    def pids(self) -> set[int]:
        out = set().union(*(c.pids() for c in self.components.values())) if self.components else set()
        pg = self.postgres.pid
        return out | (family(pg) if pg else set())

    def stop(self) -> set[int]:
        """Stop every component by pid, the newest first; returns pids that survived (none, normally)."""
        left: set[int] = set()
        for component in reversed(list(self.components.values())):
            left |= component.stop()
        left |= self.postgres.kill()
        self.components.clear()
        return left

    def cleanup(self) -> None:
        if self.own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()

    def describe(self) -> str:
        return "\n".join([
            f"  API          {self.api_url}   (token: {self.api_token})",
            f"  MLflow       {self.mlflow_url}",
            f"  Ray          GCS {self.ray_address}"
            + (f", dashboard and Jobs API {self.ray_dashboard_url}; drivers as Ray Jobs" if self.ray_jobs else
               f"; no dashboard ({ray_dashboard_missing()}): drivers run beside the service and attach to it")
            + f" (RAY_AUTH_MODE=token RAY_AUTH_TOKEN={self.ray_token})",
            f"  PostgreSQL   {self.postgres.url()} (databases scalesweep, mlflow)",
            f"  folder       {self.folder} (logs/, work/, mlartifacts/)",
        ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m api.deploy_local", description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="keep everything here (default: a new temporary folder, "
                        "removed on exit)")
    parser.add_argument("--worker-cpus", type=int, default=int(DeploySettings.from_env().worker_cpus))
    parser.add_argument("--head-cpus", type=int, default=int(DeploySettings.from_env().head_cpus))
    parser.add_argument("--timeout", type=float, default=180, help="seconds each component may take to be healthy")
    args = parser.parse_args(argv)

    def _terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)  # also where it was ignored (started in the background by a shell)
    deployment = Deployment(args.folder, worker_cpus=args.worker_cpus, head_cpus=args.head_cpus,
                            api_token=DeploySettings.from_env().api_token, timeout_s=args.timeout)
    print(f"starting the deployment in {deployment.folder} ...", flush=True)
    try:
        started = time.time()
        deployment.start()
        print(f"ready in {time.time() - started:.0f} s:\n{deployment.describe()}\nCtrl-C stops everything.",
              flush=True)
        while True:
            time.sleep(3600)
    except DeployError as exc:
        print(f"deploy-local: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping ...", flush=True)
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        left = deployment.stop()
        print("stopped" + (f"; still running: {sorted(left)}" if left else ": no process left"), flush=True)
        deployment.cleanup()
