"""Kueue manifests (``kueue.x-k8s.io`` v1beta1 and v1beta2) as the typed records of ``queues.model``.

The one converter: ``millpond apply -f`` checks a manifest against its CRD's schema and Kueue's
rules (``queues.manifests``, ``queues.checks``) and converts it here to be sure it means
something; admission reads the stored manifests back through :func:`objects_from_specs`. One
place knows how a field is spelled in each served version, and the records always hold v1beta2's:

- a ClusterQueue's cohort is ``spec.cohort`` in v1beta1, ``spec.cohortName`` in v1beta2;
- ``flavorFungibility.whenCanBorrow: Borrow`` (v1beta1) is ``MayStopSearch``, and so is
  ``whenCanPreempt: Preempt``;
- a Cohort's parent is ``spec.parentName``; a WorkloadPriorityClass keeps ``value`` and
  ``description`` beside ``metadata``, not under ``spec``.

Amounts become milli-units (:func:`model.milli`). What the schema defaults (an absent
``queueingStrategy``, preemption ``Never``) is defaulted the same way here, so a record made from
a hand-built dict (``millpond queue create``) and one from a manifest agree. A value of the wrong
shape (a manifest that skipped the checks) is one UserError line naming the object and field.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from millpond.errors import UserError
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

KINDS = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "Cohort", "WorkloadPriorityClass")
# v1beta1's fungibility words, per field, and what v1beta2 calls them.
_V1BETA1_FUNGIBILITY = {"whenCanBorrow": {"Borrow": "MayStopSearch"}, "whenCanPreempt": {"Preempt": "MayStopSearch"}}
_FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_E = TypeVar("_E", bound=enum.Enum)


@dataclass(frozen=True)
class QueueObjects:
    """Every Kueue object applied, by name (LocalQueues by (namespace, name))."""

    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)


def _map(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where}: expected an object")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(f"{where}: expected an array")
    return value


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{where}: expected a name")
    return value


def _enum(kind: type[_E], value: object, where: str, default: _E) -> _E:
    if value is None or value == "":
        return default
    try:
        return kind(value)
    except ValueError:
        raise UserError(f"{where}: {value!r} is not one of {', '.join(str(m.value) for m in kind)}") from None


def _amount(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError(f"{where}: expected a quantity")
    return milli(value, where)


def resource_groups(groups: object, where: str = "spec") -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups`` of a ClusterQueue or a Cohort: flavors in order of preference."""
    found = []
    for i, group in enumerate(_list(groups, f"{where}.resourceGroups")):
        here = f"{where}.resourceGroups[{i}]"
        group = _map(group, here)
        covered = tuple(_name(name, f"{here}.coveredResources[{j}]")
                        for j, name in enumerate(_list(group.get("coveredResources"), f"{here}.coveredResources")))
        flavors = []
        for j, flavor in enumerate(_list(group.get("flavors"), f"{here}.flavors")):
            at = f"{here}.flavors[{j}]"
            flavor = _map(flavor, at)
            quotas = []
            for k, resource in enumerate(_list(flavor.get("resources"), f"{at}.resources")):
                spot = f"{at}.resources[{k}]"
                resource = _map(resource, spot)
                limits = [None if resource.get(key) is None else _amount(resource[key], f"{spot}.{key}")
                          for key in ("borrowingLimit", "lendingLimit")]
                quotas.append(ResourceQuota(_name(resource.get("name"), f"{spot}.name"),
                                            _amount(resource.get("nominalQuota", 0), f"{spot}.nominalQuota"),
                                            limits[0], limits[1]))
            flavors.append(FlavorQuotas(_name(flavor.get("name"), f"{at}.name"), tuple(quotas)))
        found.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(found)


