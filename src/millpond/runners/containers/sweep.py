"""Containers millpond started, found by label: listed for ``millpond ps``, removed when their owner ends.

Every container carries ``io.millpond.engine=<the engine's guardian token>`` (and the owner's
label): the guardian removes its engine's containers however the engine ended, and a runner
removes one whose ``run`` command was stopped by a signal (the runtime's client dying does not
stop the container it started).
"""

from __future__ import annotations

import subprocess

from millpond.runners.containers.command import ENGINE_LABEL
from millpond.runners.containers.runtimes import ContainerRuntime


def remove(runtime: ContainerRuntime, *names: str) -> None:
    """Stop and remove the named containers now (none left running); quiet when they are gone."""
    if not names:
        return
    words = ["rm", "-f", "-t", "0", *names] if runtime.name == "podman" else ["rm", "-f", *names]
    subprocess.run(runtime.argv(*words), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)


def labelled(runtime: ContainerRuntime, label: str, running_only: bool = False) -> list[str]:
    """Ids of the containers carrying ``label`` (``KEY`` or ``KEY=VALUE``)."""
    words = ["ps", "-q", "--no-trunc", "--filter", f"label={label}"]
    if not running_only:
        words.insert(1, "-a")
    done = subprocess.run(runtime.argv(*words), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return done.stdout.split() if done.returncode == 0 else []


def remove_engine(runtime: ContainerRuntime, token: str) -> None:
    """Remove every container of one engine (the guardian's last act, and ``millpond images prune``)."""
    remove(runtime, *labelled(runtime, f"{ENGINE_LABEL}={token}"))

