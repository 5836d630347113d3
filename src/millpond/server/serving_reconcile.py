"""``millpond server`` keeps every InferenceService served: a supervisor for each servable one that has none.

At start-up and every ``lifecycle.RECONCILE_S`` (10 s) a thread calls ``serving.lifecycle.reconcile``:
a supervisor killed with ``kill -9``, one that failed, or all of them after the machine restarted
are started again, as Kubernetes' controllers bring back a Deployment's pods. The supervisors
are processes of their own: they keep serving while the server restarts, and the server does
not stop them when it stops.
"""

from __future__ import annotations

import logging
import threading

from fastapi import FastAPI

from millpond.serving import lifecycle
from millpond.settings import Settings
from millpond.store.resources import ResourceStore

log = logging.getLogger(__name__)


def install(app: FastAPI, settings: Settings) -> None:
    """Run the reconcile loop with the application (started and stopped with it)."""
    stopped = threading.Event()

    def loop() -> None:
        store = ResourceStore(settings)
        while not stopped.is_set():
            try:
                started = lifecycle.reconcile(store)
                if started:
                    log.info("started the supervisors of InferenceServices %s", ", ".join(started))
            except Exception:  # one bad pass (the store busy, a home being removed) must not end the loop
                log.exception("serving: starting InferenceServices' supervisors failed")
            stopped.wait(lifecycle.RECONCILE_S)

    def startup() -> None:
        threading.Thread(target=loop, daemon=True, name="serving-reconcile").start()

    app.router.on_startup.append(startup)
    app.router.on_shutdown.append(stopped.set)
