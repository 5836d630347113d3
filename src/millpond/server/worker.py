"""The process that executes one run the server recorded: ``python -m millpond.server.worker RUN_ID [--retry]``.

A run gets its own process (not a thread of the server) so that terminating it is the same
SIGTERM that stops ``millpond run`` — the engine records CANCELED and stops its tasks — and
so that a crashing task never takes the API down with it.
"""

from __future__ import annotations

import signal
import sys


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    run_id, use_cache, retry = argv[0], "--no-cache" not in argv, "--retry" in argv
    from millpond.pipelines.submit import execute_run, resume_run
    from millpond.settings import load_settings
    from millpond.store.journal import open_journal
    from millpond.store.keys import utcnow

    settings = load_settings()
    store = open_journal(settings.database_url)
    run = store.get_run(run_id)
    try:
        if retry:  # a finished run's failed part (marked PENDING), or a run a restart found engineless: resume
            _run, result = resume_run(store, settings, run.id)
        else:
            result = execute_run(store, settings, run, use_cache=use_cache)
    except KeyboardInterrupt:
        if store.get_run(run_id).state == "PENDING":  # stopped before the engine began
            store.update_run(run_id, state="CANCELED", error="terminated", finished_at=utcnow())
        return 130
    return 0 if result.state == "SUCCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
