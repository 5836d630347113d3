"""The order in which a task's policies apply: the one place it is written.

Why this order:

1. ``reuse`` first: a resumed run's task that already succeeded has its row; nothing else applies.
2. ``importing`` next: an importer is recorded and submitted as it stands; no container policy
   concerns it. ``executor_kind`` then refuses any executor that is not a container.
3. ``task_row`` makes the log file and records the row PENDING: every later failure, note or
   cache message has a row and a log to go to.
4. ``builtins`` (CreatePVC/DeletePVC) before resources: they need no process and no resources.
5. ``resources``, ``retry``, ``capacity``: the task's request and retry policy are read (a bad
   one fails the task), then a request no machine can ever grant fails, before any cost is paid.
6. ``cache`` after the checks above (a broken task is not answered from the cache, as before) and
   before the platform: a hit makes no secret files, mounts or workloads.
7. ``request``, then ``platform``: the platform adds its environment, mounts and time limit to the
   launcher's request; everything after it gives back what it made when it fails the task.
8. ``deadline`` after the platform: it cuts the platform's time limit to what is left of the
   workflow's; ``pod_metadata`` then notes and records what the platform said (not for a task
   the deadline failed).
9. ``queueing`` reads the platform's pod labels; last but ``placement``, so a workload is made
   only for a task that will run.
10. ``placement`` last: the runner's demand comes from the final request.

``image`` right after ``platform``: it reads the pod annotations (``millpond.io/runtime``) and pull
secrets the platform names, and describes the task's image; the launcher decides on the worker.
"""

from __future__ import annotations

from typing import Protocol

from millpond.pipelines.policies import (
    builtins,
    cache,
    capacity,
    deadline,
    executor_kind,
    image,
    importing,
    placement,
    platform,
    pod_metadata,
    queueing,
    request,
    resources,
    retry,
    reuse,
    task_row,
)
from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import Proceed, Verdict


class TaskPolicy(Protocol):
    """A policy: one module with one call (a module implements this protocol)."""

    def prepare(self, launch: TaskLaunch, run: RunContext) -> Verdict: ...


TASK_POLICIES: tuple[TaskPolicy, ...] = (
    reuse,
    importing,
    executor_kind,
    task_row,
    builtins,
    resources,
    retry,
    capacity,
    cache,
    request,
    platform,
    image,
    deadline,
    pod_metadata,
    queueing,
    placement,
)


def prepare(launch: TaskLaunch, run: RunContext, policies: tuple[TaskPolicy, ...] = TASK_POLICIES) -> Verdict:
    """Apply ``policies`` in order until one answers other than Proceed; Proceed when all did."""
    for policy in policies:
        verdict = policy.prepare(launch, run)
        if not isinstance(verdict, Proceed):
            return verdict
    return verdict if policies else Proceed()
