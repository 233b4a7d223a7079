"""Sweeps and transfers.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def _common() -> list[sa.Column]:
    return [
        sa.Column("state", sa.String(20), nullable=False, index=True),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True, unique=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("ray_job_id", sa.String(200), nullable=True),
        sa.Column("storage_path", sa.Text(), nullable=True),
        sa.Column("mlflow_experiment_id", sa.String(64), nullable=True),
        sa.Column("mlflow_parent_run_id", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
    ]


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, index=True),
        *_common(),
    )
    op.create_table(
        "transfers",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("sweep_id", sa.String(40), nullable=False, index=True),
        *_common(),
    )


def downgrade() -> None:
    op.drop_table("transfers")
    op.drop_table("sweeps")
