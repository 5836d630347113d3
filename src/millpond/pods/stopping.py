"""Deleting a pod: its containers' processes stopped as the kubelet stops a pod's, the deletion remembered.

SIGTERM to each container's process group (its process leads one), then ``GRACE_S`` for it to end,
then SIGKILL to what is left (a pod's grace period, shortened as the supervisors shorten theirs). A
process is signalled only while it is still the recorded one (its pid and start ticks), so a reused
pid is never hit. The owner sees its process end and does what its controller would: the training
supervisor restarts the job while ``backoffLimit`` (``--retry``) allows, else the job fails; a model
server's supervisor restarts the replica; a pipeline task is retried by its retry policy.
"""

from __future__ import annotations

import os
import signal
import time

from millpond.errors import UserError
from millpond.kind_handler import KindContext
from millpond.pods import deletions
from millpond.pods.records import PodView, ProcessRef
from millpond.runners.processes import is_running, kill_group

GRACE_S = 5.0
_POLL_S = 0.05


def delete_pod(pod: PodView, context: KindContext) -> None:
    """Stop ``pod``'s running containers and remember it deleted (UserError, nothing done, when it cannot be)."""
    if pod.undeletable:
        raise UserError(pod.undeletable)
    running = tuple(container.process for container in pod.containers if container.process is not None)
    stop(running)
    deletions.record(context.settings, pod, running)


def stop(processes: tuple[ProcessRef, ...]) -> None:
    """SIGTERM each process's group while it is still that process, SIGKILL what runs after ``GRACE_S``."""
    signalled = []
    for ref in processes:
        if is_running(ref.pid, ref.start):
            try:
                os.killpg(ref.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                continue
            signalled.append(ref)
    deadline = time.monotonic() + GRACE_S
    while signalled and time.monotonic() < deadline and any(is_running(ref.pid, ref.start) for ref in signalled):
        time.sleep(_POLL_S)
    for ref in signalled:
        if is_running(ref.pid, ref.start):
            kill_group(ref.pid, ref.start)
