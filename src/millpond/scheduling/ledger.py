"""One machine-wide ledger of the CPU, memory and GPUs handed out, shared by every millpond
process of a home: pipeline tasks and training jobs draw from it, so two runs and a job never
hand out the same GPU index.

Why a SQLite file in the home, and not the metadata database: what is handed out belongs to
this machine (pids, GPU indices), while the metadata may live in a shared PostgreSQL
(``MILLPOND_DATABASE_URL``) that other machines also use. A local SQLite file gives what the
ledger needs across processes: ``BEGIN IMMEDIATE`` makes each acquire one atomic
read-check-write (other writers wait on SQLite's file lock), and a process killed with kill -9
mid-write leaves no half-written ledger (the journal is rolled back by the next one to open it,
and the OS drops a dead process's locks). A JSON file under ``flock`` would need its own atomic
rename dance for the same. The ``gpus`` table's primary key is a second guard: one index can
belong to one grant only, whatever the code above it does.

A grant names its holder by pid and start time (``runners.processes``). Whoever acquires first
reclaims the grants of holders that are gone — killed, crashed, or from before a reboot — so
kill -9 never leaks a GPU for longer than it takes the next request to arrive.

GPU sharing (``--gpumemory``/``--gpucore``, ``scheduling.sharing``): a grant's shares are rows
of ``gpu_shares`` (the GPU index, the bytes and the percent of cores each holds). The table was
added after ledgers existed: ``CREATE TABLE IF NOT EXISTS`` in the same write transaction adds it
to an older ``ledger.db`` on its first use, leaving its grants as they were (no column of the
older tables changed). A GPU index in ``gpus`` (held whole) never gets a share, and one with a
share is never granted whole: both checked here, under the lock.

Kubernetes' ResourceQuota (``scheduling.resource_quota``): a holder that names its ``namespace`` is charged
against that namespace's ResourceQuotas in the same transaction that grants it, so a quota is never passed
whichever processes ask at once; ``grant_quota`` (added the same way as ``gpu_shares``) records each grant's
namespace and pods. The limits are read from the metadata database before the transaction and kept for
``QUOTA_TTL_S`` (a task's launch stays off the database; a quota applied meanwhile counts within a second).
Simplification: the ledger is the machine's, so on a Ray cluster a quota holds per machine.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from millpond.errors import UnavailableError
from millpond.runners.processes import ProcessIdentity
from millpond.scheduling import machine, resource_quota, sharing
from millpond.scheduling.resource_quota import Charge, QuotaLimits
from millpond.scheduling.sharing import GpuShare, GpuState
from millpond.settings import Settings, load_settings
from millpond.store.sqlite_wal import configure

LEDGER_FILE = "ledger.db"
# The id of the grant an engine holds for a task, in the task's environment: a task that only waits for
# work it hands on (a training job) gives it back, so the two never wait for each other (training.pipeline_step).
GRANT_ENV = "MILLPOND_LEDGER_GRANT"
QUOTA_TTL_S = 1.0  # how long a ledger object keeps a namespace's ResourceQuotas read
_BUSY_TIMEOUT_S = 30.0  # a writer holds the lock for about a millisecond; 30 s means something is wrong
_SCHEMA = """
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    pid INTEGER NOT NULL,
    start TEXT,
    boot TEXT NOT NULL,
    cpu_millis INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    gpus_requested INTEGER NOT NULL,
    granted_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS gpus (
    idx INTEGER PRIMARY KEY,
    grant_id TEXT NOT NULL REFERENCES grants(id)
);
CREATE TABLE IF NOT EXISTS gpu_shares (
    grant_id TEXT NOT NULL REFERENCES grants(id),
    seq INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    memory_bytes INTEGER NOT NULL,
    core_percent INTEGER NOT NULL,
    PRIMARY KEY (grant_id, seq)
);
CREATE TABLE IF NOT EXISTS grant_quota (
    grant_id TEXT PRIMARY KEY REFERENCES grants(id),
    namespace TEXT NOT NULL,
    pods INTEGER NOT NULL
);
"""
__all__ = ["GRANT_ENV", "GpuShare", "Grant", "GrantRecord", "Holder", "Ledger", "Request"]


@dataclass(frozen=True)
class Request:
    """What a task or a job instance asks for, as the Kubernetes scheduler counts it."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    gpus: int = 0  # whole GPUs
    shares: tuple[GpuShare, ...] = ()  # parts of one GPU each (--gpumemory/--gpucore), never with whole ones