def _preemption(value: object, where: str) -> Preemption:
    preemption = _map(value, where)
    borrow = _map(preemption.get("borrowWithinCohort"), f"{where}.borrowWithinCohort")
    threshold = borrow.get("maxPriorityThreshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
        raise UserError(f"{where}.borrowWithinCohort.maxPriorityThreshold: expected an integer")
    never = PreemptionPolicy.NEVER
    return Preemption(
        within_cluster_queue=_enum(PreemptionPolicy, preemption.get("withinClusterQueue"),
                                   f"{where}.withinClusterQueue", never),
        reclaim_within_cohort=_enum(PreemptionPolicy, preemption.get("reclaimWithinCohort"),
                                    f"{where}.reclaimWithinCohort", never),
        borrow_within_cohort=_enum(PreemptionPolicy, borrow.get("policy"), f"{where}.borrowWithinCohort.policy",
                                   never),
        borrow_max_priority_threshold=threshold,
    )


def _fungibility(value: object, where: str) -> FlavorFungibility:
    fungibility = _map(value, where)
    default = FlavorFungibility()
    chosen = []
    for key, fallback in (("whenCanBorrow", default.when_can_borrow), ("whenCanPreempt", default.when_can_preempt)):
        word = fungibility.get(key) or fallback
        word = _V1BETA1_FUNGIBILITY[key].get(word, word) if isinstance(word, str) else word
        if word not in _FUNGIBILITY:
            raise UserError(f"{where}.{key}: {word!r} is not one of {', '.join(_FUNGIBILITY)}")
        chosen.append(word)
    return FlavorFungibility(when_can_borrow=chosen[0], when_can_preempt=chosen[1])


def label_selector(value: object, where: str = "spec.namespaceSelector") -> LabelSelector | None:
    """A Kubernetes LabelSelector; None (absent) stays None: Kueue's null namespaceSelector admits no namespace."""
    if value is None:
        return None
    selector = _map(value, where)
    labels = {str(k): str(v) for k, v in _map(selector.get("matchLabels"), f"{where}.matchLabels").items()}
    expressions = []
    for i, expression in enumerate(_list(selector.get("matchExpressions"), f"{where}.matchExpressions")):
        here = f"{where}.matchExpressions[{i}]"
        expression = _map(expression, here)
        operator = expression.get("operator")
        if operator not in _OPERATORS:
            raise UserError(f"{here}.operator: {operator!r} is not one of {', '.join(_OPERATORS)}")
        values = tuple(str(v) for v in _list(expression.get("values"), f"{here}.values"))
        expressions.append((_name(expression.get("key"), f"{here}.key"), str(operator), values))
    return LabelSelector(labels, tuple(expressions))


def cohort_name(spec: Mapping[str, Any]) -> str | None:
    """The ClusterQueue's cohort: v1beta2 ``cohortName``, v1beta1 ``cohort``; "" means none."""
    name = spec.get("cohortName", spec.get("cohort"))
    return str(name) if name else None


def cluster_queue(name: str, spec: object) -> ClusterQueue:
    """A ClusterQueue from its ``spec`` (either served version)."""
    where = f"ClusterQueue {name}: spec"
    spec = _map(spec, where)
    return ClusterQueue(
        name=name,
        resource_groups=resource_groups(spec.get("resourceGroups"), where),
        cohort=cohort_name(spec),
        queueing_strategy=_enum(QueueingStrategy, spec.get("queueingStrategy"), f"{where}.queueingStrategy",
                                QueueingStrategy.BEST_EFFORT_FIFO),
        preemption=_preemption(spec.get("preemption"), f"{where}.preemption"),
        namespace_selector=label_selector(spec.get("namespaceSelector"), f"{where}.namespaceSelector"),
        flavor_fungibility=_fungibility(spec.get("flavorFungibility"), f"{where}.flavorFungibility"),
        stop_policy=_enum(StopPolicy, spec.get("stopPolicy"), f"{where}.stopPolicy", StopPolicy.NONE),
    )


def cohort(name: str, spec: object) -> Cohort:
    """A Cohort object from its ``spec`` (``parentName`` in both versions)."""
    where = f"Cohort {name}: spec"
    spec = _map(spec, where)
    parent = spec.get("parentName")
    return Cohort(name=name, parent=str(parent) if parent else None,
                  resource_groups=resource_groups(spec.get("resourceGroups"), where))


def local_queue(name: str, namespace: str, spec: object) -> LocalQueue:
    where = f"LocalQueue {namespace}/{name}: spec"
    spec = _map(spec, where)
    return LocalQueue(name=name, namespace=namespace,
                      cluster_queue=_name(spec.get("clusterQueue"), f"{where}.clusterQueue"),
                      stop_policy=_enum(StopPolicy, spec.get("stopPolicy"), f"{where}.stopPolicy", StopPolicy.NONE))


def resource_flavor(name: str, spec: object) -> ResourceFlavor:
    where = f"ResourceFlavor {name}: spec"
    labels = _map(_map(spec, where).get("nodeLabels"), f"{where}.nodeLabels")
    return ResourceFlavor(name=name, node_labels={str(k): str(v) for k, v in labels.items()})


def priority_class(name: str, manifest: Mapping[str, Any]) -> WorkloadPriorityClass:
    """A WorkloadPriorityClass: ``value`` (an int32) and ``description`` sit at the top of its manifest."""
    value = manifest.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise UserError(f"WorkloadPriorityClass {name}: value: expected a 32-bit integer")
    return WorkloadPriorityClass(name=name, value=value, description=str(manifest.get("description") or ""))


def objects_from_specs(manifests: Iterable[Mapping[str, Any]]) -> QueueObjects:
    """Applied Kueue manifests (apiVersion, kind, metadata, spec) as records; other kinds are skipped."""
    found = QueueObjects()
    for manifest in manifests:
        kind = manifest.get("kind")
        if kind not in KINDS:
            continue
        metadata = _map(manifest.get("metadata"), f"{kind}: metadata")
        name, spec = _name(metadata.get("name"), f"{kind}: metadata.name"), manifest.get("spec")
        if kind == "ClusterQueue":
            found.cluster_queues[name] = cluster_queue(name, spec)
        elif kind == "LocalQueue":
            namespace = str(metadata.get("namespace") or "default")
            found.local_queues[(namespace, name)] = local_queue(name, namespace, spec)
        elif kind == "Cohort":
            found.cohorts[name] = cohort(name, spec)
        elif kind == "ResourceFlavor":
            found.flavors[name] = resource_flavor(name, spec)
        else:
            found.priority_classes[name] = priority_class(name, manifest)
    return found
