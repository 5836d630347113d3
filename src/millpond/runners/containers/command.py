"""The ``podman run`` (or ``docker run``) words for one process: the sandbox's contract, in the image.

What the host sandbox gives a task, the container gets too: its binds at their targets; its own
folders (workspace, working folder, staged files) at the same paths, so every path the engine
wrote into its command line and environment holds inside; its environment; the host network
(DDP ranks and MPI find each other as on the host; a server with ``ports`` gets the runtime's own network,
those ports published on the loopback); ``--init`` so a signal reaches it; CPU and
memory limits enforced by the runtime; ``/dev/shm`` sized; GPUs the ledger granted as CDI devices.

Environment values never appear on the command line (``ps`` shows it): each variable is named with
``-e NAME`` and its value comes from the runtime's own environment. Variables that describe the
host (PATH, HOME, a virtualenv) are not passed: the image has its own.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from millpond.runners.base import Bind
from millpond.runners.containers.images import parse
from millpond.runners.containers.runtimes import ContainerRuntime

ENGINE_LABEL = "io.millpond.engine"
OWNER_LABEL = "io.millpond.owner"
SIDECAR_LABEL = "io.millpond.sidecar"  # on a sidecar's container: its name
HOME_LABEL = "io.millpond.home"  # the MILLPOND_HOME whose object started it: what one home's clean-up looks for
NAME_PREFIX = "millpond-"
# Variables that describe the host, not the task: the image brings its own.
HOST_ONLY = frozenset({
    "PATH", "HOME", "PWD", "OLDPWD", "SHELL", "USER", "LOGNAME", "TERM", "VIRTUAL_ENV", "PYTHONHOME",
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONSTARTUP", "PS1", "SHLVL", "_", "MAIL", "HOSTNAME",
})


@dataclass(frozen=True)
class ContainerLimits:
    """What the runtime enforces (None: no limit) and the devices it adds."""

    memory_bytes: int | None = None
    cpus: float | None = None
    shm_bytes: int | None = None
    gpus: tuple[str, ...] = ()  # CDI GPU indexes granted by the ledger ("0", "1")


@dataclass
class ContainerRun:
    """One container to start: everything but the runtime's global flags."""

    image: str
    argv: list[str]
    env: dict[str, str] = field(repr=False)
    cwd: Path
    binds: list[Bind]
    same_paths: list[Path] = field(default_factory=list)  # host folders shown at the same path
    args_only: bool = False
    limits: ContainerLimits = field(default_factory=ContainerLimits)
    labels: dict[str, str] = field(default_factory=dict)
    name: str = field(default_factory=lambda: NAME_PREFIX + secrets.token_hex(6))
    detached: bool = False  # started in the background (a sidecar): ``run -d``, its output read with ``logs``
    # (host port, container port): published on the loopback only, the container on the runtime's own network
    # (a server that listens on a fixed port, a notebook image's 8888), not on the host's
    ports: tuple[tuple[int, int], ...] = ()
    groups: tuple[int, ...] = ()  # supplementary groups of its process (``--group-add``: a pod's fsGroup)


# Variables a task is given whatever the host's environment holds (a host that sets them too would hide them).
ALWAYS_PASSED = frozenset({"PYTHONUNBUFFERED", "TMPDIR", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})


def task_env(env: Mapping[str, str], host: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the task itself was given: those not inherited unchanged from the host (and always
    ALWAYS_PASSED and millpond's own ``MILLPOND_*``), less HOST_ONLY."""
    base = os.environ if host is None else host
    return {k: v for k, v in env.items()
            if k not in HOST_ONLY and (base.get(k) != v or k in ALWAYS_PASSED or k.startswith("MILLPOND_"))}


def _binds_words(run: ContainerRun) -> list[str]:
    words: list[str] = []
    targets = set()
    for bind in sorted(run.binds, key=lambda b: len(Path(b.target).parts)):
        target = os.path.normpath(bind.target)
        targets.add(target)
        words += ["-v", f"{bind.source}:{target}" + (":ro" if bind.read_only else "")]
    for folder in _outermost(run.same_paths + [run.cwd]):
        if str(folder) not in targets and folder.exists():
            words += ["-v", f"{folder}:{folder}"]
    return words


def _outermost(folders: Iterable[Path]) -> list[Path]:
    """The folders not inside another of them (binding the outer one shows the inner)."""
    resolved = sorted({Path(os.path.normpath(os.path.abspath(f))) for f in folders}, key=lambda p: len(p.parts))
    kept: list[Path] = []
    for folder in resolved:
        if not any(folder == k or k in folder.parents for k in kept):
            kept.append(folder)
    return kept


def run_argv(runtime: ContainerRuntime, run: ContainerRun) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of the runtime's ``run``: the environment holds the task's variables' values."""
    variables = task_env(run.env)
    if run.limits.gpus:  # CDI devices appear inside as 0..N-1
        variables["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(run.limits.gpus)))
        variables["NVIDIA_VISIBLE_DEVICES"] = "all"
    network = [word for host, inside in run.ports for word in ("-p", f"127.0.0.1:{host}:{inside}")]
    words = ["run", "--rm", "--name", run.name, "--init", *(network or ["--network", "host"]), "--pull", "never",
             "-d" if run.detached else "-i=false"]
    words += runtime.run_flags()
    for group in run.groups:
        words += ["--group-add", str(group)]
    for key, value in sorted(run.labels.items()):
        words += ["--label", f"{key}={value}"]
    if run.limits.memory_bytes:
        words += ["--memory", str(run.limits.memory_bytes), "--memory-swap", str(run.limits.memory_bytes)]
    if run.limits.cpus:
        words += ["--cpus", f"{run.limits.cpus:g}"]
    if run.limits.shm_bytes:
        words += ["--shm-size", str(run.limits.shm_bytes)]
    for gpu in run.limits.gpus:
        words += ["--device", f"nvidia.com/gpu={gpu}"]
    words += _binds_words(run)
    words += ["-w", str(run.cwd)]
    for key in sorted(variables):
        words += ["-e", key]
    if not run.args_only and run.argv:
        # podman reads a JSON list (one word, whatever it holds); docker takes the program as a plain string
        words += ["--entrypoint", json.dumps(run.argv[:1]) if runtime.name == "podman" else run.argv[0]]
        words += [parse(run.image).full, *run.argv[1:]]
    else:
        words += [parse(run.image).full, *run.argv]
    environment = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "XDG_RUNTIME_DIR", "TMPDIR",
                                                                 "CONTAINERS_REGISTRIES_CONF",
                                                                 "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF",
                                                                 "DOCKER_HOST", "DOCKER_CONFIG")}
    environment.update(variables)
    return runtime.argv(*words), environment
