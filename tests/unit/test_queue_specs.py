"""queues.specs: a Kueue spec dict of either served version becomes the same model record."""

from __future__ import annotations

import pytest

from millpond.errors import UserError
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


@pytest.mark.parametrize(("manifest", "says"), [
    ({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"resourceGroups": {}}},
     "ClusterQueue q: spec.resourceGroups: expected an array"),
    ({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"resourceGroups": [{"flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": [1]}]}]}]}},
     "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: expected a quantity"),
    ({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"queueingStrategy": "Random"}},
     "spec.queueingStrategy: 'Random' is not one of StrictFIFO, BestEffortFIFO"),
    ({"kind": "ClusterQueue", "metadata": {"name": "q"}, "spec": {"flavorFungibility": {"whenCanBorrow": "Preempt"}}},
     "flavorFungibility.whenCanBorrow: 'Preempt' is not one of"),
    ({"kind": "LocalQueue", "metadata": {"name": "l", "namespace": "ns"}, "spec": {}},
     "LocalQueue ns/l: spec.clusterQueue: expected a name"),
    ({"kind": "WorkloadPriorityClass", "metadata": {"name": "p"}, "value": 2**31},
     "WorkloadPriorityClass p: value: expected a 32-bit integer"),
    ({"kind": "Cohort", "metadata": {"name": ["x"]}}, "Cohort: metadata.name: expected a name"),
])
def test_a_spec_of_the_wrong_shape_is_one_user_error_line(manifest: dict[str, object], says: str) -> None:
    with pytest.raises(UserError) as info:
        specs.objects_from_specs([manifest, {"kind": "ConfigMap"}])
    assert says in str(info.value) and "\n" not in str(info.value)


def test_objects_from_specs_skips_other_kinds_and_defaults_the_namespace() -> None:
    found = specs.objects_from_specs([
        {"kind": "ConfigMap", "metadata": {"name": "x"}},
        {"kind": "LocalQueue", "metadata": {"name": "l"}, "spec": {"clusterQueue": "cq"}},
        {"kind": "ResourceFlavor", "metadata": {"name": "f"}}])
    assert list(found.local_queues) == [("default", "l")] and list(found.flavors) == ["f"]
    assert not found.cluster_queues and not found.cohorts and not found.priority_classes
