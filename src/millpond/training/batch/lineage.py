"""A ``batch/v1`` Job's lineage, recorded when it ends (Complete or Failed): one ``millpond.TrainingJob`` execution
(``store.lineage_jobs``), kind ``Job``, its volumes those of its pod template (a ``persistentVolumeClaim`` names a
dataset: read-only or read-write as the dataset's access modes mount it).

Recorded by its controller once the Job finished, and by the reader that found its controller dead
(``lifecycle.observed``); a Job whose controller never started is recorded by that reader too.
"""

from __future__ import annotations

from typing import Any

from millpond.settings import Settings, load_settings
from millpond.store.lineage import TRAINING_EXECUTION
from millpond.store.lineage_jobs import Ended, record_ended, volume_links
from millpond.store.resources import Resource
from millpond.training.batch import status as job_status
from millpond.training.batch.kinds import KIND
from millpond.training.batch.manifest import pod_spec
from millpond.training.lineage import volumes_of
from millpond.training.pod_template import read_pod


def job_ended(resource: Resource | None, settings: Settings | None = None) -> bool:
    """Record the end of the Job ``resource`` (as stored, once finished); False when nothing was recorded."""
    settings = settings or load_settings()
    if resource is None or not job_status.finished(resource.status or {}):
        return False
    return record_ended(lambda: _ended(resource, settings), settings, f"Job {resource.namespace}/{resource.name}")


def _ended(resource: Resource, settings: Settings) -> Ended:
    status: dict[str, Any] = resource.status or {}
    template = resource.manifest["spec"].get("template") or {}
    container = read_pod(pod_spec(resource.manifest), "", ["spec", "template", "spec"],
                         (template.get("metadata") or {}).get("annotations"), downward=True)
    inputs, outputs = volume_links(volumes_of(container.data, resource.namespace, settings), resource.namespace)
    state = job_status.state(status)  # Complete or Failed
    reason = next((str(c.get("reason") or "") for c in status.get("conditions") or ()
                   if c.get("type") == state and c.get("status") == "True"), "")
    return Ended(TRAINING_EXECUTION, KIND, resource.name, resource.namespace, resource.uid, state == "Complete",
                 state, reason, inputs, outputs)
