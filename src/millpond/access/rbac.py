"""The RBAC policy: every Role, ClusterRole and binding (stored and built-in), and what it allows whom.

As Kubernetes' RBAC authorizer (``plugin/pkg/auth/authorizer/rbac``): a request is allowed when some
ClusterRoleBinding binds the identity to a ClusterRole with a rule that allows it, or, in the request's
namespace, some RoleBinding binds it to a Role of that namespace or a ClusterRole with such a rule.
Nothing denies: no rule, no access. A subject is a ``User`` (by name), a ``Group`` (one of the identity's)
or a ``ServiceAccount`` (``system:serviceaccount:NAMESPACE:NAME``). A ClusterRole with an
``aggregationRule`` holds the rules of every ClusterRole whose labels match one of its selectors.

The policy is read from the resource store whole (four kinds) and kept for ``TTL`` seconds by
:class:`PolicyCache` (and dropped at once when this process writes an RBAC object: whatever path stores
one calls :func:`note_written`), as the API server's authorizer reads from an informer's cache: a binding
made by another process (the command line) takes effect within a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from millpond.access import builtin
from millpond.access.attributes import Attributes, Decision
from millpond.access.identity import Identity
from millpond.access.rules import Rule, rules_of
from millpond.label_selectors import of_object

RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
TTL = 1.0
_written = [0]  # how many RBAC writes this process made: every PolicyCache rereads after one


def note_written() -> None:
    """An RBAC object was stored or deleted in this process: every policy cache reads it again at its next use."""
    _written[0] += 1


@dataclass(frozen=True)
class Subject:
    kind: str  # User, Group, ServiceAccount
    name: str
    namespace: str = ""

    def matches(self, identity: Identity) -> bool:
        if self.kind == "User":
            return self.name == identity.name
        if self.kind == "Group":
            return self.name in identity.groups
        if self.kind == "ServiceAccount":
            return identity.name == f"system:serviceaccount:{self.namespace}:{self.name}"
        return False


@dataclass(frozen=True)
class Binding:
    """A RoleBinding (``namespace`` set) or ClusterRoleBinding: its subjects and the role it grants."""

    name: str
    namespace: str
    subjects: tuple[Subject, ...]
    role_kind: str  # Role or ClusterRole
    role_name: str

    @classmethod
    def of(cls, manifest: Mapping[str, Any], namespace: str) -> Binding:
        metadata = manifest.get("metadata") or {}
        ref = manifest.get("roleRef") or {}
        subjects = tuple(
            Subject(str(one.get("kind", "")), str(one.get("name", "")), str(one.get("namespace") or namespace))
            for one in manifest.get("subjects") or [] if isinstance(one, Mapping))
        return cls(str(metadata.get("name", "")), namespace, subjects, str(ref.get("kind", "")),
                   str(ref.get("name", "")))

    def binds(self, identity: Identity) -> bool:
        return any(subject.matches(identity) for subject in self.subjects)

    def describe(self) -> str:
        kind = f'RoleBinding "{self.name}" of namespace "{self.namespace}"' if self.namespace else \
            f'ClusterRoleBinding "{self.name}"'
        return f'{kind} of {self.role_kind} "{self.role_name}"'


@dataclass
class Policy:
    """Every RBAC object at one moment; built-in ClusterRoles and bindings included."""

    cluster_roles: dict[str, dict[str, Any]]
    roles: dict[tuple[str, str], dict[str, Any]]
    cluster_bindings: list[Binding]
    bindings: dict[str, list[Binding]]
    _aggregated: dict[str, tuple[Rule, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, stored: Iterable[dict[str, Any]]) -> Policy:
        """The policy of ``stored`` manifests (each with ``kind`` and ``metadata``) over the built-ins."""
        cluster_roles = {role["metadata"]["name"]: role for role in builtin.cluster_roles()}
        cluster_bindings = {binding["metadata"]["name"]: binding for binding in builtin.cluster_role_bindings()}
        roles: dict[tuple[str, str], dict[str, Any]] = {}
        bindings: dict[str, list[Binding]] = {}
        for manifest in stored:
            metadata = manifest.get("metadata") or {}
            name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace") or "")
            kind = manifest.get("kind")
            if kind == "ClusterRole":
                cluster_roles[name] = manifest
            elif kind == "ClusterRoleBinding":
                cluster_bindings[name] = manifest
            elif kind == "Role":
                roles[(namespace, name)] = manifest
            elif kind == "RoleBinding":
                bindings.setdefault(namespace, []).append(Binding.of(manifest, namespace))
        return cls(cluster_roles, roles, [Binding.of(one, "") for one in cluster_bindings.values()], bindings)

    def cluster_role_rules(self, name: str, visiting: frozenset[str] = frozenset()) -> tuple[Rule, ...]:
        """A ClusterRole's rules, aggregated ones included (none for an unknown name).

        Only whole answers are remembered, and an aggregation cycle ends at a role already being visited on
        this path: the policy is shared by concurrent requests, and none may see a role's rules half-made."""
        found = self._aggregated.get(name)
        if found is not None:
            return found
        if name in visiting:
            return ()
        role = self.cluster_roles.get(name)
        rules = rules_of(role) if role else ()
        selectors = ((role or {}).get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        for selector in selectors:
            if not isinstance(selector, Mapping):
                continue
            matches = of_object(selector).matches
            for other, manifest in sorted(self.cluster_roles.items()):
                labels = (manifest.get("metadata") or {}).get("labels") or {}
                if other != name and matches(labels):
                    rules += self.cluster_role_rules(other, visiting | {name})
        if not visiting:
            self._aggregated[name] = rules
        return rules

    def granted(self, binding: Binding) -> tuple[Rule, ...]:
        """The rules a binding grants (a RoleBinding's Role is its own namespace's)."""
        if binding.role_kind == "ClusterRole":
            return self.cluster_role_rules(binding.role_name)
        role = self.roles.get((binding.namespace, binding.role_name))
        return tuple(rule for rule in rules_of(role) if not rule.non_resource_urls) if role else ()

    def bindings_of(self, identity: Identity, namespace: str) -> list[Binding]:
        """The bindings that apply to ``identity`` for a request in ``namespace`` ("" = cluster-wide only)."""
        found = [binding for binding in self.cluster_bindings if binding.binds(identity)]
        if namespace:
            found += [binding for binding in self.bindings.get(namespace, []) if binding.binds(identity)]
        return found

    def decide(self, identity: Identity, asked: Attributes) -> Decision:
        for binding in self.bindings_of(identity, asked.namespace if asked.resource_request else ""):
            rules = self.granted(binding)
            if binding.namespace:  # a RoleBinding never grants non-resource URLs
                rules = tuple(rule for rule in rules if not rule.non_resource_urls)
            if any(rule.allows(asked) for rule in rules):
                return Decision(True, f'RBAC: allowed by {binding.describe()} to "{identity.name}"')
        return Decision(False, asked.describe(identity.name))

    def rules_for(self, identity: Identity, namespace: str) -> list[Rule]:
        """Every rule that applies to ``identity`` in ``namespace`` (SelfSubjectRulesReview's answer)."""
        rules: list[Rule] = []
        for binding in self.bindings_of(identity, namespace):
            rules += [rule for rule in self.granted(binding) if not (binding.namespace and rule.non_resource_urls)]
        return rules

    def namespaces_of(self, identity: Identity) -> set[str]:
        """The namespaces where a RoleBinding binds ``identity`` (its profiles and contributions)."""
        return {namespace for namespace, found in self.bindings.items()
                if any(binding.binds(identity) for binding in found)}


class PolicyCache:
    """The policy, read at most once per ``TTL`` seconds, and again after this process wrote an RBAC object
    (:func:`note_written`)."""

    def __init__(self, read: Any) -> None:
        self._read = read  # () -> list of manifests of the four RBAC kinds
        self._lock = threading.Lock()
        self._policy: Policy | None = None
        self._read_at = 0.0
        self._seen_writes = _written[0]

    def get(self) -> Policy:
        with self._lock:
            now = time.monotonic()
            if self._policy is None or now - self._read_at > TTL or self._seen_writes != _written[0]:
                self._seen_writes = _written[0]
                self._policy = Policy.of(self._read())
                self._read_at = now
            return self._policy
