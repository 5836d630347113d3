"""``millpond server`` keeps every Notebook supervised: a supervisor for each that has none.

At start-up and every ``RECONCILE_S`` a thread calls ``notebooks.objects.reconcile``: a supervisor
killed with ``kill -9``, or all of them after the machine restarted, are started again (a stopped
Notebook's supervisor only writes its status). Supervisors are processes of their own: notebooks keep
running while the server restarts, and the server does not stop them when it stops.

The same loop runs the culler (``notebooks.culler``) every ``IDLENESS_CHECK_PERIOD``: each Notebook's
``last-activity`` annotation kept, and an idle one stopped when ``ENABLE_CULLING`` is ``true`` (settings
read from the environment once, when the application is made: ``millpond server``'s options set it).

Before its first pass the thread imports ``jsonschema``, which every apply's schema check needs: its import
builds a grammar (``rfc3987_syntax``, ~3 s on the CI machine), which the first ``kubectl apply`` of a fresh
server otherwise waited for (``benchmarks/notebooks.py``, cold).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time

from fastapi import FastAPI

from millpond.notebooks import culler, objects
from millpond.settings import Settings

log = logging.getLogger(__name__)
RECONCILE_S = 10.0


def install(app: FastAPI, settings: Settings) -> None:
    """Run the reconcile loop with the application (started and stopped with it)."""
    stopped = threading.Event()
    culling = culler.CullingSettings.from_env()

    def loop() -> None:
        importlib.import_module("jsonschema")  # warmed for the first apply (the module's docstring)
        next_reconcile = next_check = 0.0
        while not stopped.is_set():
            now = time.monotonic()
            try:
                if now >= next_reconcile:
                    next_reconcile = now + RECONCILE_S
                    started = objects.reconcile(settings)
                    if started:
                        log.info("started the supervisors of Notebooks %s", ", ".join(started))
                if now >= next_check:
                    next_check = now + culling.period_s
                    culled = culler.check_all(settings, culling)
                    if culled:
                        log.info("culled idle Notebooks %s", ", ".join(culled))
            except Exception:  # one bad pass (the store busy, a home being removed) must not end the loop
                log.exception("notebooks: reconciling Notebooks failed")
            stopped.wait(max(0.05, min(next_reconcile, next_check) - time.monotonic()))

    app.router.on_startup.append(lambda: threading.Thread(target=loop, daemon=True,
                                                          name="notebook-reconcile").start())
    app.router.on_shutdown.append(stopped.set)
