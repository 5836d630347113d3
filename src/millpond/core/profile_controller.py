"""What Kubeflow's profile controller makes of a Profile (``kubeflow/dashboard``
``components/profile-controller/controllers/profile_controller.go``), run within the apply that stores it.

For a Profile ``NAME`` owned by ``spec.owner``:

1. the Namespace ``NAME``, annotated ``owner: <owner>`` and labelled with the controller's default namespace
   labels (the ``kubeflow`` overlay's ``namespace-labels.yaml``: part-of ``kubeflow-profile``, Katib's metrics
   collector injection, Pipelines and KServe enabled, and ``istio-injection: enabled``, which the controller
   always sets); a label the namespace already has is not overwritten (``setNamespaceLabels``). A Namespace
   that was applied and is not annotated with the same owner is not taken over: the Profile gets the
   controller's ``Failed`` condition, ``namespace already exist, but not owned by profile creator <owner>``,
   and nothing else is made. A namespace only *implied* by the objects in it (millpond accepts an object in
   a namespace never created, ``core.namespaces``; Kubernetes would have refused it) is taken: that is how
   a batch that holds a Profile and the LocalQueues of its namespace applies in any order;
2. ServiceAccounts ``default-editor`` and ``default-viewer``, each bound by a RoleBinding of its own name to
   ``kubeflow-edit`` / ``kubeflow-view``;
3. the owner's RoleBinding ``namespaceAdmin`` to ``kubeflow-admin``, annotated ``user: <owner>``,
   ``role: admin`` (what KFAM lists as the owner's binding);
4. the ResourceQuota ``kf-resource-quota`` with ``spec.resourceQuotaSpec``, deleted when the spec has none.

Not made here: Istio AuthorizationPolicies (no Istio: millpond's one authorizer decides every request) and
what ``spec.plugins`` ask of a cloud (AWS IAM roles, GCP Workload Identity): kept, said once at apply.
Simplification: the controller appends a ``Failed`` condition and writes none on success; millpond keeps
one condition, ``Successful`` or ``Failed`` (the CRD's ``ProfileSucceed``/``ProfileFailed`` types), so that
``status`` always says what the last reconcile found. Deleting a Profile deletes the namespace it owns with
everything in it (the controller's owner reference: Kubernetes' garbage collector does it there).
"""

from __future__ import annotations

from typing import Any

from millpond.access import rbac
from millpond.core.kinds import KINDS, RBAC_GROUP
from millpond.core.namespaces import DEFAULT, NamespaceView
from millpond.kind_handler import KindContext
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE
from millpond.store.resources import Resource, ResourceStore

PROFILE = "Profile"
OWNER_ANNOTATION = "owner"
USER_ANNOTATION, ROLE_ANNOTATION = "user", "role"  # read by KFAM
QUOTA_NAME = "kf-resource-quota"
ADMIN_BINDING = "namespaceAdmin"
DEFAULT_EDITOR, DEFAULT_VIEWER = "default-editor", "default-viewer"
KUBEFLOW_ADMIN, KUBEFLOW_EDIT, KUBEFLOW_VIEW = "kubeflow-admin", "kubeflow-edit", "kubeflow-view"
SUCCEEDED, FAILED = "Successful", "Failed"
NAMESPACE_LABELS = {
    "istio-injection": "enabled",
    "app.kubernetes.io/part-of": "kubeflow-profile",
    "katib.kubeflow.org/metrics-collector-injection": "enabled",
    "pipelines.kubeflow.org/enabled": "true",
    "serving.kubeflow.org/inferenceservice": "enabled",
}


def owner_of(profile: dict[str, Any]) -> dict[str, Any]:
    """The Profile's ``spec.owner`` (an RBAC subject), with RBAC's default apiGroup for a User or Group."""
    owner = dict((profile.get("spec") or {}).get("owner") or {})
    if owner.get("kind") in ("User", "Group"):
        owner.setdefault("apiGroup", RBAC_GROUP)
    return owner


