"""What a family tells the ``v1`` Pod kind about each process it runs: plain, typed records (the pod-source protocol).

Kubernetes users (``kubectl get pods``, ``kubectl logs``) and the SDKs (Kubeflow's ``TrainerClient``
lists a TrainJob's pods by JobSet's labels and reads container ``node``'s log) see what runs as
Pods. millpond runs processes, not pods: each family that runs some (training-job instances,
model-server replicas, pipeline task attempts; batch Jobs and Ray nodes next) describes each of
them as one :class:`PodView`, with the name and labels its upstream controller would give the
pod, and the Pod kind (``pods.handler``) shows them, reads their logs and deletes them, never
asking which family a pod belongs to.

To add a family's pods: write a :class:`PodSource` (an object with ``pods(namespace, context)``)
in a module as ``SOURCE``, and name that module in ``pods.sources.SOURCES`` (one line). A source
lists what runs now and what ran (finished processes show terminated, as completed pods stay
until their owner is deleted); it never starts or stops anything itself.

Deleting a pod stops its containers' processes (``ContainerView.process``: SIGTERM to the
process group, SIGKILL after the grace period), as the kubelet does; the owner then restarts
it where its controller would (the training supervisor's retries, a model server's
CrashLoopBackOff, a task's retry policy). A pod that cannot be stopped that way says why in
``PodView.undeletable``.

On the floor of the layers (it imports no layer), so that every family may build these records.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from millpond.kind_handler import KindContext

LOCAL_IP = "127.0.0.1"  # every pod's address here: its processes share this host's network
_POD_UIDS = uuid.UUID("6d1f3c9e-58a4-4c1b-9a52-6f0b7d2c4e11")  # uuid5 namespace of pod uids


@dataclass(frozen=True)
class ProcessRef:
    """A container's main process, told apart from a later one with the same pid by its start ticks
    (``runners.processes.start_ticks``); it leads its own process group."""

    pid: int
    start: str | None


@dataclass(frozen=True)
class LogFile:
    """Where a container's output is: ``stamped`` when each line starts with the UTC time it was read
    (``2026-01-01T00:00:00.000000Z LINE``, as the training and serving supervisors write them)."""

    path: Path
    stamped: bool = True


@dataclass(frozen=True)
class Waiting:
    """Not started (yet, or again): Kubernetes' reason (``ContainerCreating``, ``CrashLoopBackOff``)."""

    reason: str
    message: str = ""


@dataclass(frozen=True)
class Running:
    started_at: dt.datetime


@dataclass(frozen=True)
class Terminated:
    """Ended: ``exit_code`` as Kubernetes reports it (128 + N for signal N), ``reason`` ``Completed`` or ``Error``."""

    exit_code: int
    reason: str
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    message: str = ""


ContainerState = Waiting | Running | Terminated


def parse_instant(text: object) -> dt.datetime | None:
    """An ISO 8601 time as the families and Jupyter write them (``Z`` or an offset, fractions allowed; one with
    no zone is UTC); None for no text or text that is not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def terminated(code: int, started_at: dt.datetime | None, finished_at: dt.datetime | None,
               message: str = "") -> Terminated:
    """A process's end as the kubelet reports it: a negative return code (killed by signal N) is ``128 + N``;
    0 is ``Completed``, anything else ``Error``."""
    exit_code = 128 - code if code < 0 else code
    return Terminated(exit_code, "Completed" if exit_code == 0 else "Error", started_at, finished_at, message)


@dataclass(frozen=True)
class ContainerView:
    """One container of a pod: what it runs (as recorded: the image is never pulled), its state and its log.

    ``ready``: it answers (a model server) or simply runs (a process with no readiness probe).
    ``process``: what deleting the pod stops (None: nothing of this machine to stop).
    ``limits``: its resource limits as Kubernetes writes them (``{"cpu": "2", "nvidia.com/gpu": "1"}``).
    """

    name: str
    image: str
    state: ContainerState
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    limits: Mapping[str, str] = field(default_factory=dict)
    ready: bool = False
    restart_count: int = 0
    log: LogFile | None = None
    process: ProcessRef | None = None


@dataclass(frozen=True)
class OwnerRef:
    """The object that owns the pod (its controller): a PyTorchJob, an InferenceService, a Workflow…"""

    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class PodView:
    """One pod as a family sees it; ``pods.objects`` turns it into the ``v1`` Pod Kubernetes would show.

    ``uid``: stable for as long as it is the same pod (``pod_uid``): a restart of the owner that Kubernetes
    would make with a new pod gets a new one, so ``kubectl delete``'s wait for the old uid ends.
    """

    name: str
    namespace: str
    uid: str
    created_at: dt.datetime
    containers: tuple[ContainerView, ...]
    owner: OwnerRef | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    started_at: dt.datetime | None = None
    undeletable: str = ""  # why ``delete pod`` cannot stop it ("": it can)
    restart_policy: str = "Never"

    @property
    def phase(self) -> str:
        """Kubernetes' phase from its containers: Running while one runs (or waits to run again: CrashLoopBackOff);
        Succeeded when all exited 0, Failed when all ended and one did not; Pending before any started."""
        states = [container.state for container in self.containers]
        if any(isinstance(state, Running) for state in states):
            return "Running"
        if states and all(isinstance(state, Terminated) for state in states):
            return "Succeeded" if all(state.exit_code == 0 for state in states
                                      if isinstance(state, Terminated)) else "Failed"
        if any(isinstance(state, Waiting) and state.reason == "CrashLoopBackOff" for state in states):
            return "Running"  # it ran, it will run again
        return "Pending"

    def container(self, name: str) -> ContainerView | None:
        return next((container for container in self.containers if container.name == name), None)


def pod_uid(owner_uid: str, name: str, generation: int = 0) -> str:
    """The uid of pod ``name`` of owner ``owner_uid`` in its ``generation``-th incarnation (a job's attempt):
    the same on every read, another once the owner made the pod again."""
    return str(uuid.uuid5(_POD_UIDS, f"{owner_uid}/{name}/{generation}"))


_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' names: no vowels, no 0/1/3 (utilrand)


def name_suffix(seed: str, length: int = 5) -> str:
    """A suffix as Kubernetes appends to generated names (``-x2k9p``), derived from ``seed`` so every read of
    the same pod gives it the same name."""
    number = uuid.uuid5(_POD_UIDS, seed).int
    letters = []
    for _ in range(length):
        number, digit = divmod(number, len(_SUFFIX_ALPHABET))
        letters.append(_SUFFIX_ALPHABET[digit])
    return "".join(letters)


class PodSource(Protocol):
    """What a family gives the Pod kind: its pods of ``namespace`` (every namespace: None), oldest first."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]: ...
