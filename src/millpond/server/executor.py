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

from millpond.runners.processes import is_alive
from millpond.settings import Settings


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
        if engine_pid and is_alive(engine_pid, engine_start):
            os.kill(engine_pid, signal.SIGTERM)
            return True
        return False

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
