"""The deployment files in docker/ agree with the code and with each other (no Docker engine needed).

What a typo in compose.yaml would otherwise only show at `docker compose up`: a SCALESWEEP_* variable the service
does not read, a secret missing from .env.example, a `depends_on` on a service without a health check, a torch
installed after the project (which would pull a CUDA build).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "compose.yaml"
COMPOSE_FILES = (COMPOSE, DOCKER / "compose.gpu.yaml")
ENV_EXAMPLE = DOCKER / ".env.example"
DOCKERFILE = DOCKER / "Dockerfile"

# The REST service refuses to start without these (api._settings.Settings) or falls back to local defaults that
# make no sense in a deployment (SQLite and a folder inside the container).
API_REQUIRED = (
    "SCALESWEEP_API_TOKEN", "SCALESWEEP_DATABASE_URL", "SCALESWEEP_MLFLOW_TRACKING_URI", "SCALESWEEP_WORKDIR",
)
# Processes that run Ray (a node or a driver) and so need the cluster's token (Ray 2.60 token auth).
RAY_SERVICES = ("ray-head", "ray-worker", "api")
# Services that run trials.
TRIAL_SERVICES = ("ray-head", "ray-worker")

_REF = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)([^}]*)\}")  # ${VAR}, ${VAR:-x}, ${VAR:?msg}; not $${...}


def _compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # SafeLoader resolves the `<<: *anchor` merges


def _services() -> dict[str, dict[str, Any]]:
    return _compose()["services"]


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=VALUE list form
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f".env.example: not KEY=VALUE: {line!r}"
            values[key.strip()] = value.strip()
    return values


def _interpolate(text: str, values: dict[str, str]) -> str:
    """Compose's interpolation of ${VAR}, ${VAR:-default} and ${VAR:?message}, enough for these files."""

    def one(match: re.Match[str]) -> str:
        name, rest = match.group(1), match.group(2)
        value = values.get(name, "")
        if rest.startswith(":-"):
            return value or rest[2:]
        if rest.startswith(":?"):
            assert value, f"{name} is required: {rest[2:]}"
        return value

    return _REF.sub(one, text).replace("$$", "$")


def _settings_env_names() -> set[str]:
    from api.service import Settings

    return set(Settings.variables().values())


# --- (1) the settings the services receive are the settings the code reads ------------------------------------


def test_every_scalesweep_variable_is_read_by_the_code() -> None:
    from trials.core.trial_settings import CACHE_DIR_ENV, DINOV2_PATH_ENV

    known = _settings_env_names() | {CACHE_DIR_ENV, DINOV2_PATH_ENV}  # the service's Settings + the trials' own
    unknown = {
        f"{name}: {key}"
        for name, service in _services().items()
        for key in _environment(service)
        if key.startswith("SCALESWEEP_") and key not in known
    }
    assert unknown == set(), f"set in compose.yaml but read by nothing: {sorted(unknown)}"


def test_api_service_sets_the_required_settings() -> None:
    env = _environment(_services()["api"])
    assert {name for name in API_REQUIRED if name not in env} == set()
    assert set(API_REQUIRED) <= _settings_env_names()


