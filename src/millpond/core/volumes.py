"""PersistentVolumeClaims and PersistentVolumes: Fluid's volumes of bound Datasets, and named local volumes.

Fluid's runtime controller makes, for a Dataset bound to its runtime, a PVC of the dataset's name and a
PV named ``NAMESPACE-NAME`` (``pkg/utils/dataset/volume/create.go``): storage class ``fluid``, the
dataset's ``accessModes`` (``ReadOnlyMany`` when none), the capacity of its
``pvc.fluid.io/resources.requests.storage`` annotation (``100Pi`` when none), the CSI driver
``fuse.csi.fluid.io``, the label ``fluid.io/s-NAMESPACE-NAME`` and the annotation ``CreatedBy: fluid``.
Here they are derived views of the Dataset, shown while a runtime of the same name exists (simplification:
Fluid makes them once the runtime is set up; millpond's runtime is ready as soon as it is applied), and
read-only: deleting such a PVC is refused, since Fluid's controller would make it again while the dataset
is bound (delete the Dataset). A task's ``pvcMount`` of that name already mounts the dataset.

A PVC a user applies is a named local volume: the folder ``volumes/NAMESPACE/NAME`` of the home
(``store.volume_folders``), the one a KFP task of that namespace binds for a ``pvcMount`` of that name
(the same name in two namespaces is two volumes, as in Kubernetes). It is ``Bound`` at once
to a PV ``pvc-UID`` (as a dynamic provisioner names it) of the storage class ``millpond-local`` unless the
claim names one; deleting the claim deletes the folder (the ``Delete`` reclaim policy of a dynamically
provisioned volume). Its spec is immutable after creation but for ``resources.requests``, as upstream's.
``volumeMode: Block`` and ``dataSource`` (cloning, snapshots) are refused. A PV is never applied: millpond
provisions the volume of each claim itself.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from millpond.core.view import (
    READ_ONLY,
    Planned,
    check_envelope,
    derived_uid,
    kept_object,
    metadata_of,
    parse_timestamp,
    strings,
)
from millpond.datasets.config import bound_runtime
from millpond.errors import ConflictError, UserError
from millpond.kind_handler import KindContext, KindName
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import not_found
from millpond.quantities import parse_quantity
from millpond.store import volume_folders
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since

FLUID_STORAGE_CLASS = "fluid"
FLUID_CSI_DRIVER = "fuse.csi.fluid.io"
FLUID_CAPACITY_ANNOTATION = "pvc.fluid.io/resources.requests.storage"
FLUID_DEFAULT_CAPACITY = "100Pi"
FLUID_ANNOTATIONS = {"CreatedBy": "fluid"}
LOCAL_STORAGE_CLASS = "millpond-local"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_SHORT_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
_CLAIM_SPEC = {"accessModes", "resources", "storageClassName", "volumeMode", "selector", "volumeName",
               "dataSource", "dataSourceRef", "volumeAttributesClassName"}


@dataclass(frozen=True)
class Volume:
    """One claim with its volume: the PVC and PV as shown, and whether Fluid owns them."""

    claim: dict[str, Any]
    volume: dict[str, Any]
    fluid: bool


def _fluid(dataset: Resource, runtime: Resource) -> Volume:
    """The PVC and PV Fluid makes for a Dataset bound to ``runtime``."""
    name, namespace = dataset.name, dataset.namespace
    annotations = (dataset.manifest.get("metadata") or {}).get("annotations") or {}
    capacity = str(annotations.get(FLUID_CAPACITY_ANNOTATION) or FLUID_DEFAULT_CAPACITY)
    modes = list(dataset.spec.get("accessModes") or ["ReadOnlyMany"])
    label = {f"fluid.io/s-{namespace}-{name}": "true"}
    pv_name = f"{namespace}-{name}"
    made = max(dataset.created_at, runtime.created_at)
    claim_meta = metadata_of(_entry("PersistentVolumeClaim"), name, namespace,
                             derived_uid("PersistentVolumeClaim", dataset.uid), made,
                             {"labels": label, "annotations": FLUID_ANNOTATIONS})
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": claim_meta,
             "spec": {"accessModes": modes, "resources": {"requests": {"storage": capacity}},
                      "selector": {"matchLabels": label}, "storageClassName": FLUID_STORAGE_CLASS,
                      "volumeMode": "Filesystem", "volumeName": pv_name},
             "status": {"phase": "Bound", "accessModes": modes, "capacity": {"storage": capacity}}}
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": metadata_of(_entry("PersistentVolume"), pv_name, "",
                                      derived_uid("PersistentVolume", dataset.uid), made,
                                      {"labels": label, "annotations": FLUID_ANNOTATIONS}),
              "spec": {"accessModes": modes, "capacity": {"storage": capacity},
                       "claimRef": _claim_ref(claim), "persistentVolumeReclaimPolicy": "Retain",
                       "storageClassName": FLUID_STORAGE_CLASS, "volumeMode": "Filesystem",
                       "csi": {"driver": FLUID_CSI_DRIVER, "volumeHandle": pv_name, "volumeAttributes": {
                           "fluid_path": f"millpond://{name}", "mount_type": "fuse.millpond",
                           "runtime_name": name, "runtime_namespace": namespace}}},
              "status": {"phase": "Bound"}}
    return Volume(claim, volume, fluid=True)


def _local(row: Resource, folder: str) -> Volume:
    """A user's claim, Bound to the PV of its folder."""
    claim = kept_object(_entry("PersistentVolumeClaim"), row)
    spec = dict(claim.get("spec") or {})
    pv_name = f"pvc-{row.uid}"
    spec["volumeName"] = pv_name
    storage = str(((spec.get("resources") or {}).get("requests") or {}).get("storage") or "")
    modes = list(spec.get("accessModes") or [])
    claim.update(spec=spec, status={"phase": "Bound", "accessModes": modes, "capacity": {"storage": storage}})
    volume = {"apiVersion": "v1", "kind": "PersistentVolume",
              "metadata": metadata_of(_entry("PersistentVolume"), pv_name, "",
                                      derived_uid("PersistentVolume", row.uid), row.created_at,
                                      {"annotations": {"pv.kubernetes.io/provisioned-by": "millpond"}}),
              "spec": {"accessModes": modes, "capacity": {"storage": storage}, "claimRef": _claim_ref(claim),
                       "persistentVolumeReclaimPolicy": "Delete", "storageClassName": spec["storageClassName"],
                       "volumeMode": "Filesystem", "hostPath": {"path": folder, "type": "DirectoryOrCreate"}},
              "status": {"phase": "Bound"}}
    return Volume(claim, volume, fluid=False)


