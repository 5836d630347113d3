"""Datasets on every node (cluster mode): one row per dataset and node holding a cache of it.

Each node's cache writes its own row (what it holds, its capacity, its hits and misses), so
a dataset's status, computed wherever the database is read, sums the nodes' caches as
Fluid sums its workers'; a row is also the node's claim on one of the runtime's ``replicas``.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dataset_node_caches",
        sa.Column("dataset_uid", sa.String(36), primary_key=True),
        sa.Column("node_id", sa.String(64), primary_key=True),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("node_dir", sa.Text, nullable=False),
        sa.Column("cached", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("capacity", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("hit_bytes", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("miss_bytes", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("claimed_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dataset_node_caches")
