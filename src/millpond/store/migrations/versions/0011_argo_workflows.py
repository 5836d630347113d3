"""KFP v1 (issue 17): the Argo workflow a pipeline version or run came from, as uploaded.

A kfp 1.x package is translated to IR to run; the UI draws the workflow's own steps and the
API gives the workflow back as the version's and run's ``pipeline_spec`` (as Kubeflow's v2
backend returns a v1 upload). NULL for every v2 pipeline.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("workflow", sa.JSON, nullable=True))
    with op.batch_alter_table("pipeline_versions") as batch:
        batch.add_column(sa.Column("workflow", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("pipeline_versions") as batch:
        batch.drop_column("workflow")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("workflow")
