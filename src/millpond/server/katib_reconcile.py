"""``millpond server`` keeps every unfinished Katib Experiment supervised: a supervisor for each that has none.

At start-up and every ``RECONCILE_S`` a thread calls ``katib.objects.reconcile``: a supervisor killed with
``kill -9``, or all of them after the machine restarted, are started again, and each resumes from the store
(its Suggestion's recorded suggestions, its Trials and their jobs). Supervisors are processes of their own:
experiments keep running while the server restarts.
"""

from __future__ import annotations

import logging
import threading

from fastapi import FastAPI

from millpond.katib import objects
from millpond.settings import Settings

log = logging.getLogger(__name__)
RECONCILE_S = 5.0


def install(app: FastAPI, settings: Settings) -> None:
    """Run the reconcile loop with the application (started and stopped with it)."""
    stopped = threading.Event()

    def loop() -> None:
        while not stopped.is_set():
            try:
                started = objects.reconcile(settings)
                if started:
                    log.info("started the supervisors of Experiments %s", ", ".join(started))
            except Exception:  # one bad pass (the store busy, a home being removed) must not end the loop
                log.exception("katib: reconciling Experiments failed")
            stopped.wait(RECONCILE_S)

    app.router.on_startup.append(lambda: threading.Thread(target=loop, daemon=True,
                                                          name="katib-reconcile").start())
    app.router.on_shutdown.append(stopped.set)
