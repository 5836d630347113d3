"""A Profile's contributors as Kubeflow's access management (KFAM, ``kubeflow/dashboard``
``components/access-management/kfam``) keeps them: one RoleBinding per contributor in the profile's namespace.

A contributor ``alice@example.com`` with role ``edit`` is the RoleBinding
``user-alice-example-com-clusterrole-edit`` (KFAM's ``getBindingName``: the subject's kind, its name with every
run of characters outside ``[a-zA-Z0-9]`` turned into ``-``, the roleRef's kind and name, joined by ``-``,
lower-cased, runs outside ``[a-z0-9]`` turned into ``-`` again), annotated ``user: <email>`` and
``role: edit``, bound to ClusterRole ``kubeflow-edit`` with the subject ``{kind: User, name: <email>,
apiGroup: rbac.authorization.k8s.io}``. KFAM's listing reads every RoleBinding of the profiles' namespaces that
carries both annotations, the owner's ``namespaceAdmin`` among them (role ``admin``).

Who may add or remove one is KFAM's rule: the profile's owner or a cluster administrator
(:func:`may_manage`, decided by the one ``Authorizer``). The CLI on the home is the administrator. Not made
here: KFAM's Istio AuthorizationPolicy beside each binding (no Istio: the authorizer decides every request).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from millpond.access import rbac
from millpond.access.attributes import Attributes
from millpond.access.authorizer import Authorizer
from millpond.access.identity import Identity
from millpond.core.kinds import RBAC_GROUP
from millpond.core.profile_controller import ROLE_ANNOTATION, USER_ANNOTATION, owner_of
from millpond.errors import ConflictError, ForbiddenError, NotFoundError, UserError
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE
from millpond.settings import Settings
from millpond.store.resources import ResourceStore

ROLES = {"admin": "kubeflow-admin", "edit": "kubeflow-edit", "view": "kubeflow-view"}  # KFAM's roleBindingNameMap
ROLE_OF_CLUSTER_ROLE = {cluster_role: role for role, cluster_role in ROLES.items()}
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]+")
_SUBJECT_KINDS = ("User", "Group", "ServiceAccount")
# What only a cluster administrator is allowed: every verb on every resource of every group (cluster-admin).
CLUSTER_ADMIN = Attributes("*", api_group="*", resource="*")


@dataclass(frozen=True)
class Binding:
    """One contributor of one namespace: KFAM's ``Binding`` (``user``, ``referredNamespace``, ``RoleRef``)."""

    user: str
    namespace: str
    role: str  # admin, edit or view
    user_kind: str = "User"
    stored_as: str = ""  # the RoleBinding's name, when read from one (the owner's is ``namespaceAdmin``)

    @property
    def name(self) -> str:
        """The RoleBinding's name: KFAM's for it, unless read from one named otherwise."""
        return self.stored_as or binding_name(self.user_kind, self.user, "ClusterRole", self.role)

    def as_kfam(self) -> dict[str, Any]:
        """As KFAM's JSON answers it (``RoleRef`` spelt as its Go struct tag; ``apiGroup`` always present)."""
        return {"user": {"kind": self.user_kind, "name": self.user}, "referredNamespace": self.namespace,
                "RoleRef": {"apiGroup": "", "kind": "ClusterRole", "name": self.role}}


def binding_name(user_kind: str, user: str, role_kind: str, role: str) -> str:
    """KFAM's ``getBindingName``: ``user-alice-example-com-clusterrole-edit``."""
    raw = "-".join([user_kind, _NOT_ALNUM.sub("-", user), role_kind, role]).lower()
    return _NOT_ALNUM.sub("-", raw)


def from_kfam(body: object) -> Binding:
    """A KFAM ``Binding`` JSON body (``roleRef`` or ``RoleRef``, as Go decodes either); UserError says what is
    missing."""
    if not isinstance(body, dict):
        raise UserError("a binding is a JSON object: {user: {kind, name}, referredNamespace, roleRef: {kind, name}}")
    user = body.get("user") or {}
    role_ref = body.get("RoleRef") or body.get("roleRef") or {}
    namespace = body.get("referredNamespace")
    if not isinstance(user, dict) or not isinstance(user.get("name"), str) or not user.get("name"):
        raise UserError("binding: user.name: Required value: the contributor's name (an e-mail)")
    kind = user.get("kind") or "User"
    if kind not in _SUBJECT_KINDS:
        raise UserError(f"binding: user.kind: Unsupported value: {kind!r}: supported values: User, Group, "
                        "ServiceAccount")
    if not isinstance(namespace, str) or not namespace:
        raise UserError("binding: referredNamespace: Required value: the profile's namespace")
    role = role_ref.get("name") if isinstance(role_ref, dict) else None
    if role not in ROLES:
        raise UserError(f"binding: roleRef.name: Unsupported value: {role!r}: supported values: admin, edit, view")
    if isinstance(role_ref, dict) and role_ref.get("kind", "ClusterRole") != "ClusterRole":
        raise UserError(f"binding: roleRef.kind: Unsupported value: {role_ref.get('kind')!r}: supported values: "
                        "ClusterRole")
    return Binding(str(user["name"]), namespace, str(role), str(kind))


