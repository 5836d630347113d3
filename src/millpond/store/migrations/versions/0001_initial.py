"""The first tables: experiments, runs, tasks, artifacts.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("experiment_id", sa.String(36), sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("pipeline_name", sa.String(255), nullable=False),
        sa.Column("pipeline_spec", sa.JSON, nullable=False),
        sa.Column("platform_spec", sa.JSON, nullable=True),
        sa.Column("parameters", sa.JSON, nullable=False),
        sa.Column("pipeline_root", sa.Text, nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("outputs", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
    )
    op.create_index("ix_runs_experiment_created", "runs", ["experiment_id", "created_at"])
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(36), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("parent_id", sa.String(36), nullable=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("component", sa.String(255), nullable=False),
        sa.Column("image", sa.Text, nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("inputs", sa.JSON, nullable=False),
        sa.Column("outputs", sa.JSON, nullable=False),
        sa.Column("log_path", sa.Text, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
    )
    op.create_index("ix_tasks_run_path", "tasks", ["run_id", "path"], unique=True)
    op.create_table(
        "artifacts",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(36), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("task_id", sa.String(36), sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("uri", sa.Text, nullable=False),
        sa.Column("metadata", sa.JSON, nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_index("ix_artifacts_run", "artifacts", ["run_id"])


def downgrade() -> None:
    op.drop_table("artifacts")
    op.drop_table("tasks")
    op.drop_table("runs")
    op.drop_table("experiments")
