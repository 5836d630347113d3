"""The model registry's records in the metadata database: registered models, model versions, artifacts.

Kubeflow Model Registry (``kubeflow/model-registry``, ``api/openapi/model-registry.yaml``) keeps three
entities that matter to serving: a ``RegisteredModel`` (unique name), its ``ModelVersion``s (a name unique
within the model) and the ``Artifact``s of a version (a ``ModelArtifact`` has the URI KServe serves). Each
registry is one namespace's (Kubeflow deploys one per namespace); here a ``namespace`` column says whose.

The store speaks :class:`Entry` (plain values; it sits below the API, which turns entries into the
OpenAPI's JSON) and raises millpond's errors: :class:`NotFoundError` (404) for an id, name or external id
that is not there, :class:`ConflictError` (409) for a name or external id already taken. Lists are pages
ordered by id, create or update time, ascending or descending (the API's ``orderBy``/``sortOrder``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from millpond.errors import ConflictError, NotFoundError
from millpond.store.db import session_factory
from millpond.store.models import RegistryArtifactRow, RegistryModelRow, RegistryVersionRow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

MODEL, VERSION, ARTIFACT = "RegisteredModel", "ModelVersion", "Artifact"
KINDS = (MODEL, VERSION, ARTIFACT)
_ROWS: dict[str, type[RegistryModelRow] | type[RegistryVersionRow] | type[RegistryArtifactRow]] = {
    MODEL: RegistryModelRow, VERSION: RegistryVersionRow, ARTIFACT: RegistryArtifactRow}
_PARENT = {VERSION: MODEL, ARTIFACT: VERSION}
ORDER_COLUMNS = {"ID": "id", "CREATE_TIME": "created_ms", "LAST_UPDATE_TIME": "updated_ms"}


@dataclass(frozen=True)
class Entry:
    """One registry entity as stored: its kind (``RegisteredModel``, ``ModelVersion``, ``Artifact``), id,
    namespace, the parent it belongs to (a version's model, an artifact's version; None for a model or an
    artifact attached to none), and its fields."""

    kind: str
    id: int
    namespace: str
    name: str | None
    external_id: str | None
    description: str | None
    state: str
    parent_id: int | None
    properties: Mapping[str, Any]
    custom_properties: Mapping[str, Any]
    created_ms: int
    updated_ms: int
    artifact_type: str | None = None
    uri: str | None = None


@dataclass(frozen=True)
class Draft:
    """A new entity's fields (``properties``: the type's own fields, as the API names them)."""

    name: str | None
    state: str
    parent_id: int | None = None
    external_id: str | None = None
    description: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)
    custom_properties: Mapping[str, Any] = field(default_factory=dict)
    artifact_type: str | None = None
    uri: str | None = None


@dataclass(frozen=True)
class Changes:
    """What a PATCH changes: only the fields given (``properties`` merged key by key; ``custom_properties``,
    when given, replaces the whole map, as the upstream server does)."""

    state: str | None = None
    external_id: str | None = None
    description: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)
    custom_properties: Mapping[str, Any] | None = None
    uri: str | None = None
    parent_id: int | None = None


@dataclass(frozen=True)
class Page:
    """One page of a list: its entries and whether more follow."""

    entries: list[Entry]
    more: bool


def now_ms() -> int:
    return int(time.time() * 1000)


def _entry(kind: str, row: Any) -> Entry:
    return Entry(kind=kind, id=row.id, namespace=row.namespace, name=row.name, external_id=row.external_id,
                 description=row.description, state=row.state, parent_id=getattr(row, "parent_id", None),
                 properties=dict(row.properties or {}), custom_properties=dict(row.custom_properties or {}),
                 created_ms=row.created_ms, updated_ms=row.updated_ms,
                 artifact_type=getattr(row, "artifact_type", None), uri=getattr(row, "uri", None))


class RegistryStore:
    """The registry's entities over one metadata database."""

    def __init__(self, url: str) -> None:
        self._sessions: sessionmaker[Session] = session_factory(url)

    def get(self, kind: str, namespace: str, entry_id: int) -> Entry:
        with self._sessions() as session:
            return _entry(kind, self._row(session, kind, namespace, entry_id))

    def find(self, kind: str, namespace: str, name: str | None = None, external_id: str | None = None,
             parent_id: int | None = None, artifact_type: str | None = None) -> Entry:
        """The one entity with this external id, or this name (within ``parent_id`` for versions and artifacts:
        names are unique only there); NotFoundError when none matches."""
        row_type: Any = _ROWS[kind]
        query = select(row_type).where(row_type.namespace == namespace)
        if external_id is not None:
            query = query.where(row_type.external_id == external_id)
        if name is not None:
            query = query.where(row_type.name == name)
        if parent_id is not None and kind != MODEL:
            query = query.where(row_type.parent_id == parent_id)
        if artifact_type is not None and kind == ARTIFACT:
            query = query.where(RegistryArtifactRow.artifact_type == artifact_type)
        with self._sessions() as session:
            row = session.scalars(query.order_by(row_type.id).limit(1)).first()
            if row is None:
                asked = " and ".join(f"{what} {value!r}" for what, value in (
                    ("name", name), ("externalId", external_id), ("parent id", parent_id)) if value is not None)
                raise NotFoundError(f"no {kind} with {asked} in the model registry of namespace {namespace}")
            return _entry(kind, row)

    def create(self, kind: str, namespace: str, draft: Draft) -> Entry:
        """The new entity; ConflictError when its name (within its parent) or external id is taken, NotFoundError
        when its parent is not there."""
        stamp = now_ms()
        values: dict[str, Any] = {
            "namespace": namespace, "name": draft.name, "external_id": draft.external_id,
            "description": draft.description, "state": draft.state, "properties": dict(draft.properties),
            "custom_properties": dict(draft.custom_properties), "created_ms": stamp, "updated_ms": stamp}
        if kind != MODEL:
            values["parent_id"] = draft.parent_id
        if kind == ARTIFACT:
            values.update(artifact_type=draft.artifact_type, uri=draft.uri)
        with self._sessions() as session:
            if kind != MODEL and draft.parent_id is not None:
                self._row(session, _PARENT[kind], namespace, draft.parent_id)
            self._check_unique(session, kind, namespace, draft.name, draft.external_id, draft.parent_id, None,
                               draft.artifact_type)
            row = _ROWS[kind](**values)
            session.add(row)
            try:
                session.commit()
            except IntegrityError:  # a concurrent create took the name first
                session.rollback()
                raise ConflictError(f"a {kind} named {draft.name!r} already exists") from None
            return _entry(kind, row)

    def update(self, kind: str, namespace: str, entry_id: int, changes: Changes) -> Entry:
        with self._sessions() as session:
            row: Any = self._row(session, kind, namespace, entry_id)
            if changes.external_id is not None and changes.external_id != row.external_id:
                self._check_unique(session, kind, namespace, None, changes.external_id, None, entry_id)
                row.external_id = changes.external_id
            if changes.parent_id is not None and kind == ARTIFACT and changes.parent_id != row.parent_id:
                self._row(session, VERSION, namespace, changes.parent_id)
                self._check_unique(session, kind, namespace, row.name, None, changes.parent_id, entry_id,
                                   row.artifact_type)
                row.parent_id = changes.parent_id
            if changes.state is not None:
                row.state = changes.state
            if changes.description is not None:
                row.description = changes.description
            if changes.properties:
                row.properties = {**(row.properties or {}), **changes.properties}
            if changes.custom_properties is not None:
                row.custom_properties = dict(changes.custom_properties)
            if changes.uri is not None and kind == ARTIFACT:
                row.uri = changes.uri
            row.updated_ms = max(now_ms(), row.updated_ms)
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                raise ConflictError(f"{kind} {entry_id}: its externalId is taken") from None
            return _entry(kind, row)

    def page(self, kind: str, namespace: str, *, parent_id: int | None = None, order_by: str = "ID",
             descending: bool = False, offset: int = 0, limit: int = 100, artifact_type: str | None = None,
             name: str | None = None, external_id: str | None = None) -> Page:
        """Entries ``offset`` to ``offset + limit`` of the list (of one parent's children when ``parent_id``)."""
        row_type: Any = _ROWS[kind]
        column = getattr(row_type, ORDER_COLUMNS[order_by])
        query = select(row_type).where(row_type.namespace == namespace)
        if parent_id is not None:
            query = query.where(row_type.parent_id == parent_id)
        if artifact_type is not None:
            query = query.where(row_type.artifact_type == artifact_type)
        if name is not None:
            query = query.where(row_type.name == name)
        if external_id is not None:
            query = query.where(row_type.external_id == external_id)
        ordered = (column.desc(), row_type.id.desc()) if descending else (column.asc(), row_type.id.asc())
        with self._sessions() as session:
            rows = list(session.scalars(query.order_by(*ordered).offset(offset).limit(limit + 1)))
        return Page([_entry(kind, row) for row in rows[:limit]], len(rows) > limit)

    def all(self, kind: str, namespace: str | None = None) -> list[Entry]:
        """Every entity of ``kind`` (of one namespace, or of all), by id: for the UI's page and filters."""
        row_type: Any = _ROWS[kind]
        query = select(row_type)
        if namespace is not None:
            query = query.where(row_type.namespace == namespace)
        with self._sessions() as session:
            return [_entry(kind, row) for row in session.scalars(query.order_by(row_type.id))]

    def _row(self, session: Session, kind: str, namespace: str, entry_id: int) -> Any:
        row: Any = session.get(_ROWS[kind], entry_id)
        if row is None or row.namespace != namespace:
            raise NotFoundError(f"no {kind} with id {entry_id} in the model registry of namespace {namespace}")
        return row

    def _check_unique(self, session: Session, kind: str, namespace: str, name: str | None, external_id: str | None,
                      parent_id: int | None, own_id: int | None, artifact_type: str | None = None) -> None:
        """ConflictError when the external id is another's, or the name is taken where names are unique: a model's
        in the registry, a version's in its model, an artifact's in its version among those of its type."""
        row_type: Any = _ROWS[kind]
        if external_id is not None:
            taken = session.scalars(select(row_type.id).where(
                row_type.namespace == namespace, row_type.external_id == external_id)).first()
            if taken is not None and taken != own_id:
                raise ConflictError(f"a {kind} with externalId {external_id!r} already exists (id {taken})")
        if name is None:
            return
        query = select(row_type.id).where(row_type.namespace == namespace, row_type.name == name)
        if kind != MODEL:
            query = query.where(row_type.parent_id == parent_id) if parent_id is not None else query.where(
                row_type.parent_id.is_(None))
        if kind == ARTIFACT and artifact_type is not None:
            query = query.where(row_type.artifact_type == artifact_type)
        taken = session.scalars(query).first()
        if taken is not None and taken != own_id:
            where = f" in {_PARENT[kind]} {parent_id}" if kind != MODEL and parent_id is not None else ""
            raise ConflictError(f"a {kind} named {name!r} already exists{where} (id {taken})")

