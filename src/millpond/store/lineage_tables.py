"""The lineage tables (migration 0015) as SQLAlchemy models, for the readers (the API) and the SQLAlchemy journal.

What each column holds is described in :mod:`millpond.store.lineage`, which builds the rows. Ids are text
(uuid5s decided by that module); ``type`` is MLMD's type name (``system.Model``, ``system.ContainerExecution``);
``properties``/``custom_properties`` are MLMD's, as JSON objects of plain values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, BigInteger, DateTime, Index, String, Table, Text
from sqlalchemy.orm import Mapped, mapped_column

from millpond.store.lineage import TableRows
from millpond.store.models import Base

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresqlInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert


class LineageContext(Base):
    """A ``system.PipelineRun`` (named by its run's id) or ``system.Pipeline`` (by its name); a run's parent is its
    pipeline."""

    __tablename__ = "lineage_contexts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    mlmd_id: Mapped[int] = mapped_column(BigInteger, index=True)  # ML Metadata's int64 id (lineage.mlmd_id)
    type: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(Text)
    namespace: Mapped[str] = mapped_column(String(253), default="")
    parent_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    custom_properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LineageExecution(Base):
    """One execution: a task of a run (its id is the task's), or a deployment, training job or data operation."""

    __tablename__ = "lineage_executions"
    __table_args__ = (Index("ix_lineage_executions_run", "run_id"), Index("ix_lineage_executions_type", "type"))

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    mlmd_id: Mapped[int] = mapped_column(BigInteger, index=True)  # ML Metadata's int64 id (lineage.mlmd_id)
    type: Mapped[str] = mapped_column(String(255))
    name: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16))  # MLMD's: NEW RUNNING COMPLETE FAILED CACHED CANCELED
    namespace: Mapped[str] = mapped_column(String(253), default="")
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    custom_properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LineageArtifact(Base):
    """One artifact, by its URI (its id is derived from it); ``run_id`` is the run whose task produced it."""

    __tablename__ = "lineage_artifacts"
    __table_args__ = (
        Index("ix_lineage_artifacts_uri", "uri"),
        Index("ix_lineage_artifacts_namespace_created", "namespace", "created_at"),
        Index("ix_lineage_artifacts_run", "run_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    mlmd_id: Mapped[int] = mapped_column(BigInteger, index=True)  # ML Metadata's int64 id (lineage.mlmd_id)
    type: Mapped[str] = mapped_column(String(255))
    artifact_type: Mapped[str] = mapped_column(String(64))  # KFP's ArtifactType name (Model, Dataset, Metric...)
    name: Mapped[str] = mapped_column(Text)
    uri: Mapped[str] = mapped_column(Text)
    namespace: Mapped[str] = mapped_column(String(253), default="")
    state: Mapped[str] = mapped_column(String(16), default="LIVE")
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    custom_properties: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LineageEvent(Base):
    """An execution read (INPUT) or wrote (OUTPUT) an artifact under ``path`` (the input's or output's name);
    ``io_type`` and ``producer_task`` are what KFP's native ``ArtifactTask`` says beside it."""

    __tablename__ = "lineage_events"
    __table_args__ = (
        Index("ix_lineage_events_artifact", "artifact_id"),
        Index("ix_lineage_events_execution", "execution_id"),
        Index("ix_lineage_events_run", "run_id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    artifact_id: Mapped[str] = mapped_column(String(36))
    execution_id: Mapped[str] = mapped_column(String(36))
    type: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(Text)
    io_type: Mapped[str] = mapped_column(String(32))
    producer_task: Mapped[str] = mapped_column(Text, default="")
    run_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class LineageAttribution(Base):
    """An artifact belongs to a context (MLMD's Attribution)."""

    __tablename__ = "lineage_attributions"
    __table_args__ = (Index("ix_lineage_attributions_context", "context_id"),
                      Index("ix_lineage_attributions_artifact", "artifact_id"))

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    context_id: Mapped[str] = mapped_column(String(36))
    artifact_id: Mapped[str] = mapped_column(String(36))


class LineageAssociation(Base):
    """An execution belongs to a context (MLMD's Association)."""

    __tablename__ = "lineage_associations"
    __table_args__ = (Index("ix_lineage_associations_context", "context_id"),
                      Index("ix_lineage_associations_execution", "execution_id"))

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    context_id: Mapped[str] = mapped_column(String(36))
    execution_id: Mapped[str] = mapped_column(String(36))


# The tables by name, as ``store.lineage.TableRows`` names them.
LINEAGE_TABLES = {model.__tablename__: model.__table__ for model in (
    LineageContext, LineageExecution, LineageArtifact, LineageEvent, LineageAttribution, LineageAssociation)}


Statement = tuple[Any, list[dict[str, Any]]]  # an executable and the rows it is executed with


def dialect_insert(dialect: str, table: Table) -> PostgresqlInsert | SqliteInsert:
    """INSERT with ON CONFLICT in the database's own dialect (SQLite's and PostgreSQL's both have it)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert  # noqa: PLC0415 — 180 ms, PostgreSQL only

        return postgresql_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert  # noqa: PLC0415 — the SQLite dialect's DML, when used

    return sqlite_insert(table)


def lineage_statements(tables: list[TableRows], dialect_insert: Callable[[Table], Any]) -> list[Statement]:
    """(statement, rows) for each table's rows: an INSERT whose existing ids are kept or updated, in the database's
    own dialect (``dialect_insert``: SQLite's or PostgreSQL's ``insert``, both with ON CONFLICT)."""
    statements = []
    for rows in tables:
        insert = dialect_insert(LINEAGE_TABLES[rows.table])
        statement = (insert.on_conflict_do_nothing(index_elements=["id"]) if rows.conflict == "ignore" else
                     insert.on_conflict_do_update(index_elements=["id"],
                                                  set_={c: insert.excluded[c] for c in rows.update}))
        statements.append((statement, rows.rows))
    return statements
