"""``millpond server`` hands on the quota of queued workloads whose holder was killed, without a read.

A job supervisor (or a pipeline engine) holding a Kueue workload that is killed with ``kill -9``
runs no ``release``; when its waiting peers are dead too, no cycle runs at all, so the quota it
held would stay counted until someone submits again. Every read of a queue reclaims first
(``cycle.reclaim_dead``), and this thread does the same at start-up and every ``RECLAIM_S``,
as Kueue's controller notices a Workload whose pods are gone, so a waiting workload gets the
quota and ``/metrics`` scraped alone never counts the dead.
"""

from __future__ import annotations

import logging
import threading

from fastapi import FastAPI

from millpond.scheduling.queues.cycle import reclaim_dead
from millpond.settings import Settings

RECLAIM_S = 5.0
log = logging.getLogger(__name__)


def install(app: FastAPI, settings: Settings) -> None:
    """Run the reclaim loop with the application (started and stopped with it)."""
    stopped = threading.Event()

    def loop() -> None:
        while True:
            try:
                found = reclaim_dead(settings)
                if found:
                    log.info("queues: reclaimed the quota of %d workload(s) whose holder is gone", found)
            except Exception:  # one bad pass (the database busy) must not end the loop
                log.exception("queues: reclaiming the quota of dead holders failed")
            if stopped.wait(RECLAIM_S):
                return

    def startup() -> None:
        threading.Thread(target=loop, daemon=True, name="queue-reclaim").start()

    app.router.on_startup.append(startup)
    app.router.on_shutdown.append(stopped.set)
