"""What is *used* now, beside what the ledger has *allocated*: CPU and memory of process trees and
of the machine, and GPU memory per process.

A training job's instance and a pipeline task each run in a session of their own (started with
``start_new_session``), so a workload's use is the sum over the processes of its sessions —
mpirun's ranks and a DataLoader's workers included, whatever process groups they make. One pass
over ``/proc`` maps every process to its session, so the cost of a view is one read of each
process's ``stat`` file, however many workloads it shows.

CPU is counted in seconds (user + system of the live members, plus what their reaped children
used: the kernel adds that to the parent's ``cutime``/``cstime``), so a rate over two samples is
the cores in use; Prometheus takes the rate itself from ``*_cpu_seconds_total``. Memory is the
members' resident set (RSS) summed; pages two members share are counted twice, as ``ps`` and
``kubectl top``'s cgroup-less fallback do. The machine's own numbers come from psutil.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from millpond.runners.processes import elsewhere, is_alive

_TICK_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
SAMPLE_S = 0.3  # a one-shot view (arena top) samples CPU over this long


@dataclass(frozen=True)
class ProcessStat:
    """One process, from ``/proc/PID/stat``: its session, CPU seconds (its own and its reaped children's), RSS."""

    pid: int
    session: int
    cpu_seconds: float
    rss_bytes: int


@dataclass(frozen=True)
class Usage:
    """A process tree's (or several trees') use now."""

    cpu_seconds: float = 0.0
    memory_bytes: int = 0
    processes: int = 0
    pids: frozenset[int] = field(default_factory=frozenset)

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_seconds + other.cpu_seconds, self.memory_bytes + other.memory_bytes,
                     self.processes + other.processes, self.pids | other.pids)


def _stat(pid: int) -> ProcessStat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # state ppid pgrp session tty tpgid flags ... (field 3 on)
    try:
        session = int(fields[3])
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
        rss = int(fields[21]) * _PAGE
    except (IndexError, ValueError):
        return None
    if fields[0] in ("Z", "X"):
        rss = 0
    return ProcessStat(pid, session, ticks / _TICK_HZ, rss)


def processes() -> list[ProcessStat]:
    """Every process this machine shows in ``/proc`` (one read each)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                found.append(stat)
    return found


class SessionTable:
    """The machine's processes grouped by session: one ``/proc`` pass answers every workload's use."""

    def __init__(self, table: Iterable[ProcessStat] | None = None) -> None:
        self._sessions: dict[int, list[ProcessStat]] = {}
        for stat in processes() if table is None else table:
            self._sessions.setdefault(stat.session, []).append(stat)

    def of(self, leaders: Iterable[tuple[int | None, str | None]]) -> Usage:
        """The summed use of the sessions led by ``leaders`` (pid, start ticks): a recorded leader that
        is gone, or is another process now (pid reuse), counts for nothing; so does one on another
        machine (a Ray node's ``TICKS@MACHINE``): its pid means nothing in this ``/proc``."""
        total = Usage()
        for pid, ticks in leaders:
            if not pid or elsewhere(ticks) or not is_alive(pid, ticks):
                continue
            members = self._sessions.get(int(pid), [])
            total = total + Usage(sum(m.cpu_seconds for m in members), sum(m.rss_bytes for m in members),
                                  len(members), frozenset(m.pid for m in members))
        return total


@dataclass(frozen=True)
class MachineUsage:
    """The machine now: cores busy (over the sample), memory in use and in all (psutil's ``used``/``total``)."""

    cpu_cores_used: float
    cpu_cores: int
    memory_used: int
    memory_total: int


def busy_cpu_seconds() -> float:
    """CPU seconds the machine spent busy since boot, all CPUs (psutil: everything but idle and iowait)."""
    times = psutil.cpu_times()
    return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))


def machine_usage(sample_s: float = SAMPLE_S) -> MachineUsage:
    """CPU busy over ``sample_s`` (0: since the previous call in this process, psutil's own way) and memory now."""
    percent = psutil.cpu_percent(interval=sample_s or None)
    cores = psutil.cpu_count() or 1
    memory = psutil.virtual_memory()
    return MachineUsage(cpu_cores_used=percent / 100.0 * cores, cpu_cores=cores,
                        memory_used=int(memory.total - memory.available), memory_total=int(memory.total))


@dataclass(frozen=True)
class Measured:
    """One workload over a sample: what its sessions hold at the end, and the cores they used meanwhile."""

    usage: Usage
    cpu_cores: float


def sample(groups: dict[str, list[tuple[int | None, str | None]]],
           sample_s: float = SAMPLE_S) -> tuple[dict[str, Measured], MachineUsage]:
    """Each group's sessions (key: a job, a task) and the machine, measured over ``sample_s`` seconds:
    two passes over ``/proc`` around one wait, the machine's CPU over the same wait."""
    psutil.cpu_percent(interval=None)  # starts psutil's own interval
    started, before = time.monotonic(), SessionTable()
    first = {key: before.of(leaders) for key, leaders in groups.items()}
    if sample_s > 0:
        time.sleep(sample_s)
    after = SessionTable()
    elapsed = max(time.monotonic() - started, 1e-6)
    measured = {}
    for key, leaders in groups.items():
        now = after.of(leaders)
        measured[key] = Measured(now, max(0.0, (now.cpu_seconds - first[key].cpu_seconds) / elapsed))
    return measured, machine_usage(0)
