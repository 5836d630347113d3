"""The process that executes one run the server recorded: ``python -m millpond.server.worker RUN_ID [--retry]``.

A run gets its own process (not a thread of the server) so that terminating it is the same
SIGTERM that stops ``millpond run`` — the engine records CANCELED and stops its tasks — and
so that a crashing task never takes the API down with it. The stop handlers go in first, so a
terminate that comes while the worker still starts up cancels the run rather than killing the
worker before anything is recorded.

A worker runs below the server in CPU priority (``MILLPOND_ENGINE_NICE``, 10 by default; the
executor checks it and hands it down): the runs the API started compute on the cores that answer
the API, and on Kubernetes they would not. Each worker leads a session of its own, which Linux
gives a scheduling group of its own (autogroup) weighted like the server's whole group: 16
clients creating runs had ~40 such groups beside the server's, and a 10 ms request waited
seconds for the CPU (issue 36). The worker lowers both its own niceness (what its engine and
tasks inherit, and all that counts where autogroup is off) and its group's. On an idle machine
this changes nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from millpond.runners import stopping

NICE_VAR = "MILLPOND_ENGINE_NICE"  # set by the executor (``executor.engine_niceness``) for every worker it starts
AUTOGROUP_TRIES = 5


def yield_to_the_server(niceness: int) -> None:
    """Raise this process's niceness and its autogroup's to ``niceness`` (0: leave both as they are)."""
    if niceness <= 0:
        return
    os.nice(max(0, niceness - os.nice(0)))
    for _attempt in range(AUTOGROUP_TRIES):
        try:  # the session's scheduling group: absent without CONFIG_SCHED_AUTOGROUP, refused in some sandboxes
            Path("/proc/self/autogroup").write_text(str(niceness))
            return
        except BlockingIOError:  # EAGAIN: Linux takes one such write per 100 ms, machine-wide, from the unprivileged
            time.sleep(0.1)
        except OSError:
            return


def main(argv: list[str]) -> int:
    with stopping.handled(), stopping.deferred():  # the engine polls the request; nothing raises mid-step
        yield_to_the_server(int(os.environ.get(NICE_VAR) or 0))
        return _work(argv)


def _work(argv: list[str]) -> int:
    run_id, use_cache, retry = argv[0], "--no-cache" not in argv, "--retry" in argv
    # Imported once the handlers are in (a terminate during these ~0.5 s of imports is then a cancel, not a kill):
    # these imports stay in the function on purpose.
    from millpond.pipelines.cancellation import CANCELING, record_cancelled  # noqa: PLC0415 - see above
    from millpond.pipelines.submit import execute_run, resume_run  # noqa: PLC0415 - see above
    from millpond.settings import load_settings  # noqa: PLC0415 - see above
    from millpond.store.journal import open_journal  # noqa: PLC0415 - see above

    settings = load_settings()
    store = open_journal(settings.database_url)
    run = store.get_run(run_id)
    if run.state == CANCELING:  # terminated before this worker got going
        record_cancelled(store, run_id, run.error or "terminated")
        return 130
    if run.state == "CANCELED":  # `millpond runs terminate` found no engine yet and recorded the end itself
        return 130
    try:
        if retry:  # a finished run's failed part (marked PENDING), or a run a restart found engineless: resume
            _run, result = resume_run(store, settings, run.id)
        else:
            result = execute_run(store, settings, run, use_cache=use_cache)
    except KeyboardInterrupt as exc:
        if store.get_run(run_id).state in ("PENDING", "RUNNING", CANCELING):  # stopped before the engine began
            record_cancelled(store, run_id, str(exc) or "terminated")
        return 130
    return 0 if result.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
