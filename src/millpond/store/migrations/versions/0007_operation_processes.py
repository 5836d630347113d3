"""Which process runs a data operation, so that one whose process died is seen as dead.

Adds to ``resources`` the pid and start time (clock ticks since boot, as runs record their
engine: a reused pid has another start time) of the process running a DataLoad, DataMigrate,
DataProcess or DataBackup, and how many times it was resumed after its process died. They
are columns, not status fields: ``status`` stays what Fluid reports, and a status write by
the operation never clobbers them.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE ... ADD COLUMN: nullable columns need no batch copy of the table.
    op.add_column("resources", sa.Column("process_pid", sa.Integer, nullable=True))
    op.add_column("resources", sa.Column("process_start", sa.String(32), nullable=True))
    op.add_column("resources", sa.Column("process_resumes", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("resources") as batch:
        batch.drop_column("process_resumes")
        batch.drop_column("process_start")
        batch.drop_column("process_pid")
