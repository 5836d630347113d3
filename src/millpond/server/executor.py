"""Starts, tracks and terminates the worker processes of the runs this server created.

Terminating a run signals its engine process, whoever started it: a server worker, or a
``millpond run`` in a terminal (its pid is in the run's row), so the API can stop CLI runs too.
The cancel is recorded (CANCELING) before the signal goes, so that neither a worker killed
before its handlers were in place nor a server restart can bring the run back; the engine
then stops its tasks and records CANCELED. A worker of ours that has not ended after
``TERMINATE_GRACE_S`` is killed (its guardian kills its tasks) and the run recorded CANCELED.

A worker is started from a thread of its own, not in the request that asked: ``Popen`` returns
only once the child has exec'd, which on a busy machine (every run it started computing on
the same cores) took 0.5 s at the median and up to 6 s for ``POST /runs`` under 16 clients
(issue 36). Until its worker is known the run is *launching*: a terminate waits for that (as
it did for the request), and a worker that cannot be started records its run FAILED saying
why, since no request is left to answer with the error.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time

from millpond.errors import NotFoundError, UserError
from millpond.pipelines.cancellation import CANCELING, record_cancelled
from millpond.runners.processes import is_alive, is_running, signal_process
from millpond.server.worker import NICE_VAR
from millpond.settings import Settings
from millpond.store.journal import FINAL_STATES, RunJournal, open_journal
from millpond.store.keys import utcnow
from millpond.store.runs import EngineClaim, RunStore

# A run just created (by ``millpond run``, or by a server whose worker is starting) is PENDING
# with no engine recorded for a moment: a server starting then leaves a run that young alone
# until it is this old, then looks again.
YOUNG_RUN_S = 10.0
TERMINATE_GRACE_S = 30.0  # an engine stops its tasks within ~5 s (SIGTERM, then SIGKILL)
LAUNCH_WAIT_S = 60.0  # how long a terminate or a stop waits for a worker being started to be known
ENGINE_NICE = 10  # the workers' niceness unless MILLPOND_ENGINE_NICE says otherwise (worker.py says why)


def engine_niceness() -> int:
    """The niceness the server's run workers take: ``MILLPOND_ENGINE_NICE`` (0-19; 0 keeps the server's)."""
    value = os.environ.get(NICE_VAR, "").strip()
    if not value:
        return ENGINE_NICE
    if not (value.isascii() and value.isdigit()) or int(value) > 19:  # int() refuses '²', which isdigit() takes
        raise UserError(f"{NICE_VAR} must be a whole number from 0 to 19 (a niceness), not {value!r}")
    return int(value)


class RunExecutor:
    def __init__(self, settings: Settings, store: RunStore) -> None:
        self.settings = settings
        self.store = store
        self.niceness = engine_niceness()
        self._workers: dict[str, subprocess.Popen[bytes]] = {}
        self._launching: dict[str, threading.Event] = {}  # runs whose worker is being started
        self._lock = threading.Lock()
        self._journal: RunJournal | None = None

    @property
    def journal(self) -> RunJournal:
        if self._journal is None:
            self._journal = open_journal(self.settings.database_url)
        return self._journal

    def start(self, run_id: str, use_cache: bool = True, retry: bool = False) -> None:
        """Start the run's worker from a thread that then reaps it; returns at once (see the module's note)."""
        args = [sys.executable, "-m", "millpond.server.worker", run_id]
        args += ([] if use_cache else ["--no-cache"]) + (["--retry"] if retry else [])
        launched = threading.Event()
        with self._lock:
            self._launching[run_id] = launched
        threading.Thread(target=self._launch, args=(run_id, args, launched), daemon=True,
                         name=f"run-{run_id[:8]}").start()

    def _launch(self, run_id: str, args: list[str], launched: threading.Event) -> None:
        """Start the worker, make it known (``launched``), wait for it to end and forget it."""
        process = None
        try:
            env = {**os.environ, "MILLPOND_HOME": str(self.settings.home), NICE_VAR: str(self.niceness)}
            log = self.settings.logs_dir / f"engine-{run_id}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as out:
                process = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C to the server is not one to its runs: they outlive a restart
                )
        except OSError as exc:  # no process could be made (too many processes, no memory, the logs unwritable)
            self._record_unstarted(run_id, exc)
        finally:
            with self._lock:
                if process is not None:
                    self._workers[run_id] = process
                self._launching.pop(run_id, None)
            launched.set()
        if process is not None:
            process.wait()
            with self._lock:
                if self._workers.get(run_id) is process:
                    self._workers.pop(run_id, None)

    def _record_unstarted(self, run_id: str, exc: OSError) -> None:
        try:
            self.store.update_run(run_id, state="FAILED", error=f"its engine could not be started: {exc}",
                                  finished_at=utcnow())
        except NotFoundError:
            return  # deleted meanwhile

    def _launched(self, run_id: str) -> None:
        """Wait until a worker being started for ``run_id`` (if any) is known or has failed to start."""
        with self._lock:
            launching = self._launching.get(run_id)
        if launching is not None:
            launching.wait(LAUNCH_WAIT_S)

    def terminate(self, run_id: str, engine_pid: int | None, engine_start: str | None) -> bool:
        """Record the cancel and ask the run's engine to stop; False when no engine process is alive to ask."""
        self._launched(run_id)
        with self._lock:
            worker = self._workers.get(run_id)
        ours = worker is not None and worker.poll() is None
        foreign = not ours and bool(engine_pid) and is_alive(engine_pid, engine_start)
        if not (ours or foreign):
            return False
        self.store.mark_canceling(run_id, "terminated")
        if ours:
            assert worker is not None
            worker.send_signal(signal.SIGTERM)
        else:
            signal_process(engine_pid, engine_start, signal.SIGTERM)
        threading.Thread(target=self._see_stopped, args=(run_id, worker if ours else None, engine_pid, engine_start),
                         daemon=True, name=f"stop-{run_id[:8]}").start()
        return True

    def _see_stopped(
        self, run_id: str, worker: subprocess.Popen[bytes] | None, engine_pid: int | None, engine_start: str | None,
    ) -> None:
        """Wait for the signalled engine to end (killing a worker of ours past the grace), then make sure the
        run is recorded CANCELED: an engine that died while cancelling did not get to write it."""
        deadline = time.monotonic() + TERMINATE_GRACE_S
        if worker is not None:
            try:
                worker.wait(timeout=TERMINATE_GRACE_S)
            except subprocess.TimeoutExpired:
                worker.kill()  # its guardian stops its tasks
                worker.wait()
        else:
            while is_running(engine_pid, engine_start):
                if time.monotonic() > deadline:
                    return  # someone else's engine that will not stop: leave its record to it
                time.sleep(0.2)
        try:
            if self.journal.get_run(run_id).state not in FINAL_STATES:
                record_cancelled(self.journal, run_id, "terminated")
        except NotFoundError:
            return  # the run was deleted meanwhile (a retry replaces it): nothing is left to record

    def resume_in_flight(self) -> None:
        """At server start: start or resume the runs left PENDING or RUNNING with no engine alive.

        A run whose cancel was recorded (CANCELING, CANCELED) is never among them: a CANCELING
        one whose engine is gone is recorded CANCELED instead; only ``runs retry`` runs it again.

        A server stop leaves its workers running (they are in their own sessions), so a run
        whose engine (the pid and start time in its row) is still alive is left to it; a run
        whose worker died, or was never started, is resumed as
        ``millpond runs resume`` does: tasks that SUCCEEDED keep their outputs. Off with
        ``MILLPOND_SERVER_RESUME=0``. Runs in a background thread, so the API answers at once.
        """
        if os.environ.get("MILLPOND_SERVER_RESUME", "1") == "0":
            return
        threading.Thread(target=self._resume_in_flight, daemon=True, name="resume-runs").start()

    def _resume_in_flight(self) -> None:
        def orphans(states: tuple[str, ...]) -> list[EngineClaim]:
            claims = self.store.engine_claims(states)
            return [claim for claim in claims if not is_running(claim.engine_pid, claim.engine_start)]

        for row in orphans((CANCELING,)):  # cancelled, but the engine died before it recorded the end
            if not self.running(row.run_id):
                record_cancelled(self.journal, row.run_id, row.error or "cancelled")

        for attempt in range(2):
            now = dt.datetime.now(dt.UTC)
            young = False
            for row in orphans(("PENDING", "RUNNING")):
                if self.running(row.run_id):
                    continue
                created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=dt.UTC)
                if row.engine_pid is None and (now - created).total_seconds() < YOUNG_RUN_S and attempt == 0:
                    young = True  # maybe a ``millpond run`` about to start its engine: look again later
                    continue
                self.start(row.run_id, retry=True)  # the worker's --retry is resume_run, which refuses a live engine
            if not young:
                return
            time.sleep(YOUNG_RUN_S)

    def running(self, run_id: str) -> bool:
        with self._lock:
            if run_id in self._launching:
                return True
            worker = self._workers.get(run_id)
        return worker is not None and worker.poll() is None

    def stop_all(self) -> None:
        """Stop the workers in flight (their runs record CANCELED); a server restart leaves them running."""
        with self._lock:
            launching = list(self._launching.values())
        for event in launching:
            event.wait(LAUNCH_WAIT_S)
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
