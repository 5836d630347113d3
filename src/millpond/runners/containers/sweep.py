"""Containers millpond started, found by label: listed for ``millpond ps``, removed when their owner ends.

Every container carries ``io.millpond.engine=<the engine's guardian token>`` (and the owner's
label): the guardian removes its engine's containers however the engine ended, and a runner
removes one whose ``run`` command was stopped by a signal (the runtime's client dying does not
stop the container it started).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from millpond.runners.containers import runtimes
from millpond.runners.containers.command import ENGINE_LABEL, OWNER_LABEL
from millpond.runners.containers.runtimes import ContainerRuntime


def remove(runtime: ContainerRuntime, *names: str) -> None:
    """Stop and remove the named containers now (none left running); quiet when they are gone."""
    if not names:
        return
    words = ["rm", "-f", "-t", "0", *names] if runtime.name == "podman" else ["rm", "-f", *names]
    subprocess.run(runtime.argv(*words), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)


def remove_owned(marker: Path, owner: str) -> int:
    """Remove every container labelled ``OWNER_LABEL=owner``, in the runtime named in ``marker`` (a file its
    owner wrote once one of its processes ran in a container): what a supervisor killed with -9 left. Costs
    nothing when the marker is absent (none of its processes ever ran in a container). The number removed."""
    try:
        used = marker.read_text().strip()
    except OSError:
        return 0
    found = runtimes.find(used if used in runtimes.RUNTIMES else None)
    if isinstance(found, str):
        return 0
    left = labelled(found, f"{OWNER_LABEL}={owner}")
    remove(found, *left)
    return len(left)


def labelled(runtime: ContainerRuntime, label: str, running_only: bool = False) -> list[str]:
    """Ids of the containers carrying ``label`` (``KEY`` or ``KEY=VALUE``)."""
    words = ["ps", "-q", "--no-trunc", "--filter", f"label={label}"]
    if not running_only:
        words.insert(1, "-a")
    done = subprocess.run(runtime.argv(*words), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return done.stdout.split() if done.returncode == 0 else []


@dataclass(frozen=True)
class RunningContainer:
    """One running container of millpond's, as ``millpond ps`` lists it."""

    name: str
    image: str
    pid: int
    started: str
    owner: str


def running_with(runtime: ContainerRuntime, label: str) -> list[RunningContainer]:
    """The running containers carrying ``label`` (``KEY=VALUE``), with their image, main pid and owner."""
    done = subprocess.run(runtime.argv("ps", "--filter", f"label={label}", "--format", "json"),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not done.stdout.strip():
        return []
    text = done.stdout.strip()
    try:
        items = json.loads(text) if text.startswith("[") else [json.loads(line) for line in text.splitlines()]
    except ValueError:
        return []
    found = []
    for item in items if isinstance(items, list) else []:
        labels = item.get("Labels") or {}
        names = item.get("Names") or [item.get("Name", "")]
        found.append(RunningContainer(
            name=str(names[0] if isinstance(names, list) and names else names), image=str(item.get("Image", "")),
            pid=int(item.get("Pid") or 0), started=_started(item),
            owner=str(labels.get(OWNER_LABEL, "") if isinstance(labels, dict) else ""),
        ))
    return found


def _started(item: dict[str, object]) -> str:
    """When it was created, as RFC 3339 (podman gives seconds since the epoch in ``Created``)."""
    created = item.get("Created")
    if isinstance(created, (int, float)):
        return dt.datetime.fromtimestamp(created, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(item.get("CreatedAt") or created or "")


def remove_engine(runtime: ContainerRuntime, token: str) -> None:
    """Remove every container of one engine. (The guardian does the same with the standard library only,
    ``guardian.remove_containers``: it runs as ``python -I -S`` and imports nothing of millpond.)"""
    remove(runtime, *labelled(runtime, f"{ENGINE_LABEL}={token}"))

