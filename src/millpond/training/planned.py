"""One instance as a planner hands it to the supervisor, and the local address and ports instances use.

Its own module so every planner (``launch`` for pytorch, ``launch_mpi``, ``launch_tf``) can
build it without importing the others.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

LOCAL_ADDR = "127.0.0.1"


@dataclass(frozen=True)
class Planned:
    """One instance to start: its name, role, index, rank, argv, own variables and GPUs.

    ``started_by`` names the instance whose process runs this one (an MPI worker is the ranks
    mpirun starts, not a process of its own): the supervisor starts only instances without it,
    and such an instance's status follows its starter's. ``rank_logs`` (a launcher) names, per
    MPI rank, the instance whose log gets that rank's output; ``files`` are written before start.
    """

    name: str
    role: str
    index: int
    rank: int
    argv: tuple[str, ...]
    env: dict[str, str]
    gpus: tuple[int, ...]
    started_by: str = ""
    rank_logs: tuple[str, ...] = ()
    files: tuple[tuple[Path, str], ...] = ()


def free_port() -> int:
    """A TCP port free on the loopback now (the master binds it a moment later, as on a cluster)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOCAL_ADDR, 0))
        return int(probe.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (each asked for while the others are still held)."""
    probes = []
    try:
        for _ in range(count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probes.append(probe)
            probe.bind((LOCAL_ADDR, 0))
        return [int(probe.getsockname()[1]) for probe in probes]
    finally:
        for probe in probes:
            probe.close()
