"""The pods ``delete pod`` stopped: gone from listings until their owner runs them again, then with a new uid.

Kubernetes removes a deleted pod; its controller makes another (a new uid) where it would. Here a
pod is a view of a process its owner keeps a record of (an instance's row, a replica, a task), so
the record outlives the stop. This file (``$MILLPOND_HOME/pods/deleted.json``) remembers each
deletion: the pod as it was (its uid, the processes stopped) and how many times that pod name was
deleted. A listing leaves the pod out while it is still the one deleted (the same uid and none of
its processes new); once the owner started it again it is shown with a uid of its own
(``uid_after``), so ``kubectl delete``'s wait for the old uid ends and a watch sees a new pod.
Entries older than ``KEPT_S`` are forgotten.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

from filelock import FileLock

from millpond.pods.records import PodView, ProcessRef
from millpond.settings import Settings

KEPT_S = 7 * 86400


@dataclass(frozen=True)
class Deleted:
    """One pod name's deletions: the uid it had when last deleted, the processes stopped, how many times."""

    uid: str
    processes: tuple[ProcessRef, ...]
    count: int
    at: dt.datetime


def _path(settings: Settings) -> Path:
    return settings.home / "pods" / "deleted.json"


def read(settings: Settings) -> dict[str, Deleted]:
    """Every recorded deletion, by ``NAMESPACE/NAME`` (none when the file is missing or unreadable)."""
    try:
        raw = json.loads(_path(settings).read_text(encoding="utf-8"))
        return {key: Deleted(str(value["uid"]), tuple(ProcessRef(int(pid), start) for pid, start in value["processes"]),
                             int(value["count"]), dt.datetime.fromisoformat(value["at"]))
                for key, value in raw.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def record(settings: Settings, pod: PodView, stopped: tuple[ProcessRef, ...]) -> None:
    """Remember that ``pod`` (as listed, its uid the source's) was deleted, its processes ``stopped``."""
    path = _path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    with FileLock(str(path) + ".lock"):
        known = {key: value for key, value in read(settings).items() if (now - value.at).total_seconds() < KEPT_S}
        key = f"{pod.namespace}/{pod.name}"
        count = known[key].count + 1 if key in known else 1
        known[key] = Deleted(_source_uid(pod, known.get(key)), stopped, count, now)
        partial = path.with_name(f".deleted.{os.getpid()}.partial")
        partial.write_text(json.dumps({name: {"uid": value.uid, "count": value.count, "at": value.at.isoformat(),
                                              "processes": [[ref.pid, ref.start] for ref in value.processes]}
                                       for name, value in known.items()}), encoding="utf-8")
        os.replace(partial, path)


def _source_uid(pod: PodView, before: Deleted | None) -> str:
    """The uid the source gave ``pod`` (a pod shown after an earlier deletion carries a derived one)."""
    if before is not None and pod.uid == uid_after(before.uid, before.count):
        return before.uid
    return pod.uid


def uid_after(source_uid: str, count: int) -> str:
    """The uid of a pod its owner ran again after its ``count``-th deletion."""
    return str(uuid.uuid5(uuid.UUID(source_uid), f"deleted/{count}")) if count else source_uid


def shown(pod: PodView, deleted: dict[str, Deleted]) -> PodView | None:
    """``pod`` as a listing shows it: None while it is the pod deleted; with a new uid once its owner ran it again."""
    entry = deleted.get(f"{pod.namespace}/{pod.name}")
    if entry is None or pod.uid != entry.uid:
        return pod  # never deleted, or its owner made a new one (a new attempt: the source's uid changed)
    running = {container.process for container in pod.containers if container.process is not None}
    if not running or running <= set(entry.processes):
        return None
    return replace(pod, uid=uid_after(entry.uid, entry.count))