@dataclass(frozen=True)
class Holder:
    """Who holds a grant: a ``job`` or a ``task``, and the process whose death releases it."""

    kind: str
    name: str
    pid: int
    start: str | None  # the process's start ticks; None: read now from /proc
    namespace: str = ""  # charged against this namespace's ResourceQuotas ("": none)
    pods: int = 1  # the pods the grant stands for (a job's instances), counted under ``pods``

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(self.pid, self.start) if self.start is not None else ProcessIdentity.of(self.pid)


@dataclass(frozen=True)
class Grant:
    id: str
    gpus: tuple[int, ...]
    share_gpus: tuple[int, ...] = ()  # the GPU of each of the request's shares, in its order


@dataclass(frozen=True)
class GrantRecord:
    """One grant as the ledger holds it (``arena top node``, ``millpond ps``)."""

    id: str
    holder: Holder
    request: Request
    gpus: tuple[int, ...]
    granted_at: str
    share_gpus: tuple[int, ...] = ()  # the GPU of each of ``request.shares``

    @property
    def charge(self) -> Charge:
        """What it counts against its namespace's ResourceQuotas."""
        return charge_of(self.request, self.holder.pods)

    @property
    def summary(self) -> str:
        """What it holds, in words: ``GPU 0, 2 CPUs, 4.0 GiB``."""
        parts = []
        if self.gpus:
            parts.append(f"GPU{'s' if len(self.gpus) > 1 else ''} {','.join(map(str, self.gpus))}")
        elif self.request.gpus:
            parts.append(f"no GPU ({self.request.gpus} asked: gpu-fallback cpu)")
        counted: dict[tuple[int, GpuShare], int] = {}
        for placed in zip(self.share_gpus, self.request.shares, strict=False):
            counted[placed] = counted.get(placed, 0) + 1
        for (index, share), count in counted.items():
            parts.append(f"GPU {index} share{'s' if count > 1 else ''} ({f'{count} x ' if count > 1 else ''}"
                         f"{share.words})")
        if self.request.shares and not self.share_gpus:
            parts.append("no GPU (a share asked: gpu-fallback cpu)")
        if self.request.cpu_millis:
            parts.append(f"{self.request.cpu_millis / 1000:g} CPU{'' if self.request.cpu_millis == 1000 else 's'}")
        if self.request.memory_bytes:
            parts.append(f"{self.request.memory_bytes / 2**30:.1f} GiB")
        return ", ".join(parts) or "nothing"


