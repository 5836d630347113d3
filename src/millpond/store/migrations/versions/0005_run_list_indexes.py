"""Indexes for listing runs newest first, whole or by state, with 10,000 runs and more.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_created", "runs", ["created_at"])
    op.create_index("ix_runs_state_created", "runs", ["state", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_state_created", table_name="runs")
    op.drop_index("ix_runs_created", table_name="runs")
