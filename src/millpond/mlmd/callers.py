"""Who calls the ML Metadata endpoint, and which namespaces' lineage they may read.

The caller is identified exactly as the HTTP server identifies a request (``server.access.Authenticator``, the
same object the server's request guard uses): gRPC metadata are the headers, so a client sends
``authorization: Bearer TOKEN`` (a user's ``mpt_`` token, or the server's own token), and in multi-user mode a
trusted proxy may send ``kubeflow-userid``. A single-user server without a token answers everyone, as its HTTP
API does; with one, the token is required. A refusal is UNAUTHENTICATED (no identity, or a wrong token) or
PERMISSION_DENIED (the identity header from an untrusted address).

What a caller reads is decided by the server's one ``Authorizer``, with the attributes KFP's own artifact API
asks (``server.artifact_routes``): artifacts in the namespaces where it may ``get`` ``artifacts``; executions,
contexts and events (a run's records) where it may ``get`` ``runs``. Rows of other namespaces are left out of every
answer, as if absent, as MLMD answers for ids it does not have (so no id reveals another namespace's existence).
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.access import kfp
from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import Identity
from millpond.errors import MillpondError
from millpond.server.access import Authenticator, Refusal
from millpond.store.lineage_reads import Kind, LineageReads


class Unauthenticated(MillpondError):
    """No identity for the call: gRPC's UNAUTHENTICATED (``status`` 401) or PERMISSION_DENIED (403)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.status = refusal.status


@dataclass(frozen=True)
class Caller:
    """The caller, and the namespaces of each kind of node it may read (None: every namespace)."""

    identity: Identity
    artifact_namespaces: frozenset[str] | None
    run_namespaces: frozenset[str] | None

    def namespaces(self, kind: Kind) -> frozenset[str] | None:
        """Artifacts are read as ``artifacts``; executions and contexts as the runs they belong to."""
        return self.artifact_namespaces if kind == "artifact" else self.run_namespaces


def peer_address(peer: str) -> str | None:
    """The client's address in gRPC's peer text (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``); None otherwise."""
    family, _, rest = peer.partition(":")
    if family == "ipv4":
        return rest.rpartition(":")[0] or None
    if family == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or None
    return None


class Callers:
    """Identifies a call's caller and the namespaces it may read, with the server's authenticator and authorizer."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer, reads: LineageReads) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.reads = reads

    def identify(self, metadata: dict[str, str], peer: str) -> Caller:
        """The caller of a call with these metadata (lower-case keys) from ``peer``; Unauthenticated when none."""
        found = self.authenticator.identify(metadata, peer_address(peer), public=False)
        if isinstance(found, Refusal):
            raise Unauthenticated(found)
        if not self.authorizer.multi_user or found.is_master:
            return Caller(found, None, None)
        recorded = self.reads.namespaces()
        return Caller(found, self._allowed(found, recorded, kfp.ARTIFACTS), self._allowed(found, recorded, kfp.RUNS))

    def _allowed(self, identity: Identity, namespaces: set[str], resource: str) -> frozenset[str]:
        """The namespaces among ``namespaces`` where ``identity`` may ``get`` ``resource`` (a lineage row of no
        namespace, recorded in single-user mode, is nobody's but an administrator's)."""
        return frozenset(namespace for namespace in namespaces if namespace and self.authorizer.allows(
            identity, Attributes(kfp.GET, namespace, kfp.GROUP, resource)))