def test_api_environment_validates_as_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The api's environment, filled from .env.example, is accepted by Settings (read from the environment, as
    the service reads it), and its values mean what the deployment needs: PostgreSQL through psycopg (installed
    by the Dockerfile), MLflow and Ray by service name."""
    from api.service import Settings

    for key in [k for k in os.environ if k.startswith("SCALESWEEP_")]:
        monkeypatch.delenv(key)
    for key, value in _environment(_services()["api"]).items():
        monkeypatch.setenv(key, _interpolate(value, _env_example()))
    monkeypatch.chdir(tmp_path)  # Settings resolves the workdir; nothing is created
    settings = Settings()

    services = set(_services())
    assert settings.db_url.startswith("postgresql+psycopg://")
    assert re.search(r'"psycopg\[binary\][^"]*"', DOCKERFILE.read_text()), "the URL's driver must be installed"
    assert settings.db_url.split("@", 1)[1].split(":")[0] in services
    assert settings.tracking_uri.split("//")[1].split(":")[0] in services
    # The sweep driver passes it to ray.init(address=...): a GCS host:port, not the dashboard's http:// URL.
    assert settings.ray_address is not None and not settings.ray_address.startswith("http")
    assert settings.ray_address.split(":")[0] in services
    assert settings.ray_address.endswith(":6379") and "--port 6379" in " ".join(_services()["ray-head"]["command"])


def test_ray_processes_share_the_token_and_the_work_folder() -> None:
    services = _services()
    for name in RAY_SERVICES:
        env = _environment(services[name])
        assert env.get("RAY_AUTH_MODE") == "token", name
        assert env.get("RAY_AUTH_TOKEN", "").startswith("${RAY_AUTH_TOKEN:?"), name
    # Trials write checkpoints (and Ray Tune its folder) into the driver's sweep folder from whichever node runs
    # them: the API's SCALESWEEP_WORKDIR must be the same volume at the same path on every node.
    workdir = _environment(services["api"])["SCALESWEEP_WORKDIR"]
    for name in ("api", *TRIAL_SERVICES):
        assert f"work:{workdir}" in services[name].get("volumes", []), name
    from trials.core.trial_settings import CACHE_DIR_ENV

    for name in TRIAL_SERVICES:
        cache = _environment(services[name])[CACHE_DIR_ENV]
        assert f"cache:{cache}" in services[name]["volumes"], name


def test_the_api_containers_ray_node_starts_without_the_services_secrets() -> None:
    # The raylet this container starts (and every Ray worker it forks) must not inherit the token or the database
    # URL: `ray start` runs behind `env -u` for both, and `scalesweep serve` (which needs them) only after it.
    command = " ".join(_services()["api"]["command"])
    ray_start = command.index("ray start")
    unset = command[:ray_start].split()
    for secret in ("SCALESWEEP_API_TOKEN", "SCALESWEEP_DATABASE_URL"):
        assert ["-u", secret] in [unset[i:i + 2] for i in range(len(unset) - 1)], (secret, command)
    assert "env" in unset and command.index("scalesweep serve") > ray_start


# --- (2) .env.example and compose agree -------------------------------------------------------------------------


def test_env_example_and_compose_name_the_same_variables() -> None:
    example = _env_example()
    referenced: dict[str, str] = {}
    for path in COMPOSE_FILES:
        for match in _REF.finditer(path.read_text()):
            referenced.setdefault(match.group(1), match.group(2))
    own = {k for k in example if k.startswith("COMPOSE_")}  # read by compose itself, not interpolated
    assert set(referenced) - set(example) == set(), "used by compose, missing from .env.example"
    assert set(example) - set(referenced) - own == set(), "in .env.example, used by nothing"
    for path in COMPOSE_FILES:  # unbraced $VAR would escape both checks
        assert re.findall(r"(?<!\$)\$[A-Za-z_]", path.read_text()) == [], path.name

    required = {name for name, rest in referenced.items() if rest.startswith(":?")}
    assert {"SCALESWEEP_API_TOKEN", "POSTGRES_PASSWORD", "MINIO_ROOT_PASSWORD", "RAY_AUTH_TOKEN"} <= required
    # Secrets in the example are placeholders the containers refuse, never usable defaults.
    assert {name for name in required if "CHANGE_ME" not in example[name]} == set()


def test_env_example_documents_every_variable() -> None:
    undocumented, comment_seen = [], False
    for line in ENV_EXAMPLE.read_text().splitlines():
        if not line.strip():
            comment_seen = False  # a comment documents the variables of its own block only
        elif line.lstrip().startswith("#"):
            comment_seen = True
        elif not comment_seen:
            undocumented.append(line.split("=")[0])
    assert undocumented == []


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_entrypoint_refuses_placeholder_secrets() -> None:
    entrypoint = str(DOCKER / "entrypoint.sh")
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    ok = subprocess.run(["sh", entrypoint, "true"], env=clean, capture_output=True, text=True, timeout=10)
    assert ok.returncode == 0, ok.stderr
    bad = {**clean, "DB_URL": "postgresql+psycopg://u:CHANGE_ME_x@postgres/db"}
    refused = subprocess.run(["sh", entrypoint, "true"], env=bad, capture_output=True, text=True, timeout=10)
    assert refused.returncode == 64 and "DB_URL" in refused.stderr


# --- (3) health checks and start order ---------------------------------------------------------------------------


def test_long_running_services_have_health_checks_and_dependencies_exist() -> None:
    services = _services()
    one_shot = {name for name, s in services.items() if str(s.get("restart", "")) == "no"}
    assert {name for name in services if name not in one_shot and "healthcheck" not in services[name]} == set()
    for name, service in services.items():
        for target, spec in (service.get("depends_on") or {}).items():
            assert target in services, f"{name} depends on unknown service {target}"
            condition = spec.get("condition") if isinstance(spec, dict) else None
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}, which has no healthcheck"
            elif condition == "service_completed_successfully":
                assert target in one_shot, f"{name} waits for {target} to exit, but it is a long-running service"
            else:
                pytest.fail(f"{name} -> {target}: give depends_on a condition, not {condition!r}")
    # The API starts last: after the database, MLflow and the Ray head answer.
    assert set(services["api"]["depends_on"]) == {"postgres", "mlflow", "ray-head"}


def test_published_ports_follow_publish_address() -> None:
    for name, service in _services().items():
        for port in service.get("ports", []):
            assert str(port).startswith("${PUBLISH_ADDRESS:-127.0.0.1}:"), f"{name} publishes {port} on every address"
    assert "ports" not in _services()["ray-worker"]  # scaled service: a fixed host port would collide


# --- (4) the image: torch first and pinned ------------------------------------------------------------------------


def _dockerfile_instructions() -> list[str]:
    """Instructions with continuation lines joined and comment lines dropped (the Dockerfile parser's view)."""
    joined, current = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip("\\").rstrip() + " "
        if not line.rstrip().endswith("\\"):
            joined.append(current.strip())
            current = ""
    return joined


def test_dockerfile_installs_pinned_torch_before_the_project() -> None:
    steps = _dockerfile_instructions()
    arg = next(s for s in steps if s.startswith("ARG TORCH_SPEC="))
    spec = arg.split("=", 1)[1].strip('"')
    assert re.fullmatch(r"torch==\d+\.\d+\.\d+\S*", spec), f"torch must be pinned exactly, got {spec!r}"
    # One pin everywhere: the Makefile's, the Dockerfile's, compose's build-arg default and .env.example's.
    makefile = re.search(r"^TORCH_SPEC \?= (\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert makefile is not None and makefile.group(1) == spec
    assert _env_example()["TORCH_SPEC"] == spec
    assert f"${{TORCH_SPEC:-{spec}}}" in COMPOSE.read_text()

    runs = [s for s in steps if s.startswith("RUN ")]
    torch_step = next(i for i, s in enumerate(runs) if 'pip install "${TORCH_SPEC}"' in s)
    project_steps = [i for i, s in enumerate(runs) if "requirements" in s or re.search(r"pip install .*\s\.(\s|$)", s)]
    assert project_steps and torch_step < min(project_steps)
    # Later installs are held to the torch already there (a constraint), so none can swap in a CUDA build.
    assert all("-c /etc/scalesweep-torch.txt" in runs[i] for i in project_steps if "pip install" in runs[i])
    assert "--index-url" in runs[torch_step] and any(s.startswith("ARG TORCH_INDEX_URL=") for s in steps)


def test_dockerfile_runs_as_non_root_offline_with_the_extras() -> None:
    steps = _dockerfile_instructions()
    users = [s.split()[1] for s in steps if s.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert any(s.startswith("ENV ") and "HF_HUB_OFFLINE=1" in s for s in steps)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("text", "dino"):
        assert extra in extras and f"['{extra}']" in DOCKERFILE.read_text()


def test_dockerfile_copies_exist_and_are_in_the_build_context() -> None:
    allowed = [
        line[1:] for line in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines() if line.startswith("!")
    ]
    for step in _dockerfile_instructions():
        if step.startswith("COPY ") and "--from" not in step:
            for source in step.split()[1:-1]:
                assert (ROOT / source).exists(), f"COPY {source}: no such path"
                assert any(source == a or source.startswith(f"{a}/") for a in allowed), f"{source} is ignored"


# --- (5) compose itself accepts the files -----------------------------------------------------------------------


@pytest.mark.parametrize("files", [COMPOSE_FILES[:1], COMPOSE_FILES], ids=["cpu", "cpu+gpu"])
def test_docker_compose_config_accepts_the_files(files: tuple[Path, ...]) -> None:
    if shutil.which("docker-compose") is None:
        # CI (.ci/run sets SCALESWEEP_CI=1) installs it: there a missing tool is a failure, not a skip.
        missing = pytest.fail if os.environ.get("SCALESWEEP_CI") == "1" else pytest.skip
        missing("docker-compose not installed (Debian: apt-get install docker-compose); "
                "the YAML-level checks above still ran")
    args = [a for f in files for a in ("-f", str(f))]
    env = {k: v for k, v in os.environ.items() if k not in _env_example()}  # the example file alone decides
    result = subprocess.run(
        ["docker-compose", *args, "--env-file", str(ENV_EXAMPLE), "config", "--quiet"],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert result.returncode == 0, result.stderr
