"""Training-job instances as the pods Kubeflow's controllers would make for them.

PyTorchJob, TFJob and MPIJob (the training operator; MPIJob v2beta1 the MPI operator): one pod per
instance, named as the operator names them (``JOB-REPLICATYPE-INDEX``: ``mnist-master-0``,
``mnist-worker-1``; an MPIJob's launcher ``JOB-launcher``), labelled as it labels them
(``training.kubeflow.org/job-name``, ``…/operator-name``, ``…/replica-type`` lower case,
``…/replica-index``, ``…/job-role: master`` on the master, chief or launcher), with the pod
template's own labels, owned by the job.

TrainJob (Trainer v2): Trainer makes a JobSet whose ``node`` replicated job is one Indexed Job of
``numNodes`` pods, so each node instance is pod ``JOB-node-0-INDEX-xxxxx`` (the suffix derived from
the job, stable) with JobSet's and the Job's labels, which the Kubeflow SDK's ``TrainerClient``
selects on (``jobset.sigs.k8s.io/jobset-name``, ``jobset.sigs.k8s.io/replicatedjob-name``,
``batch.kubernetes.io/job-completion-index``) and its container ``node``. Simplified: the owner
reference names the TrainJob itself (no JobSet or Job objects exist here).

A pod whose template names an image carries ``millpond.io/ran-in`` (``images.RAN_IN``): the container runtime it ran in
(``podman``), or ``host: WHY`` when it ran on this machine (``training.images`` recorded the decision).
A job that names a Kueue queue gives its pods ``kueue.x-k8s.io/queue-name`` (and its priority class).
An instance is a pod of the job's current attempt: its restart count is the attempt's number (the
supervisor restarts every instance after a failure, as ``backoffLimit`` allows), and a new attempt's
pods are new pods (another uid). Not shown: instances of a job not started yet (QUEUING: Kueue keeps a
suspended job's pods from existing) and Arena's ``rayjob`` drivers (a Ray job's pods are KubeRay's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from millpond.kind_handler import KindContext
from millpond.pods.records import (
    ContainerState,
    ContainerView,
    LogFile,
    OwnerRef,
    PodView,
    ProcessRef,
    Running,
    Terminated,
    Waiting,
    name_suffix,
    pod_uid,
    terminated,
)
from millpond.scheduling.ledger import Request
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.store.training import InstanceRecord, JobRecord, JobStore
from millpond.training import jobs
from millpond.training.images import ran_in, recorded
from millpond.training.kinds import KINDS, job_kind
from millpond.training.manifests import REPLICAS
from millpond.training.paths import job_folder
from millpond.training.spec import JobSpec, ReplicaSpec, Trainer, spec_from_json

JOB_NAME = "training.kubeflow.org/job-name"
OPERATOR_NAME = "training.kubeflow.org/operator-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ANCESTOR_STEP = "trainer.kubeflow.org/trainjob-ancestor-step"
_OPERATORS = {"PyTorchJob": "pytorchjob-controller", "TFJob": "tfjob-controller", "MPIJob": "mpijob-controller"}
_MASTER_ROLES = ("master", "chief", "launcher")


@dataclass(frozen=True)
class _Template:
    """What a replica's pod template says of its container (whether it ran in the image: ``images.RAN_IN``)."""

    container: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    labels: dict[str, str]
    annotations: dict[str, str] = field(default_factory=dict)


class TrainingPods:
    """The pods of every training job of the home (``training.jobs.list_jobs``: each observed first)."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        store = JobStore(context.settings)
        found: list[PodView] = []
        for job in jobs.list_jobs(namespace, store):
            spec = spec_from_json(job.spec)
            if spec.trainer is Trainer.RAY:
                continue
            ran = recorded(job_folder(job.uid))
            found += [job_pod(job, spec, instance, ran) for instance in store.instances(job.uid)]
        return found


SOURCE = TrainingPods()


def job_pod(job: JobRecord, spec: JobSpec, instance: InstanceRecord,
            ran: dict[str, dict[str, str]] | None = None) -> PodView:
    """The pod of one instance of ``job``'s current attempt; ``ran``: where each role ran (``images.recorded``)."""
    kind = job_kind(job.trainer, spec.manifest)
    replica = next((r for r in spec.replicas if r.role == instance.role), None)
    template = _template(kind, spec, instance.role, replica)
    trainjob = kind == "TrainJob"
    name = (f"{job.name}-node-0-{instance.index}-{name_suffix(f'{job.uid}/{instance.index}')}" if trainjob
            else instance.name)
    labels = {**template.labels, **_kueue_labels(spec),
              **(_jobset_labels(job, instance) if trainjob else _operator_labels(kind, job, instance))}
    state = _state(job, instance)
    image_note = ran_in(ran or {}, instance.role, "launcher" if spec.trainer is Trainer.MPI else "")
    process = ProcessRef(instance.pid, instance.pid_start) if instance.pid and isinstance(state, Running) else None
    container = ContainerView(
        name=template.container, image=template.image, state=state, command=template.command, args=template.args,
        env=(*spec.env, *(replica.env if replica else ())), limits=_limits(replica.resources if replica else None),
        ready=isinstance(state, Running), restart_count=job.attempt,
        log=_log(instance), process=process)
    return PodView(
        name=name, namespace=job.namespace, uid=pod_uid(job.uid, name, job.attempt),
        created_at=instance.started_at or job.started_at or job.created_at, containers=(container,),
        owner=OwnerRef(KINDS[kind].api_versions()[0] if not spec.manifest else str(spec.manifest["apiVersion"]),
                       kind, job.name, job.uid),
        labels=labels, annotations={**template.annotations,
                                    **({COMPLETION_INDEX: str(instance.index)} if trainjob else {}), **image_note},
        started_at=instance.started_at, undeletable=_undeletable(name, spec, process is None and
                                                                  isinstance(state, Running)),
        restart_policy="OnFailure" if spec.retry else "Never")


