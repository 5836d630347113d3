"""The task's resource request (cpu, memory, accelerators), its placeholders filled from its inputs.

Ignored (an empty request) when the engine ignores resources, as kfp.local does.
"""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.pipelines.resources import ResourceRequest, task_request, with_inputs


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    if run.ignore_resources:
        launch.resources = ResourceRequest()
        return PROCEED
    try:
        launch.resources = task_request(with_inputs(launch.container.raw, launch.inputs.parameters))
    except ValueError as exc:
        return Fail(f"invalid resources: {exc}")
    return PROCEED
