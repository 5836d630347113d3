"""Cache keys for task executions, as KFP computes them — with input artifacts by content.

The key covers the component's interface, the container (image, command, args, env), the
task's platform config and resolved input parameters, and each input artifact's content
digest — so identical data produced by another run still hits. A hit reuses the earlier
execution's outputs (and their artifact URIs), provided those artifacts still exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from millpond.pipelines.graph import Outputs
from millpond.pipelines.views import ComponentSpec, ContainerSpec, TaskInputs
from millpond.store import artifacts as store
from millpond.store.journal import RunJournal

_CHUNK = 1 << 20
_memo: dict[tuple[str, int, int], str] = {}
_memo_lock = threading.Lock()


def _file_digest(path: Path, digest: Any) -> None:
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)


def artifact_digest(uri: str) -> str:
    """sha256 of an artifact's content (a folder: of its files' relative paths and contents)."""
    if store.is_remote(uri):
        fs = store.filesystem(uri)
        key = store.remote_key(uri)
        if not fs.exists(key):
            return "missing"
        parts = []
        for name, info in sorted(fs.find(key, detail=True).items()) if fs.isdir(key) else [(key, fs.info(key))]:
            tag = info.get("ETag") or info.get("etag") or info.get("md5") or info.get("size")
            parts.append(f"{name[len(key):]}:{tag}")
        return "remote:" + hashlib.sha256("\n".join(parts).encode()).hexdigest()
    path = Path(uri)
    if not path.exists():
        return "missing"
    stat = path.stat()
    memo_key = (uri, stat.st_size, stat.st_mtime_ns)
    with _memo_lock:
        if memo_key in _memo:
            return _memo[memo_key]
    digest = hashlib.sha256()
    if path.is_dir():
        for root, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                file = Path(root) / name
                digest.update(str(file.relative_to(path)).encode() + b"\0")
                _file_digest(file, digest)
    else:
        _file_digest(path, digest)
    value = digest.hexdigest()
    with _memo_lock:
        _memo[memo_key] = value
    return value


def cache_key(
    component: ComponentSpec,
    container: ContainerSpec,
    platform: Mapping[str, object],
    inputs: TaskInputs,
    recursion_depth: int = 0,
) -> str:
    """The key of an execution: what it runs and on what, not where in which pipeline (KFP's rule).

    One thing of where: a task inside a DAG that calls itself is keyed by how deep it sits
    (``Node.recursion_depth``). Each level of a recursion is then its own execution, and a
    cached re-run replays the first run's levels and stops where it stopped. Keyed alone, a
    while-loop on a cached coin flip would take the first level's "heads" at every level and
    recurse for ever (a kfp 1.x cluster's cache does exactly that).
    """
    raw = container.raw
    material = {
        "inputs": component.raw.get("inputDefinitions", {}),
        "outputs": component.raw.get("outputDefinitions", {}),
        # a kfp 1.x step's Argo paths (``argo.paths``) only when it has them: other keys stay as they were
        "container": {k: raw.get(k) for k in ("image", "command", "args", "env", "resources")}
        | ({"argoPaths": raw["argoPaths"]} if "argoPaths" in raw else {})
        | ({"argoSidecars": raw["argoSidecars"]} if "argoSidecars" in raw else {}),
        "platform": platform,
        "parameters": inputs.parameters,
        "artifacts": {
            name: [{"digest": artifact_digest(str(a.get("uri", ""))), "metadata": a.get("metadata", {})} for a in items]
            for name, items in inputs.artifacts.items()
        },
    } | ({"recursionDepth": recursion_depth} if recursion_depth else {})  # other keys stay as they were
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def lookup(journal: RunJournal, key: str, max_age_s: float | None = None) -> tuple[Outputs, str] | None:
    """The outputs and task id of a cached execution whose artifacts are all still there (and, with
    ``max_age_s``, made at most that many seconds ago: kfp 1.x's ``max_cache_staleness``)."""
    entry = journal.cache_get(key, max_age_s)
    if entry is None:
        return None
    outputs, task_id = entry
    if any(artifact_digest(uri) == "missing" for uri in outputs.get("present", [])):
        journal.cache_forget(key)  # someone removed what it produced
        return None
    return Outputs.from_json(outputs), task_id


def cache_entry(outputs: Outputs) -> dict[str, Any]:
    """What the cache keeps of an execution: its outputs, and which artifacts had content
    (a Metrics artifact may have none), so a later hit can check they are still there."""
    uris = [str(a.get("uri", "")) for items in outputs.artifacts.values() for a in items]
    return {**outputs.to_json(), "present": [uri for uri in uris if artifact_digest(uri) != "missing"]}
