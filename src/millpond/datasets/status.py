"""Status of Fluid objects the way Fluid reports it, computed from the cache index on demand.

A Dataset is ``NotBound`` until a runtime of the same name exists, then ``Bound`` once its
UFS has been listed, or ``Failed`` with a condition saying why (a bucket that does not exist,
keys that are refused, a mount that cannot be reached, a secret that went missing). Whether the
mounts answer is asked again on a read once the last answer is older than a few seconds, bounded
in time (``ufs_check``), so a bucket deleted after the first listing shows, and so does one
created after a failure. Sizes are printed as Fluid prints them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.datasets import ufs_check
from millpond.datasets.cache.engine import DatasetCache, cache_stats
from millpond.datasets.cache.index import CacheIndex
from millpond.datasets.config import RUNTIME_KINDS, DatasetConfig, bound_runtime, build_config
from millpond.datasets.operations.liveness import observed
from millpond.datasets.placement import live_nodes
from millpond.datasets.quantity import format_bytes, format_percentage
from millpond.datasets.ufs import UfsError
from millpond.errors import UserError
from millpond.settings import load_settings
from millpond.store.node_caches import CacheReport, NodeCacheState, NodeCacheStore
from millpond.store.resources import Resource, ResourceStore

RUNTIME_TYPES = {
    "AlluxioRuntime": "alluxio", "JuiceFSRuntime": "juicefs", "JindoRuntime": "jindo", "ThinRuntime": "thin",
    "EFCRuntime": "efc", "VineyardRuntime": "vineyard", "CacheRuntime": "cache",
}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, ok: bool, reason: str, message: str, since: str = "") -> dict[str, str]:
    """One condition; ``since``: when the dataset and its runtime last changed (the transition), so a status read
    twice is the same status (a watch sees a change only when there is one); "" for a probe made now."""
    at = since or _now()
    return {"type": kind, "status": "True" if ok else "False", "reason": reason, "message": message,
            "lastUpdateTime": at, "lastTransitionTime": at}


def _changed_at(*resources: Resource) -> str:
    latest = max(resource.updated_at for resource in resources)
    return latest.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def dataset_status(resource: Resource, store: ResourceStore, sync_if_new: bool = True) -> dict[str, Any]:
    """A Dataset's status: phase, ufsTotal, fileNum, cacheStates, conditions, runtimes."""
    runtime = bound_runtime(store, resource.name, resource.namespace)
    if runtime is None:
        return {"phase": "NotBound", "conditions": [], "cacheStates": {}}
    status: dict[str, Any] = {
        "runtimes": [{"name": runtime.name, "namespace": runtime.namespace, "category": "Accelerate",
                      "type": RUNTIME_TYPES.get(runtime.kind, runtime.kind.lower())}],
        "mounts": [{k: v for k, v in m.items() if k != "encryptOptions"} for m in resource.spec.get("mounts") or []],
        "hcfs": {"endpoint": f"millpond://{resource.name}"},
    }
    try:
        config = build_config(resource.manifest, runtime.manifest, resource.uid, load_settings())
    except UserError as exc:
        status.update(phase="Failed", conditions=[_condition("Ready", False, "ConfigError", str(exc))])
        return status
    stats, check_error = _stats(config, sync_if_new)
    first = config.tiers[0]
    total = _summed(stats, NodeCacheStore().states(resource.uid))
    status["cacheStates"] = {
        "cacheCapacity": format_bytes(total.capacity),
        "cached": format_bytes(total.cached),
        # Two nodes may hold the same file: the share of the dataset cached somewhere is at most all of it.
        "cachedPercentage": format_percentage(min(total.cached, stats.ufs_total), stats.ufs_total),
        "cacheHitRatio": format_percentage(total.hit_bytes, total.hit_bytes + total.miss_bytes),
        "localHitRatio": format_percentage(total.hit_bytes, total.hit_bytes + total.miss_bytes),
        "lowWaterMark": f"{first.low:g}",
        "highWaterMark": f"{first.high:g}",
    }
    if check_error:
        # Fluid's condition for a dataset that cannot be set up: NotReady, status True, the error as message
        failed = _condition("NotReady", True, ufs_check.reason(check_error), check_error)
        status.update(phase="Failed", conditions=[failed])
        return status
    if stats.synced_at is None:
        status["phase"] = "Failed" if stats.sync_error else "Bound"
        if stats.sync_error:
            status["conditions"] = [_condition("Ready", False, "UFSUnreachable", stats.sync_error)]
        return status
    status.update(ufsTotal=format_bytes(stats.ufs_total), fileNum=str(stats.file_num), phase="Bound")
    ready = _condition(
        "Ready", True, "DatasetReady", f"The {RUNTIME_TYPES.get(runtime.kind, 'cache')} runtime is ready.",
        _changed_at(resource, runtime),
    )
    status["conditions"] = [ready]
    if stats.sync_error:
        status["conditions"].append(_condition("MetadataSynced", False, "UFSUnreachable", stats.sync_error))
    return status


