"""Kueue workloads (issue 15): one row per unit of admission, shared by every machine of the database.

A training job or a pipeline task that names a queue is a workload: PENDING until an admission
cycle gives it quota in a ClusterQueue (ADMITTED), EVICTED while it stops to make room (it still
holds its quota), FINISHED when it no longer holds anything. The admission cycle reads the rows
not FINISHED (``ix_workloads_state``); ``millpond queue get`` lists a queue's rows.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workloads",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("user", sa.String(253), nullable=False),
        sa.Column("queue", sa.String(253), nullable=False),
        sa.Column("requests", sa.JSON, nullable=False),
        sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
        sa.Column("priority_class", sa.String(253), nullable=True),
        sa.Column("pod_count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("cluster_queue", sa.String(253), nullable=True),
        sa.Column("flavors", sa.JSON, nullable=False),
        sa.Column("reason", sa.Text, nullable=False, server_default=""),
        sa.Column("position", sa.Integer, nullable=True),
        sa.Column("requeues", sa.Integer, nullable=False, server_default="0"),
        sa.Column("holder", sa.String(128), nullable=False, server_default=""),
        sa.Column("admitted_at", sa.Float, nullable=False, server_default="0"),
        sa.Column("finished_at", sa.Float, nullable=True),
        sa.Column("updated_at", sa.Float, nullable=False),
    )
    op.create_index("ix_workloads_state", "workloads", ["state"])
    op.create_index("ix_workloads_namespace_queue", "workloads", ["namespace", "queue"])


def downgrade() -> None:
    op.drop_index("ix_workloads_namespace_queue", "workloads")
    op.drop_index("ix_workloads_state", "workloads")
    op.drop_table("workloads")
