"""Lineage (``store.lineage``'s tables) outside the run engine: pages of artifacts and of artifact-task links, one
artifact or execution, an execution that is no task's (a model deployment) recorded, and a deleted run's records
forgotten.

The fields a list filters and sorts by are KFP's names for them (``backend/src/apiserver/model/artifact.go``,
``artifact_task.go``: ``name``, ``type``, ``uri``, ``created_at``, ``namespace``; ``run_id``, ``task_id``,
``artifact_id``, ``type``, ``key``), mapped to columns as ``store.listing`` applies them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import NotFoundError
from millpond.store.db import session_factory
from millpond.store.keys import utcnow
from millpond.store.lineage import ExecutionRecord, TableRows, rows_of
from millpond.store.lineage_tables import (
    LineageArtifact,
    LineageAssociation,
    LineageAttribution,
    LineageContext,
    LineageEvent,
    LineageExecution,
    dialect_insert,
    lineage_statements,
)
from millpond.store.listing import ListQuery, Page, one_page

ARTIFACT_FIELDS = {"artifact_id": LineageArtifact.id, "id": LineageArtifact.id, "name": LineageArtifact.name,
                   "display_name": LineageArtifact.name, "type": LineageArtifact.artifact_type,
                   "uri": LineageArtifact.uri, "created_at": LineageArtifact.created_at,
                   "namespace": LineageArtifact.namespace, "run_id": LineageArtifact.run_id,
                   "state": LineageArtifact.state}
ARTIFACT_TASK_FIELDS = {"id": LineageEvent.id, "artifact_id": LineageEvent.artifact_id, "run_id": LineageEvent.run_id,
                        "task_id": LineageEvent.execution_id, "type": LineageEvent.io_type, "key": LineageEvent.path,
                        "producer_task_name": LineageEvent.producer_task, "created_at": LineageEvent.created_at}
# The executions list of the UI (millpond's own route, ``server.lineage_routes``): MLMD's execution fields.
EXECUTION_FIELDS = {"id": LineageExecution.id, "execution_id": LineageExecution.id, "name": LineageExecution.name,
                    "type": LineageExecution.type, "state": LineageExecution.state,
                    "created_at": LineageExecution.created_at, "updated_at": LineageExecution.updated_at,
                    "namespace": LineageExecution.namespace, "run_id": LineageExecution.run_id}


class LineageStore:
    """The lineage of one millpond home (or database URL), as the API reads it."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    def record(self, execution: ExecutionRecord) -> None:
        """Record one execution with its artifacts and events, in one transaction (the engine records its tasks'
        through its journal, in the transaction of each task's end)."""
        self.write(rows_of(execution, utcnow()))

    def write(self, tables: list[TableRows]) -> None:
        """Insert lineage rows (``store.lineage`` built them) in one transaction."""
        with self._sessions() as session:
            dialect = session.get_bind().dialect.name
            for statement, rows in lineage_statements(tables, lambda table: dialect_insert(dialect, table)):
                session.execute(statement, rows)
            session.commit()

    def existing_artifacts(self, artifact_ids: list[str]) -> set[str]:
        """Which of these artifact ids are recorded."""
        with self._sessions() as session:
            return set(session.scalars(select(LineageArtifact.id).where(LineageArtifact.id.in_(artifact_ids))))

    def find_event(self, event_id: str) -> LineageEvent:
        with self._sessions() as session:
            found = session.get(LineageEvent, event_id)
        if found is None:
            raise NotFoundError(f"no artifact task {event_id!r}")
        return found

    def page_artifacts(self, query: ListQuery, namespace: str | None) -> Page[LineageArtifact]:
        """A page of artifacts, of one namespace (None: every namespace), oldest first as KFP lists them."""
        rows = select(LineageArtifact)
        if namespace is not None:
            rows = rows.where(LineageArtifact.namespace == namespace)
        with self._sessions() as session:
            return one_page(session, rows, query, ARTIFACT_FIELDS,
                            (LineageArtifact.created_at.asc(), LineageArtifact.id.asc()))

    def find_artifact(self, artifact_id: str) -> LineageArtifact:
        with self._sessions() as session:
            found = session.get(LineageArtifact, artifact_id)
        if found is None:
            raise NotFoundError(f"Failed to get artifact: artifact {artifact_id!r} not found")
        return found

    def find_execution(self, execution_id: str) -> LineageExecution:
        """An execution; a task's has the task's id (KFP's ArtifactTask.task_id)."""
        with self._sessions() as session:
            found = session.get(LineageExecution, execution_id)
        if found is None:
            raise NotFoundError(f"Failed to get task: task {execution_id!r} not found")
        return found

    def page_artifact_tasks(
        self, query: ListQuery, *, task_ids: list[str], run_ids: list[str], artifact_ids: list[str],
        io_type: str | None,
    ) -> Page[LineageEvent]:
        """A page of artifact-task links (MLMD's events) of any of these tasks, runs or artifacts (KFP ORs the
        id lists it is given), of one IOType when ``io_type`` is given; oldest first."""
        which: list[Any] = []
        if task_ids:
            which.append(LineageEvent.execution_id.in_(task_ids))
        if run_ids:
            which.append(LineageEvent.run_id.in_(run_ids))
        if artifact_ids:
            which.append(LineageEvent.artifact_id.in_(artifact_ids))
        rows = select(LineageEvent)
        if which:
            rows = rows.where(or_(*which))
        if io_type:
            rows = rows.where(LineageEvent.io_type == io_type)
        with self._sessions() as session:
            return one_page(session, rows, query, ARTIFACT_TASK_FIELDS,
                            (LineageEvent.created_at.asc(), LineageEvent.id.asc()))

    # --- what the UI's lineage pages read (server.lineage_reads) ------------------------------------------
    def page_executions(self, query: ListQuery, namespace: str | None) -> Page[LineageExecution]:
        """A page of executions, of one namespace (None: every namespace), newest first (KFP's executions list)."""
        rows = select(LineageExecution)
        if namespace is not None:
            rows = rows.where(LineageExecution.namespace == namespace)
        with self._sessions() as session:
            return one_page(session, rows, query, EXECUTION_FIELDS,
                            (LineageExecution.created_at.desc(), LineageExecution.id.asc()))

    def events_of(self, *, execution_ids: Collection[str] = (), artifact_ids: Collection[str] = (),
                  limit: int = 1000) -> list[LineageEvent]:
        """The events of these executions or artifacts (either list may be empty), oldest first, at most
        ``limit`` (a dataset every task of a thousand runs read is shown by its first thousand readers)."""
        which: list[Any] = []
        if execution_ids:
            which.append(LineageEvent.execution_id.in_(sorted(execution_ids)))
        if artifact_ids:
            which.append(LineageEvent.artifact_id.in_(sorted(artifact_ids)))
        if not which:
            return []
        with self._sessions() as session:
            return list(session.scalars(select(LineageEvent).where(or_(*which))
                                        .order_by(LineageEvent.created_at.asc(), LineageEvent.id.asc())
                                        .limit(limit)))

    def artifacts_by_id(self, artifact_ids: Collection[str]) -> dict[str, LineageArtifact]:
        if not artifact_ids:
            return {}
        with self._sessions() as session:
            rows = session.scalars(select(LineageArtifact).where(LineageArtifact.id.in_(sorted(artifact_ids))))
            return {row.id: row for row in rows}

    def executions_by_id(self, execution_ids: Collection[str]) -> dict[str, LineageExecution]:
        if not execution_ids:
            return {}
        with self._sessions() as session:
            rows = session.scalars(select(LineageExecution).where(LineageExecution.id.in_(sorted(execution_ids))))
            return {row.id: row for row in rows}


