"""The lineage of what runs outside a pipeline's tasks: training jobs and data operations, by the volumes they use.

A training job (a Kubeflow kind, an ``arena submit`` job, a ``batch/v1`` Job) or a Fluid data operation that ends
is one execution (``rows_of`` writes it, as it writes a task's): type ``millpond.TrainingJob`` or
``millpond.DataOperation``, its state MLMD's (``COMPLETE``, ``FAILED``), properties ``kind``, ``name`` and
``namespace``, custom properties ``display_name``, ``uid``, ``state`` (its own final state: ``SUCCEEDED``, ``Complete``,
``Failed``...) and ``reason``. Its id is derived from its kind and uid (``derived_id``): a supervisor restarted after
``kill -9`` that records the same end again writes the same rows, so none twice.

A volume a job mounts is a PVC, and a PVC here is a Fluid dataset: it is the artifact ``pvc://CLAIM`` of the
namespace (``system.Dataset``), the very one ``dataset_links`` gives a pipeline task mounting that PVC. A volume
mounted read-only is an ``INPUT``; one mounted read-write an ``OUTPUT`` (simplified: the job may have read it too).
A failed execution names its inputs and no outputs, as KFP publishes no outputs of a failed task.

No context: a job is no run's task. One started by a pipeline step (``train_job``) names its launcher task in the
custom properties ``run_id`` and ``task_id`` (KFP's run and task labels).

Recording never fails the end it records: a failure to write is logged (one line) and the job's status stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from millpond.settings import Settings
from millpond.store.lineage import ArtifactLink, ExecutionRecord, dataset_links, derived_id

DATA_OPERATION_EXECUTION = "millpond.DataOperation"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VolumeUse:
    """A PVC (a dataset's claim) a job mounted, and whether read-only."""

    claim: str
    read_only: bool


@dataclass(frozen=True)
class Ended:
    """One job or data operation that ended: what its execution records."""

    type_name: str  # lineage.TRAINING_EXECUTION or DATA_OPERATION_EXECUTION
    kind: str  # PyTorchJob, Job, DataLoad...
    name: str
    namespace: str
    uid: str
    succeeded: bool
    state: str  # its final state as its own kind says it (SUCCEEDED, Complete, Failed)
    reason: str = ""
    inputs: tuple[ArtifactLink, ...] = ()
    outputs: tuple[ArtifactLink, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)  # more custom properties (a pipeline step's run_id)


def volume_uri(claim: str) -> str:
    return f"pvc://{claim}"


def dataset_output(claim: str, namespace: str) -> ArtifactLink:
    """A dataset's volume written: the same artifact ``dataset_links`` names when it is read."""
    return ArtifactLink(claim, volume_uri(claim), "system.Dataset", {"namespace": namespace, "kind": "Dataset"},
                        "OUTPUT", scope=namespace)


def volume_links(volumes: Iterable[VolumeUse], namespace: str) -> tuple[tuple[ArtifactLink, ...],
                                                                       tuple[ArtifactLink, ...]]:
    """(inputs, outputs): the volumes mounted read-only, and those mounted read-write."""
    listed = list(volumes)
    read = [volume.claim for volume in listed if volume.read_only]
    written = [volume.claim for volume in listed if not volume.read_only]
    return dataset_links(read, namespace), tuple(dataset_output(claim, namespace) for claim in dict.fromkeys(written))


def uri_link(key: str, uri: str, namespace: str, io_type: str) -> ArtifactLink:
    """An external URI a data operation read or wrote (``s3://``, ``local:///``...): an artifact by its URI; a
    ``pvc://`` one is of the namespace, as a volume is."""
    scope = namespace if uri.startswith("pvc://") else ""
    return ArtifactLink(key, uri, "system.Artifact", {}, io_type, scope=scope)


def execution_of(ended: Ended) -> ExecutionRecord:
    """The execution recording ``ended`` (its outputs only when it succeeded)."""
    return ExecutionRecord(
        execution_id=derived_id(ended.type_name, ended.kind, ended.uid), type_name=ended.type_name,
        name=f"{ended.namespace}/{ended.name}", state="SUCCEEDED" if ended.succeeded else "FAILED",
        namespace=ended.namespace, inputs=ended.inputs, outputs=ended.outputs if ended.succeeded else (),
        properties={"kind": ended.kind, "name": ended.name, "namespace": ended.namespace},
        custom_properties={"display_name": ended.name, "uid": ended.uid, "state": ended.state,
                           "reason": ended.reason, **ended.extra},
    )


def record_ended(build: Callable[[], Ended | None], settings: Settings, subject: str) -> bool:
    """Record the execution of what ``build`` reads (None: nothing to record) unless lineage is off; False, with one
    warning logged naming ``subject``, when it could not be read or written: the end it records stands."""
    if not settings.lineage:
        return False
    try:
        ended = build()
        if ended is None:
            return False
        from millpond.store.lineage_store import LineageStore  # noqa: PLC0415 — SQLAlchemy's, once something ends

        LineageStore(settings.database_url).record(execution_of(ended))
    except Exception as exc:  # noqa: BLE001 — lineage never fails the end it records
        logger.warning("lineage of %s not recorded: %s: %s", subject, type(exc).__name__, exc)
        return False
    return True
