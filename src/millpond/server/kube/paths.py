"""A Kubernetes API path read as what it asks for: a group-version, maybe a namespace, a resource, a name
and a subresource.

The shapes the API server serves (``k8s.io/apiserver``'s request-info resolver):
``/api/v1/RESOURCE[/NAME[/SUB]]``, ``/api/v1/namespaces/NS/RESOURCE[/NAME[/SUB]]`` and the same under
``/apis/GROUP/VERSION``. ``/api/v1/namespaces/NAME[/status|/finalize]`` is the Namespace object itself.
"""

from __future__ import annotations

from dataclasses import dataclass

_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class ResourcePath:
    """What a resource URL names. ``namespace`` is "" for a cluster-scoped or an all-namespaces request."""

    group: str
    version: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def group_version_of(path: str) -> tuple[str, str, list[str]] | None:
    """(group, version, the segments after them) of an ``/api/v1/…`` or ``/apis/G/V/…`` path; None otherwise."""
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        return "", parts[1], parts[2:]
    if len(parts) >= 3 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


def parse(path: str) -> ResourcePath | None:
    """The resource a path names, or None when it names only a group-version (discovery) or nothing."""
    found = group_version_of(path)
    if found is None:
        return None
    group, version, rest = found
    if not rest:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in _NAMESPACE_SUBRESOURCES:
        namespace, rest = rest[1], rest[2:]
    else:
        namespace = ""
    resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", "/".join(rest[2:])
    return ResourcePath(group, version, resource, namespace, name, sub)
