"""The model registry (issue 34): registered models, their versions, and artifacts.

Kubeflow Model Registry keeps these in ML Metadata's generic tables (contexts, artifacts and their
properties); millpond keeps one small table per entity instead, with the type's own fields in a JSON
column (``properties``) beside the user's ``custom_properties``. Ids are integers, as the API's
``^[1-9][0-9]{0,8}$`` ids are.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def _common() -> list[sa.Column[Any]]:
    return [
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("external_id", sa.String(255), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("properties", sa.JSON(), nullable=False),
        sa.Column("custom_properties", sa.JSON(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.Column("updated_ms", sa.BigInteger(), nullable=False),
    ]


def _named(columns: list[sa.Column[Any]]) -> list[sa.Column[Any]]:
    """The common columns with ``name`` required (models and versions always have one)."""
    return [sa.Column("name", sa.String(255), nullable=False) if c.name == "name" else c for c in columns]


def upgrade() -> None:
    op.create_table(
        "registry_models",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(253), nullable=False),
        *_named(_common()),
        sa.UniqueConstraint("namespace", "name", name="uq_registry_models_namespace_name"),
        sa.UniqueConstraint("namespace", "external_id", name="uq_registry_models_namespace_external_id"),
    )
    op.create_table(
        "registry_versions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("parent_id", sa.Integer(), sa.ForeignKey("registry_models.id", ondelete="CASCADE"),
                  nullable=False),
        *_named(_common()),
        sa.UniqueConstraint("parent_id", "name", name="uq_registry_versions_parent_name"),
        sa.UniqueConstraint("namespace", "external_id", name="uq_registry_versions_namespace_external_id"),
    )
    op.create_table(
        "registry_artifacts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("parent_id", sa.Integer(), sa.ForeignKey("registry_versions.id", ondelete="SET NULL"),
                  nullable=True),
        sa.Column("artifact_type", sa.String(32), nullable=False),
        sa.Column("uri", sa.Text(), nullable=True),
        *_common(),
        sa.UniqueConstraint("namespace", "external_id", name="uq_registry_artifacts_namespace_external_id"),
    )
    op.create_index("ix_registry_artifacts_parent", "registry_artifacts", ["parent_id"])


def downgrade() -> None:
    op.drop_index("ix_registry_artifacts_parent", "registry_artifacts")
    op.drop_table("registry_artifacts")
    op.drop_table("registry_versions")
    op.drop_table("registry_models")
