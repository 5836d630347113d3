"""What Kueue refuses in a queueing object beyond its JSON Schema: the CRDs' CEL rules and the webhooks.

Kueue checks these when an object is created or updated (``pkg/webhooks`` ``clusterqueue_webhook``,
``cohort_webhook``, and the ``x-kubernetes-validations`` of its CRDs), and so does millpond, with
the field named as Kubernetes names it: a resource covered twice, a flavor named twice, a
flavor whose resources do not match ``coveredResources`` one for one, a negative quantity, a
``borrowingLimit`` or ``lendingLimit`` without a cohort (a Cohort: without a parent), a
``lendingLimit`` above the ``nominalQuota``, ``borrowWithinCohort`` without
``reclaimWithinCohort``, a fungibility ``preference`` without ``TryNextFlavor`` on both, a
malformed ``namespaceSelector``. The first problem is raised as one UserError line.

The spec has passed the schema (``kinds.schema_file``) before: types are right, so this
module reads values without guarding every type again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from millpond.errors import UserError
from millpond.scheduling.queues.model import milli
from millpond.scheduling.queues.specs import cohort_name

_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _shown(value: object) -> str:
    """A value in an error line as JSON (``"cpu"``): a newline or a control character in it stays escaped."""
    return json.dumps(value, ensure_ascii=False)


def _quantity(value: object, where: str) -> int:
    amount = milli(value, where)  # a QuantityError (a UserError) names the field itself
    if amount < 0:
        raise UserError(f"{where}: Invalid value: {value!r}: must be greater than or equal to 0")
    return amount


def resource_groups(groups: list[Any], *, has_parent: bool, is_cohort: bool) -> None:
    """The resource groups of a ClusterQueue (``has_parent``: it names a cohort) or a Cohort (a parent)."""
    covered_seen: set[str] = set()
    flavors_seen: set[str] = set()
    parent = "parent" if is_cohort else "cohort"
    for i, group in enumerate(groups):
        where = f"spec.resourceGroups[{i}]"
        covered = [str(name) for name in group.get("coveredResources") or []]
        for j, name in enumerate(covered):
            if name in covered_seen:
                raise UserError(f"{where}.coveredResources[{j}]: Duplicate value: {_shown(name)} "
                                "(a resource is covered by one resource group)")
            covered_seen.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            at = f"{where}.flavors[{j}]"
            if flavor["name"] in flavors_seen:
                raise UserError(f"{at}.name: Duplicate value: {_shown(flavor['name'])} "
                                "(a flavor appears once in a queue)")
            flavors_seen.add(flavor["name"])
            resources = flavor.get("resources") or []
            if len(resources) != len(covered):
                raise UserError(f"{where}: flavors must have the same number of resources as the coveredResources "
                                f"(flavor {flavor['name']} has {len(resources)}, coveredResources {len(covered)})")
            for k, resource in enumerate(resources):
                _resource_quota(resource, covered[k], f"{at}.resources[{k}]", has_parent, parent, not is_cohort)


def _resource_quota(resource: Mapping[str, Any], covered: str, where: str, has_parent: bool, parent: str,
                    lending_within_nominal: bool) -> None:
    if resource["name"] != covered:
        raise UserError(f"{where}.name: Invalid value: {_shown(resource['name'])}: must match the name in "
                        f"coveredResources ({_shown(covered)})")
    nominal = _quantity(resource.get("nominalQuota", 0), f"{where}.nominalQuota")
    for limit in ("borrowingLimit", "lendingLimit"):
        if resource.get(limit) is None:
            continue
        amount = _quantity(resource[limit], f"{where}.{limit}")
        if not has_parent:
            raise UserError(f"{where}.{limit}: Invalid value: {resource[limit]!r}: must be nil when {parent} is empty")
        if limit == "lendingLimit" and lending_within_nominal and amount > nominal:
            raise UserError(f"{where}.lendingLimit: Invalid value: {resource[limit]!r}: "
                            "must be less than or equal to the nominalQuota")


def _preemption(spec: Mapping[str, Any]) -> None:
    preemption = spec.get("preemption") or {}
    borrow = (preemption.get("borrowWithinCohort") or {}).get("policy") or "Never"
    if (preemption.get("reclaimWithinCohort") or "Never") == "Never" and borrow != "Never":
        raise UserError("spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never "
                        "(borrowing by preemption needs reclaimWithinCohort LowerPriority or Any)")


def _fungibility(spec: Mapping[str, Any]) -> None:
    fungibility = spec.get("flavorFungibility") or {}
    if "preference" in fungibility and not (fungibility.get("whenCanBorrow") == "TryNextFlavor"
                                            and fungibility.get("whenCanPreempt") == "TryNextFlavor"):
        raise UserError("spec.flavorFungibility: preference can only be set when both whenCanBorrow and "
                        "whenCanPreempt are TryNextFlavor")


def label_selector(selector: Mapping[str, Any] | None, where: str) -> None:
    """A LabelSelector as Kubernetes validates it: In/NotIn need values, Exists/DoesNotExist take none."""
    for i, expression in enumerate((selector or {}).get("matchExpressions") or []):
        operator, values = expression.get("operator"), expression.get("values") or []
        at = f"{where}.matchExpressions[{i}]"
        if operator not in _SELECTOR_OPERATORS:
            raise UserError(f"{at}.operator: Unsupported value: {operator!r}: "
                            f"supported values: {', '.join(_SELECTOR_OPERATORS)}")
        if operator in ("In", "NotIn") and not values:
            raise UserError(f"{at}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if operator in ("Exists", "DoesNotExist") and values:
            raise UserError(f"{at}.values: Forbidden: may not be specified when `operator` is 'Exists' or "
                            "'DoesNotExist'")


def cluster_queue(spec: Mapping[str, Any]) -> None:
    resource_groups(spec.get("resourceGroups") or [], has_parent=cohort_name(spec) is not None, is_cohort=False)
    label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    _preemption(spec)
    _fungibility(spec)


def cohort(spec: Mapping[str, Any]) -> None:
    resource_groups(spec.get("resourceGroups") or [], has_parent=bool(spec.get("parentName")), is_cohort=True)
