"""The task's retryPolicy, read once here; the worker retries by it (``retries.with_retries``)."""

from __future__ import annotations

from millpond.durations import DurationError
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    try:
        launch.retry = launch.task.retry_policy()
    except DurationError as exc:  # an IR stored before its durations were checked at submission
        return Fail(str(exc))
    return PROCEED
