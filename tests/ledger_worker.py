"""A process that draws GPUs from the home's ledger, for tests/store/test_ledger.py (run as ``python -m``).

``race ROUNDS FOLDER``: ROUNDS times, acquire 1 or 2 GPUs (waiting until they are free), claim
each index by creating FOLDER/gpu-INDEX exclusively — an index two processes hold at once makes
the second creation fail, and the worker exits 3 — then let go. Prints the acquire latencies.
``hold GPUS``: acquire GPUS, print the grant's indices as JSON, and sleep until killed.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

from millpond.runners.processes import own_identity
from millpond.scheduling import Holder, Ledger, Request


def _holder(name: str) -> Holder:
    pid, ticks = own_identity()
    return Holder(kind="task", name=name, pid=pid, start=ticks)


def race(rounds: int, folder: Path) -> int:
    ledger, holder, latencies = Ledger(), _holder(f"racer-{os.getpid()}"), []
    for _ in range(rounds):
        request = Request(gpus=random.choice((1, 1, 2)), cpu_millis=random.choice((0, 500)))
        while True:
            began = time.perf_counter()
            grant = ledger.try_acquire(request, holder)
            latencies.append(time.perf_counter() - began)
            if grant is not None:
                break
            time.sleep(random.uniform(0, 0.002))
        assert len(grant.gpus) == request.gpus, grant
        claimed = []
        for index in grant.gpus:
            try:
                os.close(os.open(folder / f"gpu-{index}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                print(f"CONFLICT: GPU {index} is held by another process too", flush=True)
                return 3
            claimed.append(index)
        time.sleep(random.uniform(0, 0.003))
        for index in claimed:
            os.unlink(folder / f"gpu-{index}")
        ledger.release(grant.id)
    print(json.dumps(latencies), flush=True)
    return 0


def hold(gpus: int) -> int:
    grant = Ledger().try_acquire(Request(gpus=gpus), _holder(f"holder-{os.getpid()}"))
    print(json.dumps(None if grant is None else list(grant.gpus)), flush=True)
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "race":
        sys.exit(race(int(sys.argv[2]), Path(sys.argv[3])))
    sys.exit(hold(int(sys.argv[2])))
