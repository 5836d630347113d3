"""Applied Fluid objects (``millpond apply -f``): what was applied, and the status millpond observed.

Keys are (kind, namespace, name) as in Kubernetes, with ``kind`` the canonical CamelCase
kind (``Dataset``, ``AlluxioRuntime``, ``DataLoad``). ``apply`` stores a whole batch in one
transaction, so a failed apply leaves nothing half-written; it tells created from
configured from unchanged the way kubectl does. Status is written separately, so
re-applying a manifest keeps what the cache engine reported.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from millpond.errors import UserError
from millpond.names import check_namespace, check_object_name
from millpond.settings import load_settings
from millpond.store.db import HEAD_REVISION, session_factory
from millpond.store.journal import schema_revision
from millpond.store.keys import new_id, utcnow
from millpond.store.results import rows_changed

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from millpond.settings import Settings
    from millpond.store.models import StoredResource


@dataclass(frozen=True)
class ProcessRecord:
    """The process running a data operation: pid, start time (clock ticks since boot), resumes so far.

    The start time tells the recorded process from a later one that got the same pid.
    """

    pid: int
    start: str
    resumes: int = 0


@dataclass
class Resource:
    kind: str
    name: str
    namespace: str
    uid: str
    manifest: dict[str, Any]  # apiVersion, kind, metadata, spec: as applied
    status: dict[str, Any]
    created_at: dt.datetime
    updated_at: dt.datetime
    process: ProcessRecord | None = None  # never part of the object shown: see ProcessRecord

    def as_object(self, status: dict[str, Any]) -> dict[str, Any]:
        """The object as ``kubectl get -o yaml`` shows it: metadata with uid and creationTimestamp, spec, status."""
        applied = self.manifest.get("metadata", {})
        metadata: dict[str, Any] = {
            "name": self.name, "namespace": self.namespace, "uid": self.uid,
            "creationTimestamp": self.created_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        metadata.update({key: applied[key] for key in ("labels", "annotations") if key in applied})
        return {
            "apiVersion": self.manifest.get("apiVersion"), "kind": self.kind, "metadata": metadata, "spec": self.spec,
            "status": status,
        }

    @property
    def spec(self) -> dict[str, Any]:
        return self.manifest.get("spec") or {}


def _aware(moment: dt.datetime) -> dt.datetime:
    """SQLite hands timestamps back without their zone: they were written in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def _key(manifest: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, name, namespace) of a manifest to store; UserError when the name or namespace breaks Kubernetes' rules.

    Every kind's checks refuse these already; this is the last line, so that nothing stored is
    unreachable over HTTP (``/KIND/NAME?namespace=``) or lands outside its folder.
    """
    metadata = manifest["metadata"]
    kind, name, namespace = manifest["kind"], str(metadata["name"]), str(metadata.get("namespace") or "default")
    check_object_name(name, f"{kind} metadata.name", kind)
    check_namespace(namespace, f"{kind} {name}: metadata.namespace")
    return kind, name, namespace


def _resource(row: "StoredResource") -> Resource:
    return Resource(
        kind=row.kind, name=row.name, namespace=row.namespace, uid=row.uid,
        manifest=dict(row.manifest), status=dict(row.status or {}),
        created_at=_aware(row.created_at), updated_at=_aware(row.updated_at),
        process=_process(row),
    )


def _process(row: "StoredResource") -> ProcessRecord | None:
    if row.process_pid is None or row.process_start is None:
        return None
    return ProcessRecord(row.process_pid, row.process_start, row.process_resumes or 0)


class ResourceStore:
    """Fluid objects in the metadata database of one millpond home (``settings.database_url``)."""

    def __init__(self, settings: "Settings | None" = None) -> None:
        self._sessions: sessionmaker[Session] = session_factory((settings or load_settings()).database_url)

    def _row(
        self, session: "Session", kind: str, name: str, namespace: str, *, lock: bool = False
    ) -> "StoredResource | None":
        """One object's row; ``lock`` for a read that a write in the same transaction depends on.

        SQLite has one writer at a time already; on PostgreSQL the row is read ``FOR UPDATE``, so
        two processes applying or deleting the same object take turns instead of both acting on
        what they read (SQLAlchemy leaves the clause out on SQLite).
        """
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        query = select(StoredResource).where(
            StoredResource.kind == kind, StoredResource.namespace == namespace, StoredResource.name == name)
        return session.scalar(query.with_for_update() if lock else query)

    def get(self, kind: str, name: str, namespace: str = "default") -> Resource | None:
        with self._sessions() as session:
            row = self._row(session, kind, name, namespace)
            return _resource(row) if row else None

    # ``list`` below is a method of this class: in later signatures the built-in is ``builtins.list``.
    def list(self, kind: str, namespace: str | None = None) -> list[Resource]:
        """Every object of ``kind`` (in ``namespace``, or all namespaces when None), by namespace and name."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        query = select(StoredResource).where(StoredResource.kind == kind)
        if namespace is not None:
            query = query.where(StoredResource.namespace == namespace)
        with self._sessions() as session:
            rows = session.scalars(query.order_by(StoredResource.namespace, StoredResource.name))
            return [_resource(row) for row in rows]

    def stamps(self, kinds: tuple[str, ...]) -> tuple[tuple[str, str, str, str, dt.datetime], ...]:
        """(kind, namespace, name, uid, updated_at) of every object of ``kinds``: what changes whenever one of
        them is created, deleted or changed (every write of a manifest stamps ``updated_at``), read without the
        manifests. A reader that keeps what it parsed from the objects reads again only when this differs."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        row = StoredResource
        query = (select(row.kind, row.namespace, row.name, row.uid, row.updated_at).where(row.kind.in_(kinds))
                 .order_by(row.kind, row.namespace, row.name))
        with self._sessions() as session:
            return tuple((kind, namespace, name, uid, updated) for kind, namespace, name, uid, updated
                         in session.execute(query))

    def apply(self, manifests: builtins.list[dict[str, Any]]) -> builtins.list[tuple[Resource, str]]:
        """Create or update each manifest, all in one transaction: (resource, "created" | "configured" | "unchanged").

        A manifest holds apiVersion, kind, metadata (name, optional namespace) and spec; a later
        one with the same key in the batch applies over an earlier one, as with kubectl.
        """
        from sqlalchemy.exc import IntegrityError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        try:
            return self._apply(manifests)
        except IntegrityError:  # another process created one of them between our read and our write
            raise UserError("another millpond process applied the same objects meanwhile; apply again") from None

    def _apply(self, manifests: builtins.list[dict[str, Any]]) -> builtins.list[tuple[Resource, str]]:
        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        results: list[tuple[Resource, str]] = []
        keys = [_key(manifest) for manifest in manifests]  # all checked before anything is written
        with self._sessions.begin() as session:
            for manifest, (kind, name, namespace) in zip(manifests, keys, strict=True):
                metadata = manifest["metadata"]
                stored = {**manifest, "metadata": {**metadata, "namespace": namespace}}
                row = self._row(session, kind, name, namespace, lock=True)
                now = utcnow()
                if row is None:
                    row = StoredResource(uid=new_id(), kind=kind, namespace=namespace, name=name,
                                         manifest=stored, status={}, created_at=now, updated_at=now)
                    session.add(row)
                    action = "created"
                elif row.manifest == stored:
                    action = "unchanged"
                else:
                    row.manifest, row.updated_at = stored, now
                    action = "configured"
                session.flush()
                results.append((_resource(row), action))
        return results

    def create(self, manifest: dict[str, Any]) -> Resource | None:
        """Store a new object (``kubectl create``): None, and nothing written, when its name is taken."""
        from sqlalchemy.exc import IntegrityError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        metadata = manifest["metadata"]
        kind, name, namespace = _key(manifest)
        now = utcnow()
        try:
            with self._sessions.begin() as session:
                if self._row(session, kind, name, namespace) is not None:
                    return None
                row = StoredResource(uid=new_id(), kind=kind, namespace=namespace, name=name,
                                     manifest={**manifest, "metadata": {**metadata, "namespace": namespace}},
                                     status={}, created_at=now, updated_at=now)
                session.add(row)
                session.flush()
                return _resource(row)
        except IntegrityError:  # another process took the name between our read and our write
            return None

    def delete(self, kind: str, name: str, namespace: str = "default") -> bool:
        """Remove one object; False when there was none."""
        with self._sessions.begin() as session:
            row = self._row(session, kind, name, namespace, lock=True)
            if row is None:
                return False
            session.delete(row)
            return True

    def annotate(self, kind: str, name: str, namespace: str, changes: dict[str, str | None],
                 uid: str | None = None) -> bool:
        """Set (a value) or remove (None) annotations of one object in one transaction, as a controller's
        metadata patch does; False when there is no such object (or another ``uid``: it was re-created)."""
        with self._sessions.begin() as session:
            row = self._row(session, kind, name, namespace, lock=True)
            if row is None or (uid is not None and row.uid != uid):
                return False
            metadata = dict(row.manifest.get("metadata") or {})
            annotations = dict(metadata.get("annotations") or {})
            for key, value in changes.items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
            if annotations == (metadata.get("annotations") or {}):
                return True
            if annotations:
                metadata["annotations"] = annotations
            else:
                metadata.pop("annotations", None)
            row.manifest, row.updated_at = {**row.manifest, "metadata": metadata}, utcnow()
            return True

    def set_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = "default") -> None:
        """Replace an object's status; an object deleted meanwhile stays deleted (nothing is written).

        ``updated_at`` stays the time of the last applied change: status is not the user's edit.
        """
        with self._sessions.begin() as session:
            row = self._row(session, kind, name, namespace, lock=True)
            if row is not None:
                row.status = dict(status)

    def record_process(
        self, kind: str, name: str, namespace: str, process: ProcessRecord | None, status: dict[str, Any] | None = None
    ) -> bool:
        """Record the process running an object (and, with ``status``, its status, in the same write).

        False when the object is gone.
        """
        return self._write_process(kind, name, namespace, process, status, None, conditional=False)

    def swap_process(
        self, kind: str, name: str, namespace: str, expected: ProcessRecord | None, process: ProcessRecord | None,
        status: dict[str, Any] | None = None,
    ) -> bool:
        """``record_process``, only while the recorded process is still ``expected`` (None: none recorded).

        One conditional UPDATE, so of two readers that saw the same process die, exactly one
        acts on it. False when nothing was written (changed meanwhile, or deleted).
        """
        return self._write_process(kind, name, namespace, process, status, expected, conditional=True)

    def _write_process(
        self, kind: str, name: str, namespace: str, process: ProcessRecord | None, status: dict[str, Any] | None,
        expected: ProcessRecord | None, *, conditional: bool,
    ) -> bool:
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import StoredResource  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        query = update(StoredResource).where(
            StoredResource.kind == kind, StoredResource.namespace == namespace, StoredResource.name == name)
        if conditional and expected is None:
            query = query.where(StoredResource.process_pid.is_(None))
        elif conditional and expected is not None:
            query = query.where(StoredResource.process_pid == expected.pid,
                                StoredResource.process_start == expected.start,
                                StoredResource.process_resumes == expected.resumes)
        values: dict[str, Any] = {
            "process_pid": process.pid if process else None,
            "process_start": process.start if process else None,
            "process_resumes": process.resumes if process else 0,
        }
        if status is not None:
            values["status"] = dict(status)
        with self._sessions.begin() as session:
            result = session.execute(query.values(**values).execution_options(synchronize_session=False))
            return rows_changed(result) == 1


def read_manifest(
    settings: Settings, kind: str, name: str, namespace: str = "default"
) -> tuple[str, dict[str, Any]] | None:
    """(uid, manifest) of one applied object, read without SQLAlchemy when the store is SQLite.

    Opening a dataset sits on the path of the first ``millpond://`` read or FUSE mount of a
    process; SQLAlchemy and the migration check cost ~0.5 s there, a stdlib query ~1 ms. Any
    other database, or one not yet at the head revision, goes through ``ResourceStore``.
    """
    url = settings.database_url
    path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
    if path is None or schema_revision(path) != HEAD_REVISION:
        found = ResourceStore(settings).get(kind, name, namespace)
        return (found.uid, found.manifest) if found else None
    with sqlite3.connect(path, timeout=30) as db:
        row = db.execute(
            "SELECT uid, manifest FROM resources WHERE kind = ? AND namespace = ? AND name = ?", (kind, namespace, name)
        ).fetchone()
    return (row[0], json.loads(row[1])) if row else None
