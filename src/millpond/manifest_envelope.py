"""What every kind family's manifests and stored objects share, written once: the envelope.

A checked manifest is a body (apiVersion, kind, metadata, spec) plus what its family derived
from it; :class:`ManifestBody` gives every family's record the same ``name`` and ``namespace``.
``check_metadata`` checks ``metadata`` as Kubernetes' API server does and says what is kept of it;
``store_namespace``, ``not_found`` and ``found`` are how every family finds its stored objects,
cluster-scoped ones (kept under ``CLUSTER_STORE_NAMESPACE``) included.

On the floor (it imports no layer): Fluid's, Kubeflow's, Kueue's and KServe's checks sit in
different layers and all use it; the store is reached through the small :class:`ObjectReader`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Mapping
from typing import Any, Protocol, TypeVar

from millpond.errors import NotFoundError, UserError
from millpond.kind_handler import KindName
from millpond.names import PATH_SEGMENT_KINDS, label_problem, path_segment_problem, subdomain_problem

USER_METADATA = ("name", "namespace", "labels", "annotations")
# Set by the API server, so present in what ``kubectl get -o yaml`` prints: accepted back and dropped.
SERVER_METADATA = frozenset({"uid", "creationTimestamp", "resourceVersion", "generation", "managedFields",
                             "selfLink", "finalizers", "ownerReferences", "deletionTimestamp"})
CLUSTER_STORE_NAMESPACE = "default"  # where the resource store keeps cluster-scoped objects

Stored = TypeVar("Stored")


class ManifestBody:
    """The part of a checked manifest every family shares: ``body`` and the names read from it."""

    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        """The object's namespace; "" for a cluster-scoped kind."""
        return str(self.body["metadata"].get("namespace") or "")


def is_document_of(doc: object, kinds: Container[str], refusal: Callable[[object], str | None]) -> bool:
    """A document of one of ``kinds``, or of a kind the family refuses with a reason (rather than one
    called unknown): what a family's handler claims of an apply."""
    if not isinstance(doc, dict):
        return False
    return (isinstance(doc.get("kind"), str) and doc["kind"] in kinds) or refusal(doc) is not None


def check_name(kind: str, name: str) -> None:
    """Kubernetes object names are DNS-1123 subdomains; a namespace's name is a DNS-1123 label; RBAC's kinds take
    any path segment."""
    if kind in PATH_SEGMENT_KINDS:
        problem = path_segment_problem(name)
    else:
        problem = (label_problem if kind.lower() == "namespace" else subdomain_problem)(name)
    if problem:
        raise UserError(f"invalid {kind} name {name!r}: {problem}")


def check_metadata(kind: str, metadata: object, *, namespaced: bool, generate_name: bool = False) -> dict[str, Any]:
    """The metadata kept of an object of ``kind``: its name, its namespace (``default`` unless given; none for
    a cluster-scoped kind), labels and annotations. UserError (one line, led by the kind and name) for a
    missing or invalid name or namespace, an unknown field, labels or annotations that are not strings.
    ``generate_name``: ``generateName`` is accepted (and dropped) beside a name, as Kubeflow's jobs carry it."""
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise UserError(f"{kind}: metadata.name: required field is missing (generateName is not supported)")
    name = str(metadata["name"])
    named = f"{kind} {name}" if name.isprintable() else kind  # a line break in it: the error shows it escaped
    kept: dict[str, Any] = {"name": name}
    if namespaced:
        kept["namespace"] = str(metadata.get("namespace") or "default")  # empty: the default, as kubectl reads it
    for key, value, what in (("name", name, kind), ("namespace", kept.get("namespace"), "namespace")):
        if value is not None:
            try:
                check_name(what, value)
            except UserError as exc:
                raise UserError(f"{named}: metadata.{key}: {exc}") from None
    allowed = (*USER_METADATA, "generateName") if generate_name else USER_METADATA
    for key, value in metadata.items():
        if key not in allowed and key not in SERVER_METADATA:
            raise UserError(f"{kind} {name}: unknown field {json.dumps(f'metadata.{key}', ensure_ascii=False)}")
        if key in ("labels", "annotations") and not (
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        ):
            raise UserError(f"{kind} {name}: metadata.{key}: expected a map of strings")
    kept.update({key: metadata[key] for key in ("labels", "annotations") if key in metadata})
    return kept


def store_namespace(kind: KindName, namespace: str) -> str:
    """Where the store keeps an object of ``kind`` named in ``namespace`` (cluster-scoped: one place)."""
    return CLUSTER_STORE_NAMESPACE if kind.cluster_scoped else namespace


def not_found(kind: KindName, name: str, namespace: str) -> NotFoundError:
    """kubectl's error for a missing object (a cluster-scoped one names no namespace)."""
    return NotFoundError(kind.not_found(name, CLUSTER_STORE_NAMESPACE if kind.cluster_scoped else namespace))


class ObjectReader(Protocol[Stored]):
    """The reads ``found`` needs of a store (``store.resources.ResourceStore``)."""

    def get(self, kind: str, name: str, namespace: str = "default") -> Stored | None: ...

    def list(self, kind: str, namespace: str | None = None) -> list[Stored]: ...


def found(kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
          store: ObjectReader[Stored]) -> list[Stored]:
    """The object named (NotFoundError if none), or those of ``namespace`` (all of them: ``all_namespaces``,
    or a cluster-scoped kind)."""
    where = store_namespace(kind, namespace)
    if name is not None:
        one = store.get(kind.kind, name, where)
        if one is None:
            raise not_found(kind, name, namespace)
        return [one]
    return store.list(kind.kind, None if all_namespaces and not kind.cluster_scoped else where)


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """kubectl's ``List`` of objects (``get KIND -o json``)."""
    return {"apiVersion": "v1", "kind": "List", "items": items}


def without_namespace(kind: KindName, shown: Mapping[str, Any]) -> dict[str, Any]:
    """The object as shown, without a namespace when its kind is cluster-scoped."""
    result = dict(shown)
    if kind.cluster_scoped and isinstance(result.get("metadata"), dict):
        result["metadata"] = {k: v for k, v in result["metadata"].items() if k != "namespace"}
    return result
