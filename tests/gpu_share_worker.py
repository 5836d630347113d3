"""A process drawing GPU shares and whole GPUs from the home's ledger (``python -m``), for
tests/training/test_gpu_share.py.

``race ROUNDS``: ROUNDS times, acquire a random share (1..9 GiB, maybe cores) or a whole GPU,
waiting until it fits, then check the ledger file under its own write lock (``BEGIN IMMEDIATE``,
the lock every acquire takes): no GPU's shares add up past its memory or 100% of its cores, and
no GPU is both held whole and shared. Exit 3 on a violation. ``hold GIB``: acquire a share of GIB,
print its GPU as JSON, and sleep until killed.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
import time

from millpond.runners.processes import own_identity
from millpond.scheduling import Holder, Ledger, Request
from millpond.scheduling.ledger import GpuShare

GIB = 2**30


def _holder(name: str) -> Holder:
    pid, ticks = own_identity()
    return Holder(kind="task", name=name, pid=pid, start=ticks)


def violations(ledger: Ledger) -> list[str]:
    """What is over-committed in the ledger file now, read under its write lock."""
    db = sqlite3.connect(ledger.path, timeout=30, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        found = []
        totals = dict(zip(ledger.capacity.gpus, ledger.capacity.gpu_memory, strict=True))
        for index, memory, cores in db.execute(
                "SELECT idx, SUM(memory_bytes), SUM(core_percent) FROM gpu_shares GROUP BY idx"):
            if memory > totals[index] or cores > 100:
                found.append(f"GPU {index}: {memory} bytes, {cores}% in shares")
        for (index,) in db.execute("SELECT idx FROM gpus WHERE idx IN (SELECT idx FROM gpu_shares)"):
            found.append(f"GPU {index}: held whole and shared")
        db.execute("ROLLBACK")
        return found
    finally:
        db.close()


def race(rounds: int) -> int:
    ledger, holder = Ledger(), _holder("racer")
    for _ in range(rounds):
        if random.random() < 0.2:
            request = Request(gpus=1)
        else:
            request = Request(shares=(GpuShare(random.randint(1, 9) * GIB, random.choice((0, 0, 30, 60))),))
        while (grant := ledger.try_acquire(request, holder)) is None:
            time.sleep(random.uniform(0, 0.002))
        bad = violations(ledger)
        if bad:
            print("OVERCOMMIT: " + "; ".join(bad), flush=True)
            return 3
        time.sleep(random.uniform(0, 0.003))
        ledger.release(grant.id)
    return 0


def hold(gib: int) -> int:
    grant = Ledger().try_acquire(Request(shares=(GpuShare(gib * GIB),)), _holder("share-holder"))
    print(json.dumps(None if grant is None else list(grant.share_gpus)), flush=True)
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(race(int(sys.argv[2])) if sys.argv[1] == "race" else hold(int(sys.argv[2])))