def _undeletable(name: str, spec: JobSpec, no_process_here: bool) -> str:
    """Why deleting a running pod cannot stop its process from here ("" when it can)."""
    if not no_process_here:
        return ""
    if spec.instances_on_ray:
        return (f"pod {name} runs on a node of the Ray cluster at {spec.ray_address}, not on this machine: "
                "delete its job instead")
    return f"pod {name} runs as ranks of its launcher's mpirun, not a process of its own: delete the launcher's pod"


def _log(instance: InstanceRecord) -> LogFile | None:
    return LogFile(Path(instance.log_path)) if instance.log_path else None


def _state(job: JobRecord, instance: InstanceRecord) -> ContainerState:
    """The container's state from the instance's row; one still Running in a job that ended (its supervisor
    was killed before it could say) is reported as Kubernetes does a container it lost track of."""
    if instance.status == "Running" and not job.finished:
        return Running(instance.started_at or job.created_at)
    if instance.status == "Running":
        return Terminated(137, "ContainerStatusUnknown", instance.started_at, job.finished_at,
                          "the container could not be located when the job ended")
    if instance.status in ("Succeeded", "Failed"):
        code = instance.exit_code if instance.exit_code is not None else (0 if instance.status == "Succeeded" else 1)
        return terminated(code, instance.started_at, instance.finished_at)
    return Waiting("ContainerCreating")


def _operator_labels(kind: str, job: JobRecord, instance: InstanceRecord) -> dict[str, str]:
    """The training operator's pod labels (``kubeflow/common``'s constants)."""
    labels = {JOB_NAME: job.name, OPERATOR_NAME: _OPERATORS.get(kind, "training-operator"),
              REPLICA_TYPE: instance.role, REPLICA_INDEX: str(instance.index)}
    if instance.role in _MASTER_ROLES:
        labels[JOB_ROLE] = "master"
    return labels


def _jobset_labels(job: JobRecord, instance: InstanceRecord) -> dict[str, str]:
    """What JobSet and the Job controller put on a TrainJob's node pod (and Trainer's step label)."""
    job_name = f"{job.name}-node-0"
    return {JOBSET_NAME: job.name, REPLICATED_JOB: "node", "jobset.sigs.k8s.io/replicatedjob-replicas": "1",
            "jobset.sigs.k8s.io/job-index": "0", COMPLETION_INDEX: str(instance.index),
            "batch.kubernetes.io/job-name": job_name, "job-name": job_name, ANCESTOR_STEP: "trainer"}


def _kueue_labels(spec: JobSpec) -> dict[str, str]:
    """Kueue's labels where the owner carries them (its queue, its priority class)."""
    labels = {QUEUE_LABEL: spec.queue} if spec.queue else {}
    if spec.priority:
        labels[PRIORITY_LABEL] = spec.priority
    return labels


def _template(kind: str, spec: JobSpec, role: str, replica: ReplicaSpec | None) -> _Template:
    """The replica's container as the manifest wrote it (its name, image, command and args, the template's
    labels); for a job Arena submitted, the operator's container name, the image and the command line."""
    default = KINDS[kind].container if kind in KINDS else ""
    argv = tuple(replica.command) if replica else ()
    pod = _pod_template(kind, spec.manifest, role)
    containers = ((pod.get("spec") or {}).get("containers") or []) if pod else []
    chosen = next((c for c in containers if c.get("name") == default), containers[0] if containers else None)
    if chosen is None:
        return _Template(default or "main", spec.image, argv, (), {})
    command = tuple(str(word) for word in chosen.get("command") or ())
    args = tuple(str(word) for word in chosen.get("args") or ())
    if kind == "TrainJob":  # the TrainJob's trainer overrides the runtime's node container
        command, args = argv, ()
    metadata = (pod or {}).get("metadata") or {}
    return _Template(str(chosen.get("name") or default), str(chosen.get("image") or spec.image), command, args,
                     {str(key): str(value) for key, value in (metadata.get("labels") or {}).items()},
                     {str(key): str(value) for key, value in (metadata.get("annotations") or {}).items()})


def _pod_template(kind: str, manifest: dict[str, Any], role: str) -> dict[str, Any] | None:
    """The pod template of replica type ``role`` in an applied manifest (a TrainJob: its node container)."""
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    if not isinstance(spec, dict):
        return None
    if kind == "TrainJob":
        return {"spec": {"containers": [{"name": "node", "image": (spec.get("trainer") or {}).get("image")}]}}
    holder = REPLICAS.get(kind, ("", ()))[0]
    groups = spec.get(holder) or {}
    group = next((value for key, value in groups.items() if str(key).lower() == role), None)
    template = group.get("template") if isinstance(group, dict) else None
    return template if isinstance(template, dict) else None


def _limits(request: Request | None) -> dict[str, str]:
    """A replica's resources as Kubernetes writes limits (``cpu`` in millicores, ``memory`` in bytes)."""
    if request is None:
        return {}
    limits = {}
    if request.cpu_millis:
        limits["cpu"] = str(request.cpu_millis // 1000) if request.cpu_millis % 1000 == 0 else f"{request.cpu_millis}m"
    if request.memory_bytes:
        limits["memory"] = str(request.memory_bytes)
    if request.gpus:
        limits["nvidia.com/gpu"] = str(request.gpus)
    return limits
