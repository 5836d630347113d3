"""Who holds which flavor's quota during one admission cycle, and who is on the way out.

The admission cycle admits into it and the preemptor takes victims out of it (and puts them back
while it looks for the smallest set): both work on this one record, which sits below both, so the
preemptor never imports the cycle that calls it.
"""

from __future__ import annotations

from millpond.scheduling.queues.model import Eviction, Workload
from millpond.scheduling.queues.quota import FlavorResource, QuotaTree


class Holdings:
    """Usage by workload and by flavor resource, as one cycle changes it."""

    def __init__(self, tree: QuotaTree) -> None:
        self.tree = tree  # usage per ClusterQueue and cohort: what is still available
        self.holding: dict[str, Workload] = {}  # workload id -> the workload holding quota
        self.by_key: dict[FlavorResource, dict[str, Workload]] = {}  # who holds each flavor's resource
        self.evicted: set[str] = set()  # evicted, still holding quota until their holder stops them
        self.fresh: set[str] = set()  # admitted by this cycle: no victims for it (Kueue picks them before)
        self.evictions: list[Eviction] = []  # decided by this cycle

    def hold(self, workload: Workload) -> None:
        self.holding[workload.id] = workload
        for name, value in workload.requests.items():
            if value > 0 and name in workload.flavors:
                key = (workload.flavors[name], name)
                self.tree.add(workload.cluster_queue or "", key, value)
                self.by_key.setdefault(key, {})[workload.id] = workload

    def release(self, workload: Workload) -> None:
        del self.holding[workload.id]
        for name, value in workload.requests.items():
            if value > 0 and name in workload.flavors:
                key = (workload.flavors[name], name)
                self.tree.add(workload.cluster_queue or "", key, -value)
                self.by_key[key].pop(workload.id, None)

    def evict(self, workload: Workload, reason: str, by: str) -> None:
        """Mark ``workload`` evicted (``by``: the preemptor's id, empty for a drain); it keeps its quota."""
        self.evicted.add(workload.id)
        self.evictions.append(Eviction(workload.id, reason, by))
