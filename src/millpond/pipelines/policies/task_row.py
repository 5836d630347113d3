"""The task's log file and its row, PENDING until its process starts (it may wait for resources first).

Every later policy may write to the log and fail the task on its row. A run recorded before its
names were checked may have a task path no log file can be made for: the task fails here.
"""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.store.paths import UnsafePath, task_log_file


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    try:
        log_path = task_log_file(run.settings.logs_dir, run.run.id, launch.node.path)
    except UnsafePath as exc:
        return Fail(str(exc))
    launch.log_path = log_path
    run.rows.record_task(launch, "container", launch.container.image_or_none, log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return PROCEED
