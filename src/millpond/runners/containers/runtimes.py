"""Which container runtime works on this machine, and the global flags that make it work.

Podman is preferred (daemonless, rootless, in Debian); Docker is used where its daemon answers.
Podman's defaults fail on machines without systemd or with cgroups in hybrid mode (crun refuses
hybrid mode; it asks for more open files than the hard limit allows): the flags below are chosen
from what the machine has rather than by editing ``/etc/containers/containers.conf``, so a fresh
machine with only ``apt-get install podman`` works. A probe runs once per process and is cheap
(``podman version`` / ``docker version``); whether a particular image can run is found when it runs.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
from dataclasses import dataclass

RUNTIMES = ("podman", "docker")
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ContainerRuntime:
    """A container runtime that answered here: its CLI and the words every command of it starts with."""

    name: str  # "podman" or "docker"
    binary: str
    global_flags: tuple[str, ...] = ()
    version: str = ""

    def argv(self, *words: str) -> list[str]:
        """The full command line of one runtime command (``argv("ps", "-q")``)."""
        return [self.binary, *self.global_flags, *words]

    def run_flags(self) -> list[str]:
        """Flags every ``run`` of this runtime needs here: ulimits within the machine's hard limits.

        Podman asks for 1,048,576 open files and processes by default, which fails where the hard
        limit is lower and root cannot raise it; runc also refused an ``nproc`` at the hard limit itself
        on the machines this was built on, while 16,384 (containers.conf's usual value) works.
        """
        flags = []
        for name, limit, most in (("nofile", resource.RLIMIT_NOFILE, 1 << 20), ("nproc", resource.RLIMIT_NPROC, 16384)):
            soft, hard = resource.getrlimit(limit)
            cap = hard if hard != resource.RLIM_INFINITY else soft
            value = most if cap == resource.RLIM_INFINITY or cap <= 0 else min(cap, most)
            flags += ["--ulimit", f"{name}={value}:{value}"]
        return flags


def _podman_flags() -> tuple[str, ...]:
    """runc where it is installed (crun refuses cgroups in hybrid mode), cgroupfs without systemd, file events."""
    flags: list[str] = []
    runc = shutil.which("runc") or shutil.which("runc", path="/usr/sbin:/sbin")  # a user's PATH may lack sbin
    if runc:
        flags += ["--runtime", runc]
    if not os.path.isdir("/run/systemd/system"):
        flags += ["--cgroup-manager", "cgroupfs", "--events-backend", "file"]
    return tuple(flags)


def _answer(argv: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{argv[0]} did not answer: {type(exc).__name__}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return False, (lines[-1] if lines else f"exit status {done.returncode}")[:300]
    return True, done.stdout.strip()


@functools.cache
def probe(name: str) -> ContainerRuntime | str:
    """The runtime ``name`` when it works here, else one line saying why not (cached per process)."""
    binary = shutil.which(name)
    if binary is None:
        hint = "apt-get install -y podman" if name == "podman" else "install Docker and start its daemon"
        return f"{name} is not installed ({hint})"
    if name == "podman":
        flags = _podman_flags()
        ok, said = _answer([binary, *flags, "version", "--format", "{{.Client.Version}}"])
        return ContainerRuntime("podman", binary, flags, said) if ok else f"podman does not work here: {said}"
    ok, said = _answer([binary, "version", "--format", "{{.Server.Version}}"])
    return ContainerRuntime("docker", binary, (), said) if ok else f"docker's daemon does not answer: {said}"


def find(preferred: str | None = None) -> ContainerRuntime | str:
    """The runtime to use: ``preferred`` ("podman"/"docker") only, else the first of RUNTIMES that works.

    Returns one line naming why none works when none does.
    """
    names = (preferred,) if preferred in RUNTIMES else RUNTIMES
    reasons = []
    for name in names:
        found = probe(name)
        if isinstance(found, ContainerRuntime):
            return found
        reasons.append(found)
    return "; ".join(reasons)
