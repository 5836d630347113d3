"""SeldonDeployments in the resource store: check, apply, show, delete.

Kept as applied (``store.resources``), shown with their observed status (``status.observed``). Applying one
that is created or changed writes its first status (Creating, or Failed naming the predictor that cannot
run here); an unchanged one keeps what its supervisor reported.
"""

from __future__ import annotations

from typing import Any

from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import as_list, found, not_found
from millpond.serving.seldon import status as seldon_status
from millpond.serving.seldon.kinds import KIND, SELDON_DEPLOYMENT
from millpond.serving.seldon.manifests import SeldonManifest, check_document
from millpond.store.resources import Resource, ResourceStore


def check(documents: list[tuple[str, int, Any]], validate: SchemaCheck) -> list[SeldonManifest]:
    """Every SeldonDeployment document (source, number, document) checked; nothing stored."""
    manifests = [check_document(doc, source, number, validate) for source, number, doc in documents]
    seen: set[tuple[str, str]] = set()
    for manifest in manifests:
        if (manifest.namespace, manifest.name) in seen:
            raise UserError(f"{KIND} {manifest.name}: applied twice in one batch (namespace {manifest.namespace})")
        seen.add((manifest.namespace, manifest.name))
    return manifests


def apply(manifests: list[SeldonManifest], store: ResourceStore) -> list[tuple[SeldonManifest, str]]:
    """Store them in one transaction: (manifest, "created" | "configured" | "unchanged") for each."""
    if not manifests:
        return []
    applied = store.apply([manifest.body for manifest in manifests])
    for manifest, (resource, action) in zip(manifests, applied, strict=True):
        if action != "unchanged":
            store.set_status(KIND, resource.name, seldon_status.initial(resource.name, manifest.predictors),
                             resource.namespace)
    return [(manifest, action) for manifest, (_, action) in zip(manifests, applied, strict=True)]


def as_object(resource: Resource) -> dict[str, Any]:
    """The object as ``kubectl get -o yaml`` shows it, with its status as observed."""
    return resource.as_object(seldon_status.observed(resource))


def as_objects(name: str | None, namespace: str, all_namespaces: bool, store: ResourceStore) -> dict[str, Any]:
    """The object named, or a kubectl ``List`` of them."""
    items = [as_object(one) for one in found(SELDON_DEPLOYMENT, name, namespace, all_namespaces, store)]
    return items[0] if name is not None else as_list(items)


def delete(name: str, namespace: str, store: ResourceStore) -> None:
    """Forget the object; NotFoundError when there is none."""
    if not store.delete(KIND, name, namespace):
        raise not_found(SELDON_DEPLOYMENT, name, namespace)
