"""``millpond server`` keeps every Notebook supervised: a supervisor for each that has none.

At start-up and every ``RECONCILE_S`` a thread calls ``notebooks.objects.reconcile``: a supervisor
killed with ``kill -9``, or all of them after the machine restarted, are started again (a stopped
Notebook's supervisor only writes its status). Supervisors are processes of their own: notebooks keep
running while the server restarts, and the server does not stop them when it stops.
"""

from __future__ import annotations

import logging
import threading

from fastapi import FastAPI

from millpond.notebooks import objects
from millpond.settings import Settings

log = logging.getLogger(__name__)
RECONCILE_S = 10.0


def install(app: FastAPI, settings: Settings) -> None:
    """Run the reconcile loop with the application (started and stopped with it)."""
    stopped = threading.Event()

    def loop() -> None:
        while not stopped.is_set():
            try:
                started = objects.reconcile(settings)
                if started:
                    log.info("started the supervisors of Notebooks %s", ", ".join(started))
            except Exception:  # one bad pass (the store busy, a home being removed) must not end the loop
                log.exception("notebooks: starting Notebooks' supervisors failed")
            stopped.wait(RECONCILE_S)

    app.router.on_startup.append(lambda: threading.Thread(target=loop, daemon=True,
                                                          name="notebook-reconcile").start())
    app.router.on_shutdown.append(stopped.set)
