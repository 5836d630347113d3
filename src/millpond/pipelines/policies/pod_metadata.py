"""What the platform config says beyond mounts: its notes in the task's log, its pod labels and
annotations on the task's row (``millpond runs get``, the API's pod metadata)."""

from __future__ import annotations

from millpond.pipelines.policies.launch import RunContext, TaskLaunch
from millpond.pipelines.policies.verdicts import PROCEED, Verdict


def prepare(launch: TaskLaunch, run: RunContext) -> Verdict:
    platform = launch.platform
    if platform is None:
        return PROCEED
    if platform.notes and launch.log_path is not None:
        with open(launch.log_path, "a", encoding="utf-8") as log:
            log.writelines(f"[millpond] {note}\n" for note in platform.notes)
    if platform.labels or platform.annotations:
        run.store.update_task(
            launch.node.record_id or "", pod_metadata={"labels": platform.labels, "annotations": platform.annotations}
        )
    return PROCEED
