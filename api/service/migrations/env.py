"""Alembic environment: runs on the connection and the tables' metadata that `api.service.db.migrate` passes
in (so this file imports nothing of the service)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
metadata = context.config.attributes.get("metadata")
if connection is None or metadata is None:  # pragma: no cover - always called through api.service.db.migrate
    raise RuntimeError("run migrations through api.service.db.migrate(engine)")
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
