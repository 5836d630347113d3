"""Kubeflow's ``kubeflow.org`` Profile (``v1``, and ``v1beta1`` still served): a cluster-scoped object that
gives a user a namespace of their own (``core.profile_controller`` does what Kubeflow's profile controller
does, within the apply that stores the Profile).

Checked as the CRD's schema (``shared/reference/profiles``) says: ``spec.owner`` an RBAC subject with
``kind`` and ``name``, ``spec.plugins`` a list of objects with a ``kind``, ``spec.resourceQuotaSpec`` a
ResourceQuotaSpec; the name is the namespace's, so a DNS-1123 label. Both versions are stored as ``v1`` (the
storage version; the two schemas are the same). ``spec.plugins`` (``AwsIamForServiceAccount``,
``WorkloadIdentity``) are kept and not acted on: apply says so once.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from millpond.core import profile_controller
from millpond.core.resource_quotas import check_spec
from millpond.core.view import Planned, kept_object, parse_timestamp
from millpond.errors import UserError
from millpond.kind_handler import KindContext, KindName
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE, check_metadata, not_found
from millpond.names import label_problem
from millpond.store.resources import ResourceStore
from millpond.tables import age_since

GROUP = "kubeflow.org"
VERSIONS = ("v1", "v1beta1")
STORED_VERSION = f"{GROUP}/v1"
PLUGINS_KEPT = ("kept, not acted on: millpond has no cloud identity to bind a namespace's ServiceAccounts to "
                "(AwsIamForServiceAccount, WorkloadIdentity)")
_SUBJECT_KINDS = ("User", "Group", "ServiceAccount")


def check_profile(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The Profile manifest to store (``v1``), or one UserError line led by ``where``."""
    if doc.get("apiVersion") not in tuple(f"{GROUP}/{version}" for version in VERSIONS):
        raise UserError(f"{where}: apiVersion {json.dumps(doc.get('apiVersion'))} is not supported "
                        f"(millpond reads {', '.join(f'{GROUP}/{v}' for v in VERSIONS)})")
    try:
        metadata = check_metadata("Profile", doc.get("metadata"), namespaced=False)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    name = metadata["name"]
    named = f"{where} {name}"
    problem = label_problem(name)
    if problem:
        raise UserError(f"{named}: metadata.name: a Profile names its namespace: {problem}")
    unknown = sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec", "status"})
    if unknown:
        raise UserError(f"{named}: unknown field {json.dumps(unknown[0])}")
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise UserError(f"{named}: spec: expected an object")
    unknown = sorted(set(spec) - {"owner", "plugins", "resourceQuotaSpec"})
    if unknown:
        raise UserError(f'{named}: unknown field "spec.{unknown[0]}"')
    owner = spec.get("owner")
    if not isinstance(owner, dict) or not owner.get("kind") or not owner.get("name"):
        raise UserError(f"{named}: spec.owner: Required value: an RBAC subject with kind and name "
                        "(kind: User, name: the owner's e-mail)")
    if owner["kind"] not in _SUBJECT_KINDS or not all(isinstance(value, str) for value in owner.values()):
        raise UserError(f'{named}: spec.owner.kind: Unsupported value: {json.dumps(owner["kind"])}: supported '
                        f'values: {", ".join(json.dumps(kind) for kind in _SUBJECT_KINDS)}')
    plugins = spec.get("plugins") or []
    if not isinstance(plugins, list) or not all(isinstance(p, dict) and isinstance(p.get("kind"), str)
                                                for p in plugins):
        raise UserError(f"{named}: spec.plugins: expected a list of objects, each with a kind")
    quota = spec.get("resourceQuotaSpec") or {}
    if not isinstance(quota, dict):
        raise UserError(f"{named}: spec.resourceQuotaSpec: expected an object")
    check_spec(quota, f"{named}: spec.resourceQuotaSpec")
    return {"apiVersion": STORED_VERSION, "kind": "Profile", "metadata": metadata, "spec": spec}


class ProfileView:
    """``NAME AGE`` (the CRD declares no printer columns)."""

    columns: tuple[str, ...] = ("AGE",)

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        return [kept_object(entry, row, row.status) for row in ResourceStore(context.settings).list("Profile")]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        return [age_since(parse_timestamp(shown["metadata"]["creationTimestamp"]) or now, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        manifest = check_profile(doc, where)
        name = manifest["metadata"]["name"]

        def store(context: KindContext) -> str:
            action = ResourceStore(context.settings).apply([manifest])[0][1]
            status = profile_controller.reconcile(manifest, context)
            ResourceStore(context.settings).set_status("Profile", name, status, CLUSTER_STORE_NAMESPACE)
            return action

        notes = (f"spec.plugins {', '.join(p['kind'] for p in manifest['spec']['plugins'])}: {PLUGINS_KEPT}",) \
            if manifest["spec"].get("plugins") else ()
        return Planned(entry, name, "", store, notes)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        store = ResourceStore(context.settings)
        row = store.get("Profile", name, CLUSTER_STORE_NAMESPACE)
        if row is None:
            raise not_found(entry, name, CLUSTER_STORE_NAMESPACE)
        profile_controller.tear_down(row.manifest, context)
        store.delete("Profile", name, CLUSTER_STORE_NAMESPACE)
