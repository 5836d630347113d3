"""A training job's lineage, recorded when it ends: one ``millpond.TrainingJob`` execution (``store.lineage_jobs``).

Every job of the job store ends here, whatever its trainer or how it came (a PyTorchJob, TFJob, MPIJob or TrainJob
manifest, ``arena submit``, the SDK, a pipeline's ``train_job`` step, a job on a Ray cluster): its supervisor's final
status, and a reader's that found its supervisor dead or never started (``jobs.step_job``). Its volumes are its
``--data`` datasets (a manifest's ``persistentVolumeClaim`` names one), read-only or read-write as the dataset's
access modes say, which is how the job mounted them.
"""

from __future__ import annotations

from collections.abc import Iterable

from millpond.datasets.config import load_config
from millpond.errors import MillpondError
from millpond.settings import Settings, load_settings
from millpond.store.lineage import TRAINING_EXECUTION
from millpond.store.lineage_jobs import Ended, VolumeUse, record_ended, volume_links
from millpond.store.training import JobRecord
from millpond.training.kinds import job_kind
from millpond.training.spec import DataBinding, spec_from_json

RUN_LABEL, TASK_LABEL = "pipelines.kubeflow.org/run_id", "pipelines.kubeflow.org/task_id"  # pipeline_step's


def volumes_of(bindings: Iterable[DataBinding], namespace: str, settings: Settings) -> tuple[VolumeUse, ...]:
    """The datasets a job mounts, each read-only or not as it was mounted (a dataset deleted since: read-only)."""
    used = []
    for binding in bindings:
        try:
            read_only = load_config(binding.dataset, namespace, settings).read_only
        except MillpondError:
            read_only = True
        used.append(VolumeUse(binding.dataset, read_only))
    return tuple(used)


def job_ended(job: JobRecord | None, settings: Settings | None = None) -> bool:
    """Record the end of ``job`` (a record of the job store, once finished); False when nothing was recorded."""
    settings = settings or load_settings()
    if job is None or not job.finished:
        return False
    return record_ended(lambda: _ended(job, settings), settings, f"job {job.namespace}/{job.name}")


def _ended(job: JobRecord, settings: Settings) -> Ended:
    spec = spec_from_json(job.spec)
    inputs, outputs = volume_links(volumes_of(spec.data, job.namespace, settings), job.namespace)
    labels = dict(spec.labels)
    step = {"run_id": labels[RUN_LABEL], "task_id": labels.get(TASK_LABEL, "")} if labels.get(RUN_LABEL) else {}
    return Ended(TRAINING_EXECUTION, job_kind(spec.trainer.value, spec.manifest), job.name, job.namespace, job.uid,
                 job.status == "SUCCEEDED", job.status, job.reason or "", inputs, outputs, step)
