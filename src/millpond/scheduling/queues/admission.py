"""Admission: Kueue's rules as one pure function, ``decide(snapshot, now) -> Decision``.

Whoever waits for quota runs a cycle (``queues.cycle``) under a database-wide lock: it reads a
:class:`Snapshot`, calls :func:`decide` and writes the :class:`Decision` back. Nothing here does
I/O, so the rules are tested on records alone. They are Kueue's (``pkg/scheduler``):

- a workload reaches a ClusterQueue through the LocalQueue it names in its namespace; the
  queue's ``namespaceSelector`` must match the namespace (``None`` matches none, ``{}`` all; a
  namespace carries the label ``kubernetes.io/metadata.name`` as in Kubernetes);
- each ClusterQueue orders its pending workloads by priority, then creation (a requeued
  workload keeps its place). Each round, the head of every queue is tried, heads that fit
  without borrowing first, then by priority and age (Kueue's entry ordering). A head that does
  not fit blocks its queue under StrictFIFO; under BestEffortFIFO the next one tries. A workload
  that can never fit (or whose queue is unusable) blocks nobody;
- flavors are assigned per resource group, in the group's order (``flavorFungibility``:
  by default the first flavor that fits, borrowing included, else the first one preemption
  could free); quotas and borrowing are counted by :class:`QuotaTree`;
- a workload that fits only by preempting picks victims as Kueue's classical preemption does
  (``preemption.py``); the victims are *evicted* and keep holding quota until their holder
  reports them stopped, the preemptor waits (and keeps its place) meanwhile;
- ``stopPolicy: Hold`` admits nothing new, ``HoldAndDrain`` also evicts what is admitted.

Every workload still pending gets a reason a user can act on and its 0-based position.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from millpond.scheduling.queues.assignment import FIT, NO_FIT, PREEMPT, Assignment
from millpond.scheduling.queues.holdings import Holdings
from millpond.scheduling.queues.model import (
    Admission,
    ClusterQueue,
    Decision,
    FlavorQuotas,
    LabelSelector,
    Pending,
    QueueingStrategy,
    Snapshot,
    StopPolicy,
    Workload,
    WorkloadState,
)
from millpond.scheduling.queues.preemption import Preemptor
from millpond.scheduling.queues.quota import FlavorResource, QuotaTree
from millpond.scheduling.queues.render import amount, who

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # every Kubernetes namespace carries it
PODS = "pods"  # counted only by a ClusterQueue that covers it, as in Kueue
_HOLDING = (WorkloadState.ADMITTED, WorkloadState.EVICTED)


def queue_order(workload: Workload) -> tuple[int, float, str]:
    """A ClusterQueue's order: higher priority first, then older first (Kueue's default ordering)."""
    return (-workload.priority, workload.created, workload.id)


def selector_matches(selector: LabelSelector | None, namespace: str, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    labels = {**labels, NAMESPACE_NAME_LABEL: namespace}
    if any(labels.get(key) != value for key, value in selector.match_labels.items()):
        return False
    for key, operator, values in selector.match_expressions:
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


class _Cycle:
    """One run of :func:`decide`: the snapshot's usage in a :class:`Holdings`, changed as it admits and evicts."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot = snapshot
        self.now = now
        self.held = Holdings(QuotaTree(snapshot.cluster_queues, snapshot.cohorts))
        self.tree = self.held.tree  # the usage the flavor assigner reads, as admissions and evictions change it
        self.potential = QuotaTree(snapshot.cluster_queues, snapshot.cohorts)  # nothing used: what could ever fit
        # "held by" texts per (flavor resource, cohort tree), with the tree's version they were made at
        self._held_by: dict[tuple[FlavorResource, tuple[bool, str]], tuple[int, str]] = {}
        self.admitted: list[Admission] = []
        self.pending: dict[str, str] = {}
        self.preemptor = Preemptor(self.held)
        self._resolved: dict[tuple[str, str], tuple[ClusterQueue | None, str]] = {}
        # assignments per (ClusterQueue, requests, explain), with the version of its tree they were made at
        self._assigned: dict[tuple[str, tuple[tuple[str, int], ...], bool], tuple[int, Assignment]] = {}
        # preemptions that found no victims per (ClusterQueue, requests, priority): (its tree's version after, reason)
        self._unpreemptable: dict[tuple[str, tuple[tuple[str, int], ...], int], tuple[int, str]] = {}
        for workload in snapshot.workloads:
            if workload.state in _HOLDING and workload.cluster_queue in self.tree.queues:
                self.held.hold(workload)
                if workload.state is WorkloadState.EVICTED:
                    self.held.evicted.add(workload.id)

    # --- resolution ----------------------------------------------------------------------
    def resolve(self, workload: Workload) -> tuple[ClusterQueue | None, str]:
        """The workload's ClusterQueue, or why it has none it can be admitted to now."""
        key = (workload.namespace, workload.queue)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(workload)
        return self._resolved[key]

    def _resolve(self, workload: Workload) -> tuple[ClusterQueue | None, str]:
        local = self.snapshot.local_queues.get((workload.namespace, workload.queue))
        if local is None:
            return None, f"LocalQueue {workload.queue} doesn't exist in namespace {workload.namespace}"
        queue = self.snapshot.cluster_queues.get(local.cluster_queue)
        if queue is None:
            return None, (f"ClusterQueue {local.cluster_queue} doesn't exist "
                          f"(LocalQueue {workload.namespace}/{local.name} points to it)")
        labels = dict(self.snapshot.namespace_labels.get(workload.namespace, {}))
        if not selector_matches(queue.namespace_selector, workload.namespace, labels):
            selector = "null: it admits no namespace" if queue.namespace_selector is None else "does not select it"
            return None, (f"Workload namespace doesn't match ClusterQueue selector: ClusterQueue {queue.name}'s "
                          f"namespaceSelector {selector} (namespace {workload.namespace})")
        inactive = self.inactive(queue)
        if inactive:
            return None, f"ClusterQueue {queue.name} is inactive: {inactive}"
        if local.stop_policy is not StopPolicy.NONE:
            return None, f"LocalQueue {workload.namespace}/{local.name} is stopped ({local.stop_policy.value})"
        if queue.stop_policy is not StopPolicy.NONE:
            return None, f"ClusterQueue {queue.name} is stopped ({queue.stop_policy.value}): it admits nothing new"
        return queue, ""

    def inactive(self, queue: ClusterQueue) -> str:
        missing = sorted({flavor.flavor for group in queue.resource_groups for flavor in group.flavors}
                         - set(self.snapshot.flavors))
        if missing:
            return f"ResourceFlavor {', '.join(missing)} doesn't exist"
        broken = self.tree.in_broken_cohort(queue.name)
        return f"its Cohort {broken} is part of a cycle of parents" if broken else ""

    # --- flavor assignment ---------------------------------------------------------------
    def assign(self, workload: Workload, queue: ClusterQueue, explain: bool = True) -> Assignment:
        """Kueue's flavor assigner with ``flavorFungibility``: per resource group, flavors in order
        (``explain``: with the reasons a user reads, for whatever does not fit).

        An assignment depends only on the queue, the requests and the usage, so workloads asking
        the same of the same queue share one while the usage of its tree does not change (``tree.version_of``):
        Kueue's equivalence hashing, exact. A saturated cohort's backlog of a few shapes costs a
        few assignments a cycle, not one per workload. The result is shared: callers only read it.
        """
        key = (queue.name, tuple(sorted(workload.requests.items())), explain)
        cached = self._assigned.get(key)
        version = self.tree.version_of(queue.name)
        if cached is not None and cached[0] == version:
            return cached[1]
        result = self._assign(workload, queue, explain)
        self._assigned[key] = (version, result)
        return result

    def _assign(self, workload: Workload, queue: ClusterQueue, explain: bool) -> Assignment:
        result = Assignment()
        requested = {name for name, value in workload.requests.items() if value > 0}
        covered = {name for group in queue.resource_groups for name in group.covered}
        if PODS not in covered:
            requested.discard(PODS)
        for name in sorted(requested - covered):
            result.mode, result.never = NO_FIT, True
            result.reasons.append(f"resource {name} unavailable in ClusterQueue {queue.name}")
        for group in queue.resource_groups:
            names = [name for name in group.covered if name in requested]
            if names:
                self._assign_group(workload, queue, group.flavors, names, result, explain)
        return result

    def _assign_group(self, workload: Workload, queue: ClusterQueue, flavors: tuple[FlavorQuotas, ...],
                      names: list[str], result: Assignment, explain: bool) -> None:
        chosen: tuple[int, bool, str] | None = None  # (mode, borrowing, flavor)
        reasons, never = [], True
        fungibility = queue.flavor_fungibility
        for flavor in flavors:
            mode, borrowing, ever = FIT, False, True
            for name in names:
                key, want = (flavor.flavor, name), workload.requests[name]
                if want <= self.tree.available(queue.name, key):
                    borrowing = borrowing or self.tree.borrowing(queue.name, key, want)
                    continue
                most = self.potential.available(queue.name, key)
                if want <= most:
                    mode = min(mode, PREEMPT)
                else:
                    mode, ever = NO_FIT, False
                if explain:
                    reasons.append(self.explain(queue, key, want, most))
            never = never and not ever
            if mode == FIT and (not borrowing or fungibility.when_can_borrow in ("MayStopSearch", "Borrow")):
                chosen = (mode, borrowing, flavor.flavor)
                break
            if mode == PREEMPT and fungibility.when_can_preempt in ("MayStopSearch", "Preempt"):
                chosen = (mode, borrowing, flavor.flavor)
                break
            if mode > NO_FIT and (chosen is None or (mode, not borrowing) > (chosen[0], not chosen[1])):
                chosen = (mode, borrowing, flavor.flavor)
        if chosen is None:
            result.mode = NO_FIT
            result.never = result.never or never
            result.reasons.extend(reasons)
            return
        mode, borrowing, flavor_name = chosen
        for name in names:
            result.flavors[name] = flavor_name
        result.mode = min(result.mode, mode)
        result.borrowing = result.borrowing or borrowing
        if mode != FIT:
            result.reasons.extend(reason for reason in reasons if f" flavor {flavor_name}:" in reason)

    def explain(self, queue: ClusterQueue, key: FlavorResource, want: int, most: int) -> str:
        """One line: the resource and flavor, what is asked, what is free, who holds it."""
        flavor, name = key
        free = max(0, self.tree.available(queue.name, key))
        node = self.tree.queues[queue.name]
        if want > most:
            where = f" with its cohort {queue.cohort}" if queue.cohort else ""
            return (f"{name} in flavor {flavor}: asks {amount(name, want)}, more than ClusterQueue {queue.name} "
                    f"could ever get{where} ({amount(name, most)}): it can never be admitted as it is")
        lend = f", cohort {queue.cohort} included" if queue.cohort else ""
        return (f"insufficient unused quota for {name} in flavor {flavor}: asks {amount(name, want)}, "
                f"{amount(name, free)} free{lend} (ClusterQueue {queue.name}: nominal {amount(name, node.nominal(key))}"
                f", {amount(name, node.usage.get(key, 0))} used); held by {self.held_by(queue, key)}")

    def held_by(self, queue: ClusterQueue, key: FlavorResource) -> str:
        """The biggest holders of ``key`` in ``queue``'s cohort tree (kept while usage does not change)."""
        root = self.tree.roots[queue.name]
        cached = self._held_by.get((key, root))
        version = self.tree.version_of(queue.name)
        if cached is not None and cached[0] == version:
            return cached[1]
        name = key[1]
        holders = sorted((w for w in self.held.by_key.get(key, {}).values()
                          if self.tree.roots.get(w.cluster_queue or "") == root),
                         key=lambda w: (-w.requests[name], w.admitted_at, w.created, w.id))
        text = ", ".join(f"{who(w)} in {w.cluster_queue} ({amount(name, w.requests[name])}"
                         f"{', stopping' if w.id in self.held.evicted else ''})" for w in holders[:3]) or "nobody"
        if len(holders) > 3:
            text += f" and {len(holders) - 3} more"
        self._held_by[(key, root)] = (version, text)
        return text

    # --- the cycle -----------------------------------------------------------------------
    def drain(self) -> None:
        """HoldAndDrain on a ClusterQueue or a LocalQueue evicts what it admitted."""
        for workload in sorted(self.held.holding.values(), key=lambda w: w.id):
            if workload.state is not WorkloadState.ADMITTED:
                continue
            queue = self.snapshot.cluster_queues[workload.cluster_queue or ""]
            local = self.snapshot.local_queues.get((workload.namespace, workload.queue))
            if queue.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                self.held.evict(workload, f"ClusterQueue {queue.name} is stopped (HoldAndDrain)", "")
            elif local is not None and local.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                self.held.evict(workload, f"LocalQueue {workload.namespace}/{local.name} is stopped (HoldAndDrain)", "")

    def run(self) -> Decision:
        self.drain()
        waiting = sorted((w for w in self.snapshot.workloads if w.state is WorkloadState.PENDING), key=queue_order)
        queues: dict[str, deque[Workload]] = {}
        unresolved: dict[tuple[str, str], list[Workload]] = {}
        for workload in waiting:
            queue, reason = self.resolve(workload)
            if queue is None:
                self.pending[workload.id] = reason
                unresolved.setdefault((workload.namespace, workload.queue), []).append(workload)
            else:
                queues.setdefault(queue.name, deque()).append(workload)
        order = {name: list(items) for name, items in queues.items()}
        while queues:
            heads = []
            for name, items in queues.items():
                queue = self.snapshot.cluster_queues[name]
                heads.append((self.assign(items[0], queue, explain=False).borrowing, queue_order(items[0]), name))
            for _borrowing, _order, name in sorted(heads):
                self.step(self.snapshot.cluster_queues[name], queues)
        return Decision(tuple(self.admitted), tuple(self.held.evictions), self.positions(order, unresolved))

    def step(self, queue: ClusterQueue, queues: dict[str, deque[Workload]]) -> None:
        items = queues[queue.name]
        workload = items.popleft()
        equivalent = (queue.name, tuple(sorted(workload.requests.items())), workload.priority)
        known = self._unpreemptable.get(equivalent)
        if known is not None and known[0] == self.tree.version_of(queue.name):
            # the same asked of the same queue at the same priority, nothing changed since that one's preemption
            # found no victims: neither does this one's, which comes after it (Kueue's equivalence hashing)
            self.pending[workload.id] = known[1]
            self._blocked(workload, queue, items, queues)
            return
        assignment = self.assign(workload, queue)
        blocks = False
        if assignment.mode == FIT:
            self.admit(workload, queue, assignment)
        elif assignment.never or assignment.mode == NO_FIT:
            self.pending[workload.id] = "; ".join(assignment.reasons)
            blocks = not assignment.never
        else:
            claimed = len(self.preemptor.claimed)
            self.pending[workload.id] = self.preemptor.preempt(workload, queue, assignment)
            if len(self.preemptor.claimed) == claimed:  # no victims found
                self._unpreemptable[equivalent] = (self.tree.version_of(queue.name), self.pending[workload.id])
            blocks = True
        if blocks:
            self._blocked(workload, queue, items, queues)
        elif not items:
            del queues[queue.name]

    def _blocked(self, workload: Workload, queue: ClusterQueue, items: deque[Workload],
                 queues: dict[str, deque[Workload]]) -> None:
        """``workload`` waits for quota: under StrictFIFO the ones behind it wait for it."""
        if queue.queueing_strategy is QueueingStrategy.STRICT_FIFO:
            for behind in items:
                self.pending[behind.id] = (f"waits behind {who(workload)} at the head of StrictFIFO ClusterQueue "
                                           f"{queue.name}, which does not fit: {self.pending[workload.id]}")
            items.clear()
        if not items:
            del queues[queue.name]

    def admit(self, workload: Workload, queue: ClusterQueue, assignment: Assignment) -> None:
        admitted = dataclasses.replace(workload, state=WorkloadState.ADMITTED, cluster_queue=queue.name,
                                       flavors=dict(assignment.flavors), admitted_at=self.now)
        self.held.hold(admitted)
        self.held.fresh.add(workload.id)
        self.admitted.append(Admission(workload.id, queue.name, dict(assignment.flavors), assignment.borrowing))

    def positions(self, order: dict[str, list[Workload]], unresolved: dict[tuple[str, str], list[Workload]]
                  ) -> tuple[Pending, ...]:
        admitted = {admission.workload_id for admission in self.admitted}
        result: list[Pending] = []
        for items in [*order.values(), *unresolved.values()]:
            still = [w for w in items if w.id not in admitted]
            result.extend(Pending(w.id, self.pending[w.id], index) for index, w in enumerate(still))
        return tuple(result)


def decide(snapshot: Snapshot, now: float) -> Decision:
    """One admission cycle over ``snapshot``: who is admitted, who is evicted to make room, why the rest wait.

    ``now`` (epoch seconds) is when the cycle runs: what it admits counts as admitted then (a
    preemptor of the same cycle never picks those: Kueue nominates victims among the workloads
    admitted before the cycle, never one it is admitting). Every PENDING
    workload of the snapshot is in exactly one of ``admitted`` and ``pending``; ``evicted`` holds
    ADMITTED ones only (an Eviction's ``by`` is the preemptor's id, empty for a HoldAndDrain).
    """
    return _Cycle(snapshot, now).run()
