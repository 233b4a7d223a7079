"""Alembic environment: runs on the connection `api._db.migrate` passes in."""

from __future__ import annotations

from alembic import context

from api._db import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - always called through api._db.migrate
    raise RuntimeError("run migrations through api._db.migrate(engine)")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
