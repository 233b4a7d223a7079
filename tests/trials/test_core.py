"""trials.core: the one settings mechanism every process kind reads its environment through, and faces written
once (a package's TYPE_CHECKING imports are its `__all__` and what loads on first use)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import ValidationError

from trials.core import SERVICE_SECRET_ENV, EnvSettings

ROOT = Path(__file__).resolve().parents[2]


class _Kind(EnvSettings):
    ENV_PREFIX: ClassVar[str] = "KIND_"
    ENV_NAMES: ClassVar[Mapping[str, str]] = {"compiler": "CC"}

    workers: int = 2
    compiler: str | None = None


def test_settings_read_their_own_variables_and_arguments_win() -> None:
    env = {"KIND_WORKERS": "7", "CC": "clang", "KIND_OTHER": "x", "kind_workers": "9"}
    assert _Kind.variables() == {"workers": "KIND_WORKERS", "compiler": "CC"}
    read = _Kind.from_env(env)
    assert (read.workers, read.compiler) == (7, "clang")  # typed; KIND_OTHER and the lower-case name are not read
    assert _Kind.from_env(env, workers=3).workers == 3
    assert _Kind.from_env({}).workers == 2


def test_a_bad_value_names_the_field_and_settings_are_frozen() -> None:
    with pytest.raises(ValidationError, match="workers"):
        _Kind.from_env({"KIND_WORKERS": "many"})
    with pytest.raises(ValidationError):
        _Kind.from_env({}).workers = 4  # type: ignore[misc]


def test_every_process_kind_uses_the_one_mechanism() -> None:
    from api.client import ClientSettings
    from api.deploy_local import DeploySettings
    from api.service import Settings
    from sweeper import DriverSettings
    from trials import TrialSettings

    kinds = (Settings, ClientSettings, DeploySettings, DriverSettings, TrialSettings)
    assert all(issubclass(kind, EnvSettings) for kind in kinds)
    service = Settings.from_env({"SCALESWEEP_API_TOKEN": "a-real-token-123", "SCALESWEEP_WORKDIR": "/tmp/w"})
    assert service.workdir == Path("/tmp/w") and set(service.secret_values) == set(SERVICE_SECRET_ENV)


# In a fresh interpreter: the faces name what their TYPE_CHECKING blocks import, and load nothing heavy until asked.
_FACES = """
import json, sys
import trials, trials.core, api, api.client
before = sorted(m for m in ("torch", "mlflow", "fastapi", "httpx") if m in sys.modules)
from trials import ScalesweepError   # the error root, on the face; the rest of the core is trials.core's
print(json.dumps({"trials": trials.__all__, "core": len(trials.core.__all__), "client": api.client.__all__,
                  "api": api.__all__, "before": before, "moved": ScalesweepError.__module__,
                  "orphans": hasattr(trials, "adopt_orphans")}))
"""


def test_faces_are_derived_from_their_type_checking_imports() -> None:
    import json

    ran = subprocess.run([sys.executable, "-c", _FACES], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    faces = json.loads(ran.stdout)
    assert len(faces["trials"]) == 20 and {"run_trial", "ScalesweepError"} <= set(faces["trials"])
    assert faces["core"] == 19 and faces["api"] == ["Settings", "create_app", "forget_secret_env"]
    assert {"ScalesweepClient", "watch_sweep", "watch_transfer"} <= set(faces["client"])
    assert faces["before"] == []
    assert (faces["moved"], faces["orphans"]) == ("trials.core.errors", False)  # trials answers its face alone
