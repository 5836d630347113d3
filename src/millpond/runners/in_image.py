"""A ProcessSpec with ``in_image`` as a container: its command line, and what is left to do once it ends.

Every runner of this machine's processes (pipeline tasks, training instances, data operations, model
servers) starts a process the same way whether it is a host command or a container's ``run``: this
module turns the spec into the runtime's words, and after the exit removes a container whose client
was stopped by a signal and reads an OOM kill.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from millpond.errors import TaskFailure
from millpond.runners.base import InImage, ProcessSpec, Sidecar
from millpond.runners.containers import sweep
from millpond.runners.containers.command import (
    ENGINE_LABEL,
    HOME_LABEL,
    SIDECAR_LABEL,
    ContainerLimits,
    ContainerRun,
    run_argv,
    task_env,
)
from millpond.runners.guardian import TOKEN_VAR, guardian
from millpond.runners.process_groups import MARK_VAR
from millpond.settings import load_settings

OOM_EXIT = 137


@dataclass(frozen=True)
class Started:
    """The runtime's command line and environment for one container, and the container's name."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    name: str
    # The runtime client's working folder: conmon writes an ``oom`` file into its own working folder when
    # the kernel OOM-kills the container (podman's own OOMKilled stays false with runc on cgroups v1).
    folder: Path
    sidecars: tuple[str, ...] = ()  # the names of the sidecar containers started beside it


def _granted_gpus(env: dict[str, str], fake: bool) -> tuple[str, ...]:
    """The GPUs the ledger granted (the task's own CUDA_VISIBLE_DEVICES), unless they are test-only fakes."""
    if fake:
        return ()
    granted = task_env(env).get("CUDA_VISIBLE_DEVICES", "")
    return tuple(part for part in granted.split(",") if part.strip().isdigit())


def container_command(spec: ProcessSpec, extra_env: dict[str, str] | None = None) -> Started:
    """The container run of ``spec`` (which has ``in_image``); ``extra_env``: the guardian's stamp and marks."""
    image = spec.in_image
    assert image is not None
    env = {**spec.env, **(extra_env or {})}
    settings = load_settings()
    labels = {HOME_LABEL: str(settings.home), **image.labels}
    token = env.get(TOKEN_VAR)
    if token:
        labels[ENGINE_LABEL] = token
        guardian().watch_containers(image.runtime.argv(), f"{ENGINE_LABEL}={token}")
    gpus = _granted_gpus(env, fake=settings.fake_gpus is not None)
    run = ContainerRun(
        image=image.image, argv=list(spec.argv), env=env, cwd=spec.cwd, binds=list(spec.binds),
        # multi-user: not the log's folder (a run's logs, or the home's): the output reaches the log through the client
        same_paths=[p for p in (spec.workspace, *spec.carried, None if settings.multi_user else spec.log_path.parent)
                    if p is not None],
        args_only=image.args_only,
        limits=ContainerLimits(image.memory_bytes, image.cpus, image.shm_bytes, gpus),
        labels=labels, ports=image.ports, groups=image.groups,
    )
    argv, environment = run_argv(image.runtime, run)
    folder = Path(tempfile.mkdtemp(prefix="millpond-conmon-"))
    sidecars: list[str] = []
    try:
        for sidecar in image.sidecars:
            sidecars.append(_start_sidecar(image, sidecar, run, env, labels, folder))
    except BaseException:
        sweep.remove(image.runtime, *sidecars)
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Started(argv, environment, run.name, folder, tuple(sidecars))


def _start_sidecar(image: InImage, sidecar: Sidecar, main: ContainerRun, env: dict[str, str],
                   labels: dict[str, str], folder: Path) -> str:
    """Start one sidecar in the background, in its own image, on the host's network beside the main container."""
    run = ContainerRun(
        image=sidecar.image, argv=list(sidecar.argv),
        env={**{k: v for k, v in env.items() if k in (TOKEN_VAR, MARK_VAR)}, **sidecar.env},
        cwd=main.cwd, binds=main.binds if sidecar.mirror_binds else [], same_paths=[main.cwd],
        args_only=sidecar.args_only, labels={**labels, SIDECAR_LABEL: sidecar.name},
        name=f"{main.name}-{sidecar.name}"[:120], detached=True,
    )
    argv, environment = run_argv(image.runtime, run)
    done = subprocess.run(argv, env=environment, cwd=folder, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise TaskFailure(f"sidecar {sidecar.name!r} did not start in image {sidecar.image}: {said}")
    return run.name


def finish(image: InImage, started: Started, exit_code: int, stopped: bool, log: IO[bytes] | None = None) -> str | None:
    """After the runtime's client exited: remove the container when the client was stopped (``--rm`` did
    otherwise) and its sidecars (their output appended to ``log``); the reason ``OOMKilled`` when the kernel
    killed it for its memory limit."""
    oom = exit_code == OOM_EXIT and (started.folder / "oom").exists()
    shutil.rmtree(started.folder, ignore_errors=True)
    for name in started.sidecars:
        said = subprocess.run(image.runtime.argv("logs", name), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60)
        if log is not None and said.returncode == 0 and (said.stdout or said.stderr):
            log.write(f"[millpond] sidecar {name.rsplit('-', 1)[-1]}:\n".encode() + said.stdout + said.stderr)
    if stopped or exit_code < 0 or started.sidecars:
        sweep.remove(image.runtime, *((started.name,) if stopped or exit_code < 0 else ()), *started.sidecars)
    return "OOMKilled" if oom else None

