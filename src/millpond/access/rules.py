"""One RBAC ``PolicyRule`` against a request's attributes, matched as Kubernetes matches it
(``pkg/apis/rbac/helpers.go``: ``VerbMatches``, ``APIGroupMatches``, ``ResourceMatches``,
``ResourceNameMatches``, ``NonResourceURLMatches``).

- verbs and apiGroups: the request's, or ``*``;
- resources: the request's ``resource`` or ``resource/subresource``, ``*`` (everything, subresources
  included), or ``*/subresource``;
- resourceNames: empty matches every name; otherwise only a request naming one of them (so a rule with
  names never allows ``list``, ``watch`` or ``create``, which name nothing);
- nonResourceURLs: the path, or a prefix ending in ``*``; only for non-resource requests, and only in
  ClusterRoles (a Role's nonResourceURLs mean nothing, as Kubernetes ignores them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from millpond.access.attributes import Attributes

ALL = "*"


@dataclass(frozen=True)
class Rule:
    """One ``PolicyRule`` (every list as applied; empty lists match nothing but names)."""

    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def of(cls, rule: Mapping[str, Any]) -> Rule:
        """A rule as a manifest writes it (``verbs``, ``apiGroups``, ``resources``, ``resourceNames``,
        ``nonResourceURLs``); anything that is not a list of strings is read as empty."""
        def strings(key: str) -> tuple[str, ...]:
            value = rule.get(key)
            return tuple(item for item in value if isinstance(item, str)) if isinstance(value, list) else ()

        return cls(strings("verbs"), strings("apiGroups"), strings("resources"), strings("resourceNames"),
                   strings("nonResourceURLs"))

    def as_manifest(self) -> dict[str, list[str]]:
        """The rule as a manifest writes it (empty lists left out), for SelfSubjectRulesReview and built-ins."""
        fields = {"verbs": self.verbs, "apiGroups": self.api_groups, "resources": self.resources,
                  "resourceNames": self.resource_names, "nonResourceURLs": self.non_resource_urls}
        return {key: list(value) for key, value in fields.items() if value}

    def allows(self, asked: Attributes) -> bool:
        if not _verb(self.verbs, asked.verb):
            return False
        if not asked.resource_request:
            return _url(self.non_resource_urls, asked.path)
        return (_group(self.api_groups, asked.api_group) and _resource(self.resources, asked)
                and (not self.resource_names or asked.name in self.resource_names))


def rules_of(manifest: Mapping[str, Any]) -> tuple[Rule, ...]:
    """The rules of a Role or ClusterRole manifest."""
    listed = manifest.get("rules")
    return tuple(Rule.of(rule) for rule in listed if isinstance(rule, Mapping)) if isinstance(listed, list) else ()


def allowed_by(rules: Sequence[Rule], asked: Attributes) -> bool:
    return any(rule.allows(asked) for rule in rules)


def _verb(verbs: tuple[str, ...], verb: str) -> bool:
    return ALL in verbs or verb in verbs


def _group(groups: tuple[str, ...], group: str) -> bool:
    return ALL in groups or group in groups


def _resource(resources: tuple[str, ...], asked: Attributes) -> bool:
    combined = f"{asked.resource}/{asked.subresource}" if asked.subresource else asked.resource
    for resource in resources:
        if resource in (ALL, combined):
            return True
        if asked.subresource and resource == f"{ALL}/{asked.subresource}":
            return True
    return False


def _url(urls: tuple[str, ...], path: str) -> bool:
    for url in urls:
        if url in (ALL, path) or (url.endswith(ALL) and path.startswith(url[:-1])):
            return True
    return False
