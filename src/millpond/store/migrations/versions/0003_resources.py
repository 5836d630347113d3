"""Applied Fluid resources (Dataset, runtimes, data operations): ``millpond apply -f``.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "resources",
        sa.Column("uid", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("manifest", sa.JSON, nullable=False),
        sa.Column("status", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.UniqueConstraint("kind", "namespace", "name", name="uq_resources_kind_namespace_name"),
    )


def downgrade() -> None:
    op.drop_table("resources")
