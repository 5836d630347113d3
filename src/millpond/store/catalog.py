"""Pipelines and their versions: IR documents stored once (uploaded, or created as JSON) and run many times.

Names are unique (a pipeline's among the pipelines of its namespace, ``""`` for shared ones; a version's
within its pipeline); taking one twice is a ``NameTaken`` (HTTP 409). Each method is one short transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from millpond.errors import ConflictError, NotFoundError, UserError
from millpond.store.db import session_factory
from millpond.store.listing import ListQuery, Page, one_page
from millpond.store.models import Pipeline, PipelineVersion

PIPELINE_FIELDS = {"display_name": Pipeline.display_name, "name": Pipeline.name, "pipeline_id": Pipeline.id,
                   "id": Pipeline.id, "created_at": Pipeline.created_at, "description": Pipeline.description,
                   "namespace": Pipeline.namespace}
VERSION_FIELDS = {"display_name": PipelineVersion.display_name, "name": PipelineVersion.name,
                  "pipeline_version_id": PipelineVersion.id, "id": PipelineVersion.id,
                  "created_at": PipelineVersion.created_at, "description": PipelineVersion.description}
MAX_NAME = 255


class NameTaken(ConflictError):
    """The name is already used (HTTP 409): a pipeline's, a version's within its pipeline, an experiment's."""


@dataclass(frozen=True)
class VersionDraft:
    """What a new version is made of: its names, and its validated IR (and kfp-kubernetes platform spec)."""

    name: str
    display_name: str
    description: str | None
    pipeline_spec: dict[str, Any]
    platform_spec: dict[str, Any] | None = None
    workflow: dict[str, Any] | None = None  # the Argo workflow of a kfp 1.x upload, as uploaded


class PipelineStore:
    """The pipelines and pipeline versions of one millpond home (or database URL)."""

    def __init__(self, database_url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(database_url)

    # --- writes ------------------------------------------------------------------------------
    def create_pipeline(self, name: str, display_name: str, description: str | None,
                        first_version: VersionDraft | None = None, namespace: str = "") -> Pipeline:
        """A new pipeline of ``namespace`` ("": shared), with its first version when given, in one transaction."""
        with self._sessions() as session:
            if session.scalar(select(Pipeline.id).where(Pipeline.namespace == namespace, Pipeline.name == name)):
                raise NameTaken(f"pipeline {name!r} already exists; upload a version to it instead")
            pipeline = Pipeline(name=name, display_name=display_name[:MAX_NAME], description=description or "",
                                namespace=namespace)
            session.add(pipeline)
            session.flush()
            if first_version is not None:
                session.add(self._version(session, pipeline.id, first_version))
            self._commit(session, f"pipeline {name!r} already exists")
            return pipeline

    def add_version(self, pipeline_id: str, draft: VersionDraft) -> PipelineVersion:
        with self._sessions() as session:
            self._pipeline(session, pipeline_id)
            version = self._version(session, pipeline_id, draft)
            session.add(version)
            self._commit(session, f"pipeline {pipeline_id!r} already has a version named {draft.name!r}")
            return version

    def delete_pipeline(self, pipeline_id: str) -> None:
        """Delete a pipeline with its versions (runs keep their copies of the spec)."""
        with self._sessions() as session:
            session.execute(delete(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id))
            session.execute(delete(Pipeline).where(Pipeline.id == pipeline_id))
            session.commit()

    def delete_version(self, version_id: str) -> None:
        with self._sessions() as session:
            session.execute(delete(PipelineVersion).where(PipelineVersion.id == version_id))
            session.commit()

    # --- reads -------------------------------------------------------------------------------
    def get_pipeline(self, pipeline_id: str) -> Pipeline:
        with self._sessions() as session:
            return self._pipeline(session, pipeline_id)

    def pipeline_named(self, name: str, namespace: str | None = None) -> Pipeline | None:
        """The pipeline of this name, or else of this display name; of ``namespace`` (None: any)."""
        rows = select(Pipeline) if namespace is None else select(Pipeline).where(Pipeline.namespace == namespace)
        with self._sessions() as session:
            found = session.scalars(rows.where(Pipeline.name == name)).first()
            return found or session.scalars(rows.where(Pipeline.display_name == name)).first()

    def get_version(self, version_id: str, pipeline_id: str | None = None) -> PipelineVersion:
        """A version by id (and of that pipeline, when one is given)."""
        with self._sessions() as session:
            version = session.get(PipelineVersion, version_id)
        if version is None or (pipeline_id and version.pipeline_id != pipeline_id):
            raise NotFoundError(f"no pipeline version with id {version_id!r}"
                                + (f" in pipeline {pipeline_id!r}" if pipeline_id else ""))
        return version

    def newest_version(self, pipeline_id: str) -> PipelineVersion | None:
        with self._sessions() as session:
            self._pipeline(session, pipeline_id)
            return session.scalars(select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id)
                                   .order_by(PipelineVersion.created_at.desc()).limit(1)).first()

    def count_versions(self, pipeline_id: str) -> int:
        with self._sessions() as session:
            return session.scalar(select(func.count()).where(PipelineVersion.pipeline_id == pipeline_id)) or 0

    def page_pipelines(self, query: ListQuery, namespace: str | None = None) -> Page[Pipeline]:
        """A page of pipelines, of one namespace ("": the shared ones; None: all)."""
        rows = select(Pipeline) if namespace is None else select(Pipeline).where(Pipeline.namespace == namespace)
        with self._sessions() as session:
            return one_page(session, rows, query, PIPELINE_FIELDS, Pipeline.created_at.asc())

    def page_versions(self, pipeline_id: str, query: ListQuery) -> Page[PipelineVersion]:
        with self._sessions() as session:
            self._pipeline(session, pipeline_id)
            rows = select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline_id)
            return one_page(session, rows, query, VERSION_FIELDS, PipelineVersion.created_at.asc())

    # --- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _pipeline(session: Session, pipeline_id: str) -> Pipeline:
        pipeline = session.get(Pipeline, pipeline_id)
        if pipeline is None:
            raise NotFoundError(f"no pipeline with id {pipeline_id!r}")
        return pipeline

    @staticmethod
    def _version(session: Session, pipeline_id: str, draft: VersionDraft) -> PipelineVersion:
        if len(draft.name) > MAX_NAME:
            raise UserError(f"version name is over {MAX_NAME} characters: {draft.name[:40]}...")
        taken = session.scalar(select(PipelineVersion.id).where(PipelineVersion.pipeline_id == pipeline_id,
                                                                PipelineVersion.name == draft.name))
        if taken:
            raise NameTaken(f"pipeline {pipeline_id!r} already has a version named {draft.name!r}")
        return PipelineVersion(pipeline_id=pipeline_id, name=draft.name, display_name=draft.display_name[:MAX_NAME],
                               description=draft.description or "", pipeline_spec=draft.pipeline_spec,
                               platform_spec=draft.platform_spec, workflow=draft.workflow)

    @staticmethod
    def _commit(session: Session, taken: str) -> None:
        """Commit; a name another request took since the check is a NameTaken, not a crash."""
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            raise NameTaken(taken) from None
