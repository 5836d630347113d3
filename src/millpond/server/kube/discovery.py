"""Discovery: what kubectl and the clients ask before any request, built from the one registry of kinds.

``/version``; ``/api`` (the core group's versions) and ``/apis`` (every group with its versions);
``/api/v1`` and ``/apis/GROUP/VERSION`` (an ``APIResourceList``: each kind's plural, singular,
short names, scope and verbs), the access reviews' groups included (``reviews``: create-only, so
``kubectl auth can-i``/``whoami`` find them). kubectl ≥ 1.30 first asks ``/api`` and ``/apis`` for the aggregated
documents (``apidiscovery.k8s.io/v2`` ``APIGroupDiscoveryList``, one request for everything); it gets
them when its ``Accept`` names them, and the plain lists otherwise, as the API server negotiates.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import Any

from millpond import __version__
from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY
from millpond.server.kube import reviews

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
# The Kubernetes API level served: within kubectl's supported skew of the clients installed beside it.
KUBE_MAJOR, KUBE_MINOR = "1", "36"
# Subresources every kind has, and those of one kind (a Pod's log).
_SUBRESOURCES: dict[str, list[tuple[str, list[str]]]] = {"Pod": [("log", ["get"])]}


def version() -> dict[str, Any]:
    """``/version``: the API level, with millpond's own version in ``gitVersion``."""
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    level = f"v{KUBE_MAJOR}.{KUBE_MINOR}.0"
    return {"major": KUBE_MAJOR, "minor": KUBE_MINOR, "gitVersion": f"{level}+millpond.{__version__}",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "", "goVersion": "",
            "compiler": "millpond", "platform": f"linux/{machine}"}


def groups() -> dict[str, list[str]]:
    """Every API group ("" for the core one) with its versions, preferred first, in the registry's order."""
    found: dict[str, list[str]] = {}
    for kind in REGISTRY:
        versions = found.setdefault(kind.group, [])
        versions.extend(v for v in kind.versions if v not in versions)
    return found


def served_groups() -> dict[str, list[str]]:
    """``groups()`` and the access reviews' groups (``authorization.k8s.io``, ``authentication.k8s.io``)."""
    found = groups()
    for review in reviews.REVIEWS:
        versions = found.setdefault(review.group, [])
        if review.version not in versions:
            versions.append(review.version)
    return found


def kinds_of(group: str, version: str) -> list[KindName]:
    return [kind for kind in REGISTRY if kind.group == group and version in kind.versions]


def find(group: str, version: str, resource: str) -> KindName | None:
    """The kind served at ``/apis/GROUP/VERSION/RESOURCE`` (its plural), or None."""
    return next((kind for kind in kinds_of(group, version) if kind.plural == resource), None)


def is_kube_group(group: str) -> bool:
    """Whether ``/apis/GROUP`` is this API's (KFP's ``/apis/v2beta1`` and millpond's own are not)."""
    return group in served_groups()


def _resource(kind: KindName, version: str) -> dict[str, Any]:
    return {"name": kind.plural, "singularName": kind.kind.lower(), "namespaced": not kind.cluster_scoped,
            "group": kind.group, "version": version, "kind": kind.kind, "verbs": VERBS,
            "shortNames": list(kind.short_names), "categories": _categories(kind)}


def _categories(kind: KindName) -> list[str]:
    """``kubectl get all`` lists the kinds in category ``all``: the built-in workloads only, as upstream."""
    return ["all"] if kind.group in ("", "batch") and kind.kind in ("Pod", "Job") else []


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/G/V``: an ``APIResourceList``; None when no kind is served there."""
    kinds = kinds_of(group, version)
    virtual = reviews.of_group(group, version)
    if not kinds and not virtual:
        return None
    resources: list[dict[str, Any]] = [_review(review) for review in virtual]
    for kind in kinds:
        resources.append(_resource(kind, version))
        for sub, verbs in [("status", ["get", "patch", "update"]), *_SUBRESOURCES.get(kind.kind, [])]:
            resources.append({"name": f"{kind.plural}/{sub}", "singularName": "", "namespaced": not kind.cluster_scoped,
                              "kind": kind.kind, "verbs": verbs})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources}


def _review(review: reviews.Review) -> dict[str, Any]:
    return {"name": review.plural, "singularName": review.kind.lower(), "namespaced": review.namespaced,
            "group": review.group, "version": review.version, "kind": review.kind, "verbs": ["create"]}


def core_versions() -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {"kind": "APIVersions", "versions": groups().get("", ["v1"]) or ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]}


def group_list() -> dict[str, Any]:
    """``/apis``: every named group with its versions."""
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(name, versions) for name, versions in served_groups().items() if name]}


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group(name: str) -> dict[str, Any] | None:
    """``/apis/GROUP``: one ``APIGroup``."""
    versions = served_groups().get(name)
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)} if versions and name else None


def aggregated_version(accept: str) -> str | None:
    """The ``apidiscovery.k8s.io`` version the client accepts (v2 first), or None for the plain documents."""
    for wanted in ("v2", "v2beta1"):
        if f"g=apidiscovery.k8s.io;v={wanted};as=APIGroupDiscoveryList" in accept.replace(" ", ""):
            return wanted
    return None


def aggregated(core: bool, version_of_discovery: str) -> dict[str, Any]:
    """The aggregated discovery document of ``/api`` (``core``) or ``/apis``."""
    items = [_discovery_group(name, versions) for name, versions in served_groups().items() if (name == "") == core]
    if core and not items:
        items = [_discovery_group("", ["v1"])]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version_of_discovery}",
            "metadata": {}, "items": items}


def _discovery_group(name: str, versions: Iterable[str]) -> dict[str, Any]:
    return {"metadata": {"name": name} if name else {},
            "versions": [{"version": v, "resources": [
                *(_discovery_resource(k, v) for k in kinds_of(name, v)),
                *(_discovery_review(review) for review in reviews.of_group(name, v))],
                "freshness": "Current"} for v in versions]}


def _discovery_review(review: reviews.Review) -> dict[str, Any]:
    return {"resource": review.plural, "responseKind": {"group": review.group, "version": review.version,
                                                        "kind": review.kind},
            "scope": "Namespaced" if review.namespaced else "Cluster", "singularResource": review.kind.lower(),
            "verbs": ["create"]}


def _discovery_resource(kind: KindName, version: str) -> dict[str, Any]:
    response = {"group": kind.group, "version": version, "kind": kind.kind}
    subresources = [{"subresource": sub, "responseKind": response if sub == "status" else
                     {"group": "", "version": "", "kind": ""}, "verbs": verbs}
                    for sub, verbs in [("status", ["get", "patch", "update"]), *_SUBRESOURCES.get(kind.kind, [])]]
    return {"resource": kind.plural, "responseKind": response,
            "scope": "Cluster" if kind.cluster_scoped else "Namespaced", "singularResource": kind.kind.lower(),
            "verbs": VERBS, "shortNames": list(kind.short_names), "categories": _categories(kind),
            "subresources": subresources}