def _claim_ref(claim: dict[str, Any]) -> dict[str, Any]:
    metadata = claim["metadata"]
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": metadata["name"],
            "namespace": metadata["namespace"], "uid": metadata["uid"]}


def _entry(kind: str) -> KindName:
    return REGISTRY[kind]


def volumes(context: KindContext, namespace: str | None = None) -> Iterator[Volume]:
    """Every claim with its volume (of ``namespace``, or of all): Fluid's first, then the local ones."""
    store = ResourceStore(context.settings)
    for dataset in store.list("Dataset", namespace):
        runtime = bound_runtime(store, dataset.name, dataset.namespace)
        if runtime is not None:
            yield _fluid(dataset, runtime)
    for row in store.list("PersistentVolumeClaim", namespace):
        yield _local(row, str(volume_folders.folder(context.settings.volumes_dir, row.namespace, row.name)))


def _age(shown: dict[str, Any], now: dt.datetime) -> str:
    return age_since(parse_timestamp(shown["metadata"]["creationTimestamp"]) or now, now)


def _modes(shown: dict[str, Any]) -> str:
    return ",".join(_SHORT_MODES.get(mode, mode) for mode in shown["spec"].get("accessModes") or [])


class ClaimView:
    """``NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS AGE``."""

    columns: tuple[str, ...] = ("STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "AGE")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        return [one.claim for one in volumes(context, namespace)]

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        spec, status = shown["spec"], shown["status"]
        return [status["phase"], spec.get("volumeName", ""), status["capacity"].get("storage", ""), _modes(shown),
                spec.get("storageClassName", ""), _age(shown, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        metadata, fields = check_envelope(entry, doc, where, {"spec": dict})
        name, namespace = metadata["name"], metadata["namespace"]
        named = f"{where} {name}"
        spec = fields.get("spec") or {}
        _check_claim_spec(named, spec)
        store = ResourceStore(context.settings)
        before = store.get("PersistentVolumeClaim", name, namespace)
        spec = _defaulted(named, spec, before)
        for one in volumes(context):
            claimed = one.claim["metadata"]
            if one.fluid and (claimed["name"], claimed["namespace"]) == (name, namespace):
                raise ConflictError(f"{named}: it is the volume Fluid makes for Dataset {name}; "
                                    "choose another name")
        if before is not None and _fixed(before.spec) != _fixed(spec):
            raise UserError(f"{named}: spec: Forbidden: spec is immutable after creation except "
                            "resources.requests and volumeAttributesClassName for bound claims")
        manifest = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}

        def apply(context: KindContext) -> str:
            volume_folders.folder(context.settings.volumes_dir, namespace, name).mkdir(parents=True, exist_ok=True)
            return ResourceStore(context.settings).apply([manifest])[0][1]

        return Planned(entry, name, namespace, apply)

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        store = ResourceStore(context.settings)
        if store.get("PersistentVolumeClaim", name, namespace) is None:
            if store.get("Dataset", name, namespace) is not None and \
                    bound_runtime(store, name, namespace) is not None:
                raise UserError(f'persistentvolumeclaims "{name}" is the volume Fluid makes for Dataset {name}: '
                                "delete the dataset (Fluid makes it again while the dataset is bound)")
            raise not_found(entry, name, namespace)
        store.delete("PersistentVolumeClaim", name, namespace)
        shutil.rmtree(volume_folders.folder(context.settings.volumes_dir, namespace, name),
                      ignore_errors=True)  # reclaim policy Delete


def _defaulted(named: str, spec: dict[str, Any], before: Resource | None) -> dict[str, Any]:
    """The claim's spec with the API server's defaults (storage class, volume mode), so that the claim read back
    (``get -o json``) applies again unchanged; ``volumeName`` only as the claim's own volume (no static binding)."""
    spec = {"storageClassName": LOCAL_STORAGE_CLASS, "volumeMode": "Filesystem", **spec}
    named_volume = spec.pop("volumeName", None)
    if named_volume and (before is None or named_volume != f"pvc-{before.uid}"):
        raise UserError(f'{named}: spec.volumeName: binding to a named volume ("{named_volume}") is not supported: '
                        "millpond provisions each claim's volume itself")
    return spec


def _fixed(spec: dict[str, Any]) -> dict[str, Any]:
    """What of a claim's spec may not change once it exists."""
    return {key: value for key, value in spec.items() if key not in ("resources", "volumeAttributesClassName")}


def _check_claim_spec(named: str, spec: dict[str, Any]) -> None:
    unknown = sorted(set(spec) - _CLAIM_SPEC)
    if unknown:
        raise UserError(f'{named}: unknown field "spec.{unknown[0]}"')
    modes = strings(spec.get("accessModes"), f"{named}: spec.accessModes")
    if not modes:
        raise UserError(f"{named}: spec.accessModes: Required value: at least 1 access mode is required")
    for mode in modes:
        if mode not in ACCESS_MODES:
            raise UserError(f'{named}: spec.accessModes: Unsupported value: "{mode}": supported values: '
                            + ", ".join(f'"{one}"' for one in ACCESS_MODES))
    requests = (spec.get("resources") or {}).get("requests") if isinstance(spec.get("resources"), dict) else None
    if not isinstance(requests, dict) or "storage" not in requests:
        raise UserError(f"{named}: spec.resources.requests.storage: Required value")
    if parse_quantity(requests["storage"], "spec.resources.requests.storage").bytes <= 0:
        raise UserError(f"{named}: spec.resources.requests.storage: Invalid value: must be greater than zero")
    if spec.get("volumeMode", "Filesystem") != "Filesystem":
        raise UserError(f"{named}: spec.volumeMode: a local volume is a folder: only Filesystem is supported")
    for key in ("dataSource", "dataSourceRef"):
        if spec.get(key):
            raise UserError(f"{named}: spec.{key}: cloning and snapshots are not supported (a local volume starts "
                            "empty)")
    if "storageClassName" in spec and not isinstance(spec["storageClassName"], str):
        raise UserError(f"{named}: spec.storageClassName: expected a string")


class VolumeView:
    """``NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS REASON AGE``; never applied."""

    columns: tuple[str, ...] = ("CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
                                "REASON", "AGE")

    def objects(self, entry: KindName, namespace: str | None, context: KindContext) -> list[dict[str, Any]]:
        return sorted((one.volume for one in volumes(context)), key=lambda shown: shown["metadata"]["name"])

    def cells(self, shown: dict[str, Any], now: dt.datetime) -> list[str]:
        spec, ref = shown["spec"], shown["spec"].get("claimRef") or {}
        return [spec["capacity"].get("storage", ""), _modes(shown), spec["persistentVolumeReclaimPolicy"],
                shown["status"]["phase"], f"{ref.get('namespace')}/{ref.get('name')}", spec["storageClassName"],
                "", _age(shown, now)]

    def check(self, entry: KindName, doc: dict[str, Any], where: str, context: KindContext) -> Planned:
        raise UserError(f"{where}: {READ_ONLY}: millpond provisions the volume of each PersistentVolumeClaim "
                        "itself (a folder of the home); apply the claim instead")

    def delete(self, entry: KindName, name: str, namespace: str, context: KindContext) -> None:
        shown = next((one for one in self.objects(entry, None, context) if one["metadata"]["name"] == name), None)
        if shown is None:
            raise not_found(entry, name, namespace)
        ref = shown["spec"]["claimRef"]
        raise UserError(f'persistentvolumes "{name}" is bound to claim {ref["namespace"]}/{ref["name"]}: '
                        "delete the claim (or its Dataset) instead")
