"""Starts, tracks and terminates the worker processes of the runs this server created.

Terminating a run signals its engine process, whoever started it: a server worker, or a
``millpond run`` in a terminal (its pid is in the run's row), so the API can stop CLI runs too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from millpond.runners.processes import is_running, signal_process
from millpond.settings import Settings

# A run just created (by ``millpond run``, or by a server whose worker is starting) is PENDING
# with no engine recorded for a moment: a server starting then leaves a run that young alone
# until it is this old, then looks again.
YOUNG_RUN_S = 10.0


class RunExecutor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._workers: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()

    def start(self, run_id: str, use_cache: bool = True, retry: bool = False) -> None:
        args = [sys.executable, "-m", "millpond.server.worker", run_id]
        args += ([] if use_cache else ["--no-cache"]) + (["--retry"] if retry else [])
        env = {**os.environ, "MILLPOND_HOME": str(self.settings.home)}
        log = self.settings.logs_dir / f"engine-{run_id}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C to the server is not one to its runs: they outlive a restart
            )
        with self._lock:
            self._workers[run_id] = process
        threading.Thread(target=self._reap, args=(run_id, process), daemon=True, name=f"reap-{run_id[:8]}").start()

    def _reap(self, run_id: str, process: subprocess.Popen[bytes]) -> None:
        process.wait()
        with self._lock:
            self._workers.pop(run_id, None)

    def terminate(self, run_id: str, engine_pid: int | None, engine_start: str | None) -> bool:
        """Ask the run's engine to stop; False when no engine process is alive to ask."""
        with self._lock:
            worker = self._workers.get(run_id)
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            return True
        return signal_process(engine_pid, engine_start, signal.SIGTERM)

    def resume_in_flight(self, sessions: Any) -> None:
        """At server start: start or resume the runs left PENDING or RUNNING with no engine alive.

        A server stop leaves its workers running (they are in their own sessions), so a run
        whose engine (the pid and start time in its row) is still alive is left to it; a run
        whose worker died, or was never started, is resumed as
        ``millpond runs resume`` does: tasks that SUCCEEDED keep their outputs. Off with
        ``MILLPOND_SERVER_RESUME=0``. Runs in a background thread, so the API answers at once.
        """
        if os.environ.get("MILLPOND_SERVER_RESUME", "1") == "0":
            return
        threading.Thread(target=self._resume_in_flight, args=(sessions,), daemon=True, name="resume-runs").start()

    def _resume_in_flight(self, sessions: Any) -> None:
        import datetime as dt

        from sqlalchemy import select

        from millpond.store.models import Run

        def orphans() -> list[Any]:
            with sessions() as session:
                rows = session.execute(select(Run.id, Run.created_at, Run.engine_pid, Run.engine_start)
                                       .where(Run.state.in_(("PENDING", "RUNNING"))))
                return [row for row in rows if not is_running(row.engine_pid, row.engine_start)]

        for attempt in range(2):
            now = dt.datetime.now(dt.UTC)
            young = False
            for row in orphans():
                if self.running(row.id):
                    continue
                created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=dt.UTC)
                if row.engine_pid is None and (now - created).total_seconds() < YOUNG_RUN_S and attempt == 0:
                    young = True  # maybe a ``millpond run`` about to start its engine: look again later
                    continue
                self.start(row.id, retry=True)  # the worker's --retry is resume_run, which refuses a live engine
            if not young:
                return
            time.sleep(YOUNG_RUN_S)

    def running(self, run_id: str) -> bool:
        with self._lock:
            worker = self._workers.get(run_id)
        return worker is not None and worker.poll() is None

    def stop_all(self) -> None:
        """Stop the workers in flight (their runs record CANCELED); a server restart leaves them running."""
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
