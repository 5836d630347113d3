"""What each data operation does: DataLoad, DataMigrate, DataProcess, DataBackup.

Each executor takes the applied resource and a progress callback and returns Fluid's
``infos`` for its status, or raises an error whose message is the one line the user sees.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import tempfile
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
from millpond.datasets.operations.transfer import open_side
from millpond.datasets.operations.transient import attempt
from millpond.datasets.shared_mounts import using
from millpond.datasets.status import resource_status
from millpond.runners.base import Bind
from millpond.runners.environment import inherited_environment, with_console_scripts
from millpond.runners.process_groups import MARK_VAR, end_marked, marked
from millpond.runners.sandbox import SandboxUnavailable, wrap
from millpond.settings import load_settings
from millpond.store.resources import Resource, ResourceStore

Progress = Callable[..., None]


def _dataset_name(resource: Resource) -> tuple[str, str]:
    ref = resource.spec.get("dataset") or {}
    if isinstance(ref, str):  # DataBackup names its dataset by a plain string
        ref = {"name": ref}
    if not ref.get("name"):
        raise OperationFailed("spec.dataset.name is missing")
    return str(ref["name"]), str(ref.get("namespace") or resource.namespace)


def data_load(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Preload ``target`` paths (the whole dataset when none) into the cache."""
    name, namespace = _dataset_name(resource)
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


def data_process(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Run the processor's script or containers with the dataset mounted at ``mountPath`` (+ ``subPath``).

    The dataset's shared mount is held for this step only: it ends with its last user.
    """
    name, namespace = _dataset_name(resource)
    with using(name, namespace, f"DataProcess {resource.namespace}/{resource.name}") as folder:
        return _process_in(resource, folder)


def _process_in(resource: Resource, folder: Path) -> dict[str, Any]:
    name, namespace = _dataset_name(resource)
    ref = resource.spec.get("dataset") or {}
    mount_path = str(ref.get("mountPath") or "/data")
    sub_path = str(ref.get("subPath") or "").strip("/")
    read_only = load_config(name, namespace).read_only
    source = folder / sub_path if sub_path else folder
    if not source.is_dir():
        raise OperationFailed(f"dataset {name} has no folder {sub_path!r}")
    commands, env = _commands(resource)
    home = load_settings().home
    logs = home / "operations"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{resource.namespace}_DataProcess_{resource.name}.out"
    with tempfile.TemporaryDirectory(prefix="millpond-process-") as work, open(log_path, "wb") as log:
        for position, (argv, script) in enumerate(commands):
            if script is not None:
                script_path = Path(work) / f"script-{position}"
                script_path.write_text(script)
                argv = [*argv, str(script_path)]
            try:
                words = wrap(argv, [Bind(source, mount_path.rstrip("/") or "/", read_only=read_only)], Path(work))
            except SandboxUnavailable as exc:
                raise OperationFailed(f"cannot mount the dataset at {mount_path}: {exc}") from None
            mark = marked()  # what the script starts in other sessions ends with it (runners.process_groups)
            try:
                result = subprocess.run(
                    words, env={**_script_environment(home), **env, **mark}, stdout=log, stderr=subprocess.STDOUT,
                    cwd=work,
                )
            finally:
                end_marked(mark[MARK_VAR])
            if result.returncode != 0:
                log.flush()
                tail = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()][-1:] or [""]
                raise OperationFailed(f"the script exited with status {result.returncode}: {tail[0][:200]}")
    return {"log": str(log_path)}


def _script_environment(home: Path) -> dict[str, str]:
    """What a script starts with: millpond's environment, its console scripts first on PATH, its home pinned.

    So a script that drives millpond (``arena submit``, ``arena get NAME -o json``, as seed
    000's training step does) reaches this installation and this home's store and ledger,
    even when the venv was never activated or ``MILLPOND_HOME`` was relative (the script runs
    in a folder of its own).
    """
    return {**with_console_scripts(inherited_environment()), "MILLPOND_HOME": str(home)}


def _commands(resource: Resource) -> tuple[list[tuple[list[str], str | None]], dict[str, str]]:
    """(argv, script source or None) to run in order, and the environment, from a Script or Job processor."""
    processor = resource.spec.get("processor") or {}
    script = processor.get("script")
    if script:
        env = {str(e["name"]): str(e.get("value", "")) for e in script.get("env") or [] if "name" in e}
        command = [str(word) for word in script.get("command") or ["bash"]]
        return [(command + [str(a) for a in script.get("args") or []], script.get("source"))], env
    containers = ((processor.get("job") or {}).get("podSpec") or {}).get("containers") or []
    if not containers:
        raise OperationFailed("spec.processor has neither a script nor a job with containers")
    env = {str(e["name"]): str(e.get("value", "")) for c in containers for e in c.get("env") or [] if "name" in e}
    return [([*map(str, c.get("command") or []), *map(str, c.get("args") or [])], None) for c in containers], env


def data_backup(resource: Resource, progress: Progress) -> dict[str, Any]:
    """Write the dataset's manifest, status and cache index to ``backupPath`` (local:// or pvc://)."""
    name, namespace = _dataset_name(resource)
    target = _backup_folder(str(resource.spec.get("backupPath") or ""), resource.name)
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


def _backup_folder(uri: str, name: str) -> Path:
    if uri.startswith("local://"):
        return Path("/" + uri.removeprefix("local://").lstrip("/"))
    if uri.startswith("pvc://"):
        volume, _, sub = uri.removeprefix("pvc://").partition("/")
        return load_settings().volumes_dir / volume / sub
    raise OperationFailed(f"backupPath {uri!r} must be local:///PATH or pvc://NAME[/PATH]")


EXECUTORS: dict[str, Callable[[Resource, Progress], dict[str, Any]]] = {
    "DataLoad": data_load, "DataMigrate": data_migrate, "DataProcess": data_process, "DataBackup": data_backup,
}

