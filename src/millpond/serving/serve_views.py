"""What ``arena serve list|get|logs`` show of an InferenceService, in Arena's shape (``ServingJobInfo``).

An InferenceService is one "serving job": its TYPE is the ``servingType`` label ``arena serve`` set
(``Custom``, ``KServe``, ``Sklearn``; an applied manifest without one is ``KServe``), its VERSION the
``servingVersion`` label, else the latest revision's number (``00001``, as Arena shows KServe's),
DESIRED the replicas asked, AVAILABLE those that answer now (``serving.endpoints``), ADDRESS the URL
of its status. Its instances are the replicas of its revisions (``NAME-predictor-00001-replica-0``),
one log file each.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from millpond.serving import endpoints as endpoint_files
from millpond.serving import lifecycle
from millpond.serving.spec import predictor_spec
from millpond.store.resources import Resource

TYPE_NAMES = {"custom": "Custom", "kserve": "KServe", "sklearn": "Sklearn"}


def _age(since: dt.datetime, now: dt.datetime) -> str:
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _ready(status: dict[str, Any]) -> tuple[str, str]:
    """(Ready's status, its message) from the InferenceService's conditions."""
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "Unknown"), str(condition.get("message") or "")
    return "Unknown", ""


def instance_logs(name: str, namespace: str) -> dict[str, Path]:
    """Each instance's log file by instance name (``REVISION-replica-N``), newest revision first."""
    found: dict[str, Path] = {}
    logs = sorted(lifecycle.replica_logs(name, namespace), key=lambda p: (p.parent.name, p.name))
    by_revision: dict[str, list[Path]] = {}
    for path in logs:
        by_revision.setdefault(path.parent.name, []).append(path)
    # lifecycle sorts replica-10 after replica-9; the revision's number sorts the revisions
    for revision in sorted(by_revision, reverse=True):
        for path in by_revision[revision]:
            found[f"{revision}-{path.stem}"] = path
    return found


def info(resource: Resource, instances: bool = False) -> dict[str, Any]:
    """Arena's ``ServingJobInfo`` of one InferenceService (with its instances when asked)."""
    now = dt.datetime.now(dt.timezone.utc)
    labels = (resource.manifest.get("metadata") or {}).get("labels") or {}
    status = dict(lifecycle.observed_status(resource) or {})
    ready, message = _ready(status)
    predictor = predictor_spec(resource.manifest)
    served = endpoint_files.read(resource.namespace, resource.name)
    revisions = list(served.revisions) if served is not None else []
    latest = str(((status.get("components") or {}).get("predictor") or {}).get("latestCreatedRevision") or "")
    version = str(labels.get("servingVersion") or (latest.rsplit("-", 1)[-1] if latest else ""))
    url = str(status.get("url") or "")
    port = urlsplit(url).port if url else None
    item: dict[str, Any] = {
        "name": resource.name, "namespace": resource.namespace,
        "type": TYPE_NAMES.get(str(labels.get("servingType") or ""), "KServe"), "version": version,
        "age": _age(resource.created_at, now), "desiredInstances": predictor.replicas,
        "availableInstances": sum(len(r.replicas) for r in revisions), "address": url,
        "ports": f"HTTP:{port}" if port else "", "ready": ready, "message": "" if ready == "True" else message,
        "requestGPUs": predictor.resources.gpus,  # per replica, as Arena's ServingJobInfo counts them
        "requestGPUMemory": sum(share.memory_bytes for share in predictor.resources.shares) // 2**30,
        "revisions": [{"name": r.name, "percent": r.percent, "replicas": list(r.replicas)} for r in revisions],
        "endpoints": ([{"name": "HTTP", "url": url}] if url else [])
        + [{"name": f"{r.name} ({r.percent}%)", "url": u} for r in revisions for u in r.replicas],
    }
    if instances:
        item["instances"] = _instances(resource, served, now)
    return item


def _instances(resource: Resource, served: Any, now: dt.datetime) -> list[dict[str, Any]]:
    """Each replica the supervisor reports (``endpoints.extra["replicas"]``: its URL once it answers, its
    restarts, why it is down), else each replica log left by one that ran: Running, Pending or Stopped."""
    reported = {(str(r.get("revision")), int(r.get("index") or 0)): r
                for r in ((served.extra if served is not None else {}).get("replicas") or []) if isinstance(r, dict)}
    out = []
    for log_path in instance_logs(resource.name, resource.namespace).values():
        key = (log_path.parent.name, _index(log_path))
        reported.setdefault(key, {"revision": key[0], "index": key[1], "log": str(log_path), "stopped": True})
    for (revision, index), replica in sorted(reported.items(), key=lambda item: (item[0][0], item[0][1])):
        log = Path(str(replica.get("log") or "")) if replica.get("log") else None
        up = bool(replica.get("url"))
        status = "Stopped" if replica.get("stopped") else "Running" if up else \
            ("CrashLoopBackOff" if replica.get("restarts") else "Pending")
        started = _first_stamp(log) if log else None
        out.append({"name": f"{revision}-replica-{index}", "status": status, "age": _age(started or now, now),
                    "ready": "1/1" if up else "0/1", "readyContainers": int(up), "totalContainers": 1,
                    "restartCount": int(replica.get("restarts") or 0), "nodeName": "localhost",
                    "pid": replica.get("pid"), "url": replica.get("url") or "", "reason": replica.get("failure") or "",
                    "log": str(log or "")})
    return out


def _first_stamp(log: Path) -> dt.datetime | None:
    """When the replica first started: the time its log's first line was written (a pod's age counts
    from its creation, not from its last restart)."""
    try:
        with open(log, "rb") as text:
            stamp = text.read(40).split(b" ", 1)[0].decode()
        return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _index(log: Path) -> int:
    tail = log.stem.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
