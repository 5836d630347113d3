"""Multi-user KFP (issue 32): experiments, runs and pipelines belong to a namespace.

An experiment's and a pipeline's name become unique within their namespace instead of over the whole
home (KFP's rule in multi-user mode); every existing row gets ``""``, single-user mode's namespace, so
single-user homes read as before. A run keeps its experiment's namespace beside it, for the lists that
filter on it.

SQLite changes a table's constraints by rebuilding it (a batch migration); its unnamed ``UNIQUE(name)``
is found through a naming convention, as Alembic documents. PostgreSQL named it ``TABLE_name_key``.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_NAMING = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
_NAMESPACED = ("experiments", "pipelines")


def _namespace_column() -> sa.Column[str]:
    return sa.Column("namespace", sa.String(253), nullable=False, server_default="")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table in _NAMESPACED:
        if sqlite:
            with op.batch_alter_table(table, recreate="always", naming_convention=_NAMING) as batch:
                batch.add_column(_namespace_column())
                batch.drop_constraint(f"uq_{table}_name", type_="unique")
                batch.create_unique_constraint(f"uq_{table}_namespace_name", ["namespace", "name"])
        else:
            op.add_column(table, _namespace_column())
            op.drop_constraint(f"{table}_name_key", table, type_="unique")
            op.create_unique_constraint(f"uq_{table}_namespace_name", table, ["namespace", "name"])
    op.add_column("runs", _namespace_column())  # a plain ALTER TABLE ADD COLUMN: runs is referenced by tasks
    op.create_index("ix_runs_namespace_created", "runs", ["namespace", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_namespace_created", "runs")
    op.drop_column("runs", "namespace")
    sqlite = op.get_bind().dialect.name == "sqlite"
    for table in _NAMESPACED:
        if sqlite:
            with op.batch_alter_table(table, recreate="always") as batch:
                batch.drop_constraint(f"uq_{table}_namespace_name", type_="unique")
                batch.drop_column("namespace")
                batch.create_unique_constraint(f"uq_{table}_name", ["name"])
        else:
            op.drop_constraint(f"uq_{table}_namespace_name", table, type_="unique")
            op.drop_column(table, "namespace")
            op.create_unique_constraint(f"{table}_name_key", table, ["name"])
