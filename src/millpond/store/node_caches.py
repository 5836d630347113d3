"""Nodes' caches of datasets (cluster mode): each node's claim on a cache slot and its last report.

A node's cache of a dataset writes one row, keyed by (dataset uid, Ray node id), naming the
node's folder (a node restarted on the same machine keeps its folder and takes its row over). The row is
first a *claim*: a runtime's ``replicas`` bounds how many nodes hold a cache of its dataset
(Fluid's worker count). A claim inserts its row and counts the others in one transaction that
holds the database's write lock (SQLite's, taken by the insert; PostgreSQL's table lock), so
two nodes claiming the last slot at once cannot both get it. The row's
numbers are then updated by the node as it caches and serves, and read by whoever computes
the dataset's status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from millpond.errors import MillpondError
from millpond.settings import load_settings
from millpond.store.db import session_factory
from millpond.store.keys import utcnow
from millpond.store.results import rows_changed

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from millpond.settings import Settings


@dataclass(frozen=True)
class NodeCacheState:
    """What one node last reported of its cache of one dataset."""

    node_id: str
    node_dir: str
    cached: int
    capacity: int
    hit_bytes: int
    miss_bytes: int


@dataclass(frozen=True)
class CacheReport:
    cached: int
    capacity: int
    hit_bytes: int
    miss_bytes: int


class _Refused(MillpondError):  # noqa: N818 - internal: rolls the claim's transaction back, never escapes
    """Every slot is held: the claim's insert is rolled back."""


class NodeCacheStore:
    """The ``dataset_node_caches`` rows of the database ``settings`` names (shared by every node)."""

    def __init__(self, settings: "Settings | None" = None) -> None:
        self._sessions: sessionmaker[Session] = session_factory((settings or load_settings()).database_url)

    def claim(
        self, uid: str, namespace: str, name: str, node_id: str, node_dir: str, replicas: int | None
    ) -> bool:
        """Take a cache slot of dataset ``uid`` for ``node_id``; False when ``replicas`` nodes already hold one."""
        from sqlalchemy import func, select, text  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)
        from sqlalchemy.exc import IntegrityError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            if session.get(DatasetNodeCache, (uid, node_id)) is not None:
                return True
            # The same folder under a new node id: the node was restarted (Ray gives it a new id) and
            # its cache files are still there, so its claim is the old one's.
            restarted = session.scalar(select(DatasetNodeCache).where(
                DatasetNodeCache.dataset_uid == uid, DatasetNodeCache.node_dir == node_dir))
            if restarted is not None:
                restarted.node_id = node_id
                return True
        try:
            with self._sessions.begin() as session:
                if session.get_bind().dialect.name == "postgresql":  # SQLite's insert below is its write lock
                    session.execute(text("LOCK TABLE dataset_node_caches IN EXCLUSIVE MODE"))
                now = utcnow()
                session.add(DatasetNodeCache(
                    dataset_uid=uid, node_id=node_id, namespace=namespace, name=name, node_dir=node_dir,
                    cached=0, capacity=0, hit_bytes=0, miss_bytes=0, claimed_at=now, updated_at=now,
                ))
                session.flush()
                others = session.scalar(select(func.count()).select_from(DatasetNodeCache).where(
                    DatasetNodeCache.dataset_uid == uid, DatasetNodeCache.node_id != node_id)) or 0
                if replicas is not None and others >= replicas:
                    raise _Refused
        except IntegrityError:  # the same node claimed it meanwhile (another process of that node)
            return True
        except _Refused:
            return False
        return True

    def report(self, uid: str, node_id: str, report: CacheReport) -> None:
        """Write a node's numbers into its claim (nothing when the claim is gone: the dataset was deleted)."""
        from sqlalchemy import update  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.execute(
                update(DatasetNodeCache)
                .where(DatasetNodeCache.dataset_uid == uid, DatasetNodeCache.node_id == node_id)
                .values(cached=report.cached, capacity=report.capacity, hit_bytes=report.hit_bytes,
                        miss_bytes=report.miss_bytes, updated_at=utcnow())
            )

    def release_lost(self, uid: str, live: set[str]) -> int:
        """Drop the claims of dataset ``uid`` held by nodes not in ``live`` (the cluster's live node ids):
        a node lost for good must not keep a ``replicas`` slot, nor count in the dataset's status, as
        Fluid drops a worker's cache state with its pod. A lost node that comes back claims again.
        Returns how many were dropped."""
        from sqlalchemy import delete  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            result = session.execute(delete(DatasetNodeCache).where(
                DatasetNodeCache.dataset_uid == uid, DatasetNodeCache.node_id.not_in(sorted(live))))
            return rows_changed(result)

    def states(self, uid: str) -> list[NodeCacheState]:
        """Every node holding a cache of dataset ``uid``, in the order they claimed it."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            rows = session.scalars(
                select(DatasetNodeCache).where(DatasetNodeCache.dataset_uid == uid)
                .order_by(DatasetNodeCache.claimed_at, DatasetNodeCache.node_id)
            ).all()
            return [
                NodeCacheState(r.node_id, r.node_dir, r.cached, r.capacity, r.hit_bytes, r.miss_bytes) for r in rows
            ]

    def nodes_of(self, name: str, namespace: str) -> list[NodeCacheState]:
        """Every node holding a cache of the dataset ``namespace/name`` (whatever its uid)."""
        from sqlalchemy import select  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions() as session:
            rows = session.scalars(select(DatasetNodeCache).where(
                DatasetNodeCache.namespace == namespace, DatasetNodeCache.name == name)).all()
            return [
                NodeCacheState(r.node_id, r.node_dir, r.cached, r.capacity, r.hit_bytes, r.miss_bytes) for r in rows
            ]

    def forget(self, name: str, namespace: str) -> None:
        """The dataset is deleted: its nodes' rows go with it (each node's files are its own to clean)."""
        from sqlalchemy import delete  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        from millpond.store.models import DatasetNodeCache  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        with self._sessions.begin() as session:
            session.execute(delete(DatasetNodeCache).where(
                DatasetNodeCache.namespace == namespace, DatasetNodeCache.name == name))