def profile(settings: Settings, name: str) -> dict[str, Any]:
    """The Profile ``name``'s manifest; NotFoundError (kubectl's line) when there is none."""
    row = ResourceStore(settings).get("Profile", name, CLUSTER_STORE_NAMESPACE)
    if row is None:
        raise NotFoundError(f'profiles.kubeflow.org "{name}" not found')
    return row.manifest


def profile_names(settings: Settings) -> list[str]:
    return [row.name for row in ResourceStore(settings).list("Profile")]


def is_cluster_admin(authorizer: Authorizer, identity: Identity) -> bool:
    """Whether ``identity`` may do everything everywhere (cluster-admin; single-user mode: everyone)."""
    return authorizer.allows(identity, CLUSTER_ADMIN)


def may_manage(authorizer: Authorizer, identity: Identity, namespace: str) -> None:
    """KFAM's ``isOwnerOrAdmin``: nothing when ``identity`` owns the profile ``namespace`` or is a cluster
    administrator; NotFoundError when there is no such profile; ForbiddenError otherwise."""
    found = profile(authorizer.settings, namespace)
    if is_cluster_admin(authorizer, identity) or owner_of(found).get("name") == identity.name:
        return
    raise ForbiddenError(f'User "{identity.name}" cannot manage the contributors of profile "{namespace}": only its '
                         f'owner ({owner_of(found).get("name", "")}) or a cluster administrator may')


def listed(settings: Settings, user: str = "", namespaces: list[str] | None = None, role: str = "") -> list[Binding]:
    """KFAM's ``List``: the bindings annotated with a user and a role in ``namespaces`` (default: every profile's),
    filtered by ``user`` and ``role`` when given."""
    store = ResourceStore(settings)
    found = []
    for namespace in namespaces if namespaces is not None else profile_names(settings):
        for row in store.list("RoleBinding", namespace):
            annotations = (row.manifest.get("metadata") or {}).get("annotations") or {}
            who, what = annotations.get(USER_ANNOTATION), annotations.get(ROLE_ANNOTATION)
            subjects = row.manifest.get("subjects") or []
            if who is None or what is None or (user and who != user) or (role and what != role):
                continue
            if len(subjects) != 1:
                continue  # KFAM answers an error for the whole list; one odd binding hides only itself here
            cluster_role = (row.manifest.get("roleRef") or {}).get("name", "")
            found.append(Binding(str(subjects[0].get("name", "")), namespace,
                                 ROLE_OF_CLUSTER_ROLE.get(cluster_role, cluster_role), str(subjects[0].get("kind")),
                                 row.name))
    return found


def add(settings: Settings, binding: Binding) -> None:
    """Create the contributor's RoleBinding; ConflictError when it exists, NotFoundError without the profile."""
    profile(settings, binding.namespace)
    store = ResourceStore(settings)
    if store.get("RoleBinding", binding.name, binding.namespace) is not None:
        raise ConflictError(f'rolebindings.rbac.authorization.k8s.io "{binding.name}" already exists')
    subject = {"apiGroup": RBAC_GROUP, "kind": binding.user_kind, "name": binding.user} \
        if binding.user_kind != "ServiceAccount" else {"kind": binding.user_kind, "name": binding.user}
    store.apply([{"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
                  "metadata": {"name": binding.name, "namespace": binding.namespace,
                               "annotations": {USER_ANNOTATION: binding.user, ROLE_ANNOTATION: binding.role}},
                  "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": ROLES[binding.role]},
                  "subjects": [subject]}])
    rbac.note_written()  # this process's decisions see the new contributor at once


def remove(settings: Settings, binding: Binding) -> None:
    """Delete the contributor's RoleBinding; NotFoundError when there is none."""
    profile(settings, binding.namespace)
    if not ResourceStore(settings).delete("RoleBinding", binding.name, binding.namespace):
        raise NotFoundError(f'rolebindings.rbac.authorization.k8s.io "{binding.name}" not found')
    rbac.note_written()
