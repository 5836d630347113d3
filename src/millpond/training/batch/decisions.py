"""What Kubernetes' Job controller decides from a Job's settings and its pods, as pure functions.

The controller (``controller``) observes (pods reaped, the stored spec read, Kueue asked) and then asks
these what to do: whether the Job ended and why (:func:`end_due`), which pods to create and which to
delete (:func:`pods_wanted`), how long a failure holds the next pod back (:func:`backoff_s`). Every
input is passed in (no clock, no store), so each rule is tested without a process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from millpond.training.batch import status as job_status
from millpond.training.batch.manifest import JobSettings
from millpond.training.batch.pods import JobPod, Phase

BACKOFF_VAR = "MILLPOND_JOB_BACKOFF_S"
BACKOFF_S = 10.0  # Kubernetes' first back-off after a pod failure
BACKOFF_MAX_S = 360.0


@dataclass(frozen=True)
class Ending:
    """How the Job ends: ``Complete`` or ``Failed``, with the conditions' reason and message."""

    outcome: str
    reason: str
    message: str


@dataclass(frozen=True)
class PodChanges:
    """Pods to create (their completion indexes; None for a NonIndexed pod) and pods to delete (by name)."""

    create: tuple[int | None, ...] = ()
    delete: tuple[str, ...] = ()


def backoff_s(failures: int) -> float:
    """The delay before the next pod after ``failures`` failures: 10 s doubling, at most 6 min
    (``MILLPOND_JOB_BACKOFF_S`` sets the first)."""
    text = os.environ.get(BACKOFF_VAR, "").strip()
    try:
        base = float(text) if text else BACKOFF_S
    except ValueError:
        base = BACKOFF_S
    return 0.0 if failures <= 0 else min(BACKOFF_MAX_S, base * 2 ** (failures - 1))


def failures(pods: Sequence[JobPod]) -> int:
    """Pod failures counted against backoffLimit: failed pods and restarted containers (OnFailure)."""
    return sum(1 for pod in pods if pod.phase == Phase.FAILED) + sum(pod.restarts for pod in pods)


def end_due(settings: JobSettings, pods: Sequence[JobPod], running_s: float | None) -> Ending | None:
    """The Job's end, if it is due: failures beyond ``backoffLimit``, ``running_s`` (since ``startTime``, None
    while suspended or not started) beyond ``activeDeadlineSeconds``, or its completions reached."""
    if failures(pods) > settings.backoff_limit:
        return Ending("Failed", *job_status.BACKOFF)
    if running_s is not None and settings.active_deadline_s is not None and running_s >= settings.active_deadline_s:
        return Ending("Failed", *job_status.DEADLINE)
    succeeded = [pod for pod in pods if pod.phase == Phase.SUCCEEDED]
    if settings.indexed:
        done = {pod.index for pod in succeeded} >= set(range(settings.completions or 0))
    elif settings.completions is None:  # a work queue: one success, and nothing left running
        done = bool(succeeded) and not any(pod.active for pod in pods)
    else:
        done = len(succeeded) >= settings.completions
    return Ending("Complete", *job_status.REACHED) if done else None


def pods_wanted(settings: JobSettings, pods: Sequence[JobPod], parallelism: int, *, held_back: bool) -> PodChanges:
    """What to create so that ``parallelism`` pods run (never more than the completions left; Indexed: the
    lowest indexes neither succeeded nor active), or, above it, the newest active pods to delete.
    ``held_back``: a failure's back-off has not passed, so nothing is created yet."""
    active = [pod for pod in pods if pod.active]
    succeeded = [pod for pod in pods if pod.phase == Phase.SUCCEEDED]
    if len(active) > parallelism:
        return PodChanges(delete=tuple(pod.name for pod in active[parallelism:]))
    if held_back:
        return PodChanges()
    room = parallelism - len(active)
    if settings.indexed:
        taken = {pod.index for pod in [*active, *succeeded]}
        free = [index for index in range(settings.completions or 0) if index not in taken]
        return PodChanges(create=tuple(free[:room]))
    if settings.completions is None:
        return PodChanges(create=(None,) * (0 if succeeded else room))
    return PodChanges(create=(None,) * max(0, min(room, settings.completions - len(succeeded) - len(active))))
