"""Kueue's queueing objects in the resource store: apply, find, show, delete, and read them back as records.

They are applied objects like Fluid's (``store.resources``), kept as applied (either served
version: ``specs`` reads both). The cluster-scoped kinds (all but LocalQueue) are kept under
``STORE_NAMESPACE_OF_CLUSTER``, as every family keeps its cluster-scoped kinds
(``millpond.manifest_envelope``), and shown without a namespace. The family's handler
(``queues.handler``), through which ``millpond apply``/``get``/``delete`` and the server's resource
routes reach them, and ``millpond queue`` go through here; :func:`stored_objects` is what admission
and ``queue list`` read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from millpond.errors import ConflictError, UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE as STORE_NAMESPACE_OF_CLUSTER
from millpond.manifest_envelope import as_list, found, not_found, store_namespace
from millpond.scheduling.queues import specs
from millpond.scheduling.queues.kinds import QueueKind, refusal
from millpond.scheduling.queues.manifests import QueueManifest, check_document
from millpond.scheduling.queues.specs import QueueObjects
from millpond.store.resources import Resource, ResourceStore

__all__ = ["STORE_NAMESPACE_OF_CLUSTER", "apply", "as_object", "as_objects", "check", "delete", "missing_notes",
           "status_key", "stored_objects"]


def check(documents: list[tuple[str, int, Any]], store: ResourceStore, validate: SchemaCheck) -> list[QueueManifest]:
    """Every Kueue document (source, number, document) checked, against what is stored too; nothing stored."""
    for source, number, doc in documents:  # a kind that means nothing here is named first, wherever it is
        reason = refusal(doc)
        if reason is not None:
            raise UserError(f"{source}: document {number}: {reason}")
    manifests = [check_document(doc, source, number, validate) for source, number, doc in documents]
    queues: dict[tuple[str, str], str | None] = {}  # None: a stored one without the (required) field
    for manifest in manifests:
        if manifest.info.kind != "LocalQueue":
            continue
        key = (manifest.namespace, manifest.name)
        target = manifest.body["spec"]["clusterQueue"]
        if key not in queues:
            stored = store.get("LocalQueue", manifest.name, manifest.namespace)
            queues[key] = stored.spec.get("clusterQueue") if stored is not None else target
        if queues[key] != target:  # Kueue's CRD: spec.clusterQueue "field is immutable"
            raise ConflictError(f'LocalQueue {manifest.name}: spec.clusterQueue: Invalid value: "{target}": '
                                f'field is immutable (it points at ClusterQueue "{queues[key]}"; delete it first)')
    return manifests


def missing_notes(manifests: list[QueueManifest], store: ResourceStore) -> list[str]:
    """Kueue accepts a LocalQueue naming a ClusterQueue not there yet, or a ClusterQueue naming a flavor not
    there yet, and leaves the queue inactive; millpond accepts them too and says so (one line for
    each missing kind, whatever the batch), so that the workloads waiting on them are no mystery."""
    def exists(kind: str, name: str) -> bool:
        return any(m.info.kind == kind and m.name == name for m in manifests) or \
            store.get(kind, name, STORE_NAMESPACE_OF_CLUSTER) is not None

    queues: dict[str, list[str]] = {}
    flavors: dict[str, list[str]] = {}
    for manifest in manifests:
        spec = manifest.body.get("spec") or {}
        if manifest.info.kind == "LocalQueue" and not exists("ClusterQueue", spec["clusterQueue"]):
            queues.setdefault(spec["clusterQueue"], []).append(f"{manifest.namespace}/{manifest.name}")
        elif manifest.info.kind == "ClusterQueue":
            for group in spec.get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    if not exists("ResourceFlavor", flavor["name"]):
                        flavors.setdefault(flavor["name"], []).append(manifest.name)
    notes = []
    if queues:
        notes.append(f"ClusterQueue {', '.join(sorted(queues))} not found: LocalQueue "
                     f"{', '.join(sorted({q for names in queues.values() for q in names}))} admits nothing until "
                     "it is applied")
    if flavors:
        notes.append(f"ResourceFlavor {', '.join(sorted(flavors))} not found: ClusterQueue "
                     f"{', '.join(sorted({q for names in flavors.values() for q in names}))} admits nothing until "
                     "it is applied")
    return notes


def apply(manifests: list[QueueManifest], store: ResourceStore) -> list[tuple[QueueKind, str, str]]:
    """Store them all in one transaction: (kind, name, "created" | "configured" | "unchanged") for each."""
    applied = store.apply([manifest.body for manifest in manifests])
    return [(manifest.info, manifest.name, action)
            for manifest, (_, action) in zip(manifests, applied, strict=True)]


def as_object(info: QueueKind, resource: Resource, status: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The object as ``kubectl get -o yaml`` shows it (a cluster-scoped one has no namespace)."""
    shown = resource.as_object(dict(status or {}))
    if info.cluster_scoped:
        shown["metadata"].pop("namespace", None)
    if info.kind == "WorkloadPriorityClass":  # no spec: value and description at the top
        shown.pop("spec", None)
        shown.pop("status", None)
        shown.update({key: resource.manifest[key] for key in ("value", "description") if key in resource.manifest})
    return shown


def as_objects(info: QueueKind, name: str | None, namespace: str, all_namespaces: bool, store: ResourceStore,
               statuses: Mapping[tuple[str, str, str], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The object named, or a kubectl ``List`` of them: what ``get -o json`` prints and the server returns.
    ``statuses`` (``views.statuses``) gives ClusterQueues and LocalQueues Kueue's status fields."""
    items = [as_object(info, one, (statuses or {}).get(status_key(info, one)))
             for one in found(info.names, name, namespace, all_namespaces, store)]
    return items[0] if name is not None else as_list(items)


def status_key(info: QueueKind, resource: Resource) -> tuple[str, str, str]:
    """The key of ``views.statuses`` for a stored object."""
    return (info.kind, "" if info.cluster_scoped else resource.namespace, resource.name)


def delete(info: QueueKind, name: str, namespace: str, store: ResourceStore) -> None:
    """Forget the object; NotFoundError when there is none."""
    if not store.delete(info.kind, name, store_namespace(info.names, namespace)):
        raise not_found(info.names, name, namespace)


def stored_objects(store: ResourceStore) -> QueueObjects:
    """Every stored queueing object as records (they were checked when applied)."""
    return specs.objects_from_specs(resource.manifest for kind in specs.KINDS for resource in store.list(kind, None))
