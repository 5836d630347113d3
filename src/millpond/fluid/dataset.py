"""``FluidDataset``: what ``FluidClient.get_dataset`` returns — bind a runtime, report status, build dataflows.

A runtime is a cache engine in Fluid; here every runtime kind is served by millpond's own
cache, and ``bind_runtime`` writes the runtime manifest a Fluid user would get, with its one
tieredstore level placed on this machine: MEM on /dev/shm, SSD/HDD under the millpond home.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from millpond.datasets.cleanup import dataset_deleted
from millpond.datasets.config import bound_runtime
from millpond.datasets.status import dataset_status, resource_status
from millpond.errors import UserError
from millpond.fluid import constants, models
from millpond.fluid.dataflow import FluidDataFlow
from millpond.fluid.objects import already_exists, apply, not_found, shown
from millpond.fluid.utils import infer_runtime_kind
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore

if TYPE_CHECKING:
    from millpond.fluid.config import ConfiguredClient
    from millpond.store.resources import Resource

logger = logging.getLogger("fluidsdk")

MEDIA = ("MEM", "SSD", "HDD")
STATUS_TYPES = ("mount", "cache", "binding_status", "full")
_STATUS_ALIASES = {"cache_status": "cache", "mount_status": "mount", "full_status": "full"}
# Fluid's SDK sets these watermarks for the engines that have them (JuiceFS's "low" is a free-space ratio: not copied).
_WATERMARKS = {constants.ALLUXIO_RUNTIME_KIND: ("0.99", "0.95"), constants.JINDO_RUNTIME_KIND: ("0.99", "0.95")}


def _store() -> ResourceStore:
    return ResourceStore()


def _quantity(gib: float) -> str:
    if not gib > 0:
        raise ValueError(f"cache_capacity_GiB must be above 0, got {gib!r}")
    return f"{int(gib)}Gi" if float(gib).is_integer() else f"{int(gib * 1024)}Mi"


def cache_level(medium: str, capacity_gib: float, kind: str) -> models.Level:
    """The one tieredstore level ``bind_runtime`` asks for, at a path on this machine."""
    medium = medium.upper()
    if medium not in MEDIA:
        raise ValueError(f"cache_medium must be one of {', '.join(MEDIA)}, got {medium!r}")
    path = "/dev/shm" if medium == "MEM" else str(load_settings().home / "cache" / medium.lower())
    high, low = _WATERMARKS.get(kind, (None, None))
    return models.Level(mediumtype=medium, path=path, quota=_quantity(capacity_gib), high=high, low=low)


def runtime_manifest(kind: str, name: str, namespace: str, replicas: int, level: models.Level,
                     extra_spec: dict[str, Any]) -> dict[str, Any]:
    spec = {"replicas": replicas, "tieredstore": models.TieredStore(levels=[level]).to_dict()}
    spec.update({models.camel_case(key): models.to_manifest(value) for key, value in extra_spec.items()})
    return {"apiVersion": constants.API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": spec}


class FluidDataset:
    """One Dataset of the store; ``obj`` is its current object (metadata, spec, status) as a dict."""

    def __init__(self, name: str, namespace: str, resource: Resource, client: ConfiguredClient | None = None) -> None:
        self.name = name
        self.namespace = namespace
        self.uid = resource.uid
        self.fluid_client = client

    def __repr__(self) -> str:
        return f"FluidDataset(name={self.name!r}, namespace={self.namespace!r})"

    def _resource(self, store: ResourceStore) -> Resource:
        found = store.get(constants.DATASET_KIND, self.name, self.namespace)
        if found is None:
            raise not_found(constants.DATASET_KIND, self.name, self.namespace)
        if found.uid != self.uid:
            raise UserError(f"Dataset {self.name} has a different UID, the dataset may already been cleaned up")
        return found

    @property
    def obj(self) -> dict[str, Any]:
        """The Dataset as ``millpond get dataset NAME -o json`` shows it, read now."""
        store = _store()
        return shown(self._resource(store), store)

    def bind_runtime(self, runtime_type: str | None = None, replicas: int = 1, cache_capacity_GiB: float = 2,
                     cache_medium: str = "MEM", wait: bool = False, **kwargs: Any) -> None:
        """Create the runtime of the dataset's name (the kind ``runtime_type`` names), with one cache level.

        ``kwargs`` are further runtime spec fields (``properties=…``); with ``wait`` the dataset
        is checked to be Bound (its UFS listed), and a failure raises with Fluid's condition message.
        """
        kind = infer_runtime_kind(runtime_type)
        if runtime_type and kind is None:
            raise ValueError(f"Unsupported runtime kind {runtime_type}")
        if kind is None:
            kind = self.fluid_client.config.runtime_kind if self.fluid_client else constants.ALLUXIO_RUNTIME_KIND
            logger.warning(f"No runtime_type is given to bind_runtime(), implicitly using {kind}")

        store = _store()
        self._resource(store)
        manifest = runtime_manifest(kind, self.name, self.namespace, replicas,
                                    cache_level(cache_medium, cache_capacity_GiB, kind), kwargs)
        existing = bound_runtime(store, self.name, self.namespace)
        if existing is not None and (existing.kind, existing.spec) != (kind, manifest["spec"]):
            raise already_exists(existing.kind, self.name, self.namespace)
        apply([manifest], "bind_runtime", store)
        logger.debug(f'{kind} "{self.namespace}/{self.name}" created')
        if wait:
            self._wait_bound(store)

    def _wait_bound(self, store: ResourceStore) -> None:
        status = dataset_status(self._resource(store), store)
        if status.get("phase") != "Bound":
            reasons = "; ".join(
                c.get("message", "") for c in status.get("conditions") or []
                if c.get("status") != "True" or c.get("type") == "NotReady"  # NotReady is true when it failed
            )
            why = f": {reasons}" if reasons else ""
            raise UserError(f'Dataset "{self.namespace}/{self.name}" is {status.get("phase")}{why}')
        logger.debug(f'Dataset "{self.namespace}/{self.name}" bound successfully')

    def report_status(self, status_type: str = "cache") -> Any:
        """``mount`` (spec.mounts), ``cache`` (cacheStates with total size and file count),
        ``binding_status`` ({phase, runtimes}) or ``full`` (the whole status), as Fluid's SDK reports them."""
        status_type = _STATUS_ALIASES.get(status_type, status_type)
        if status_type not in STATUS_TYPES:
            raise ValueError(f"status_type must be one of {list(STATUS_TYPES)}")
        store = _store()
        resource = self._resource(store)
        if status_type == "mount":
            return resource.spec.get("mounts") or []
        status = resource_status(resource, store)
        if status_type == "cache":
            return {**(status.get("cacheStates") or {}), "dataset total size": status.get("ufsTotal", ""),
                    "dataset file num": status.get("fileNum", "")}
        if status_type == "binding_status":
            return {"phase": status.get("phase"), "runtimes": self._runtimes(status, store)}
        return status

    def _runtimes(self, status: dict[str, Any], store: ResourceStore) -> list[dict[str, Any]]:
        """status.runtimes as Fluid's SDK prints them (its models' snake_case), with the runtime's replicas."""
        runtime = bound_runtime(store, self.name, self.namespace)
        replicas = (runtime.spec.get("replicas") if runtime else None) or 1
        return [{"category": r.get("category"), "master_replicas": replicas, "name": r.get("name"),
                 "namespace": r.get("namespace"), "type": r.get("type")} for r in status.get("runtimes") or []]

    def clean_up(self, wait: bool = True) -> None:
        """Delete the dataset, its runtime and its cache (the UFS keeps its data); gone when this returns.

        ``wait`` is accepted for Fluid's signature: deletion here is synchronous either way.
        A dataset deleted meanwhile, or replaced by another of the same name, is left alone.
        """
        store = _store()
        found = store.get(constants.DATASET_KIND, self.name, self.namespace)
        if found is None or found.uid != self.uid:
            return
        runtime = bound_runtime(store, self.name, self.namespace)
        store.delete(constants.DATASET_KIND, self.name, self.namespace)
        dataset_deleted(self.name, self.namespace)
        if runtime is not None:
            store.delete(runtime.kind, self.name, self.namespace)
        logger.debug(f'Dataset "{self.namespace}/{self.name}" deleted successfully')

    def preload(
        self, target_path: str | list[str] | dict[str, int] = "/", load_metadata: bool = False
    ) -> FluidDataFlow:
        return FluidDataFlow(self.name, self.namespace).preload(target_path, load_metadata)

    def migrate(self, path: str, migrate_direction: str,
                external_storage: models.ExternalStorage | dict[str, Any]) -> FluidDataFlow:
        return FluidDataFlow(self.name, self.namespace).migrate(path, migrate_direction, external_storage)

    def process(self, dataset_mountpath: str, processor: models.Processor | dict[str, Any],
                sub_path: str | None = None) -> FluidDataFlow:
        return FluidDataFlow(self.name, self.namespace).process(dataset_mountpath, processor, sub_path)
