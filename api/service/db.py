"""Durable records of sweeps and transfers (SQLAlchemy 2; SQLite by default, PostgreSQL by URL).

The schema is owned by Alembic migrations in `api/migrations/`; `migrate(url)` brings a database to the head
revision at start-up, so a deployment upgrades in place.
"""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Integer, String, Text, TypeDecorator, create_engine, false
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from sqlalchemy.pool import QueuePool

__all__ = ["Base", "SweepRecord", "TransferRecord", "make_engine", "make_sessionmaker", "migrate", "migration_config",
           "new_id"]

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return value.astimezone(dt.UTC) if value is not None and value.tzinfo else value

    def process_result_value(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        return value.replace(tzinfo=dt.UTC) if value is not None and value.tzinfo is None else value


class Base(DeclarativeBase):
    """Declarative base of the service's tables."""


class _Job:
    """Columns every launched job (sweep or transfer) has: spec, state, owner, driver and MLflow ids."""

    state: Mapped[str] = mapped_column(String(20), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    owner: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=_now, index=True)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=_now, onupdate=_now)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True, nullable=True)
    pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    ray_job_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    storage_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    mlflow_experiment_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    mlflow_parent_run_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Whether the next launch continues the job's work folder (`--resume`): set by a resume, an extension and a
    # restart's reconcile, cleared by the launch. In the database, not in the service's memory: a queued resume or
    # extension outlives a service restart (issue 53, H3).
    resume: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # When the job's driver was last started: a status file older than this is a previous launch's, never this
    # one's final state.
    launched_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class SweepRecord(_Job, Base):
    """One submitted sweep."""

    __tablename__ = "sweeps"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200), index=True)


class TransferRecord(_Job, Base):
    """One transfer of a finished sweep's choice to larger rungs."""

    __tablename__ = "transfers"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    sweep_id: Mapped[str] = mapped_column(String(40), index=True)


def make_engine(url: str, *, pool_size: int = 5, pool_timeout_s: float = 30.0) -> Engine:
    """An engine with a fixed pool of `pool_size` connections (no overflow) on SQLite files and servers alike: a
    checkout that waits longer than `pool_timeout_s` raises `sqlalchemy.exc.TimeoutError`, which the service
    answers with 503 + Retry-After (the pool is sized to its route threads: docs/load.md)."""
    pool = {"pool_size": pool_size, "max_overflow": 0, "pool_timeout": pool_timeout_s}
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        # The job queue's thread and request threads share the engine.
        return create_engine(url, poolclass=QueuePool, connect_args={"check_same_thread": False, "timeout": 30},
                             **pool)
    return create_engine(url, pool_pre_ping=True, **pool)


def make_sessionmaker(engine: Engine) -> sessionmaker:
    return sessionmaker(engine, expire_on_commit=False)


def migration_config(connection: Any) -> Any:
    """Alembic's configuration for the migrations on `connection`, with the tables' metadata that `env.py` needs:
    what `migrate` runs, and what a test stepping down and up again uses."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = connection
    cfg.attributes["metadata"] = Base.metadata  # what env.py compares the database against
    return cfg


def migrate(engine: Engine) -> None:
    """Upgrade the database behind `engine` to the newest schema revision."""
    from alembic import command

    with engine.begin() as connection:
        command.upgrade(migration_config(connection), "head")
