"""The contract between the engine and whatever starts a task's process.

The engine describes one process (argv, environment, folder, log, mounts) and waits for
its exit code; a runner decides how it starts — a plain fork/exec today, a warm pool or a
Ray worker later — without the engine changing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol

from millpond.runners.containers.runtimes import ContainerRuntime


@dataclass(frozen=True)
class Bind:
    """Show ``source`` at ``target`` inside the task's private mount namespace."""

    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DatasetBind:
    """Show the dataset ``name`` (its folder ``sub_path``) at ``target``: mounted where the process runs.

    A runner on another machine (a Ray node) cannot carry the engine's mount of a dataset: it mounts
    the dataset there, through that machine's own cache, with the ProcessSpec's ``mounter``.
    """

    name: str
    namespace: str
    target: str
    read_only: bool
    sub_path: str = ""


# How a runner on another machine mounts a process's datasets there: (datasets, user) -> the
# binds that show them, and how to let go of them. Given by the layer that knows datasets.
Mounter = Callable[[list[DatasetBind], str], tuple[list[Bind], Callable[[], None]]]


@dataclass(frozen=True)
class Demand:
    """What the process asked for (its task's requests), for a runner that places it on another machine."""

    cpus: float = 0.0
    memory_bytes: int = 0
    gpus: int = 0
    accelerator: str | None = None  # "nvidia.com/gpu", or a kind such as "NVIDIA_TESLA_T4"
    prefer_node: str | None = None  # a node holding the task's datasets' cache (datasets.placement): soft affinity


@dataclass(frozen=True)
class Packages:
    """A component's ``packages_to_install`` and the index options it gave pip (``pip_index_urls``)."""

    requirements: tuple[str, ...]
    index_options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sidecar:
    """A container started beside the main one and removed when it ends (an Argo step's sidecar), in its image.

    ``argv`` is its command and args (``args_only``: args alone, run by the image's entrypoint); ``env`` its own
    variables; ``binds``: the main container's mounts, when it mirrors them (``mirrorVolumeMounts``).
    """

    name: str
    image: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    args_only: bool = False
    mirror_binds: bool = False


@dataclass(frozen=True)
class InImage:
    """Run the process in ``image`` with ``runtime`` (``containers.policy.decide`` chose it), not on the host.

    ``args_only``: argv is the container's ``args`` (the image's entrypoint runs them). The limits are
    enforced by the runtime (an OOM kill is reported as ``OOMKilled``); ``labels`` name the owner.
    """

    runtime: ContainerRuntime
    image: str
    args_only: bool = False
    memory_bytes: int | None = None
    cpus: float | None = None
    shm_bytes: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    sidecars: tuple[Sidecar, ...] = ()  # started before the process, each in its own image, removed after it
    # (host port, container port) published on the loopback, on the runtime's own network instead of the host's
    ports: tuple[tuple[int, int], ...] = ()
    groups: tuple[int, ...] = ()  # supplementary groups of its process (a pod's fsGroup)


@dataclass
class ProcessSpec:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_path: Path
    binds: list[Bind] = field(default_factory=list)
    timeout_s: float | None = None
    # told the pid once the process runs (None when it runs on another machine: a Ray node)
    on_start: Callable[[int | None], None] | None = None
    # kfp's standard executor program (component source, executor arguments), when that is
    # all the task runs with millpond's own interpreter: a runner may run it from a warm process.
    python_task: tuple[str, list[str]] | None = None
    demand: Demand = field(default_factory=Demand)
    # The folder that holds every path of this machine the process uses (its cwd, its mounts'
    # sources, its staged files): a runner on another machine carries it there and back.
    workspace: Path | None = None
    # Remote objects (URI, path in the workspace) the process reads, left for the runner to fetch
    # where the process runs (only for a runner that says ``fetches_inputs``; others find them staged).
    fetch: list[tuple[str, Path]] = field(default_factory=list)
    # Datasets the process sees, mounted where it runs (only for a runner on another machine: the
    # engine's own runs get them as ``binds`` of the engine's mounts); ``mounter`` mounts them there.
    datasets: list[DatasetBind] = field(default_factory=list)
    mounter: Mounter | None = None
    # Folders of this machine outside ``workspace`` that the process needs a private copy of (its
    # secret and config-map files, its empty dirs): a runner on another machine takes them there
    # and brings nothing of them back.
    carried: list[Path] = field(default_factory=list)
    # packages_to_install, left for a runner that ``installs_packages`` to put in a venv where the
    # process runs (others find the launcher's venv first on PATH already).
    packages: Packages | None = None
    # The image it runs in (a container runtime), when the runtime policy chose the image over the host.
    in_image: InImage | None = None
    # Multi-user mode: folders beyond the home it must not see (its run's local pipeline root, shared by
    # every run: its own inputs and outputs are its binds), covered in its sandbox (runners.isolation).
    hidden: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class ProcessResult:
    exit_code: int
    seconds: float
    error: str | None = None  # why it could not start or was stopped, when not the program's own exit
    reason: str | None = None  # Kubernetes' word for how it ended, when it says more than the code (OOMKilled)


class Runner(Protocol):
    def run(self, spec: ProcessSpec, cancel: threading.Event) -> ProcessResult:
        """Run the process to its end (or until ``cancel`` is set), appending its output to the log."""
        ...

    def close(self) -> None:
        """Release what the runner holds (warm processes); called when the run ends."""
        ...
