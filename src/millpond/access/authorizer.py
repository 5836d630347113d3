"""The one authorization decision: may this identity do what these attributes ask?

Every surface asks it: the Kubernetes API (each request's verb, group, resource, namespace, name), the
KFP API (KFP's SubjectAccessReview attributes, ``access.kfp``), millpond's own routes and the UI (the
resources behind them), the model gateway (``get`` on the InferenceService a query reaches) and
``/metrics`` (a non-resource path). In single-user mode every request is allowed, as before; in
multi-user mode ``system:masters`` (the server token, the command line on the home) is never refused
and everyone else gets what RBAC grants (``rbac``).
"""

from __future__ import annotations

from millpond.access.attributes import Attributes, Decision
from millpond.access.identity import Identity
from millpond.access.rbac import RBAC_KINDS, Policy, PolicyCache
from millpond.access.rules import Rule
from millpond.errors import ForbiddenError
from millpond.settings import Settings
from millpond.store.resources import ResourceStore

SINGLE_USER = Decision(True, "single-user mode: every caller may do everything")
MASTER = Decision(True, "system:masters: the machine's administrator")


class Authorizer:
    """Decisions over one home's RBAC objects; ``multi_user`` False allows everything."""

    def __init__(self, settings: Settings, multi_user: bool) -> None:
        self.settings = settings
        self.multi_user = multi_user
        self._cache = PolicyCache(self._read)

    def _read(self) -> list[dict]:
        store = ResourceStore(self.settings)
        return [resource.manifest | {"metadata": {**(resource.manifest.get("metadata") or {}),
                                                  "namespace": resource.namespace}}
                for kind in RBAC_KINDS for resource in store.list(kind)]

    def policy(self) -> Policy:
        return self._cache.get()

    def decide(self, identity: Identity, asked: Attributes) -> Decision:
        if not self.multi_user:
            return SINGLE_USER
        if identity.is_master:
            return MASTER
        return self.policy().decide(identity, asked)

    def allows(self, identity: Identity, asked: Attributes) -> bool:
        return self.decide(identity, asked).allowed

    def check(self, identity: Identity, asked: Attributes) -> None:
        """Nothing when allowed; ForbiddenError (403) with kube-apiserver's words otherwise."""
        decision = self.decide(identity, asked)
        if not decision.allowed:
            raise ForbiddenError(decision.reason)

    def namespaces(self, identity: Identity) -> set[str] | None:
        """The namespaces ``identity`` has a RoleBinding in; None when it may list every namespace (single-user,
        an administrator, a ClusterRoleBinding that lets it list namespaces)."""
        if not self.multi_user or identity.is_master:
            return None
        policy = self.policy()
        if policy.decide(identity, Attributes("list", resource="namespaces")).allowed:
            return None
        return policy.namespaces_of(identity)

    def rules(self, identity: Identity, namespace: str) -> list[Rule]:
        """What applies to ``identity`` in ``namespace`` (SelfSubjectRulesReview); every rule for a master."""
        if not self.multi_user or identity.is_master:
            return [Rule(("*",), ("*",), ("*",)), Rule(("*",), non_resource_urls=("*",))]
        return self.policy().rules_for(identity, namespace)
