"""Recording a cancelled run truthfully, whoever notices it: its engine, a retry, a server start.

A cancel is recorded in two steps. CANCELING is written the moment the engine (or the server,
for a terminate request) acts on it — before any task is stopped — so a run the user cancelled
is never taken for one whose engine merely died: a server start resumes RUNNING and PENDING
runs left without an engine, never a CANCELING one. CANCELED follows once the tasks are
stopped; a CANCELING run whose engine died before that is finished by the next one to look.
"""

from __future__ import annotations

from millpond.runners.processes import kill_group
from millpond.store.journal import RunJournal
from millpond.store.keys import utcnow

CANCELING = "CANCELING"
CANCELED = "CANCELED"


def kill_leftover_tasks(store: RunJournal, run_id: str) -> list[str]:
    """Kill the process group each unfinished task of the run left behind (its engine died); their ids."""
    unfinished = store.unfinished_tasks(run_id)
    for _task_id, pid, pid_start in unfinished:
        kill_group(pid, pid_start)
    return [task_id for task_id, _pid, _start in unfinished]


def close_tasks(store: RunJournal, run_id: str, reason: str) -> None:
    """Record every task of the run not yet final (in flight, waiting, a loop or sub-DAG) as CANCELED.

    A process group such a task left behind (its engine died) is killed first.
    """
    store.cancel_tasks(kill_leftover_tasks(store, run_id), reason)


def record_cancelled(store: RunJournal, run_id: str, reason: str) -> None:
    """Finish a cancelled run whose engine is gone (or never started): its tasks, then the run, CANCELED."""
    close_tasks(store, run_id, reason)
    store.update_run(run_id, state=CANCELED, error=reason, finished_at=utcnow())
