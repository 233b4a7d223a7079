"""Alembic environment: runs on the connection `api.service._db.migrate` passes in."""

from __future__ import annotations

from alembic import context

from api.service._db import Base

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - always called through api.service._db.migrate
    raise RuntimeError("run migrations through api.service._db.migrate(engine)")
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