def _summed(local: Any, nodes: list[NodeCacheState]) -> CacheReport:
    """The dataset's caches summed, as Fluid sums its workers': every node's, and the engine's own.

    The engine's own cache (its home) counts when it was used, or when no node holds one
    (local mode: it is the only worker).
    """
    parts = [CacheReport(n.cached, n.capacity, n.hit_bytes, n.miss_bytes) for n in nodes]
    if not nodes or local.cached or local.hit_bytes or local.miss_bytes:
        parts.append(CacheReport(local.cached, local.capacity, local.hit_bytes, local.miss_bytes))
    return CacheReport(
        cached=sum(p.cached for p in parts), capacity=sum(p.capacity for p in parts),
        hit_bytes=sum(p.hit_bytes for p in parts), miss_bytes=sum(p.miss_bytes for p in parts),
    )


def worker_counts(runtime: Resource, nodes: list[NodeCacheState]) -> dict[str, int]:
    """Fluid's worker numbers: the nodes holding a cache of the dataset are its workers.

    ``replicas`` is what is desired (Fluid starts that many workers; here a node's cache comes
    into being when a task or a DataLoad first uses the dataset there); without it, every node
    that holds one. A node lost from the cluster still holds its slot but is not ready (when this
    process has joined the cluster and can tell). Outside cluster mode the engine's own cache is
    the one worker.
    """
    replicas = (runtime.spec or {}).get("replicas")
    held = len(nodes) or 1
    desired = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and nodes else held
    live = live_nodes() if nodes else None  # known when this process has joined the cluster
    ready = held if live is None else sum(1 for node in nodes if node.node_id in live)
    return {
        "desiredWorkerNumberScheduled": desired, "currentWorkerNumberScheduled": held,
        "workerNumberReady": ready, "workerNumberAvailable": ready, "workerNumberUnavailable": max(0, desired - ready),
    }


def _stats(config: DatasetConfig, check: bool) -> tuple[Any, str | None]:
    """Cache numbers from the index, and what the last check of the mounts found wrong.

    With ``check``, the mounts are asked again if that answer is stale (bounded in time); when
    they answer and were never listed (or the mounts changed since), the UFS is listed first, so a
    new dataset shows its size. Without it (a runtime's status) only what is recorded is read."""
    index = CacheIndex(config.state_dir)
    try:
        error = ufs_check.check(config, index, load_settings().volumes_dir) if check else index.meta("check_error")
        unlisted = index.meta("synced_at") is None or index.meta("fingerprint") != config.fingerprint()
        if check and not error and unlisted:
            cache = DatasetCache(config, load_settings().volumes_dir)
            try:
                cache.sync()
            except (UfsError, UserError) as exc:
                index.set_meta({"sync_error": str(exc)})
            finally:
                cache.close()
        return cache_stats(index, config), error or None
    finally:
        index.close()


def runtime_status(resource: Resource, store: ResourceStore) -> dict[str, Any]:
    """A runtime's status: its parts are this process's engine, ready once a dataset binds to it."""
    dataset = store.get("Dataset", resource.name, resource.namespace)
    phase = "Ready" if dataset is not None else "NotReady"
    status: dict[str, Any] = {"masterPhase": phase, "workerPhase": phase, "fusePhase": phase,
                              "valueFile": "", "setupDuration": "0s"}
    if dataset is not None:
        status["cacheStates"] = dataset_status(dataset, store, sync_if_new=False).get("cacheStates", {})
        status.update(worker_counts(resource, NodeCacheStore().states(dataset.uid)))
    return status


def resource_status(resource: Resource, store: ResourceStore) -> dict[str, Any]:
    """What ``millpond get`` shows in ``status`` for any Fluid kind."""
    if resource.kind == "Dataset":
        return dataset_status(resource, store)
    if resource.kind in RUNTIME_KINDS:
        return runtime_status(resource, store)
    # A data operation's status is written by the process that runs it (until then it is Pending),
    # unless that process died: then it is resumed, or Failed.
    return observed(store, resource)


def cache_counters(resource: Resource, store: ResourceStore) -> tuple[CacheReport, int, int] | None:
    """A bound Dataset's cache numbers for ``/metrics``: (summed report, hit reads, miss reads), or None
    when it is not bound or its runtime does not build.

    Only what is recorded is read: the index's counters and its per-tier sum, and the nodes' rows in
    cluster mode — never the UFS, never the file table (a dataset of a million files costs the same
    as one of ten). An index that does not exist yet (nothing read) is not created: all zero. Reads
    are counted by this machine's caches only (nodes report bytes).
    """
    runtime = bound_runtime(store, resource.name, resource.namespace)
    if runtime is None:
        return None
    try:
        config = build_config(resource.manifest, runtime.manifest, resource.uid, load_settings())
    except UserError:
        return None
    counters: dict[str, int] = {}
    cached = 0
    if (config.state_dir / "index.db").is_file():
        index = CacheIndex(config.state_dir)
        try:
            counters, cached = index.counters(), sum(index.usage().values())
        finally:
            index.close()
    local = CacheReport(cached, config.capacity, counters.get("cache_hit_bytes", 0),
                        counters.get("cache_miss_bytes", 0))
    total = _summed(local, NodeCacheStore().states(resource.uid))
    return total, counters.get("cache_hit_reads", 0), counters.get("cache_miss_reads", 0)
