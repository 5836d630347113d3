"""Kueue: a task whose pod labels name a local queue becomes a workload of that queue.

It then waits PENDING until an admission cycle admits it (``task_queues.EngineQueues``), in the run's
namespace (``queueing.run_namespace``): in single-user mode its experiment's name, so an experiment name
that is no namespace name fails it.
"""

from __future__ import annotations

import time

from millpond.errors import UserError
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Fail, Verdict
from millpond.pipelines.queueing import run_namespace, task_queueing, task_workload


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    platform = launch.platform
    queueing = task_queueing(platform.labels, platform.annotations) if platform is not None else None
    if queueing is None:
        return PROCEED
    node = launch.node
    name = f"{run.resource_name}-{node.name}"[:63]  # its pod's name
    try:
        project = run_namespace(run.run, run.store)
        run.queues.add(node.path, task_workload(node.record_id or "", name, project, launch.resources, queueing,
                                                time.time()))
    except UserError as exc:
        return Fail(str(exc))
    return PROCEED
