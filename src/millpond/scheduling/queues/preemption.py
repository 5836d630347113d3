"""Choosing victims as Kueue's classical preemption does (``pkg/scheduler/preemption``).

A workload that would fit in a flavor only if others made room may preempt:

- in its own ClusterQueue (``withinClusterQueue``): ``LowerPriority`` workloads, or with
  ``LowerOrNewerEqualPriority`` also equal-priority ones created after it;
- in the other ClusterQueues of its cohort tree (``reclaimWithinCohort``), only workloads of
  queues that borrow the resources it needs: ``Any`` priority, ``LowerPriority`` or
  ``LowerOrNewerEqualPriority``. Reclaiming is allowed only while its own queue stays within
  its nominal quota, unless ``borrowWithinCohort`` lets it borrow while preempting
  workloads below ``maxPriorityThreshold``.

Candidates are ordered as Kueue orders them: already evicted first (they are leaving anyway),
other queues' before its own, lowest priority first, most recently admitted first. They are
removed one by one until the workload fits, then added back from the last but one down
whenever it still fits without them: a minimal set, never the whole queue.
"""

from __future__ import annotations

from millpond.scheduling.queues.assignment import Assignment
from millpond.scheduling.queues.holdings import Holdings
from millpond.scheduling.queues.model import ClusterQueue, PreemptionPolicy, Workload
from millpond.scheduling.queues.quota import FlavorResource
from millpond.scheduling.queues.render import who


def may_preempt(policy: PreemptionPolicy, preemptor: Workload, victim: Workload) -> bool:
    """Whether ``policy`` lets ``preemptor`` evict ``victim`` (ANY: whatever the priorities)."""
    if policy is PreemptionPolicy.ANY:
        return True
    if policy is PreemptionPolicy.LOWER_PRIORITY:
        return victim.priority < preemptor.priority
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return victim.priority < preemptor.priority or (
            victim.priority == preemptor.priority and victim.created > preemptor.created)
    return False


