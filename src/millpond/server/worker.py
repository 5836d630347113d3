"""The process that executes one run the server recorded: ``python -m millpond.server.worker RUN_ID [--retry]``.

A run gets its own process (not a thread of the server) so that terminating it is the same
SIGTERM that stops ``millpond run`` — the engine records CANCELED and stops its tasks — and
so that a crashing task never takes the API down with it. The stop handlers go in first, so a
terminate that comes while the worker still starts up cancels the run rather than killing the
worker before anything is recorded.
"""

from __future__ import annotations

import sys

from millpond.runners import stopping


def main(argv: list[str]) -> int:
    with stopping.handled(), stopping.deferred():  # the engine polls the request; nothing raises mid-step
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
