"""A ProcessSpec with ``in_image`` as a container: its command line, and what is left to do once it ends.

Every runner of this machine's processes (pipeline tasks, training instances, data operations, model
servers) starts a process the same way whether it is a host command or a container's ``run``: this
module turns the spec into the runtime's words, and after the exit removes a container whose client
was stopped by a signal and reads an OOM kill.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from millpond.runners.base import InImage, ProcessSpec
from millpond.runners.containers import sweep
from millpond.runners.containers.command import ENGINE_LABEL, ContainerLimits, ContainerRun, run_argv, task_env
from millpond.runners.guardian import TOKEN_VAR, guardian

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


def _granted_gpus(env: dict[str, str]) -> tuple[str, ...]:
    """The GPUs the ledger granted (the task's own CUDA_VISIBLE_DEVICES), unless they are test-only fakes."""
    if os.environ.get("MILLPOND_FAKE_GPUS") or os.environ.get("MILLPOND_GPUS"):
        return ()
    granted = task_env(env).get("CUDA_VISIBLE_DEVICES", "")
    return tuple(part for part in granted.split(",") if part.strip().isdigit())


def container_command(spec: ProcessSpec, extra_env: dict[str, str] | None = None) -> Started:
    """The container run of ``spec`` (which has ``in_image``); ``extra_env``: the guardian's stamp and marks."""
    image = spec.in_image
    assert image is not None
    env = {**spec.env, **(extra_env or {})}
    labels = dict(image.labels)
    token = env.get(TOKEN_VAR)
    if token:
        labels[ENGINE_LABEL] = token
        guardian().watch_containers(image.runtime.argv(), f"{ENGINE_LABEL}={token}")
    gpus = _granted_gpus(env)
    run = ContainerRun(
        image=image.image, argv=list(spec.argv), env=env, cwd=spec.cwd, binds=list(spec.binds),
        same_paths=[p for p in (spec.workspace, *spec.carried, spec.log_path.parent) if p is not None],
        args_only=image.args_only,
        limits=ContainerLimits(image.memory_bytes, image.cpus, image.shm_bytes, gpus),
        labels=labels,
    )
    argv, environment = run_argv(image.runtime, run)
    return Started(argv, environment, run.name, Path(tempfile.mkdtemp(prefix="millpond-conmon-")))


def finish(image: InImage, started: Started, exit_code: int, stopped: bool) -> str | None:
    """After the runtime's client exited: remove the container when the client was stopped (``--rm`` did
    otherwise); the reason ``OOMKilled`` when the kernel killed it for its memory limit."""
    oom = exit_code == OOM_EXIT and (started.folder / "oom").exists()
    shutil.rmtree(started.folder, ignore_errors=True)
    if stopped or exit_code < 0:
        sweep.remove(image.runtime, started.name)
    return "OOMKilled" if oom else None