def forget_runs(session: Session, runs: Any) -> None:
    """Delete the lineage of the runs ``runs`` (a SELECT of run ids) in ``session``'s transaction: their executions,
    events, context links and run contexts, and the artifacts they produced that no other run's event names."""
    session.execute(delete(LineageEvent).where(LineageEvent.run_id.in_(runs)))
    executions = select(LineageExecution.id).where(LineageExecution.run_id.in_(runs))
    session.execute(delete(LineageAssociation).where(LineageAssociation.execution_id.in_(executions)))
    session.execute(delete(LineageExecution).where(LineageExecution.run_id.in_(runs)))
    still_named = select(LineageEvent.artifact_id)
    orphans = select(LineageArtifact.id).where(LineageArtifact.run_id.in_(runs), LineageArtifact.id.not_in(still_named))
    session.execute(delete(LineageAttribution).where(LineageAttribution.artifact_id.in_(orphans)))
    session.execute(delete(LineageArtifact).where(LineageArtifact.run_id.in_(runs),
                                                  LineageArtifact.id.not_in(still_named)))
    run_contexts = select(LineageContext.id).where(LineageContext.type == "system.PipelineRun",
                                                   LineageContext.name.in_(runs))
    session.execute(delete(LineageAttribution).where(LineageAttribution.context_id.in_(run_contexts)))
    session.execute(delete(LineageContext).where(LineageContext.type == "system.PipelineRun",
                                                 LineageContext.name.in_(runs)))
