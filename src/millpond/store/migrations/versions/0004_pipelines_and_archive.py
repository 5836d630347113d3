"""Uploaded pipelines and their versions; archiving runs and experiments (storage_state).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "pipelines",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "pipeline_versions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("pipeline_id", sa.String(36), sa.ForeignKey("pipelines.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("display_name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("pipeline_spec", sa.JSON, nullable=False),
        sa.Column("platform_spec", sa.JSON, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("pipeline_id", "name", name="uq_pipeline_versions_pipeline_name"),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("storage_state", sa.String(16), nullable=False, server_default="AVAILABLE"))
        batch.add_column(sa.Column("pipeline_id", sa.String(36), nullable=True))
        batch.add_column(sa.Column("pipeline_version_id", sa.String(36), nullable=True))
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("storage_state", sa.String(16), nullable=False, server_default="AVAILABLE"))


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy would drop tables that others reference.
    op.drop_column("experiments", "storage_state")
    op.drop_column("runs", "pipeline_version_id")
    op.drop_column("runs", "pipeline_id")
    op.drop_column("runs", "storage_state")
    op.drop_table("pipeline_versions")
    op.drop_table("pipelines")
