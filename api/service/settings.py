"""The service's settings: one object read from `SCALESWEEP_*` environment variables, through the project's one
settings mechanism (`trials.core.EnvSettings`: a frozen pydantic model, arguments over the environment)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from trials.core import SERVICE_SECRET_ENV, EnvSettings

__all__ = ["Settings", "get_settings"]

# Stores MLflow's client can track to (its SQLAlchemy stores, its REST server, a local folder).
_TRACKING_SCHEMES = frozenset({"", "file", "sqlite", "postgresql", "mysql", "mssql", "http", "https", "databricks"})


class Settings(EnvSettings):
    """Read from the environment (prefix `SCALESWEEP_`); invalid values stop the service at start-up."""

    ENV_PREFIX: ClassVar[str] = "SCALESWEEP_"

    workdir: Path = Field(
        Path("scalesweep-work"), description="Sweep state, driver logs and Ray Tune storage live under this folder."
    )
    database_url: str | None = Field(
        None, description="Sweep records: SQLAlchemy URL (sqlite:///... or postgresql+psycopg://...). "
        "Default: sqlite file in the workdir."
    )
    mlflow_tracking_uri: str | None = Field(
        None, description="Where trials log: sqlite:///... or http(s)://. Default: sqlite file in the workdir."
    )
    optuna_storage: str | None = Field(
        None, description="Optuna RDB storage that `POST /v1/sweeps/{id}/optuna` writes a sweep's study to (for "
        "optuna-dashboard). Default: the service's database when it is PostgreSQL, else an sqlite file in the "
        "workdir (optuna.db).",
    )
    mlflow_ui_url: str | None = Field(
        None, description="Base URL of the MLflow UI, for links in responses (e.g. http://127.0.0.1:5000)."
    )
    api_token: SecretStr = Field(
        ..., min_length=8, description="Bearer token required on every mutating call (and on reads if auth_reads)."
    )
    auth_reads: bool = Field(False, description="Also require the token on GET requests.")
    max_concurrent_sweeps: int = Field(
        1, ge=1, description="Sweeps running at once on this machine; 1 suits a 2-core laptop."
    )
    reconcile: Literal["resume", "mark_failed"] = Field(
        "resume", description="At start-up, a RUNNING sweep whose driver is gone is resumed, or marked FAILED."
    )
    ray_address: str | None = Field(
        None,
        description="Ray cluster (GCS address, e.g. ray-head:6379) that local drivers attach to as RAY_ADDRESS; "
        "unset = each local driver starts a Ray of its own.",
    )
    drivers: Literal["local", "ray-job"] = Field(
        "local",
        description="Where sweep and transfer drivers run: 'local' = a subprocess of the service in its own "
        "session; 'ray-job' = a Ray Job on the cluster (needs ray_dashboard_url or ray_address, and the workdir "
        "on storage shared with the cluster's head).",
    )
    ray_dashboard_url: str | None = Field(
        None,
        description="The Ray Jobs API (the head's dashboard, e.g. http://ray-head:8265) for drivers=ray-job. "
        "Default: port 8265 on ray_address's host.",
    )
    driver_nice: int = Field(
        5, ge=0, le=19, description="Niceness of local sweep/transfer drivers (their Ray and trials inherit it): on "
        "a machine that both serves and trains, the service's answers go first (api_load: README).",
    )
    poll_interval_s: float = Field(1.0, gt=0, description="How often the job queue checks its drivers.")
    api_threads: int = Field(
        32, ge=1, le=1000, description="Worker threads that run the routes (every route and dependency that touches "
        "the database, files or MLflow is synchronous and runs on one); the database pool is sized to match "
        "(docs/load.md).",
    )
    db_pool_size: int | None = Field(
        None, ge=1, le=1000, description="Database connections kept open. Default: api_threads + 2 (the job "
        "queue's thread and one spare), so a route thread never waits for a connection.",
    )
    db_pool_timeout_s: float = Field(
        1.0, gt=0, le=60, description="How long a request waits for a database connection before it is answered "
        "503 with Retry-After (never a long hang).",
    )
    max_body_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest request body accepted (a sweep spec is a few kB); larger is 413, "
        "refused before it is read, and only after the token was checked.",
    )

    @field_validator("api_token")
    @classmethod
    def _token_not_blank(cls, token: SecretStr) -> SecretStr:
        # Spaces pass a length check, but no client sends them as a bearer token: the service would run and refuse
        # every call.
        if len(token.get_secret_value().strip()) < 8:
            raise ValueError("is blank or under 8 characters once spaces are removed; set a real token, e.g. "
                             "python -c \"import secrets; print(secrets.token_urlsafe(24))\"")
        return token

    trainers: Path | None = Field(
        None,
        description="Trainer registry (YAML/JSON: name -> command template, fixed env, cwd, timeout): the only "
        "commands the command backend runs for a REST sweep (docs/security.md). Unset = none registered.",
    )
    max_work: int = Field(
        100_000_000, ge=1, description="Largest total work of one sweep or transfer, in training-step units (every "
        "trial's steps plus its evaluations' sampling: sweeper._work). 1e8: a paper-scale study (14 settings x 3 "
        "seeds x 60k steps is about 2.5e6) fits 40 times; a CPU at 40 ms a step would take 46 days. Raise it on a "
        "cluster.",
    )
    max_trial_cpus: float | None = Field(
        None, gt=0, le=1_000_000,
        description="Most CPUs one trial may reserve (execution.workers_per_trial x cpus_per_trial, one placement "
        "group); a sweep or transfer asking more is refused with 422. Default: this host's CPU count (the workers "
        "where drivers run here); set it to the cluster's size.",
    )
    max_trial_gpus: float = Field(
        0.0, ge=0, le=100_000, description="Most GPUs one trial may reserve (workers_per_trial x gpus_per_trial).")
    max_trial_memory_gb: float | None = Field(
        None, gt=0, le=1_000_000,
        description="Largest estimated memory of one trial, in GB (weights, gradients, optimizer state, EMA, "
        "activations at its batch and image size: sweeper.trial_memory_bytes); a sweep or transfer with a trial "
        "over it is refused with 422. Default: half this host's RAM (the workers' memory where drivers run here); "
        "set it to a worker's memory on a cluster.",
    )
    rest_rungs: str = Field(
        "cpu-3xs,cpu-2xs,cpu-xs1,cpu-xs,cpu-s,cpu-m,cpu-l",
        description="Comma-separated rungs a REST sweep or transfer may name (trials.models.list_rungs()); "
        "default: the CPU rungs. Add the paper rungs on a cluster that can hold them.",
    )
    max_queued_jobs: int = Field(
        100, ge=1, le=1_000_000, description="PENDING sweeps and transfers, all owners together, beyond which a "
        "submission is refused with 429 and Retry-After.",
    )
    max_queued_per_owner: int = Field(
        20, ge=1, le=1_000_000, description="PENDING sweeps and transfers of one owner (X-Scalesweep-User) beyond "
        "which that owner's submission is refused with 429 and Retry-After.",
    )
    analysis_workers: int = Field(
        2, ge=1, le=64, description="Expensive reads (a sweep's importance, the HTML reports) computed at once; one "
        "more is answered 503 with Retry-After at once, so cheap reads never wait behind them (docs/load.md).",
    )
    report_timeout_s: float = Field(
        300, gt=0, le=86_400, description="Longest an HTML report (a sweep's, a comparison's, a running "
        "transfer's) may take to draw, in its own worker process; past it the worker is killed and the request "
        "answered 503 (the worst case measured drew in seconds: docs/load.md).",
    )
    report_memory_mb: int = Field(
        2048, ge=256, le=1_048_576, description="Data memory (heap) a report's worker process may take, in MiB; "
        "past it the drawing fails and the request is answered 503.",
    )
    data_paths: str = Field(
        "",
        description="Comma-separated absolute folders a REST spec may name (dataset roots, captions, caches, "
        "weights): any other server path in a spec sent over REST is refused (docs/security.md). Unset = none; "
        "the local CLI takes any path.",
    )
    allowed_hosts: str = Field(
        "*",
        description="Comma-separated Host names the service answers (a Host check before any route, e.g. "
        "'localhost,127.0.0.1,api.internal'; '*.example.org' matches subdomains); '*' = any. Others get 400.",
    )

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            make_url(url)
        except ArgumentError:
            raise ValueError("not a SQLAlchemy URL (e.g. sqlite:////data/scalesweep.db or "
                             "postgresql+psycopg://user:password@host:5432/db)") from None
        return url

    @field_validator("mlflow_tracking_uri")
    @classmethod
    def _tracking_uri(cls, uri: str | None) -> str | None:
        if uri is None:
            return None
        scheme = uri.split("://", 1)[0].split("+", 1)[0].lower() if "://" in uri else ""
        if scheme not in _TRACKING_SCHEMES:
            raise ValueError(f"MLflow cannot track to {uri.split('@')[-1]!r}; use one of "
                             f"{', '.join(s + '://' for s in sorted(_TRACKING_SCHEMES) if s)} or a local folder")
        return uri

    @field_validator("trainers")
    @classmethod
    def _trainers(cls, path: Path | None) -> Path | None:
        if path is not None:
            from sweeper.search import load_trainers

            try:
                load_trainers(path)  # read again by the job runner; checked here so a bad file stops start-up
            except RuntimeError as exc:  # SweepError: one line naming the file
                raise ValueError(str(exc)) from None
        return path

    @property
    def secret_values(self) -> dict[str, str]:
        """The service's secrets by environment variable (`SERVICE_SECRET_ENV`, those set): removed from every
        process the service starts."""
        field = {variable: name for name, variable in self.variables().items()}
        values = {variable: getattr(self, field[variable]) for variable in SERVICE_SECRET_ENV}
        return {variable: value.get_secret_value() if isinstance(value, SecretStr) else str(value)
                for variable, value in values.items() if value}

    @property
    def data_path_list(self) -> list[Path]:
        return [Path(p.strip()) for p in self.data_paths.split(",") if p.strip()]

    @field_validator("data_paths")
    @classmethod
    def _absolute_data_paths(cls, value: str) -> str:
        relative = [p.strip() for p in value.split(",") if p.strip() and not Path(p.strip()).is_absolute()]
        if relative:
            raise ValueError(f"registered data paths must be absolute folders, got {relative}")
        return value

    @property
    def shown_secrets(self) -> set[str]:
        """What no answer or log may show: the token, and the user information (and password) of every URI the
        service holds."""
        from trials.core import uri_secrets

        return {self.api_token.get_secret_value()} | uri_secrets(
            self.database_url, self.optuna_storage, self.mlflow_tracking_uri, self.mlflow_ui_url, self.ray_address,
            self.ray_dashboard_url)

    def redact(self, text: str) -> str:
        """`text` fit to show: URIs without their user information, the service's secrets replaced."""
        from trials.core import without_credentials

        return without_credentials(text, self.shown_secrets)

    @field_validator("rest_rungs")
    @classmethod
    def _known_rungs(cls, value: str) -> str:
        from trials.models import list_rungs

        unknown = [r for r in _names(value) if r not in list_rungs()]
        if unknown:
            raise ValueError(f"unknown rungs {unknown}; allowed: {list_rungs()}")
        return value

    @property
    def rest_rung_list(self) -> list[str]:
        return _names(self.rest_rungs)

    @property
    def trial_cpus(self) -> float:
        """max_trial_cpus, else this host's CPU count."""
        return self.max_trial_cpus if self.max_trial_cpus is not None else float(os.cpu_count() or 1)

    @property
    def max_trial_memory_bytes(self) -> int:
        """max_trial_memory_gb in bytes, else half this host's physical memory."""
        if self.max_trial_memory_gb is not None:
            return int(self.max_trial_memory_gb * 1e9)
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2

    @property
    def host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()] or ["*"]

    @model_validator(mode="after")
    def _defaults_in_workdir(self) -> Settings:
        if self.drivers == "ray-job" and not (self.ray_dashboard_url or self.ray_address):
            raise ValueError("drivers=ray-job needs SCALESWEEP_RAY_DASHBOARD_URL (e.g. http://ray-head:8265) or "
                             "SCALESWEEP_RAY_ADDRESS")
        work = self.workdir.resolve()
        if self.database_url is None:
            object.__setattr__(self, "database_url", f"sqlite:///{work / 'scalesweep.db'}")
        if self.mlflow_tracking_uri is None:
            object.__setattr__(self, "mlflow_tracking_uri", f"sqlite:///{work / 'mlflow.db'}")
        if self.optuna_storage is None:  # Optuna's tables beside the service's own in PostgreSQL, else a file
            pg = str(self.database_url).startswith("postgresql")
            object.__setattr__(self, "optuna_storage",
                               str(self.database_url) if pg else f"sqlite:///{work / 'optuna.db'}")
        return self

    @property
    def db_url(self) -> str:
        return str(self.database_url)

    @property
    def pool_size(self) -> int:
        """Connections in the database pool: db_pool_size, else one per route thread plus two."""
        return self.db_pool_size if self.db_pool_size is not None else self.api_threads + 2

    @property
    def ray_jobs_address(self) -> str:
        """Where the Ray Jobs API answers: ray_dashboard_url, else port 8265 on ray_address's host."""
        if self.ray_dashboard_url:
            return self.ray_dashboard_url.rstrip("/")
        host = str(self.ray_address).split("://")[-1].rsplit(":", 1)[0]
        return f"http://{host}:8265"

    @property
    def tracking_uri(self) -> str:
        return str(self.mlflow_tracking_uri)


def _names(value: str) -> list[str]:
    return [n.strip() for n in value.split(",") if n.strip()]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()  # type: ignore[call-arg]  # api_token comes from the environment
