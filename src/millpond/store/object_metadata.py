"""An applied object's ``metadata``, checked as Kubernetes' API server checks it, and what is kept of it.

A manifest's ``metadata`` carries what its author wrote (name, namespace, labels, annotations)
and, in a document copied from ``kubectl get -o yaml``, what a cluster set (uid,
resourceVersion, managedFields…): the latter is dropped, anything else is an unknown field.
Kept here, beside the store the objects go to, so that every owner of kinds checks metadata the
same way with the same lines (``serving.manifests`` does; Fluid's, Kubeflow's and Kueue's
checks have their own copies of these rules, which could move here).
"""

from __future__ import annotations

import json
from typing import Any

from millpond.errors import UserError
from millpond.store.secrets import check_name

USER_METADATA = ("name", "namespace", "labels", "annotations")
SERVER_METADATA = frozenset({"uid", "creationTimestamp", "resourceVersion", "generation", "managedFields",
                             "selfLink", "finalizers", "ownerReferences", "deletionTimestamp"})


def kept_metadata(kind: str, metadata: object, namespaced: bool) -> dict[str, Any]:
    """The metadata kept of an object of ``kind``: its name, its namespace (``default`` unless given; none
    for a cluster-scoped kind), labels and annotations. UserError (one line, led by the kind and name)
    for a missing or invalid name, an unknown field, labels or annotations that are not strings."""
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise UserError(f"{kind}: metadata.name: required field is missing (generateName is not supported)")
    name = str(metadata["name"])
    try:
        check_name(kind, name)
    except UserError as exc:
        raise UserError(f"{kind}: metadata.name: {exc}") from None
    for key, value in metadata.items():
        if key not in USER_METADATA and key not in SERVER_METADATA:
            raise UserError(f"{kind} {name}: unknown field {json.dumps(f'metadata.{key}', ensure_ascii=False)}")
        if key in ("labels", "annotations") and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise UserError(f"{kind} {name}: metadata.{key}: expected a map of strings")
    kept: dict[str, Any] = {"name": name}
    if namespaced:
        kept["namespace"] = str(metadata.get("namespace") or "default")
        try:
            check_name("namespace", kept["namespace"])
        except UserError as exc:
            raise UserError(f"{kind} {name}: metadata.namespace: {exc}") from None
    kept.update({key: metadata[key] for key in ("labels", "annotations") if key in metadata})
    return kept
