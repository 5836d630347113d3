"""The ClusterRoles and ClusterRoleBindings a cluster boots with, and Kubeflow's aggregated roles.

Kubernetes' bootstrap policy (``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``):

- ``cluster-admin``: everything. ``admin``/``edit``/``view``: the user-facing roles, granted in a namespace
  by a RoleBinding. ``view`` reads every namespaced resource but Secrets and RBAC objects, and namespaces
  (through a RoleBinding: its own namespace); ``edit`` also
  writes them (Secrets included, RBAC objects not); ``admin`` also manages the namespace's Roles and
  RoleBindings. The resources are every namespaced kind millpond serves (the kinds registry), so a kind
  added later is covered as upstream's aggregation (``aggregate-to-edit`` labels) covers a CRD's.
- ``system:basic-user`` (SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview),
  ``system:discovery`` and ``system:public-info-viewer`` (discovery and version paths), bound to every
  authenticated user (the last one to unauthenticated callers too).

Kubeflow's (``kubeflow/manifests`` ``common/kubeflow-roles``): ``kubeflow-admin``, ``kubeflow-edit`` and
``kubeflow-view`` hold no rules of their own; each aggregates every ClusterRole labelled
``rbac.authorization.kubeflow.org/aggregate-to-kubeflow-{admin,edit,view}: "true"``, which each component
ships: here ``kubeflow-kubernetes-*`` (the Kubernetes resources, as admin/edit/view above) and
``kubeflow-pipelines-*`` (KFP's ``pipelines.kubeflow.org`` resources and verbs, ``access.kfp``) and
``kubeflow-model-registry-*`` (the model registry's ``registeredmodels``, ``access.model_registry``). A user's
own ClusterRole with such a label joins the aggregate, as in Kubeflow.

Simplification: a stored ClusterRole or ClusterRoleBinding with a built-in's name replaces it (the API
server reconciles bootstrap roles by adding to them; here the user's copy is taken as written).
"""

from __future__ import annotations

from typing import Any

from millpond.access import kfp, model_registry
from millpond.access.identity import AUTHENTICATED, UNAUTHENTICATED
from millpond.kinds import REGISTRY

RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
CLUSTER_ADMIN = "cluster-admin"
KUBEFLOW_ADMIN, KUBEFLOW_EDIT, KUBEFLOW_VIEW = "kubeflow-admin", "kubeflow-edit", "kubeflow-view"
KUBEFLOW_ROLES = (KUBEFLOW_ADMIN, KUBEFLOW_EDIT, KUBEFLOW_VIEW)
AGGREGATE_LABEL = "rbac.authorization.kubeflow.org/aggregate-to-{role}"
BOOTSTRAP_LABEL = {"kubernetes.io/bootstrapping": "rbac-defaults"}

READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_PRIVATE = {("", "secrets")}  # view never reads these
_RBAC_NAMESPACED = {(RBAC_GROUP, "roles"), (RBAC_GROUP, "rolebindings")}  # only admin writes these


def _namespaced_resources() -> dict[str, list[str]]:
    """Every namespaced resource of the registry (with ``pods/log``), by API group, sorted."""
    groups: dict[str, set[str]] = {}
    for kind in REGISTRY:
        if not kind.cluster_scoped:
            groups.setdefault(kind.group, set()).add(kind.plural)
    groups.setdefault("", set()).update({"pods", "pods/log"} if "pods" in groups.get("", set()) else set())
    return {group: sorted(names) for group, names in sorted(groups.items())}


