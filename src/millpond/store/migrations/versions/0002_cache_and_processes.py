"""The execution cache, which processes run an engine or a task (for resume), pod metadata.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cache_entries",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("task_id", sa.String(36), nullable=False),
        sa.Column("outputs", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("engine_pid", sa.Integer, nullable=True))
        batch.add_column(sa.Column("engine_start", sa.String(32), nullable=True))
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("pid", sa.Integer, nullable=True))
        batch.add_column(sa.Column("pid_start", sa.String(32), nullable=True))
        batch.add_column(sa.Column("pod_metadata", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("pod_metadata")
        batch.drop_column("pid_start")
        batch.drop_column("pid")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("engine_start")
        batch.drop_column("engine_pid")
    op.drop_table("cache_entries")
