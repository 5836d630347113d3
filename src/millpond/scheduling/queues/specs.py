"""Kueue manifests' ``spec`` dicts turned into the typed records of ``queues.model``.

One place reads both served versions, so nothing above it sees the difference: v1beta1 names a
ClusterQueue's cohort ``spec.cohort`` and spells flavor fungibility ``Borrow`` / ``Preempt``;
v1beta2 says ``spec.cohortName`` and ``MayStopSearch`` for both. The records always hold the
v1beta2 spelling. Amounts become milli-units through :func:`model.milli`.

The dicts are expected to have passed the CRD's schema and Kueue's webhook checks already
(``queues.checks``); what the schema defaults (an absent ``queueingStrategy``, preemption
``Never``) is defaulted here the same way, so a record made from a hand-built dict (``millpond
queue create``) and one made from a manifest agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.scheduling.queues.model import (
    ClusterQueue,
    Cohort,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    WorkloadPriorityClass,
    milli,
)

# v1beta1's fungibility words and what v1beta2 calls them.
_V1BETA1_FUNGIBILITY = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _optional_milli(value: object, what: str) -> int | None:
    return None if value is None else milli(value, what)


def resource_groups(groups: object) -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups`` of a ClusterQueue or a Cohort: flavors in order of preference."""
    found = []
    for group in groups if isinstance(groups, list) else []:
        flavors = []
        for flavor in _map(group).get("flavors") or []:
            quotas = tuple(
                ResourceQuota(
                    name=str(resource["name"]),
                    nominal=milli(resource.get("nominalQuota", 0), f"{resource['name']} nominalQuota"),
                    borrowing_limit=_optional_milli(resource.get("borrowingLimit"), "borrowingLimit"),
                    lending_limit=_optional_milli(resource.get("lendingLimit"), "lendingLimit"),
                )
                for resource in _map(flavor).get("resources") or []
            )
            flavors.append(FlavorQuotas(str(flavor["name"]), quotas))
        covered = tuple(str(name) for name in _map(group).get("coveredResources") or [])
        found.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(found)


def _preemption(spec: Mapping[str, Any]) -> Preemption:
    preemption = _map(spec.get("preemption"))
    borrow = _map(preemption.get("borrowWithinCohort"))
    threshold = borrow.get("maxPriorityThreshold")
    return Preemption(
        within_cluster_queue=PreemptionPolicy(preemption.get("withinClusterQueue") or "Never"),
        reclaim_within_cohort=PreemptionPolicy(preemption.get("reclaimWithinCohort") or "Never"),
        borrow_within_cohort=PreemptionPolicy(borrow.get("policy") or "Never"),
        borrow_max_priority_threshold=None if threshold is None else int(threshold),
    )


def _fungibility(spec: Mapping[str, Any]) -> FlavorFungibility:
    fungibility = _map(spec.get("flavorFungibility"))
    borrow = str(fungibility.get("whenCanBorrow") or "MayStopSearch")
    preempt = str(fungibility.get("whenCanPreempt") or "TryNextFlavor")
    return FlavorFungibility(when_can_borrow=_V1BETA1_FUNGIBILITY.get(borrow, borrow),
                             when_can_preempt=_V1BETA1_FUNGIBILITY.get(preempt, preempt))


def label_selector(value: object) -> LabelSelector | None:
    """A Kubernetes LabelSelector; None (absent) stays None: Kueue's null namespaceSelector admits no namespace."""
    if value is None:
        return None
    selector = _map(value)
    expressions = tuple(
        (str(expr["key"]), str(expr["operator"]), tuple(str(v) for v in expr.get("values") or ()))
        for expr in selector.get("matchExpressions") or [] if isinstance(expr, Mapping)
    )
    labels = {str(k): str(v) for k, v in _map(selector.get("matchLabels")).items()}
    return LabelSelector(labels, expressions)


def cohort_name(spec: Mapping[str, Any]) -> str | None:
    """The ClusterQueue's cohort: v1beta2 ``cohortName``, v1beta1 ``cohort``; "" means none."""
    name = spec.get("cohortName", spec.get("cohort"))
    return str(name) if name else None


def cluster_queue(name: str, spec: Mapping[str, Any]) -> ClusterQueue:
    """A ClusterQueue from its ``spec`` (either served version)."""
    return ClusterQueue(
        name=name,
        resource_groups=resource_groups(spec.get("resourceGroups")),
        cohort=cohort_name(spec),
        queueing_strategy=QueueingStrategy(spec.get("queueingStrategy") or "BestEffortFIFO"),
        preemption=_preemption(spec),
        namespace_selector=label_selector(spec.get("namespaceSelector")),
        flavor_fungibility=_fungibility(spec),
        stop_policy=StopPolicy(spec.get("stopPolicy") or "None"),
    )


def cohort(name: str, spec: Mapping[str, Any]) -> Cohort:
    """A Cohort object from its ``spec`` (``parentName`` in both versions)."""
    parent = spec.get("parentName")
    return Cohort(name=name, parent=str(parent) if parent else None,
                  resource_groups=resource_groups(spec.get("resourceGroups")))


def local_queue(name: str, namespace: str, spec: Mapping[str, Any]) -> LocalQueue:
    return LocalQueue(name=name, namespace=namespace, cluster_queue=str(spec.get("clusterQueue") or ""),
                      stop_policy=StopPolicy(spec.get("stopPolicy") or "None"))


def resource_flavor(name: str, spec: Mapping[str, Any]) -> ResourceFlavor:
    return ResourceFlavor(name=name, node_labels={str(k): str(v) for k, v in _map(spec.get("nodeLabels")).items()})


def priority_class(name: str, manifest: Mapping[str, Any]) -> WorkloadPriorityClass:
    """A WorkloadPriorityClass: ``value`` and ``description`` sit at the top of its manifest, not under spec."""
    return WorkloadPriorityClass(name=name, value=int(manifest.get("value") or 0),
                                 description=str(manifest.get("description") or ""))
