"""What each data operation does: DataLoad, DataMigrate, DataProcess, DataBackup.

Each executor takes the applied resource and a progress callback and returns Fluid's
``infos`` for its status, or raises an error whose message is the one line the user sees.
DataProcess runs containers (in their images, or on this host): ``processor``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from millpond.datasets.cache.engine import open_cache
from millpond.datasets.config import load_config
from millpond.datasets.manifest_checks import MAX_MIGRATE_PARALLELISM
from millpond.datasets.node_loads import load_on_nodes
from millpond.datasets.operations.copied import CopiedFiles
from millpond.datasets.operations.failures import OperationFailed
from millpond.datasets.operations.processor import data_process, dataset_ref
from millpond.datasets.operations.transfer import open_side
from millpond.datasets.operations.transient import attempt
from millpond.datasets.status import resource_status
from millpond.settings import load_settings
from millpond.store import volume_folders
from millpond.store.resources import Resource, ResourceStore

Progress = Callable[..., None]


def data_load(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Preload ``target`` paths (the whole dataset when none) into the cache."""
    name, namespace = dataset_ref(resource)
    targets = [str(t.get("path") or "/") for t in resource.spec.get("target") or []] or ["/"]
    address = load_settings().ray_address
    if address is not None:  # cluster mode: each node it is told to warm loads its own cache
        return load_on_nodes(address, resource.spec, name, namespace, targets, progress)
    cache = open_cache(name, namespace)
    if resource.spec.get("loadMetadata"):
        cache.sync()
    result = cache.load(targets, progress)
    return {"files": str(result.files), "bytes": str(result.bytes), "fetchedBytes": str(result.fetched_bytes),
            "fetchedFiles": str(result.fetched_files), "seconds": f"{result.seconds:.2f}",
            "cachedFiles": str(result.cached_files), "cachedBytes": str(result.cached_bytes)}


def data_migrate(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Copy from a dataset path or an external URI to another, ``parallelism`` files at a time, each verified."""
    spec = resource.spec
    source = open_side(spec.get("from") or {}, resource, "from")
    target = open_side(spec.get("to") or {}, resource, "to")
    files = attempt(source.files)
    if not files:
        raise OperationFailed(f"nothing to migrate at {source.describe()}")
    single = len(files) == 1 and files[0][0] == ""
    total = sum(size for _, size in files)
    journal = CopiedFiles(resource)
    skipped = journal.finished(files, target)  # copied by an earlier process of this run, before it died
    done = {"bytes": sum(skipped.values()), "files": len(skipped)}
    lock = threading.Lock()
    failed = threading.Event()

    def copy(item: tuple[str, int]) -> None:
        if failed.is_set():
            return  # another copy failed: a worker that took this file before the rest were cancelled skips it
        relative, _ = item
        try:
            data = attempt(lambda: source.read(relative))
            placed = target.place(relative, single, source.basename())
            attempt(lambda: target.write(placed, data))
        except BaseException:
            failed.set()
            raise
        with lock:
            journal.add(relative, placed, data)
            done["bytes"] += len(data)
            done["files"] += 1
            progress(done["bytes"], done["files"], total)

    parallelism = min(MAX_MIGRATE_PARALLELISM, max(1, int(spec.get("parallelism") or 1)))  # apply refuses more
    pool = ThreadPoolExecutor(parallelism, thread_name_prefix="millpond-migrate")
    futures = [pool.submit(copy, item) for item in files if item[0] not in skipped]
    try:
        for future in as_completed(futures):
            future.result()  # the first failure ends the copy: the files not yet started are not tried
    finally:
        for future in futures:
            future.cancel()
        pool.shutdown(wait=True)  # only the copies under way remain, each bounded by the storage timeouts
    attempt(target.finish)
    journal.remove()
    infos = {"files": str(done["files"]), "bytes": str(done["bytes"]), "parallelism": str(parallelism)}
    if skipped:
        infos.update(skippedFiles=str(len(skipped)), skippedBytes=str(sum(skipped.values())))
    return infos


def data_backup(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Write the dataset's manifest, status and cache index to ``backupPath`` (local:// or pvc://)."""
    name, namespace = dataset_ref(resource)
    target = _backup_folder(str(resource.spec.get("backupPath") or ""), resource.namespace)
    target.mkdir(parents=True, exist_ok=True)
    store = ResourceStore()
    dataset = store.get("Dataset", name, namespace)
    if dataset is None:
        raise OperationFailed(f"dataset {name} not found")
    metadata = target / f"metadata-backup-{namespace}-{name}.json"
    metadata.write_text(json.dumps({"manifest": dataset.manifest, "status": resource_status(dataset, store)}, indent=2))
    index = load_config(name, namespace).state_dir / "index.db"
    copied = target / f"index-backup-{namespace}-{name}.db"
    if index.exists():
        with sqlite3.connect(index) as source, sqlite3.connect(copied) as destination:
            source.backup(destination)  # a consistent copy while readers and writers go on
    progress(metadata.stat().st_size, 1, None)
    return {"backupLocationPath": str(target)}


def _backup_folder(uri: str, namespace: str) -> Path:
    if uri.startswith("local://"):
        return Path("/" + uri.removeprefix("local://").lstrip("/"))
    if uri.startswith("pvc://"):
        volume, _, sub = uri.removeprefix("pvc://").partition("/")
        return volume_folders.find(load_settings().volumes_dir, namespace, volume) / sub  # its namespace's PVC
    raise OperationFailed(f"backupPath {uri!r} must be local:///PATH or pvc://NAME[/PATH]")


EXECUTORS: dict[str, Callable[[Resource, Progress], dict[str, Any]]] = {
    "DataLoad": data_load, "DataMigrate": data_migrate, "DataProcess": data_process, "DataBackup": data_backup,
}

