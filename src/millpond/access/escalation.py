"""Kubernetes' RBAC privilege-escalation rules: nobody grants what they do not hold.

As ``pkg/registry/rbac/validation`` and the Role/ClusterRole/binding storages (``policybased``) check a
write of an RBAC object:

- a **Role** or **ClusterRole** may be created or updated by a caller that holds the ``escalate`` verb on
  it (``roles``/``clusterroles`` in its namespace or cluster-wide), or that already holds every
  permission its rules grant (``ConfirmNoEscalation``: the caller's own rules in the role's namespace,
  cluster-wide for a ClusterRole, cover each rule); a ClusterRole with an ``aggregationRule`` needs full
  authority (``*`` on everything and every URL), since what it aggregates may change;
- a **RoleBinding** or **ClusterRoleBinding** may be written by a caller that holds ``bind`` on the role it
  names (in the binding's namespace, cluster-wide for a ClusterRoleBinding), or that holds every
  permission of that role in the binding's scope. A binding to a role that does not exist is refused
  unless the caller may ``bind`` it (upstream answers the lookup's NotFound).

Coverage is upstream's ``Covers``: each rule of the role, broken into one verb, group, resource and name at
a time, must be allowed by one of the caller's rules (``*`` covers everything; ``*/SUB`` covers every
resource's ``SUB``; a rule with names covers only those names; a URL rule ending in ``*`` covers the
URLs it prefixes). ``system:masters`` is never refused (the authorizer allows it everything).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.builtin import RBAC_GROUP
from millpond.access.identity import Identity
from millpond.access.rules import ALL, Rule, rules_of

_PLURALS = {"Role": "roles", "ClusterRole": "clusterroles"}


@dataclass(frozen=True)
class Refused:
    """Why a write of an RBAC object is refused: 403 (``forbidden``) or 404 (the role named does not exist)."""

    code: int
    message: str


def check_write(authorizer: Authorizer, identity: Identity, manifest: Mapping[str, Any]) -> Refused | None:
    """None when ``identity`` may store ``manifest`` (a Role, ClusterRole or binding); why not otherwise."""
    if not authorizer.multi_user or identity.is_master:
        return None
    kind = str(manifest.get("kind", ""))
    metadata = manifest.get("metadata") or {}
    name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace") or "")
    if kind in _PLURALS:
        return _role(authorizer, identity, manifest, kind, name, namespace)
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        return _binding(authorizer, identity, manifest, namespace if kind == "RoleBinding" else "")
    return None


def _role(authorizer: Authorizer, identity: Identity, manifest: Mapping[str, Any], kind: str, name: str,
          namespace: str) -> Refused | None:
    scope = namespace if kind == "Role" else ""
    if authorizer.allows(identity, Attributes("escalate", scope, RBAC_GROUP, _PLURALS[kind], name=name)):
        return None
    wanted = list(rules_of(manifest))
    if kind == "ClusterRole" and manifest.get("aggregationRule"):
        full = [Rule((ALL,), (ALL,), (ALL,)), Rule((ALL,), non_resource_urls=(ALL,))]
        if missing(authorizer.rules(identity, ""), full):
            return Refused(403, "must have cluster-admin privileges to use the aggregationRule")
    if kind == "Role":
        wanted = [rule for rule in wanted if not rule.non_resource_urls]  # a Role's URLs mean nothing
    return _not_held(identity, missing(authorizer.rules(identity, scope), wanted))


def _binding(authorizer: Authorizer, identity: Identity, manifest: Mapping[str, Any],
             namespace: str) -> Refused | None:
    ref = manifest.get("roleRef") or {}
    role_kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
    plural = _PLURALS.get(role_kind)
    if plural is None:
        return None  # the kind's own validation refuses it
    if authorizer.allows(identity, Attributes("bind", namespace, RBAC_GROUP, plural, name=role_name)):
        return None
    policy = authorizer.policy()
    if role_kind == "ClusterRole":
        if role_name not in policy.cluster_roles:
            return Refused(404, f'clusterroles.{RBAC_GROUP} "{role_name}" not found')
        granted = list(policy.cluster_role_rules(role_name))
    else:
        role = policy.roles.get((namespace, role_name))
        if role is None:
            return Refused(404, f'roles.{RBAC_GROUP} "{role_name}" not found')
        granted = [rule for rule in rules_of(role) if not rule.non_resource_urls]
    if namespace:  # a RoleBinding grants no URLs
        granted = [rule for rule in granted if not rule.non_resource_urls]
    return _not_held(identity, missing(authorizer.rules(identity, namespace), granted))


def _not_held(identity: Identity, lacking: list[Rule]) -> Refused | None:
    if not lacking:
        return None
    described = "; ".join(sorted({_compact(rule) for rule in lacking}))
    groups = ", ".join(f'"{group}"' for group in identity.groups)
    return Refused(403, f'user "{identity.name}" (groups=[{groups}]) is attempting to grant RBAC permissions not '
                        f"currently held: {described}")


def missing(held: list[Rule], wanted: list[Rule]) -> list[Rule]:
    """The simple rules (one verb, group, resource, name or URL each) of ``wanted`` no rule of ``held`` covers."""
    return [one for rule in wanted for one in _simple(rule) if not any(_covers(owner, one) for owner in held)]


def _simple(rule: Rule) -> list[Rule]:
    if rule.non_resource_urls:
        return [Rule((verb,), non_resource_urls=(url,)) for verb in rule.verbs for url in rule.non_resource_urls]
    names: list[tuple[str, ...]] = [(name,) for name in rule.resource_names] or [()]
    return [Rule((verb,), (group,), (resource,), name) for verb in rule.verbs for group in rule.api_groups
            for resource in rule.resources for name in names]


def _covers(owner: Rule, one: Rule) -> bool:
    if not (ALL in owner.verbs or one.verbs[0] in owner.verbs):
        return False
    if one.non_resource_urls:
        url = one.non_resource_urls[0]
        return any(held in (ALL, url) or (held.endswith(ALL) and url.startswith(held[:-1]))
                   for held in owner.non_resource_urls)
    if not (ALL in owner.api_groups or one.api_groups[0] in owner.api_groups):
        return False
    resource = one.resources[0]
    if not (ALL in owner.resources or resource in owner.resources
            or ("/" in resource and f"{ALL}/{resource.split('/', 1)[1]}" in owner.resources)):
        return False
    return not owner.resource_names or (bool(one.resource_names) and one.resource_names[0] in owner.resource_names)


def _compact(rule: Rule) -> str:
    """A missing rule as upstream's ``CompactString`` writes it: ``{APIGroups:[""], Resources:["secrets"], …}``."""
    def quoted(values: tuple[str, ...]) -> str:
        return "[" + " ".join(f'"{value}"' for value in values) + "]"

    if rule.non_resource_urls:
        return f"{{NonResourceURLs:{quoted(rule.non_resource_urls)}, Verbs:{quoted(rule.verbs)}}}"
    names = f", ResourceNames:{quoted(rule.resource_names)}" if rule.resource_names else ""
    return (f"{{APIGroups:{quoted(rule.api_groups)}, Resources:{quoted(rule.resources)}{names}, "
            f"Verbs:{quoted(rule.verbs)}}}")