def charge_of(request: Request, pods: int = 1) -> Charge:
    """What ``request`` counts against a ResourceQuota (GPUs as asked, even when they fall back to CPU)."""
    return Charge(request.cpu_millis, request.memory_bytes, request.gpus,
                  sum(share.memory_bytes for share in request.shares), pods)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class Ledger:
    """The machine's resources, and who holds which, for every millpond process of a home."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self.path = self.settings.home / LEDGER_FILE
        self._capacity: machine.Capacity | None = None
        self._boot = _boot_id()
        self._quotas: dict[str, tuple[float, list[QuotaLimits]]] = {}  # namespace -> (read at, its quotas)

    # --- what the machine has ---------------------------------------------------------------
    @property
    def capacity(self) -> machine.Capacity:
        """Counted once per ledger object (the GPU count may ask nvidia-smi)."""
        if self._capacity is None:
            self._capacity = machine.capacity(self.settings.fake_gpus, self.settings.fake_gpu_memory)
        return self._capacity

    def falls_back(self, request: Request) -> bool:
        """True when ``request`` asks for more GPUs than the machine has and gpu-fallback is cpu:
        it then runs on CPU (with no GPU) instead of being refused."""
        if self.settings.gpu_fallback != "cpu":
            return False
        have = len(self.capacity.gpus)
        return (request.gpus > 0 and request.gpus > have) or (bool(request.shares) and not have)

    def fallback_warning(self, request: Request) -> str | None:
        """The warning to show when ``request`` runs on CPU instead of its GPUs, or None."""
        if not self.falls_back(request):
            return None
        have = len(self.capacity.gpus)
        asked = _plural(request.gpus, "GPU") if request.gpus else "a share of a GPU"
        return (
            f"requests {asked} but this machine has {have or 'none'}: "
            "running on CPU instead (gpu-fallback is cpu)"
        )

    def impossible(self, request: Request, gpu_name: str | None = None) -> str | None:
        """Why ``request`` can never be met on this machine, in one line, or None.

        ``gpu_name`` names the GPUs in the message (``nvidia.com/gpu``); default "GPU(s)".
        """
        cap = self.capacity
        if request.gpus > len(cap.gpus) and not self.falls_back(request):
            have = f"only {len(cap.gpus)}" if cap.gpus else "none"
            asked = f"{request.gpus} {gpu_name}" if gpu_name else _plural(request.gpus, "GPU")
            hint = "" if cap.gpus else " (millpond config set gpu-fallback cpu runs GPU requests on CPU)"
            return f"requests {asked} but this machine has {have}{hint}"
        if request.cpu_millis > cap.cpu_millis:
            return f"requests {request.cpu_millis / 1000:g} CPUs but this machine has {cap.cpu_millis / 1000:g}"
        if request.memory_bytes > cap.memory_bytes:
            return (
                f"requests {request.memory_bytes / 2**30:.1f} GiB of memory "
                f"but this machine has {cap.memory_bytes / 2**30:.1f} GiB"
            )
        if request.shares and not self.falls_back(request):
            return self._shares_impossible(request)
        return None

    def _shares_impossible(self, request: Request) -> str | None:
        """Why ``request``'s shares never fit this machine's GPUs, even all free, or None."""
        cap = self.capacity
        if not cap.gpus:
            return ("requests a share of a GPU but this machine has none "
                    "(millpond config set gpu-fallback cpu runs GPU requests on CPU)")
        largest = max(cap.gpu_memory, default=0)
        if not largest:
            if self.settings.fake_gpus is not None:
                return ("requests a share of a GPU's memory but MILLPOND_FAKE_GPUS declares GPUs without memory "
                        "(give N x SIZE, like 1x16Gi; a test-only setting)")
            return "requests a share of a GPU's memory but nvidia-smi reports no GPU memory on this machine"
        biggest = max(request.shares, key=lambda share: share.memory_bytes)
        if biggest.memory_bytes > largest:
            return (f"requests {biggest.memory_bytes / 2**30:.1f} GiB of one GPU's memory "
                    f"but the largest GPU here has {largest / 2**30:.1f} GiB")
        empty = sharing.states(cap.gpus, cap.gpu_memory, {}, ())
        whole = {gpu.index: "this request" for gpu in empty[:request.gpus]}
        if sharing.place(request.shares, sharing.states(cap.gpus, cap.gpu_memory, whole, ())) is None:
            together = f" and {_plural(request.gpus, 'whole GPU')}" if request.gpus else ""
            return (f"requests {len(request.shares)} GPU shares of {biggest.words}{together}, "
                    "more than this machine's GPUs hold together")
        return None

    # --- handing out --------------------------------------------------------------------------
    def try_acquire(self, request: Request, holder: Holder) -> Grant | None:
        """Reserve ``request`` for ``holder`` if it fits what is free now; None when it does not.

        Atomic across processes. Grants of holders that are gone are reclaimed first.
        """
        falls_back = self.falls_back(request)
        gpus_wanted = 0 if falls_back else request.gpus
        shares = () if falls_back else request.shares
        start = holder.identity.start
        quotas = self.quotas(holder.namespace)
        with self._transaction() as db:
            held = self._live(db)
            if quotas and self._over_quota(quotas, held, holder.namespace, charge_of(request, holder.pods)):
                return None
            free_gpus = self._free_gpus(held)
            cpu_free, memory_free = self._free_cpu_memory(held)
            if (
                gpus_wanted > len(free_gpus)
                or request.cpu_millis > cpu_free
                or request.memory_bytes > memory_free
            ):
                return None
            whole = tuple(free_gpus[:gpus_wanted])
            share_gpus: tuple[int, ...] = ()
            if shares:
                taken = {index: f"{holder.kind} {holder.name}" for index in whole}
                placed = sharing.place(shares, self._gpu_states(held, taken))
                if placed is None:
                    return None
                share_gpus = placed
            grant = Grant(id=uuid.uuid4().hex, gpus=whole, share_gpus=share_gpus)
            db.execute(
                "INSERT INTO grants VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    grant.id, holder.kind, holder.name, holder.pid, start, self._boot,
                    request.cpu_millis, request.memory_bytes, request.gpus,
                    datetime.now(timezone.utc).isoformat(),
                ),
            )
            db.executemany("INSERT INTO gpus VALUES (?, ?)", [(index, grant.id) for index in grant.gpus])
            if holder.namespace:
                db.execute("INSERT INTO grant_quota VALUES (?, ?, ?)", (grant.id, holder.namespace, holder.pods))
            db.executemany(
                "INSERT INTO gpu_shares VALUES (?, ?, ?, ?, ?)",
                [(grant.id, seq, index, share.memory_bytes, share.core_percent)
                 for seq, (index, share) in enumerate(zip(grant.share_gpus, shares, strict=True))],
            )
            return grant

    def release(self, grant_id: str) -> None:
        """Give a grant back (releasing one already gone is no error)."""
        with self._transaction() as db:
            self._delete(db, [grant_id])

    def quotas(self, namespace: str) -> list[QuotaLimits]:
        """The ResourceQuotas a holder of ``namespace`` is charged against (none without a namespace)."""
        if not namespace:
            return []
        now = time.monotonic()
        kept = self._quotas.get(namespace)
        if kept is None or now - kept[0] > QUOTA_TTL_S:
            kept = self._quotas[namespace] = (now, resource_quota.namespace_quotas(self.settings, namespace))
        return kept[1]

    @staticmethod
    def _over_quota(quotas: list[QuotaLimits], held: list[GrantRecord], namespace: str, charge: Charge) -> str | None:
        used = resource_quota.total(g.charge for g in held if g.holder.namespace == namespace)
        return resource_quota.exceeded(quotas, used, charge)

    def namespace_usage(self, namespace: str) -> dict[str, int]:
        """What the live grants of ``namespace`` count under every quota key (a ResourceQuota's ``status.used``)."""
        with self._transaction() as db:
            held = self._live(db)
        return resource_quota.total(g.charge for g in held if g.holder.namespace == namespace)

    def never_within_quota(self, request: Request, namespace: str, pods: int = 1) -> str | None:
        """The ``exceeded quota`` line (with what is used now) when ``request`` alone passes a hard limit of
        ``namespace``'s ResourceQuotas, so that no release could ever make room; None otherwise."""
        if resource_quota.never_fits(self.quotas(namespace), charge_of(request, pods)) is None:
            return None
        return self.quota_refusal(request, namespace, pods)

    def quota_refusal(self, request: Request, namespace: str, pods: int = 1) -> str | None:
        """kube-apiserver's ``exceeded quota`` line when ``request`` of ``namespace`` would pass a ResourceQuota
        now; None when it fits them (or the namespace has none)."""
        quotas = self.quotas(namespace)
        if not quotas:
            return None
        with self._transaction() as db:
            held = self._live(db)
        return self._over_quota(quotas, held, namespace, charge_of(request, pods))

    def why_waiting(self, request: Request, namespace: str = "", pods: int = 1) -> str:
        """What ``request`` waits for, in one line: ``needs 2 GPUs, 0 free (held by job x, task y)``; a request of
        ``namespace`` that would pass its ResourceQuota: kube-apiserver's ``exceeded quota: …`` line."""
        refused = self.quota_refusal(request, namespace, pods)
        if refused:
            return refused
        with self._transaction() as db:
            held = self._live(db)
        gpus_wanted = 0 if self.falls_back(request) else request.gpus
        free_gpus = self._free_gpus(held)
        cpu_free, memory_free = self._free_cpu_memory(held)
        reasons = []
        if gpus_wanted > len(free_gpus):
            holders = _names(g for g in held if g.gpus)
            reasons.append(f"needs {_plural(gpus_wanted, 'GPU')}, {len(free_gpus)} free{holders}")
        if request.cpu_millis > cpu_free:
            holders = _names(g for g in held if g.request.cpu_millis)
            reasons.append(f"needs {request.cpu_millis / 1000:g} CPUs, {max(0, cpu_free) / 1000:g} free{holders}")
        if request.memory_bytes > memory_free:
            holders = _names(g for g in held if g.request.memory_bytes)
            reasons.append(
                f"needs {request.memory_bytes / 2**30:.1f} GiB of memory, "
                f"{max(0, memory_free) / 2**30:.1f} GiB free{holders}"
            )
        if request.shares and not self.falls_back(request):
            gpus = self._gpu_states(held, {})
            if sharing.place(request.shares, gpus) is None:
                count = f"{len(request.shares)} shares" if len(request.shares) > 1 else "a share"
                biggest = max(request.shares, key=lambda share: share.memory_bytes)
                reasons.append(f"needs {count} of {biggest.words} of one GPU; "
                               + "; ".join(gpu.words for gpu in gpus))
        return "; ".join(reasons) or "nothing: it fits now"

    def gpu_states(self) -> list[GpuState]:
        """Every GPU now: held whole, or the memory and cores its shares hold (``arena top node``)."""
        with self._transaction() as db:
            return self._gpu_states(self._live(db), {})

    def grants(self) -> list[GrantRecord]:
        """Every grant of a live holder, oldest first."""
        with self._transaction() as db:
            return self._live(db)

    # --- the file -----------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the ledger file: committed on success, rolled back on error."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise UnavailableError(f"the resource ledger {self.path} cannot be opened: {exc}") from exc
        try:
            try:
                configure(db, _BUSY_TIMEOUT_S)  # WAL: readers never wait; a power cut may lose the last grants
                db.execute("BEGIN IMMEDIATE")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
            except sqlite3.Error as exc:
                raise UnavailableError(
                    f"the resource ledger {self.path} cannot be used: {exc} "
                    "(if it is damaged, remove it while no millpond process runs)"
                ) from exc
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise UnavailableError(f"the resource ledger {self.path} cannot be written: {exc}") from exc
        finally:
            db.close()

    def _live(self, db: sqlite3.Connection) -> list[GrantRecord]:
        """The grants whose holders still run; the others are deleted (reclaimed) here."""
        rows = db.execute(
            "SELECT id, kind, name, pid, start, boot, cpu_millis, memory_bytes, gpus_requested, granted_at "
            "FROM grants ORDER BY granted_at, id"
        ).fetchall()
        indices: dict[str, list[int]] = {}
        for index, grant_id in db.execute("SELECT idx, grant_id FROM gpus ORDER BY idx"):
            indices.setdefault(grant_id, []).append(index)
        charged = {grant_id: (namespace, pods) for grant_id, namespace, pods in
                   db.execute("SELECT grant_id, namespace, pods FROM grant_quota")}
        shared: dict[str, list[tuple[int, GpuShare]]] = {}
        for grant_id, index, memory_bytes, core_percent in db.execute(
            "SELECT grant_id, idx, memory_bytes, core_percent FROM gpu_shares ORDER BY grant_id, seq"
        ):
            shared.setdefault(grant_id, []).append((index, GpuShare(memory_bytes, core_percent)))
        live, gone = [], []
        for grant_id, kind, name, pid, start, boot, cpu, memory, gpus, granted_at in rows:
            namespace, pods = charged.get(grant_id, ("", 1))
            if boot != self._boot or not ProcessIdentity(pid, start).is_running():
                gone.append(grant_id)
                continue
            shares = shared.get(grant_id, [])
            live.append(
                GrantRecord(
                    id=grant_id,
                    holder=Holder(kind=kind, name=name, pid=pid, start=start, namespace=namespace, pods=pods),
                    request=Request(cpu_millis=cpu, memory_bytes=memory, gpus=gpus,
                                    shares=tuple(share for _, share in shares)),
                    gpus=tuple(indices.get(grant_id, ())),
                    granted_at=granted_at,
                    share_gpus=tuple(index for index, _ in shares),
                )
            )
        orphans = (set(indices) | set(shared) | set(charged)) - {g.id for g in live} - set(gone)
        self._delete(db, [*gone, *orphans])
        return live

    @staticmethod
    def _delete(db: sqlite3.Connection, grant_ids: list[str]) -> None:
        if grant_ids:
            db.executemany("DELETE FROM gpus WHERE grant_id = ?", [(g,) for g in grant_ids])
            db.executemany("DELETE FROM gpu_shares WHERE grant_id = ?", [(g,) for g in grant_ids])
            db.executemany("DELETE FROM grant_quota WHERE grant_id = ?", [(g,) for g in grant_ids])
            db.executemany("DELETE FROM grants WHERE id = ?", [(g,) for g in grant_ids])

    def _free_gpus(self, held: list[GrantRecord]) -> list[int]:
        """GPUs free to be granted whole: neither held whole nor holding a share."""
        taken = {index for grant in held for index in (*grant.gpus, *grant.share_gpus)}
        return [index for index in self.capacity.gpus if index not in taken]

    def _gpu_states(self, held: list[GrantRecord], taken: dict[int, str]) -> list[GpuState]:
        """Each GPU's shares and whole holder; ``taken``: GPUs the request itself takes whole."""
        whole = {index: f"{g.holder.kind} {g.holder.name}" for g in held for index in g.gpus}
        shares = [(index, share, f"{g.holder.kind} {g.holder.name}")
                  for g in held for index, share in zip(g.share_gpus, g.request.shares, strict=False)]
        cap = self.capacity
        return sharing.states(cap.gpus, cap.gpu_memory, {**whole, **taken}, shares)

    def _free_cpu_memory(self, held: list[GrantRecord]) -> tuple[int, int]:
        cpu = self.capacity.cpu_millis - sum(g.request.cpu_millis for g in held)
        memory = self.capacity.memory_bytes - sum(g.request.memory_bytes for g in held)
        return cpu, memory


def _names(grants: Iterator[GrantRecord] | list[GrantRecord]) -> str:
    """`` (held by job x, task y)``: who holds what a request waits for, five at most."""
    names = list(dict.fromkeys(f"{g.holder.kind} {g.holder.name}" for g in grants))
    if not names:
        return ""
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f" (held by {', '.join(names[:5])}{more})"
