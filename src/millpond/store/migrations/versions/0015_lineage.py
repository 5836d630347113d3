"""Lineage (issue 34): executions, artifacts, contexts and the events, attributions and associations between them.

ML Metadata's model, which KFP's native artifact API (``/apis/v2beta1/artifacts``, ``/artifact_tasks``) and an
MLMD endpoint both read; see ``millpond.store.lineage``. Ids are text, decided by the writer; no foreign keys, so
the engine inserts an event before or after the artifact it names within one transaction, and a run's deletion
removes its rows explicitly (``store.lineage_reads.forget_runs``).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _id() -> sa.Column[str]:
    return sa.Column("id", sa.String(36), primary_key=True)


def _mlmd_id() -> sa.Column[int]:
    """ML Metadata's int64 id of the row (``store.lineage.mlmd_id``), for an MLMD endpoint to answer and look up."""
    return sa.Column("mlmd_id", sa.BigInteger, nullable=False, index=True)


def _json(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.JSON, nullable=False)


def _time(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "lineage_contexts", _id(), _mlmd_id(), sa.Column("type", sa.String(255), nullable=False),
        sa.Column("name", sa.Text, nullable=False), sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("parent_id", sa.String(36)), _json("properties"), _json("custom_properties"), _time("created_at"),
    )
    op.create_table(
        "lineage_executions", _id(), _mlmd_id(), sa.Column("type", sa.String(255), nullable=False),
        sa.Column("name", sa.Text, nullable=False), sa.Column("state", sa.String(16), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False), sa.Column("run_id", sa.String(36)),
        _json("properties"), _json("custom_properties"), _time("created_at"), _time("updated_at"),
    )
    op.create_index("ix_lineage_executions_run", "lineage_executions", ["run_id"])
    op.create_index("ix_lineage_executions_type", "lineage_executions", ["type"])
    op.create_table(
        "lineage_artifacts", _id(), _mlmd_id(), sa.Column("type", sa.String(255), nullable=False),
        sa.Column("artifact_type", sa.String(64), nullable=False),
        sa.Column("name", sa.Text, nullable=False), sa.Column("uri", sa.Text, nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False), sa.Column("state", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(36)), _json("properties"), _json("custom_properties"),
        _time("created_at"), _time("updated_at"),
    )
    op.create_index("ix_lineage_artifacts_uri", "lineage_artifacts", ["uri"])
    op.create_index("ix_lineage_artifacts_namespace_created", "lineage_artifacts", ["namespace", "created_at"])
    op.create_index("ix_lineage_artifacts_run", "lineage_artifacts", ["run_id"])
    op.create_table(
        "lineage_events", _id(), sa.Column("artifact_id", sa.String(36), nullable=False),
        sa.Column("execution_id", sa.String(36), nullable=False), sa.Column("type", sa.String(32), nullable=False),
        sa.Column("path", sa.Text, nullable=False), sa.Column("io_type", sa.String(32), nullable=False),
        sa.Column("producer_task", sa.Text, nullable=False), sa.Column("run_id", sa.String(36)), _time("created_at"),
    )
    op.create_index("ix_lineage_events_artifact", "lineage_events", ["artifact_id"])
    op.create_index("ix_lineage_events_execution", "lineage_events", ["execution_id"])
    op.create_index("ix_lineage_events_run", "lineage_events", ["run_id"])
    for table, column in (("lineage_attributions", "artifact_id"), ("lineage_associations", "execution_id")):
        op.create_table(table, _id(), sa.Column("context_id", sa.String(36), nullable=False),
                        sa.Column(column, sa.String(36), nullable=False))
        op.create_index(f"ix_{table}_context", table, ["context_id"])
        op.create_index(f"ix_{table}_{column.removesuffix('_id')}", table, [column])


def downgrade() -> None:
    for table in ("lineage_associations", "lineage_attributions", "lineage_events", "lineage_artifacts",
                  "lineage_executions", "lineage_contexts"):
        op.drop_table(table)
