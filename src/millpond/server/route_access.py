"""What millpond's own routes, the UI's helpers and the model gateway ask the one Authorizer.

Each route asks with the attributes of the objects it touches, as the Kubernetes API would for the
same objects (``access.attributes``): a kind of the registry by its group and plural in its namespace
(none for a cluster-scoped kind); a KFP run by KFP's vocabulary (``access.kfp``) in its experiment's
namespace; an InferenceService queried through the gateway by ``get`` on ``inferenceservices``.
A route that reads one object refuses (403, Kubernetes' words) before it looks the object up, as
kube-apiserver does, so the answer says nothing of what another namespace holds. A route that lists
never refuses for the namespaces it cannot show: it shows only those where the caller may ``list``
(:func:`list_scope`), as Kubeflow's UI shows only the namespaces of the caller's profiles.

In single-user mode the Authorizer allows everything, so every helper here is a no-op there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from starlette.requests import HTTPConnection

from millpond.access.attributes import Attributes
from millpond.errors import ForbiddenError
from millpond.kind_handler import KindName
from millpond.server.callers import authorizer_of, identity_of, require

AllNamespaces = None
NamespaceScope = frozenset[str] | None  # the namespaces a list may show; None: every one


def kind_attributes(entry: KindName, verb: str, namespace: str, name: str = "") -> Attributes:
    """The attributes of ``verb`` on objects of ``entry`` (no namespace for a cluster-scoped kind)."""
    return Attributes(verb, "" if entry.cluster_scoped else namespace, entry.group, entry.plural, name=name)


def require_kind(connection: HTTPConnection, entry: KindName, verb: str, namespace: str, name: str = "") -> None:
    """Nothing when the caller may ``verb`` that object (or those objects); ForbiddenError (403) otherwise."""
    require(connection, kind_attributes(entry, verb, namespace, name))


def allows(connection: HTTPConnection, asked: Attributes) -> bool:
    return authorizer_of(connection).allows(identity_of(connection), asked)


def require_any(connection: HTTPConnection, choices: Iterable[Attributes]) -> None:
    """Nothing when one of ``choices`` is allowed; else the first one's refusal (a route over several kinds,
    as the training jobs' routes over PyTorchJob, TFJob, MPIJob…)."""
    listed = list(choices)
    if not any(allows(connection, asked) for asked in listed):
        require(connection, listed[0])


Resource = tuple[str, str]  # (API group, plural)


def list_scope(connection: HTTPConnection, resources: Iterable[Resource],
               known: Callable[[], Iterable[str]]) -> NamespaceScope:
    """The namespaces whose ``resources`` (any of them) the caller may ``list``: None when it may list them
    cluster-wide (an administrator, single-user mode); else those of ``known()`` (the namespaces the objects
    are in) or of the caller's RoleBindings where a ``list`` is allowed."""
    authorizer, identity = authorizer_of(connection), identity_of(connection)
    wanted = tuple(resources)

    def may_list(namespace: str) -> bool:
        return any(authorizer.allows(identity, Attributes("list", namespace, group, plural))
                   for group, plural in wanted)

    if may_list(""):
        return AllNamespaces
    bound = authorizer.namespaces(identity)
    candidates = set(known()) if bound is None else bound
    return frozenset(namespace for namespace in candidates if may_list(namespace))


def shows(scope: NamespaceScope, namespace: str) -> bool:
    return scope is None or namespace in scope


def kind_scope(connection: HTTPConnection, entry: KindName, known: Callable[[], Iterable[str]]) -> NamespaceScope:
    """:func:`list_scope` for one kind of the registry (a cluster-scoped kind: all, or nothing)."""
    if entry.cluster_scoped:
        require_kind(connection, entry, "list", "")
        return AllNamespaces
    return list_scope(connection, ((entry.group, entry.plural),), known)


def refusal(connection: HTTPConnection, asked: Attributes) -> str | None:
    """Kubernetes' Forbidden line when ``asked`` is refused, else None (for routes that answer in their own
    protocol's shape, as the model gateway)."""
    try:
        require(connection, asked)
    except ForbiddenError as exc:
        return str(exc)
    return None
