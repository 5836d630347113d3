"""queues.specs: a Kueue spec dict of either served version becomes the same model record."""

from __future__ import annotations

from millpond.scheduling.queues import specs
from millpond.scheduling.queues.model import PreemptionPolicy, QueueingStrategy, StopPolicy

_GROUPS = [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
    {"name": "default-flavor", "resources": [
        {"name": "cpu", "nominalQuota": 9, "borrowingLimit": "500m"},
        {"name": "memory", "nominalQuota": "36Gi", "lendingLimit": "1Gi"},
        {"name": "nvidia.com/gpu", "nominalQuota": "0.5"}]}]}]


def test_v1beta1_and_v1beta2_spellings_give_one_record() -> None:
    old = specs.cluster_queue("cq", {"cohort": "team", "resourceGroups": _GROUPS, "namespaceSelector": {},
                                     "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}})
    new = specs.cluster_queue("cq", {"cohortName": "team", "resourceGroups": _GROUPS, "namespaceSelector": {},
                                     "flavorFungibility": {"whenCanBorrow": "MayStopSearch",
                                                           "whenCanPreempt": "MayStopSearch"}})
    assert old == new
    assert new.cohort == "team" and new.flavor_fungibility.when_can_preempt == "MayStopSearch"
    [group] = new.resource_groups
    cpu, memory, gpu = group.flavors[0].resources
    assert (cpu.nominal, cpu.borrowing_limit, cpu.lending_limit) == (9000, 500, None)
    assert (memory.nominal, memory.lending_limit) == (36 * 2**30 * 1000, 2**30 * 1000)
    assert gpu.nominal == 500
    assert new.namespace_selector is not None and not new.namespace_selector.match_labels


def test_defaults_are_kueues() -> None:
    queue = specs.cluster_queue("cq", {})
    assert queue.cohort is None and queue.namespace_selector is None
    assert queue.queueing_strategy is QueueingStrategy.BEST_EFFORT_FIFO
    assert queue.preemption.within_cluster_queue is PreemptionPolicy.NEVER
    assert queue.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert queue.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert queue.stop_policy is StopPolicy.NONE


def test_preemption_selector_and_the_other_kinds() -> None:
    queue = specs.cluster_queue("cq", {
        "queueingStrategy": "StrictFIFO", "stopPolicy": "Hold",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                       "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100}},
        "namespaceSelector": {"matchLabels": {"team": "a"},
                              "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}})
    assert queue.queueing_strategy is QueueingStrategy.STRICT_FIFO and queue.stop_policy is StopPolicy.HOLD
    assert queue.preemption.reclaim_within_cohort is PreemptionPolicy.ANY
    assert queue.preemption.borrow_within_cohort is PreemptionPolicy.LOWER_PRIORITY
    assert queue.preemption.borrow_max_priority_threshold == 100
    assert queue.namespace_selector is not None
    assert queue.namespace_selector.match_expressions == (("env", "In", ("dev",)),)
    cohort = specs.cohort("team", {"parentName": "org", "resourceGroups": _GROUPS})
    assert cohort.parent == "org" and cohort.resource_groups[0].flavors[0].flavor == "default-flavor"
    assert specs.local_queue("lq", "ns", {"clusterQueue": "cq"}).cluster_queue == "cq"
    assert specs.resource_flavor("f", {"nodeLabels": {"a": "b"}}).node_labels == {"a": "b"}
    high = specs.priority_class("high", {"value": 1000, "description": "urgent"})
    assert (high.value, high.description) == (1000, "urgent")
