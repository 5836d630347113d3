"""ServiceAccounts and RBAC's Roles, ClusterRoles and their bindings: kept as applied; RBAC enforced by a
multi-user server.

Each is a row of the resource store with its fields as applied, checked as the API server's validation
does (a rule names its verbs; a binding's ``roleRef`` names a Role or ClusterRole and never changes).
When the server runs ``--multi-user``, the RBAC objects decide every request (``access.authorizer``); a
write of one takes effect at once in the process that stored it (``access.rbac.note_written``) and within
a second in the others. A single-user server and the command line on the home decide nothing (the
machine's administrator), and ``apply`` says so in one ``info:`` line per kind. No token is issued for a
ServiceAccount. Every namespace has its ``default`` ServiceAccount, as the API server's controller makes
one; ``kubectl get clusterroles``/``clusterrolebindings`` list the built-in ones (``access.builtin``)
beside the stored ones, and a stored one of a built-in's name replaces it, as the policy reads them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from millpond.access import builtin, rbac
from millpond.core import namespaces
from millpond.core.kinds import RBAC_GROUP
from millpond.core.view import Planned, check_envelope, derived_uid, kept_object, metadata_of, parse_timestamp, strings
from millpond.errors import UserError
from millpond.kind_handler import KindContext, KindName
from millpond.manifest_envelope import not_found, store_namespace
from millpond.store.resources import ResourceStore
from millpond.tables import age_since

Checker = Callable[[str, dict[str, Any]], None]  # (where, the kept fields): UserError names what is wrong

DEFAULT_ACCOUNT = "default"
ENFORCED = "kept; enforced by a --multi-user server (a single-user server and the command line do not enforce RBAC)"
NO_TOKENS = "kept; millpond issues no service-account tokens (one user, or the server's own token)"


def _rules(where: str, fields: dict[str, Any]) -> None:
    for index, rule in enumerate(fields.get("rules") or []):
        here = f"{where}: rules[{index}]"
        if not isinstance(rule, dict):
            raise UserError(f"{here}: expected an object")
        unknown = set(rule) - {"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"}
        if unknown:
            raise UserError(f'{here}: unknown field "{sorted(unknown)[0]}"')
        for key, value in rule.items():
            strings(value, f"{here}.{key}")
        if not rule.get("verbs"):
            raise UserError(f"{here}.verbs: Required value: verbs must contain at least one value")


def _binding(cluster: bool) -> Checker:
    def check(where: str, fields: dict[str, Any]) -> None:
        ref = fields.get("roleRef")
        if not isinstance(ref, dict) or not all(isinstance(ref.get(key), str) and ref.get(key)
                                                for key in ("apiGroup", "kind", "name")):
            raise UserError(f"{where}: roleRef: Required value: apiGroup, kind and name")
        allowed = ("ClusterRole",) if cluster else ("Role", "ClusterRole")
        if ref["kind"] not in allowed or ref["apiGroup"] != RBAC_GROUP:
            raise UserError(f'{where}: roleRef.kind: Unsupported value: "{ref["kind"]}": supported values: '
                            + ", ".join(f'"{kind}"' for kind in allowed) + f" (apiGroup {RBAC_GROUP})")
        for index, subject in enumerate(fields.get("subjects") or []):
            here = f"{where}: subjects[{index}]"
            if not isinstance(subject, dict) or not subject.get("name") or \
                    subject.get("kind") not in ("User", "Group", "ServiceAccount"):
                raise UserError(f'{here}: expected kind "User", "Group" or "ServiceAccount" and a name')
    return check


def _service_account(where: str, fields: dict[str, Any]) -> None:
    for key in ("secrets", "imagePullSecrets"):
        for index, reference in enumerate(fields.get(key) or []):
            if not isinstance(reference, dict):
                raise UserError(f"{where}: {key}[{index}]: expected an object")


@dataclass(frozen=True)
class KeptView:
    """One kind kept as applied: its top-level fields with their JSON types, its check and kubectl's columns."""

    fields: Mapping[str, type | tuple[type, ...]]
    rules: Checker
    columns: tuple[str, ...]
    note: str
    cell: Callable[[dict[str, Any]], list[str]] = lambda shown: []

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        store = ResourceStore(context.settings)
        where = None if namespace is None or entry.cluster_scoped else store_namespace(entry, namespace)
        return [kept_object(entry, one) for one in store.list(entry.kind, where)]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        if self.columns[-1] == "CREATED AT":  # kubectl shows a Role's creation time, not its age
            return [*self.cell(shown), shown["metadata"]["creationTimestamp"]]
        return [*self.cell(shown), age_since(parse_timestamp(shown["metadata"]["creationTimestamp"]) or now, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        metadata, fields = check_envelope(entry, doc, where, self.fields)
        name, namespace = metadata["name"], metadata.get("namespace", "")
        self.rules(f"{where} {name}", fields)
        manifest = {"apiVersion": doc["apiVersion"], "kind": entry.kind, "metadata": metadata, **fields}
        if "roleRef" in fields:
            before = ResourceStore(context.settings).get(entry.kind, name, store_namespace(entry, namespace))
            if before is not None and before.manifest.get("roleRef") != fields["roleRef"]:
                raise UserError(f"{where} {name}: roleRef: Invalid value: cannot change roleRef")

        def store(context: KindContext) -> str:
            action = ResourceStore(context.settings).apply([manifest])[0][1]
            if entry.kind in rbac.RBAC_KINDS:
                rbac.note_written()
            return action

        return Planned(entry, name, namespace, store, (self.note,))

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if not ResourceStore(context.settings).delete(entry.kind, name, store_namespace(entry, namespace)):
            raise not_found(entry, name, namespace)
        if entry.kind in rbac.RBAC_KINDS:
            rbac.note_written()


@dataclass(frozen=True)
class BuiltInView(KeptView):
    """ClusterRoles or ClusterRoleBindings: the stored ones, and the built-in ones (``access.builtin``) no stored
    one of the same name replaces, derived as the API server's bootstrap policy makes them at start-up. A
    built-in is not stored, so it cannot be deleted (apply one of its name to replace it)."""

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        kept = super().objects(entry, namespace, context)
        have = {shown["metadata"]["name"] for shown in kept}
        made = builtin.cluster_roles() if entry.kind == "ClusterRole" else builtin.cluster_role_bindings()
        since = namespaces.every(context.settings).get("default") or dt.datetime.now(dt.timezone.utc)
        for manifest in made:
            name = manifest["metadata"]["name"]
            if name not in have:
                kept.append({**manifest, "metadata": metadata_of(
                    entry, name, "", derived_uid(entry.kind, name), since, manifest["metadata"])})
        return sorted(kept, key=lambda shown: shown["metadata"]["name"])

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        stored = ResourceStore(context.settings).get(entry.kind, name, store_namespace(entry, namespace))
        made = builtin.cluster_roles() if entry.kind == "ClusterRole" else builtin.cluster_role_bindings()
        if stored is None and any(manifest["metadata"]["name"] == name for manifest in made):
            raise UserError(f"{entry.kind} {name} is built in (millpond's bootstrap policy): it cannot be deleted; "
                            "apply one of the same name to replace it")
        super().delete(entry, name, namespace, context)


@dataclass(frozen=True)
class ServiceAccountView(KeptView):
    """Kept ServiceAccounts, and the ``default`` one the API server's ServiceAccount controller makes in every
    namespace (derived here: deleting it is answered as done, since the controller makes it again at once)."""

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        kept = super().objects(entry, namespace, context)
        have = {(shown["metadata"]["namespace"], shown["metadata"]["name"]) for shown in kept}
        known = namespaces.every(context.settings)
        for where in sorted(known) if namespace is None else [namespace] if namespace in known else []:
            if (where, DEFAULT_ACCOUNT) not in have:
                kept.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata_of(
                    entry, DEFAULT_ACCOUNT, where, derived_uid("ServiceAccount", where, DEFAULT_ACCOUNT),
                    known[where])})
        return sorted(kept, key=lambda shown: (shown["metadata"]["namespace"], shown["metadata"]["name"]))

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        if name == DEFAULT_ACCOUNT and namespace in namespaces.every(context.settings):
            ResourceStore(context.settings).delete(entry.kind, name, namespace)
            return
        super().delete(entry, name, namespace, context)


def _secrets_count(shown: dict[str, Any]) -> list[str]:
    return [str(len(shown.get("secrets") or []))]


def _role_of(shown: dict[str, Any]) -> list[str]:
    ref = shown.get("roleRef") or {}
    return [f"{ref.get('kind', '')}/{ref.get('name', '')}"]


_RULES = {"rules": list}
_BINDING = {"subjects": list, "roleRef": dict}
VIEWS: dict[str, KeptView] = {
    "ServiceAccount": ServiceAccountView(
        {"secrets": list, "imagePullSecrets": list, "automountServiceAccountToken": bool}, _service_account,
        ("SECRETS", "AGE"), NO_TOKENS, _secrets_count),
    "Role": KeptView(_RULES, _rules, ("CREATED AT",), ENFORCED),
    "ClusterRole": BuiltInView({**_RULES, "aggregationRule": dict}, _rules, ("CREATED AT",), ENFORCED),
    "RoleBinding": KeptView(_BINDING, _binding(cluster=False), ("ROLE", "AGE"), ENFORCED, _role_of),
    "ClusterRoleBinding": BuiltInView(_BINDING, _binding(cluster=True), ("ROLE", "AGE"), ENFORCED, _role_of),
}