def owns(namespace: Resource | None, owner: str) -> bool:
    """Whether the Namespace row is the one a Profile of ``owner`` made (its ``owner`` annotation)."""
    annotations = ((namespace.manifest.get("metadata") or {}).get("annotations") or {}) if namespace else {}
    return namespace is not None and annotations.get(OWNER_ANNOTATION) == owner


def _binding(name: str, namespace: str, role: str, subject: dict[str, Any],
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": metadata,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role}, "subjects": [subject]}


def _account(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}


def _namespace(name: str, owner: str, found: Resource | None) -> dict[str, Any]:
    """The Namespace manifest: the found one's labels kept (never overwritten), the controller's added."""
    metadata = dict((found.manifest.get("metadata") or {}) if found else {"name": name})
    labels = {**NAMESPACE_LABELS, **(metadata.get("labels") or {})}
    annotations = {**(metadata.get("annotations") or {}), OWNER_ANNOTATION: owner}
    spec = (found.manifest.get("spec") if found else None) or {"finalizers": ["kubernetes"]}
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels, "annotations": annotations}, "spec": spec}


def not_owned(name: str, owner: str, context: KindContext) -> str | None:
    """The controller's refusal when Namespace ``name`` was applied and is not one a Profile of ``owner`` made
    (``default`` included: it always exists); None otherwise."""
    found = ResourceStore(context.settings).get("Namespace", name, CLUSTER_STORE_NAMESPACE)
    if (found is not None and not owns(found, owner)) or (found is None and name == DEFAULT):
        return f"namespace already exist, but not owned by profile creator {owner}"
    return None


def reconcile(profile: dict[str, Any], context: KindContext) -> dict[str, Any]:
    """Make the profile's namespace and what is in it; the Profile's status (its one condition)."""
    name = str(profile["metadata"]["name"])
    owner = owner_of(profile)
    owner_name = str(owner.get("name", ""))
    store = ResourceStore(context.settings)
    refused = not_owned(name, owner_name, context)
    if refused:
        return {"conditions": [{"type": FAILED, "status": "True", "message": refused}]}
    found = store.get("Namespace", name, CLUSTER_STORE_NAMESPACE)
    objects = [
        _namespace(name, owner_name, found),
        _account(DEFAULT_EDITOR, name), _account(DEFAULT_VIEWER, name),
        _binding(DEFAULT_EDITOR, name, KUBEFLOW_EDIT, {"kind": "ServiceAccount", "name": DEFAULT_EDITOR,
                                                       "namespace": name}),
        _binding(DEFAULT_VIEWER, name, KUBEFLOW_VIEW, {"kind": "ServiceAccount", "name": DEFAULT_VIEWER,
                                                       "namespace": name}),
        _binding(ADMIN_BINDING, name, KUBEFLOW_ADMIN, owner,
                 {USER_ANNOTATION: owner_name, ROLE_ANNOTATION: "admin"}),
    ]
    quota = (profile.get("spec") or {}).get("resourceQuotaSpec") or {}
    if quota.get("hard"):
        objects.append({"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": {"name": QUOTA_NAME, "namespace": name}, "spec": quota})
    else:
        store.delete("ResourceQuota", QUOTA_NAME, name)
    store.apply(objects)
    rbac.note_written()  # the owner's and service accounts' bindings decide this process's requests at once
    message = f"namespace {name} is owned by {owner_name}, with its RoleBindings and ServiceAccounts" + (
        f" and ResourceQuota {QUOTA_NAME}" if quota.get("hard") else "")
    return {"conditions": [{"type": SUCCEEDED, "status": "True", "message": message}]}


def tear_down(profile: dict[str, Any], context: KindContext) -> None:
    """Delete the namespace the Profile owns, with everything in it (nothing when it owns none)."""
    name = str(profile["metadata"]["name"])
    found = ResourceStore(context.settings).get("Namespace", name, CLUSTER_STORE_NAMESPACE)
    if owns(found, str(owner_of(profile).get("name", ""))):
        NamespaceView().delete(KINDS["Namespace"], name, "", context)
