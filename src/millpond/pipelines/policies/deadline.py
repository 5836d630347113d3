"""An Argo workflow's ``activeDeadlineSeconds``: a task's time limit is at most what is left of it.

A task that would start after the deadline fails instead. An exit task (ALL_UPSTREAM_TASKS_COMPLETED)
is exempt: it runs after a failure, deadline or not.
"""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    left = run.deadline.left_s()
    if left is None or launch.task.is_exit_task:
        return PROCEED
    if left <= 0:
        return Fail(f"{run.deadline.text()} before it started")
    request = launch.the_request()
    if request.timeout_s is None or left < request.timeout_s:
        request.timeout_s = left
        run.deadline.cut.add(launch.node.path)
    return PROCEED
