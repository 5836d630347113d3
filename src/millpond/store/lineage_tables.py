"""The lineage tables (migration 0014) as SQLAlchemy models, for the readers (the API) and the SQLAlchemy journal.

What each column holds is described in :mod:`millpond.store.lineage`, which builds the rows. Ids are text
(uuid5s decided by that module); ``type`` is MLMD's type name (``system.Model``, ``system.ContainerExecution``);
``properties``/``custom_properties`` are MLMD's, as JSON objects of plain values.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, DateTime, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from millpond.store.models import Base


class LineageContext(Base):
    """A ``system.PipelineRun`` (named by its run's id) or ``system.Pipeline`` (by its name); a run's parent is its
    pipeline."""

    __tablename__ = "lineage_contexts"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
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
