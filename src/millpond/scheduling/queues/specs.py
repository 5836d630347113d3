"""Kueue manifests (``kueue.x-k8s.io`` v1beta1 and v1beta2) as the model's records: the one converter.

``millpond apply -f`` stores the manifests as applied (``store.resources``); admission reads
them back through :func:`objects_from_specs`, and the manifests' own checks (``queues.kinds``)
reuse the per-kind functions, so one place knows how a field is spelled in each version:

- ``spec.cohort`` (v1beta1) is ``spec.cohortName`` (v1beta2);
- ``flavorFungibility.whenCanBorrow: Borrow`` (v1beta1) is ``MayStopSearch`` (v1beta2), and
  ``whenCanPreempt: Preempt`` is ``MayStopSearch``;
- a Cohort's parent is ``spec.parentName``; a WorkloadPriorityClass keeps ``value`` and
  ``description`` at the top level, not under ``spec``.

Quantities become integers of milli-units (``model.milli``). A value of the wrong shape is a
``UserError`` naming the object and field; schema validation proper (patterns, enums, limits)
is the manifests' check, against ``reference/kueue``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
_FUNGIBILITY_V1BETA1 = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class QueueObjects:
    """Every Kueue object applied, by name (LocalQueues by (namespace, name))."""

    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueue] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UserError(f"{where} must be a mapping")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list")
    return value


def _enum(kind: type, value: object, where: str, default: Any, aliases: Mapping[str, str] = {}) -> Any:  # noqa: B006
    if value is None:
        return default
    try:
        return kind(aliases.get(str(value), value))
    except ValueError:
        allowed = ", ".join(member.value for member in kind)  # type: ignore[attr-defined]
        raise UserError(f"{where}: {value!r} is not one of {allowed}") from None


def _limit(value: object, where: str) -> int | None:
    return None if value is None else milli(value, where)


def resource_groups(groups: object, where: str) -> tuple[ResourceGroup, ...]:
    """``spec.resourceGroups`` of a ClusterQueue or a Cohort."""
    result = []
    for index, group in enumerate(_list(groups, f"{where}.resourceGroups")):
        here = f"{where}.resourceGroups[{index}]"
        group = _mapping(group, here)
        covered = tuple(str(name) for name in _list(group.get("coveredResources"), f"{here}.coveredResources"))
        flavors = []
        for position, flavor in enumerate(_list(group.get("flavors"), f"{here}.flavors")):
            at = f"{here}.flavors[{position}]"
            flavor = _mapping(flavor, at)
            quotas = []
            for number, resource in enumerate(_list(flavor.get("resources"), f"{at}.resources")):
                spot = f"{at}.resources[{number}]"
                resource = _mapping(resource, spot)
                quotas.append(ResourceQuota(
                    str(resource.get("name", "")), milli(resource.get("nominalQuota", 0), f"{spot}.nominalQuota"),
                    _limit(resource.get("borrowingLimit"), f"{spot}.borrowingLimit"),
                    _limit(resource.get("lendingLimit"), f"{spot}.lendingLimit")))
            flavors.append(FlavorQuotas(str(flavor.get("name", "")), tuple(quotas)))
        result.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(result)


def label_selector(value: object, where: str) -> LabelSelector | None:
    """A namespaceSelector: absent is None (no namespace, as Kueue), ``{}`` selects every namespace."""
    if value is None:
        return None
    selector = _mapping(value, where)
    given = _mapping(selector.get("matchLabels"), f"{where}.matchLabels")
    labels = {str(key): str(item) for key, item in given.items()}
    expressions = []
    for index, expression in enumerate(_list(selector.get("matchExpressions"), f"{where}.matchExpressions")):
        here = f"{where}.matchExpressions[{index}]"
        expression = _mapping(expression, here)
        operator = str(expression.get("operator", ""))
        if operator not in _OPERATORS:
            raise UserError(f"{here}.operator: {operator!r} is not one of {', '.join(_OPERATORS)}")
        values = tuple(str(item) for item in _list(expression.get("values"), f"{here}.values"))
        expressions.append((str(expression.get("key", "")), operator, values))
    return LabelSelector(labels, tuple(expressions))


def preemption(value: object, where: str) -> Preemption:
    spec = _mapping(value, where)
    borrow = _mapping(spec.get("borrowWithinCohort"), f"{where}.borrowWithinCohort")
    threshold = borrow.get("maxPriorityThreshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int)):
        raise UserError(f"{where}.borrowWithinCohort.maxPriorityThreshold must be an integer")
    never = PreemptionPolicy.NEVER
    return Preemption(
        within_cluster_queue=_enum(PreemptionPolicy, spec.get("withinClusterQueue"), f"{where}.withinClusterQueue",
                                   never),
        reclaim_within_cohort=_enum(PreemptionPolicy, spec.get("reclaimWithinCohort"),
                                    f"{where}.reclaimWithinCohort", never),
        borrow_within_cohort=_enum(PreemptionPolicy, borrow.get("policy"), f"{where}.borrowWithinCohort.policy",
                                   never),
        borrow_max_priority_threshold=threshold)


def flavor_fungibility(value: object, where: str) -> FlavorFungibility:
    spec = _mapping(value, where)
    default = FlavorFungibility()
    borrow = str(spec.get("whenCanBorrow") or default.when_can_borrow)
    preempt = str(spec.get("whenCanPreempt") or default.when_can_preempt)
    return FlavorFungibility(_FUNGIBILITY_V1BETA1.get(borrow, borrow), _FUNGIBILITY_V1BETA1.get(preempt, preempt))


def cluster_queue(name: str, spec: object) -> ClusterQueue:
    where = f"ClusterQueue {name}: spec"
    spec = _mapping(spec, where)
    cohort = spec.get("cohortName", spec.get("cohort"))
    return ClusterQueue(
        name=name, resource_groups=resource_groups(spec.get("resourceGroups"), where),
        cohort=str(cohort) if cohort else None,
        queueing_strategy=_enum(QueueingStrategy, spec.get("queueingStrategy"), f"{where}.queueingStrategy",
                                QueueingStrategy.BEST_EFFORT_FIFO),
        preemption=preemption(spec.get("preemption"), f"{where}.preemption"),
        namespace_selector=label_selector(spec.get("namespaceSelector"), f"{where}.namespaceSelector"),
        flavor_fungibility=flavor_fungibility(spec.get("flavorFungibility"), f"{where}.flavorFungibility"),
        stop_policy=_enum(StopPolicy, spec.get("stopPolicy"), f"{where}.stopPolicy", StopPolicy.NONE))


def cohort(name: str, spec: object) -> Cohort:
    where = f"Cohort {name}: spec"
    spec = _mapping(spec, where)
    parent = spec.get("parentName")
    return Cohort(name, str(parent) if parent else None, resource_groups(spec.get("resourceGroups"), where))


def local_queue(name: str, namespace: str, spec: object) -> LocalQueue:
    where = f"LocalQueue {namespace}/{name}: spec"
    spec = _mapping(spec, where)
    target = spec.get("clusterQueue")
    if not target:
        raise UserError(f"{where}.clusterQueue is required")
    return LocalQueue(name, namespace, str(target),
                      _enum(StopPolicy, spec.get("stopPolicy"), f"{where}.stopPolicy", StopPolicy.NONE))


def resource_flavor(name: str, spec: object) -> ResourceFlavor:
    where = f"ResourceFlavor {name}: spec"
    labels = _mapping(_mapping(spec, where).get("nodeLabels"), f"{where}.nodeLabels")
    return ResourceFlavor(name, {str(key): str(value) for key, value in labels.items()})


def priority_class(name: str, manifest: Mapping[str, Any]) -> WorkloadPriorityClass:
    """A WorkloadPriorityClass: ``value`` (an int32) and ``description`` sit beside ``metadata``."""
    value = manifest.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        raise UserError(f"WorkloadPriorityClass {name}: value must be a 32-bit integer")
    return WorkloadPriorityClass(name, value, str(manifest.get("description") or ""))


def objects_from_specs(manifests: Iterable[Mapping[str, Any]]) -> QueueObjects:
    """Applied Kueue manifests (apiVersion, kind, metadata, spec) as records; other kinds are skipped."""
    found = QueueObjects()
    for manifest in manifests:
        metadata = _mapping(manifest.get("metadata"), "metadata")
        name, kind, spec = str(metadata.get("name", "")), manifest.get("kind"), manifest.get("spec")
        if kind == "ClusterQueue":
            found.cluster_queues[name] = cluster_queue(name, spec)
        elif kind == "LocalQueue":
            namespace = str(metadata.get("namespace") or "default")
            found.local_queues[(namespace, name)] = local_queue(name, namespace, spec)
        elif kind == "Cohort":
            found.cohorts[name] = cohort(name, spec)
        elif kind == "ResourceFlavor":
            found.flavors[name] = resource_flavor(name, spec)
        elif kind == "WorkloadPriorityClass":
            found.priority_classes[name] = priority_class(name, manifest)
    return found