class Preemptor:
    """Preemption within one admission cycle: victims claimed by one preemptor are not counted twice."""

    def __init__(self, cycle: Holdings) -> None:
        self.cycle = cycle
        self.claimed: set[str] = set()
        # Attempts that found no victims, per ClusterQueue, at one version of its tree: a later workload of the
        # same queue (lower in its order: no higher priority, not older) asking no less fails too.
        self._failed: dict[str, tuple[int, list[tuple[Workload, dict[FlavorResource, int]]]]] = {}

    def _known_to_fail(self, workload: Workload, queue: ClusterQueue, wanted: dict[FlavorResource, int]) -> bool:
        version, failures = self._failed.get(queue.name, (-1, []))
        if version != self.cycle.tree.version_of(queue.name):
            return False
        return any((earlier.priority, -earlier.created) >= (workload.priority, -workload.created)
                   and asked.keys() == wanted.keys() and all(asked[key] <= wanted[key] for key in asked)
                   for earlier, asked in failures)

    def _remember_failure(self, workload: Workload, queue: ClusterQueue, wanted: dict[FlavorResource, int]) -> None:
        version, failures = self._failed.get(queue.name, (-1, []))
        now = self.cycle.tree.version_of(queue.name)
        if version != now:
            failures = []
        if len(failures) < 8:  # the first ones, higher in the queue's order, cover the most
            failures.append((workload, wanted))
        self._failed[queue.name] = (now, failures)

    def preempt(self, workload: Workload, queue: ClusterQueue, assignment: Assignment) -> str:
        """Evict the minimal set that lets ``workload`` in, or say why none does; the pending reason."""
        tree = self.cycle.tree
        wanted = assignment.keys(workload)
        need = {key for key, value in wanted.items() if value > tree.available(queue.name, key)}
        known = self._known_to_fail(workload, queue, wanted)
        targets = [] if known else self.targets(workload, queue, wanted, need)
        if not targets:
            if not known:
                self._remember_failure(workload, queue, wanted)
            policy = queue.preemption
            return ("; ".join(assignment.reasons) + f"; preempting would not free enough (withinClusterQueue "
                    f"{policy.within_cluster_queue.value}, reclaimWithinCohort {policy.reclaim_within_cohort.value})")
        for victim in targets:
            if victim.id not in self.cycle.evicted:
                self.cycle.evict(victim, self._why(victim, workload, queue), workload.id)
        self.claimed.update(victim.id for victim in targets)
        for key, value in wanted.items():  # reserved for this cycle: the room being made is this workload's
            tree.add(queue.name, key, value)
        names = ", ".join(who(victim) for victim in targets)
        return f"preempting to make room: waits for {names} to stop; admitted next once they have"

    @staticmethod
    def _why(victim: Workload, preemptor: Workload, queue: ClusterQueue) -> str:
        if victim.cluster_queue == queue.name:
            cause = "due to prioritization in the ClusterQueue"
        else:
            cause = "due to reclamation within the cohort"
        return f"Preempted to accommodate a workload (UID: {preemptor.id}) {cause}: {who(preemptor)}"

    def candidates(self, workload: Workload, queue: ClusterQueue, need: set[FlavorResource]) -> list[Workload]:
        cycle, policy = self.cycle, queue.preemption
        roots = cycle.tree.roots
        mine = roots[queue.name]
        users = {victim.id: victim for key in need for victim in cycle.by_key.get(key, {}).values()}
        found = []
        for victim in users.values():
            if victim.id in self.claimed or victim.id == workload.id or victim.id in cycle.fresh:
                continue
            same_tree = roots.get(victim.cluster_queue or "") == mine
            if victim.id in cycle.evicted:
                if same_tree:
                    found.append(victim)
            elif victim.cluster_queue == queue.name:
                if may_preempt(policy.within_cluster_queue, workload, victim):
                    found.append(victim)
            elif (queue.cohort and same_tree and self._borrowing(victim.cluster_queue or "", need)
                  and may_preempt(policy.reclaim_within_cohort, workload, victim)):
                found.append(victim)
        found.sort(key=lambda v: (v.id not in cycle.evicted, v.cluster_queue == queue.name, v.priority,
                                  -v.admitted_at, v.id))
        return found

    def _borrowing(self, queue: str, need: set[FlavorResource]) -> bool:
        return any(self.cycle.tree.borrowing(queue, key) for key in need)

    def targets(self, workload: Workload, queue: ClusterQueue, wanted: dict[FlavorResource, int],
                need: set[FlavorResource]) -> list[Workload]:
        """Kueue's ``getTargets``: which candidates, and whether the preemptor may borrow meanwhile."""
        candidates = self.candidates(workload, queue, need)
        same = [victim for victim in candidates if victim.cluster_queue == queue.name]
        if len(same) == len(candidates):
            return self.minimal(queue, wanted, need, candidates, True, None)
        policy = queue.preemption
        if policy.borrow_within_cohort is not PreemptionPolicy.NEVER:
            threshold = workload.priority
            if policy.borrow_max_priority_threshold is not None and policy.borrow_max_priority_threshold < threshold:
                threshold = policy.borrow_max_priority_threshold + 1
            if not self._under_nominal(queue, need):
                candidates = [v for v in candidates if v.cluster_queue == queue.name or v.priority < threshold]
            return self.minimal(queue, wanted, need, candidates, True, threshold)
        if self._under_nominal(queue, need):
            found = self.minimal(queue, wanted, need, candidates, False, None)
            if found:
                return found
        return self.minimal(queue, wanted, need, same, True, None)

    def _under_nominal(self, queue: ClusterQueue, need: set[FlavorResource]) -> bool:
        node = self.cycle.tree.queues[queue.name]
        return all(node.usage.get(key, 0) < node.nominal(key) for key in need)

    def _fits(self, queue: ClusterQueue, wanted: dict[FlavorResource, int], borrow: bool) -> bool:
        tree = self.cycle.tree
        return all(value <= tree.available(queue.name, key) and (borrow or not tree.borrowing(queue.name, key, value))
                   for key, value in wanted.items())

    def minimal(self, queue: ClusterQueue, wanted: dict[FlavorResource, int], need: set[FlavorResource],
                candidates: list[Workload], borrow: bool, threshold: int | None) -> list[Workload]:
        """Remove candidates in order until the preemptor fits, then put back those it does not need."""
        cycle = self.cycle
        removed: list[Workload] = []
        fits = False
        for victim in candidates:
            other = victim.cluster_queue != queue.name
            if other and victim.id not in cycle.evicted and not self._borrowing(victim.cluster_queue or "", need):
                continue  # its queue no longer borrows: reclaiming it would take from its nominal quota
            if other and threshold is not None and victim.priority >= threshold:
                borrow = False
            cycle.release(victim)
            removed.append(victim)
            if self._fits(queue, wanted, borrow):
                fits = True
                break
        if not fits:
            for victim in removed:
                cycle.hold(victim)
            return []
        targets = list(removed)
        for victim in reversed(removed[:-1]):
            cycle.hold(victim)
            if self._fits(queue, wanted, borrow):
                targets.remove(victim)
            else:
                cycle.release(victim)
        for victim in targets:
            cycle.hold(victim)
        return targets
