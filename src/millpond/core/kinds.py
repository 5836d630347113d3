"""Kubernetes' built-in kinds millpond serves, by the names kubectl accepts for them.

Group "" is the core group (``apiVersion: v1``, served under ``/api/v1``): kubectl names its resources
without a group (``secret/x created``, ``secrets "x" not found``). RBAC's four kinds are
``rbac.authorization.k8s.io/v1``; Kubeflow's Profile is ``kubeflow.org/v1`` (``v1beta1`` still served),
cluster-scoped. The short names are kube-apiserver's own (``ns``, ``cm``, ``sa``,
``pvc``, ``pv``, ``no``, ``ev``).
"""

from __future__ import annotations

from millpond.kind_handler import KindName
from millpond.kinds import REGISTRY

OWNER = "core"
CORE_VERSION = "v1"
RBAC_GROUP = "rbac.authorization.k8s.io"


def _core(kind: str, plural: str, *short: str, cluster_scoped: bool = False) -> KindName:
    return KindName(kind, plural, "", (CORE_VERSION,), OWNER, short, cluster_scoped)


def _rbac(kind: str, plural: str, *, cluster_scoped: bool = False) -> KindName:
    return KindName(kind, plural, RBAC_GROUP, ("v1",), OWNER, (), cluster_scoped)


KINDS: dict[str, KindName] = {entry.kind: entry for entry in (
    _core("Namespace", "namespaces", "ns", cluster_scoped=True),
    _core("Secret", "secrets"),
    _core("ConfigMap", "configmaps", "cm"),
    _core("ServiceAccount", "serviceaccounts", "sa"),
    _core("PersistentVolumeClaim", "persistentvolumeclaims", "pvc"),
    _core("PersistentVolume", "persistentvolumes", "pv", cluster_scoped=True),
    _core("Node", "nodes", "no", cluster_scoped=True),
    _core("Event", "events", "ev"),
    _core("ResourceQuota", "resourcequotas", "quota"),
    _rbac("Role", "roles"),
    _rbac("ClusterRole", "clusterroles", cluster_scoped=True),
    _rbac("RoleBinding", "rolebindings"),
    _rbac("ClusterRoleBinding", "clusterrolebindings", cluster_scoped=True),
    KindName("Profile", "profiles", "kubeflow.org", ("v1", "v1beta1"), OWNER, (), True),
)}


def api_version(entry: KindName) -> str:
    """The apiVersion objects of ``entry`` carry: ``v1`` for the core group, ``GROUP/v1`` otherwise."""
    return f"{entry.group}/{entry.versions[0]}" if entry.group else entry.versions[0]


REGISTRY.register(KINDS.values())  # the handler: core.handler
