"""Workload versions (issue 36): a change counter, so an admission cycle reads only the rows changed since its last.

Every transaction that writes workload rows takes the next value of ``workload_generation`` (one row)
and stamps it on the rows it writes (``workloads.version``). The counter's row is locked until the
transaction ends, so once a reader sees value ``G`` every row stamped ``G`` or less is committed: a
process that keeps the live rows it read at ``G`` brings them up to date with the rows stamped above
``G`` (``ix_workloads_version``), whichever process, on whichever machine, wrote them. ``epoch``, random,
tells a database re-created behind the same URL from the one a process read.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workloads", sa.Column("version", sa.BigInteger, nullable=False, server_default="0"))
    op.create_index("ix_workloads_version", "workloads", ["version"])
    generation = op.create_table(
        "workload_generation",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
        sa.Column("epoch", sa.String(36), nullable=False),
    )
    op.bulk_insert(generation, [{"id": 1, "value": 1, "epoch": uuid.uuid4().hex}])


def downgrade() -> None:
    op.drop_table("workload_generation")
    op.drop_index("ix_workloads_version", "workloads")
    op.drop_column("workloads", "version")
