"""One instance as a planner hands it to the supervisor, and the local address and ports instances use.

Its own module so every planner (``launch`` for pytorch, ``launch_mpi``, ``launch_tf``) can
build it without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from millpond.runners.ports import LOCAL_ADDR, free_port, free_ports

__all__ = ["LOCAL_ADDR", "Planned", "free_port", "free_ports"]


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
