"""The cohort tree's quota arithmetic: how much a ClusterQueue may still take of one flavor's resource.

This is Kueue's hierarchical accounting (``pkg/cache/resource_node.go``), so that borrowing,
``borrowingLimit`` and ``lendingLimit`` mean here what they mean there:

- every node (a ClusterQueue, a Cohort) has a *subtree quota*: its own nominal quota plus what
  each child lends up (the child's subtree quota less what it keeps for itself);
- a node with a ``lendingLimit`` keeps ``subtree - lendingLimit`` *guaranteed*: nobody else
  may use that part;
- a node's usage counts, in its parent, only above its guaranteed part;
- what a node may still use is its free guaranteed part plus what its parent has available,
  the latter capped by its ``borrowingLimit`` (counted past its own lendable quota).

A ClusterQueue without a cohort is a root: it has its nominal quota and nothing more. Cohorts
named only by a ClusterQueue's ``cohort`` (no Cohort object) are roots without quota of their
own, which is Kueue's flat cohort. Amounts are milli-units, keys ``(flavor, resource)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from millpond.scheduling.queues.model import ClusterQueue, Cohort, ResourceGroup, ResourceQuota

FlavorResource = tuple[str, str]  # (flavor, resource)


@dataclass(eq=False)
class Node:
    """A ClusterQueue or a Cohort in the tree, with the usage admission has counted so far.

    Compared by identity (``eq=False``): a field-by-field ``==`` would compare whole subtrees, and
    the cycle check below asks "seen this node?" once per step up every chain.
    """

    name: str
    is_queue: bool
    quotas: dict[FlavorResource, ResourceQuota] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    def nominal(self, key: FlavorResource) -> int:
        quota = self.quotas.get(key)
        return quota.nominal if quota else 0

    def guaranteed(self, key: FlavorResource) -> int:
        """The part of its subtree quota a node never lends (only set by a ``lendingLimit``)."""
        quota = self.quotas.get(key)
        if quota is None or quota.lending_limit is None:
            return 0
        return max(0, self.subtree.get(key, 0) - quota.lending_limit)

    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node


def _quotas(groups: Iterable[ResourceGroup]) -> dict[FlavorResource, ResourceQuota]:
    return {(flavor.flavor, quota.name): quota for group in groups for flavor in group.flavors
            for quota in flavor.resources}


class QuotaTree:
    """ClusterQueues and Cohorts as Kueue's tree; ``broken`` names cohorts whose parents form a cycle."""

    def __init__(self, cluster_queues: Mapping[str, ClusterQueue], cohorts: Mapping[str, Cohort]) -> None:
        self.cohorts: dict[str, Node] = {}
        self.queues: dict[str, Node] = {}
        self.broken: set[str] = set()
        for name, cohort in cohorts.items():
            self.cohorts[name] = Node(name, False, _quotas(cohort.resource_groups))
        for queue in cluster_queues.values():
            if queue.cohort and queue.cohort not in self.cohorts:
                self.cohorts[queue.cohort] = Node(queue.cohort, False)  # a flat cohort: no object, no quota
        for name, cohort in cohorts.items():
            if cohort.parent:
                parent = self.cohorts.setdefault(cohort.parent, Node(cohort.parent, False))
                self._attach(self.cohorts[name], parent)
        self._break_cycles()
        for queue in cluster_queues.values():
            node = Node(queue.name, True, _quotas(queue.resource_groups))
            self.queues[queue.name] = node
            if queue.cohort:
                self._attach(node, self.cohorts[queue.cohort])
        for node in [*self.cohorts.values(), *self.queues.values()]:
            if node.parent is None:
                self._sum_subtree(node)
        # the tree each queue is in: (is its root a queue, the root's name)
        self.roots = {name: (node.root().is_queue, node.root().name) for name, node in self.queues.items()}
        # per tree, bumped by every change of usage in it: nothing in one tree lends to, borrows from or preempts
        # in another, so what was computed for a queue holds while its tree's version stays (a busy cohort does
        # not void what was found for the others)
        self.tree_versions = dict.fromkeys(self.roots.values(), 0)

    @staticmethod
    def _attach(child: Node, parent: Node) -> None:
        child.parent = parent
        parent.children.append(child)

    def _break_cycles(self) -> None:
        """Kueue leaves a cohort cycle inactive: its cohorts are cut loose and named in ``broken``.

        Each cohort is walked up once (a chain reaching one already walked stops there), so a
        hierarchy of any depth or size costs time in proportion to it."""
        done: set[int] = set()
        for start in list(self.cohorts.values()):
            path: list[Node] = []
            on_path: set[int] = set()
            node: Node | None = start
            while node is not None and id(node) not in done and id(node) not in on_path:
                path.append(node)
                on_path.add(id(node))
                node = node.parent
            done |= on_path
            if node is not None and id(node) in on_path:  # came back to a cohort of this walk: a cycle
                cycle = path[path.index(node):]
                self.broken.update(member.name for member in cycle)
                for member in cycle:
                    if member.parent is not None:
                        member.parent.children.remove(member)
                    member.parent = None

    def _sum_subtree(self, top: Node) -> None:
        """Each node's subtree quota under ``top``, children before parents (no recursion: any depth)."""
        order: list[Node] = []
        stack = [top]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(node.children)
        for node in reversed(order):  # every child comes after its parent in ``order``
            node.subtree = {key: quota.nominal for key, quota in node.quotas.items()}
            for child in node.children:
                for key, amount in child.subtree.items():
                    node.subtree[key] = node.subtree.get(key, 0) + amount - child.guaranteed(key)

    def in_broken_cohort(self, queue: str) -> str | None:
        """The cohort of a cycle above ``queue``, if any (its queue is then inactive, as in Kueue)."""
        node: Node | None = self.queues[queue].parent
        while node is not None:
            if node.name in self.broken:
                return node.name
            node = node.parent
        return None

    # --- usage -------------------------------------------------------------------------------
    def add(self, queue: str, key: FlavorResource, amount: int) -> None:
        """Count ``amount`` (negative: release) on ``queue`` and what of it reaches each ancestor."""
        self.tree_versions[self.roots[queue]] += 1
        node: Node | None = self.queues[queue]
        while node is not None and amount:
            guaranteed = node.guaranteed(key)
            before = node.usage.get(key, 0)
            node.usage[key] = before + amount
            amount = max(0, before + amount - guaranteed) - max(0, before - guaranteed)
            node = node.parent

    def version_of(self, queue: str) -> int:
        """The version of the usage of ``queue``'s tree: all that its admission and preemption read."""
        return self.tree_versions[self.roots[queue]]

    def available(self, queue: str, key: FlavorResource) -> int:
        """What ``queue`` may still take of ``key``: its own free quota and what its cohort may lend it."""
        return _available(self.queues[queue], key)

    def used(self, queue: str, key: FlavorResource) -> int:
        return self.queues[queue].usage.get(key, 0)

    def borrowing(self, queue: str, key: FlavorResource, extra: int = 0) -> bool:
        """Whether ``queue`` uses (with ``extra`` more) beyond its nominal quota of ``key``."""
        node = self.queues[queue]
        return node.usage.get(key, 0) + extra > node.nominal(key)


def _available(node: Node, key: FlavorResource) -> int:
    """What ``node`` may still take of ``key``: from the root down to it (no recursion: any depth)."""
    chain = [node]
    parent = node.parent
    while parent is not None:
        chain.append(parent)
        parent = parent.parent
    root = chain.pop()
    available = root.subtree.get(key, 0) - root.usage.get(key, 0)
    for below in reversed(chain):
        usage = below.usage.get(key, 0)
        guaranteed = below.guaranteed(key)
        from_parent = available
        quota = below.quotas.get(key)
        if quota is not None and quota.borrowing_limit is not None:
            lent = below.subtree.get(key, 0) - guaranteed
            used_in_parent = max(0, usage - guaranteed)
            from_parent = min(lent - used_in_parent + quota.borrowing_limit, from_parent)
        available = max(0, guaranteed - usage) + max(0, from_parent)
    return available
