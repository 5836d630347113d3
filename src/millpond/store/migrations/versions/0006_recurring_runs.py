"""Recurring runs in the database (they were JSON files under $MILLPOND_HOME/recurring/).

Adds ``recurring_runs``; ``scheduled_runs``, whose primary key (recurring run, scheduled time)
is the claim that keeps two servers on one home from starting the same scheduled run twice;
and ``runs.recurring_run_id``, so runs can be listed by the recurring run that started them.
A home's old JSON files are imported by the server when it starts (the database URL does
not say where the home is), then renamed to ``NAME.json.imported``.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "recurring_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("experiment_id", sa.String(36), nullable=True),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("service_account", sa.String(253), nullable=False),
        sa.Column("pipeline_spec", sa.JSON, nullable=True),
        sa.Column("platform_spec", sa.JSON, nullable=True),
        sa.Column("pipeline_id", sa.String(36), nullable=True),
        sa.Column("pipeline_version_id", sa.String(36), nullable=True),
        sa.Column("parameters", sa.JSON, nullable=False),
        sa.Column("pipeline_root", sa.Text, nullable=True),
        sa.Column("cron", sa.String(255), nullable=True),
        sa.Column("interval_second", sa.Integer, nullable=True),
        sa.Column("start_time", TZ, nullable=True),
        sa.Column("end_time", TZ, nullable=True),
        sa.Column("max_concurrency", sa.Integer, nullable=False),
        sa.Column("no_catchup", sa.Boolean, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.Column("last_scheduled_at", TZ, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_recurring_runs_experiment", "recurring_runs", ["experiment_id"])
    op.create_table(
        "scheduled_runs",
        sa.Column("recurring_run_id", sa.String(36), sa.ForeignKey("recurring_runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("scheduled_at", TZ, primary_key=True),
        sa.Column("claimed_at", TZ, nullable=False),
        sa.Column("run_id", sa.String(36), nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_scheduled_runs_claimed", "scheduled_runs", ["recurring_run_id", "claimed_at"])
    # Plain ALTER TABLE ... ADD COLUMN: a batch copy of ``runs`` would drop the tables that reference it.
    op.add_column("runs", sa.Column("recurring_run_id", sa.String(36), nullable=True))
    op.create_index("ix_runs_recurring_created", "runs", ["recurring_run_id", "created_at"])
    op.create_index("ix_runs_recurring_state", "runs", ["recurring_run_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_runs_recurring_state", table_name="runs")
    op.drop_index("ix_runs_recurring_created", table_name="runs")
    op.drop_column("runs", "recurring_run_id")
    op.drop_index("ix_scheduled_runs_claimed", table_name="scheduled_runs")
    op.drop_table("scheduled_runs")
    op.drop_index("ix_recurring_runs_experiment", table_name="recurring_runs")
    op.drop_table("recurring_runs")
