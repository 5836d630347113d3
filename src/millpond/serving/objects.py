"""KServe's objects in the resource store: check, apply, find, show, delete; and an InferenceService's status.

They are applied objects like Fluid's and Kueue's (``store.resources``), kept as applied. A
ClusterServingRuntime is cluster-scoped: kept under ``STORE_NAMESPACE_OF_CLUSTER`` and shown
without a namespace. ``millpond apply``/``get``/``delete`` and the server's resource routes go
through here (``serving.handler``, the family's handler in the one registry of kinds).

An InferenceService's status has KServe's shape (``url``, ``conditions`` with
``PredictorReady`` and ``Ready``, ``components.predictor``, ``modelStatus``). Applying one
writes its first status: Ready False with the reason when millpond cannot serve it here
(:attr:`PredictorSpec.unservable`), else Ready Unknown, ``NotStarted``, until a model server
process reports (:func:`set_status` is the door for whoever starts them).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE as STORE_NAMESPACE_OF_CLUSTER
from millpond.manifest_envelope import as_list, found, not_found, store_namespace
from millpond.serving.kinds import KINDS, ServingKind, refusal
from millpond.serving.manifests import ServingManifest, check_document
from millpond.serving.observed import observed_status
from millpond.serving.spec import PredictorSpec, predictor_spec
from millpond.store import volume_folders
from millpond.store.resources import Resource, ResourceStore

NOT_STARTED = ("NotStarted", "no model server answers for it yet: its supervisor starts them "
                             "(millpond apply, millpond server)")


def check(documents: list[tuple[str, int, Any]], validate: SchemaCheck) -> list[ServingManifest]:
    """Every KServe document (source, number, document) checked; nothing stored."""
    for source, number, doc in documents:  # a kind that means nothing here is named first, wherever it is
        reason = refusal(doc)
        if reason is not None:
            raise UserError(f"{source}: document {number}: {reason}")
    return [check_document(doc, source, number, validate) for source, number, doc in documents]


def apply(manifests: list[ServingManifest], store: ResourceStore) -> list[tuple[ServingManifest, str]]:
    """Store them all in one transaction: (manifest, "created" | "configured" | "unchanged") for each.

    A created or changed InferenceService gets its first status (:func:`initial_status`); an
    unchanged one keeps what its model server reported.
    """
    if not manifests:
        return []
    bodies = [_stored_body(manifest) for manifest in manifests]
    applied = store.apply(bodies)
    for manifest, (resource, action) in zip(manifests, applied, strict=True):
        if manifest.predictor is not None and action != "unchanged":
            store.set_status(resource.kind, resource.name, initial_status(manifest.predictor), resource.namespace)
    return [(manifest, action) for manifest, (_, action) in zip(manifests, applied, strict=True)]


def _volume(volumes_dir: Path, namespace: str, name: str) -> Path:
    """The PVC folder an InferenceService of ``namespace`` mounts (a name no PVC can have: one that is no folder)."""
    try:
        return volume_folders.find(volumes_dir, namespace, name)
    except UserError:
        return Path(volumes_dir) / namespace / name


def missing_notes(manifests: list[ServingManifest], store: ResourceStore, volumes_dir: Path) -> list[str]:
    """A ``pvc://NAME`` predictor whose NAME is neither a Dataset of its namespace nor a named local volume
    (``volumes_dir/NAMESPACE/NAME``, what a PVC is on one machine) yet: accepted, as KServe accepts one naming a
    PVC not bound yet, and named in one line, so that its model not loading is no mystery."""
    missing: dict[tuple[str, str], list[str]] = {}
    for manifest in manifests:
        storage = manifest.predictor.storage if manifest.predictor is not None else None
        name = storage.dataset if storage is not None else None
        if name and store.get("Dataset", name, manifest.namespace) is None and \
                not _volume(volumes_dir, manifest.namespace, name).is_dir():
            missing.setdefault((name, manifest.namespace), []).append(manifest.name)
    return [f"pvc://{name}: no Dataset {name} in namespace {namespace} and no volume "
            f"{_volume(volumes_dir, namespace, name)}: "
            f"InferenceService {', '.join(names)} cannot load its model until one exists"
            for (name, namespace), names in sorted(missing.items())]


def _stored_body(manifest: ServingManifest) -> dict[str, Any]:
    if not manifest.info.cluster_scoped:
        return manifest.body
    return {**manifest.body, "metadata": {**manifest.body["metadata"], "namespace": STORE_NAMESPACE_OF_CLUSTER}}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def initial_status(predictor: PredictorSpec) -> dict[str, Any]:
    """KServe's status of an InferenceService no model server answers for yet.

    Ready False (``modelStatus.lastFailureInfo`` says why) when millpond cannot serve it here;
    otherwise Ready Unknown, ``NotStarted``.
    """
    if predictor.unservable is not None:
        reason = predictor.failure_reason or "InvalidPredictorSpec"
        return status("False", reason, predictor.unservable, active="FailedToLoad",
                      transition="BlockedByFailedLoad" if reason == "ModelLoadFailed" else "InvalidSpec")
    return status("Unknown", *NOT_STARTED)


def status(ready: str, reason: str, message: str, *, url: str | None = None, active: str = "Pending",
           transition: str = "InProgress", revision: str | None = None, previous: str | None = None,
           canary_percent: int | None = None, ready_revision: str | None = None) -> dict[str, Any]:
    """An InferenceService status as KServe writes it (PredictorReady and Ready alike; no ingress here).

    ``ready`` is "True", "False" or "Unknown"; ``url`` the address it answers at once served.
    ``active`` is ``modelStatus.states.activeModelState`` (Pending, Loading, Loaded, FailedToLoad; the
    target state is Loaded, FailedToLoad for an invalid spec as in KServe), ``transition``
    ``modelStatus.transitionStatus`` (InProgress, UpToDate, BlockedByFailedLoad, InvalidSpec).
    ``revision`` is the latest revision's name; with ``previous`` and ``canary_percent`` the traffic is
    split as KServe's canary rollout splits it: the latest gets the percent, ``prev`` the rest.
    ``ready_revision`` is the newest revision that ever answered: KServe (Knative) names a
    ``latestReadyRevision`` (and a ``latestRolledoutRevision``) only once one became ready, so a model
    that never loaded has neither.
    """
    now = _now()
    target = "FailedToLoad" if transition == "InvalidSpec" else "Loaded"
    conditions = [{"type": kind, "status": ready, "lastTransitionTime": now,
                   **({} if ready == "True" else {"reason": reason, "message": message})}
                  for kind in ("PredictorReady", "Ready")]
    shown: dict[str, Any] = {"conditions": conditions,
                             "modelStatus": {"states": {"activeModelState": active, "targetModelState": target},
                                             "transitionStatus": transition}}
    if ready == "False":
        shown["modelStatus"]["lastFailureInfo"] = {"reason": reason, "message": message}
    predictor: dict[str, Any] = {}
    if url:
        shown["url"] = url
        shown["address"] = {"url": url}
        predictor["url"] = url
    if revision:
        latest = {"latestRevision": True, "percent": 100, "revisionName": revision}
        traffic = [latest]
        if previous and canary_percent is not None:
            latest.update({"percent": canary_percent, "tag": "latest"})
            traffic = [{"latestRevision": False, "percent": 100 - canary_percent, "revisionName": previous,
                        "tag": "prev"}, latest]
            predictor["previousRolledoutRevision"] = previous
        rolled_out = previous or (revision if ready_revision == revision else None)
        predictor.update({"latestCreatedRevision": revision,
                          **({"latestReadyRevision": ready_revision} if ready_revision else {}),
                          **({"latestRolledoutRevision": rolled_out} if rolled_out else {}), "traffic": traffic})
    if predictor:
        shown["components"] = {"predictor": predictor}
    return shown


def set_status(store: ResourceStore, name: str, namespace: str, value: Mapping[str, Any]) -> None:
    """Write an InferenceService's status (a model server's supervisor reports here); a deleted one stays deleted."""
    store.set_status("InferenceService", name, dict(value), namespace)


def as_object(info: ServingKind, resource: Resource) -> dict[str, Any]:
    """The object as ``kubectl get -o yaml`` shows it, with its status (a runtime's is empty; an
    InferenceService's as observed: never Ready once no supervisor serves it)."""
    shown = resource.as_object(_observed_status(resource))
    if info.cluster_scoped:
        shown["metadata"].pop("namespace", None)
    return shown


def as_objects(info: ServingKind, name: str | None, namespace: str, all_namespaces: bool,
               store: ResourceStore) -> dict[str, Any]:
    """The object named, or a kubectl ``List`` of them: what ``get -o json`` prints and the server returns."""
    items = [as_object(info, one) for one in found(info.names, name, namespace, all_namespaces, store)]
    return items[0] if name is not None else as_list(items)


def delete(info: ServingKind, name: str, namespace: str, store: ResourceStore) -> None:
    """Forget the object; NotFoundError when there is none."""
    if not store.delete(info.kind, name, store_namespace(info.names, namespace)):
        raise not_found(info.names, name, namespace)


def _observed_status(resource: Resource) -> dict[str, Any]:
    if resource.kind != "InferenceService":
        return dict(resource.status or {})
    return observed_status(resource)


def predictors(store: ResourceStore, namespace: str | None = None) -> list[PredictorSpec]:
    """Every stored InferenceService's predictor (of ``namespace``, or all), as checked when applied."""
    return [predictor_spec(resource.manifest) for resource in store.list("InferenceService", namespace)]


def predictor_of(store: ResourceStore, name: str, namespace: str = "default") -> PredictorSpec:
    """The stored InferenceService ``name``'s predictor; NotFoundError when there is none."""
    resource = store.get("InferenceService", name, namespace)
    if resource is None:
        raise not_found(KINDS["InferenceService"].names, name, namespace)
    return predictor_spec(resource.manifest)


def columns(resource: Resource) -> list[str]:
    """KServe's printer columns of an InferenceService after NAME: URL, READY, PREV, LATEST (AGE is the caller's)."""
    shown = _observed_status(resource)
    ready = next((c.get("status", "") for c in shown.get("conditions") or [] if c.get("type") == "Ready"), "")
    traffic = (shown.get("components") or {}).get("predictor", {}).get("traffic") or []
    prev = next((str(t.get("percent", "")) for t in traffic if t.get("tag") == "prev"), "")
    latest = next((str(t.get("percent", "")) for t in traffic if t.get("latestRevision")), "")
    return [str(shown.get("url") or ""), ready, prev, latest]
