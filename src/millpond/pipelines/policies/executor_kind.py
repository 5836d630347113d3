"""Only containers run: any other executor kind (a resolver, …) fails the task, naming the kind."""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    if launch.executor.container is not None:
        return PROCEED
    return Fail(f"executor kind {launch.executor.kind!r} is not supported")
