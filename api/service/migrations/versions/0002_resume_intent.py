"""A job's resume intent and its latest launch, kept in the database (issue 53, H3).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    for table in ("sweeps", "transfers"):
        with op.batch_alter_table(table) as batch:  # SQLite alters a table by copying it
            batch.add_column(sa.Column("resume", sa.Boolean(), nullable=False, server_default=sa.false()))
            batch.add_column(sa.Column("launched_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for table in ("sweeps", "transfers"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("launched_at")
            batch.drop_column("resume")