def _rules(level: str) -> list[dict[str, Any]]:
    """The rules of Kubernetes' ``view``, ``edit`` or ``admin`` over every namespaced resource."""
    rules: list[dict[str, Any]] = []
    for group, plurals in _namespaced_resources().items():
        readable = [p for p in plurals if (group, p.split("/")[0]) not in _PRIVATE | _RBAC_NAMESPACED]
        if any("/" in p for p in plurals):  # a subresource (pods/log) is read, never written
            rules.append({"apiGroups": [group], "resources": [p for p in readable if "/" in p], "verbs": READ})
            readable = [p for p in readable if "/" not in p]
            plurals = [p for p in plurals if "/" not in p]
        writable = [p for p in plurals if (group, p.split("/")[0]) not in _RBAC_NAMESPACED]
        if level == "view":
            rules.append({"apiGroups": [group], "resources": readable, "verbs": READ})
        elif level == "edit":
            rules.append({"apiGroups": [group], "resources": writable, "verbs": READ + WRITE})
        else:
            rules.append({"apiGroups": [group], "resources": plurals, "verbs": READ + WRITE})
    # reading the namespace itself: a RoleBinding grants it for its own namespace (a request on namespaces/NAME
    # carries namespace NAME), as upstream's view (and so edit and admin) reads namespaces
    rules.append({"apiGroups": [""], "resources": ["namespaces"], "verbs": READ})
    if level == "admin":  # an admin may ask what others may do in its namespace
        rules.append({"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"],
                      "verbs": ["create"]})
    return rules


def _cluster_role(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None,
                  aggregate_from: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {**BOOTSTRAP_LABEL, **(labels or {})}}
    role: dict[str, Any] = {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": metadata,
                            "rules": rules}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {aggregate_from: "true"}}]}
    return role


def _binding(name: str, role: str, groups: list[str]) -> dict[str, Any]:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABEL)},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group} for group in groups]}


def cluster_roles() -> list[dict[str, Any]]:
    """The built-in ClusterRoles, as manifests (``kubectl get clusterroles`` lists them)."""
    def kubeflow(role: str) -> str:
        return AGGREGATE_LABEL.format(role=role)

    return [
        _cluster_role(CLUSTER_ADMIN, [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                      {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _cluster_role("admin", _rules("admin")),
        _cluster_role("edit", _rules("edit")),
        _cluster_role("view", _rules("view")),
        _cluster_role("system:basic-user", [
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews",
                                                                 "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
        _cluster_role("system:discovery", [{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version", "/version/",
            "/healthz", "/livez", "/readyz"], "verbs": ["get"]}]),
        _cluster_role("system:public-info-viewer", [{"nonResourceURLs": [
            "/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        _cluster_role(KUBEFLOW_ADMIN, [], aggregate_from=kubeflow(KUBEFLOW_ADMIN)),
        _cluster_role(KUBEFLOW_EDIT, [], {kubeflow(KUBEFLOW_ADMIN): "true"}, kubeflow(KUBEFLOW_EDIT)),
        _cluster_role(KUBEFLOW_VIEW, [], {kubeflow(KUBEFLOW_EDIT): "true"}, kubeflow(KUBEFLOW_VIEW)),
        _cluster_role("kubeflow-kubernetes-admin", _rules("admin"), {kubeflow(KUBEFLOW_ADMIN): "true"}),
        _cluster_role("kubeflow-kubernetes-edit", _rules("edit"), {kubeflow(KUBEFLOW_EDIT): "true"}),
        _cluster_role("kubeflow-kubernetes-view", _rules("view"), {kubeflow(KUBEFLOW_VIEW): "true"}),
        _cluster_role("kubeflow-pipelines-edit", kfp.EDIT_RULES, {kubeflow(KUBEFLOW_EDIT): "true"}),
        _cluster_role("kubeflow-pipelines-view", kfp.VIEW_RULES, {kubeflow(KUBEFLOW_VIEW): "true"}),
        _cluster_role("kubeflow-model-registry-edit", model_registry.EDIT_RULES, {kubeflow(KUBEFLOW_EDIT): "true"}),
        _cluster_role("kubeflow-model-registry-view", model_registry.VIEW_RULES, {kubeflow(KUBEFLOW_VIEW): "true"}),
    ]


def cluster_role_bindings() -> list[dict[str, Any]]:
    """The built-in ClusterRoleBindings (every user may ask what it may do, and read discovery)."""
    return [
        _binding("system:basic-user", "system:basic-user", [AUTHENTICATED]),
        _binding("system:discovery", "system:discovery", [AUTHENTICATED]),
        _binding("system:public-info-viewer", "system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]),
    ]
