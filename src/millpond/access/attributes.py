"""What a request asks, as Kubernetes' authorizer reads it (``authorizer.Attributes``), and the answer.

A *resource* request names a verb (``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``,
``delete``, ``deletecollection``, or a custom one as KFP's ``archive``/``terminate``/``readArtifact``),
an API group (``""`` for the core group), a resource (plural), maybe a subresource, a name and a
namespace (``""``: cluster-wide, or cluster-scoped). A *non-resource* request names a URL path and an
HTTP verb (``get``, ``post``…), as ``/healthz`` or ``/metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Attributes:
    """One request's authorization attributes (a resource request when ``resource`` is set, else ``path``)."""

    verb: str
    namespace: str = ""
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    path: str = ""

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)

    def describe(self, user: str) -> str:
        """kube-apiserver's Forbidden message: ``User "alice" cannot list resource "pods" in API group ""
        in the namespace "team-b"``."""
        if not self.resource_request:
            return f'User "{user}" cannot {self.verb} path "{self.path}"'
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f' in the namespace "{self.namespace}"' if self.namespace else " at the cluster scope"
        return f'User "{user}" cannot {self.verb} resource "{resource}" in API group "{self.api_group}"{where}'


@dataclass(frozen=True)
class Decision:
    """Allowed or not, and why (the binding that allowed it, or what was missing)."""

    allowed: bool
    reason: str = ""
