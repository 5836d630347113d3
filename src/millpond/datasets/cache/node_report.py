"""A cluster node's cache of a dataset, as the shared database knows it: its claim and its numbers.

On a Ray node (``config.node`` set) the cache claims one of the runtime's ``replicas`` when it
opens, then writes what it holds, its capacity and its hits and misses into its row whenever
they change (at most once a flush, about a second), so a dataset's status read anywhere sums
every node's cache, and placement can send a task to the node holding most of its data.
Off a cluster node nothing here runs: the engine's own cache is read from its index as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from millpond.store.node_caches import CacheReport, NodeCacheStore

if TYPE_CHECKING:
    from millpond.datasets.cache.index import CacheIndex
    from millpond.datasets.config import DatasetConfig


class NodeReport:
    """The node's row for one dataset: claimed once, then kept up to date by the cache's flushes."""

    def __init__(self, store: NodeCacheStore, uid: str, node_id: str) -> None:
        self.store = store
        self.uid = uid
        self.node_id = node_id
        self._last: CacheReport | None = None

    @classmethod
    def claim(cls, config: DatasetConfig) -> NodeReport | None:
        """Claim a cache slot for this node: None off a cluster node, or when ``replicas`` nodes hold one.

        A database that does not answer is no slot either: the node's readers are served from
        the UFS, uncached, rather than failed (the bound cannot be checked, and nothing would
        report what the node held).
        """
        from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        node = config.node
        if node is None:
            return None
        try:
            store = NodeCacheStore()
            held = store.claim(
                config.uid, config.namespace, config.name, node.node_id, str(node.folder), config.replicas
            )
        except SQLAlchemyError:
            return None
        return cls(store, config.uid, node.node_id) if held else None

    def send(self, index: CacheIndex, capacity: int) -> None:
        """Write the node's numbers when they changed since the last write.

        A database that does not answer costs this report only: the next flush tries again,
        and readers are never failed by bookkeeping.
        """
        from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - SQLAlchemy on first use (~0.6 s)

        counters = index.counters()
        report = CacheReport(
            cached=sum(index.usage().values()), capacity=capacity,
            hit_bytes=counters.get("cache_hit_bytes", 0), miss_bytes=counters.get("cache_miss_bytes", 0),
        )
        if report == self._last:
            return
        try:
            self.store.report(self.uid, self.node_id, report)
        except SQLAlchemyError:
            return
        self._last = report
