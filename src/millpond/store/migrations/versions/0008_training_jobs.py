"""Training jobs (``arena submit``): the job, its instances and its events.

``training_jobs`` holds one job per (namespace, name): the whole spec as JSON, the status
Arena shows (QUEUING PENDING RUNNING SUCCEEDED FAILED) with its reason, and the process that
supervises it (pid + start ticks, so a supervisor killed with ``kill -9`` is seen dead at the
next read). ``training_instances`` holds the current attempt's processes, one per instance
(each a process group: pid + start ticks, exit code, log, granted GPUs). ``training_events``
is what ``arena get -e`` prints: why a job waits, starts, restarts, ends.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "training_jobs",
        sa.Column("uid", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("trainer", sa.String(32), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
        sa.Column("supervisor_pid", sa.Integer, nullable=True),
        sa.Column("supervisor_start", sa.String(32), nullable=True),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
        sa.Column("gpus", sa.JSON, nullable=True),
        sa.UniqueConstraint("namespace", "name", name="uq_training_jobs_namespace_name"),
    )
    op.create_table(
        "training_instances",
        sa.Column("job_uid", sa.String(36), sa.ForeignKey("training_jobs.uid", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("name", sa.String(253), primary_key=True),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("index", sa.Integer, nullable=False),
        sa.Column("rank", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("pid", sa.Integer, nullable=True),
        sa.Column("pid_start", sa.String(32), nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("log_path", sa.Text, nullable=True),
        sa.Column("gpus", sa.JSON, nullable=True),
        sa.Column("started_at", TZ, nullable=True),
        sa.Column("finished_at", TZ, nullable=True),
    )
    op.create_table(
        "training_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_uid", sa.String(36), sa.ForeignKey("training_jobs.uid", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("at", TZ, nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
    )
    op.create_index("ix_training_events_job", "training_events", ["job_uid", "id"])


def downgrade() -> None:
    op.drop_index("ix_training_events_job", table_name="training_events")
    op.drop_table("training_events")
    op.drop_table("training_instances")
    op.drop_table("training_jobs")
