"""A ``batch/v1`` Job document checked as the API server and Kueue's webhook check it, and what is kept of it.

Checks, in order, each a one-line UserError naming the file, the Job and the field: the envelope
(``apiVersion: batch/v1``, metadata; ``generateName`` without a name gets the API server's five
random characters, so every apply of such a file creates a new Job, as ``kubectl create`` does);
the JSON Schema derived from the JobSpec (``schemas/job.v1.json``: wrong types, unknown fields);
then the Job's own validation (``k8s.io/kubernetes/pkg/apis/batch/validation``): ``parallelism``,
``completions``, ``backoffLimit``, ``activeDeadlineSeconds`` and ``ttlSecondsAfterFinished`` not
negative, ``completionMode`` NonIndexed or Indexed (Indexed needs ``completions``), the pod's
``restartPolicy`` Never or OnFailure (a pod's default, Always, is refused as the API server refuses
it). The pod template is read as a training instance's (``training.pod_template``: the first
container's command, args, env, resources; the image recorded, never pulled). What one machine can
never hold is refused before anything starts: more pods at once than it runs (``pod_room``).

Kueue: the ``kueue.x-k8s.io/queue-name`` label makes the Job a workload of that LocalQueue, its
``kueue.x-k8s.io/priority-class`` label gives its priority, and ``kueue.x-k8s.io/job-min-parallelism``
(partial admission) is read and kept; ``podset-required-topology`` (Topology Aware Scheduling) is
refused: this machine has no topology levels to place pods in.

Refused with their field named, because they change what the Job does and are not built here:
``podFailurePolicy``, ``successPolicy``, ``backoffLimitPerIndex``/``maxFailedIndexes``, ``managedBy``
and DRA resource claims. ``selector``, ``manualSelector`` and ``podReplacementPolicy`` are accepted
(``kubectl get -o yaml`` of a Job carries the generated selector back) and not kept: the selector is
always the generated one.
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import dataclass, field
from typing import Any

from millpond.datasets.fields import field_path, show
from millpond.documents import plain_value
from millpond.errors import UserError
from millpond.kind_handler import SchemaCheck
from millpond.manifest_envelope import ManifestBody, check_metadata
from millpond.scheduling import pod_room
from millpond.scheduling.queues.model import PRIORITY_LABEL, QUEUE_LABEL
from millpond.scheduling.queues.submission import check_queue_name
from millpond.training.batch.kinds import API_VERSION, KIND, SCHEMA
from millpond.training.pod_template import Container, read_pod

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
MAX_INDEXED = 100_000  # the API server's cap on an Indexed Job's completions and parallelism
GENERATED_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # the API server's alphabet for generateName's suffix
NAME_LIMIT = 63  # a Job's name is a label value of its pods (batch.kubernetes.io/job-name)
# Labels the Job controller puts on its pod template (shown by ``get``; dropped when applied back).
CONTROLLER_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid",
                     "job-name")
_UNSUPPORTED = ("podFailurePolicy", "successPolicy", "backoffLimitPerIndex", "maxFailedIndexes", "managedBy")
_DROPPED = ("selector", "manualSelector", "podReplacementPolicy")


@dataclass(frozen=True)
class JobSettings:
    """The spec fields the controller acts on, with the API server's defaults; re-read at every step, since
    ``parallelism``, ``suspend``, ``activeDeadlineSeconds``, ``backoffLimit`` and the TTL may change."""

    parallelism: int = 1
    completions: int | None = 1  # None: a work queue (done once any pod succeeded and none runs)
    indexed: bool = False
    backoff_limit: int = 6
    active_deadline_s: int | None = None
    ttl_s: int | None = None
    suspend: bool = False  # as the user asked; Kueue keeps a queued Job suspended until it is admitted
    restart_on_failure: bool = False  # restartPolicy OnFailure: a failed container restarts in its pod
    queue: str = ""
    priority: str = ""
    min_parallelism: int | None = None  # Kueue's partial admission: the fewest pods worth admitting

    @property
    def pods_wanted(self) -> int:
        """Pods to run at once when nothing has finished yet: Kueue's pod set count."""
        return self.parallelism if self.completions is None else min(self.parallelism, self.completions)


@dataclass
class JobManifest(ManifestBody):
    """One checked Job: the body kept (defaults filled in, generated fields dropped) and what it asks for."""

    body: dict[str, Any]
    settings: JobSettings
    container: Container
    notes: list[str] = field(default_factory=list)


def settings_of(body: dict[str, Any]) -> JobSettings:
    """The controller's reading of a stored (already checked) Job body."""
    spec = body["spec"]
    metadata = body["metadata"]
    labels = metadata.get("labels") or {}
    minimum = (metadata.get("annotations") or {}).get(MIN_PARALLELISM)
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    return JobSettings(
        parallelism=int(spec["parallelism"]), completions=spec.get("completions"),
        indexed=spec.get("completionMode") == "Indexed", backoff_limit=int(spec["backoffLimit"]),
        active_deadline_s=spec.get("activeDeadlineSeconds"), ttl_s=spec.get("ttlSecondsAfterFinished"),
        suspend=bool(spec.get("suspend")), restart_on_failure=restart == "OnFailure",
        queue=str(labels.get(QUEUE_LABEL) or ""), priority=str(labels.get(PRIORITY_LABEL) or ""),
        min_parallelism=int(minimum) if minimum is not None else None,
    )


def pod_spec(body: dict[str, Any]) -> dict[str, Any]:
    return dict((body["spec"].get("template") or {}).get("spec") or {})


def check_document(doc: Any, source: str, number: int, validate: SchemaCheck) -> JobManifest:
    """One Job document checked and normalised; UserError names the file, document, Job and field."""
    where = f"{source}: document {number}"
    doc = plain_value(doc, where)
    try:
        metadata = _named(doc.get("metadata"))
        label = f"{KIND} {metadata.get('name', '')}".strip()
        try:
            manifest = _check(doc, metadata, validate)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return manifest


def check_body(doc: dict[str, Any], validate: SchemaCheck) -> JobManifest:
    """A Job body another family builds (a JobSet's), checked as an applied one, errors led by the field alone."""
    return _check(doc, _named(doc.get("metadata")), validate)


def _named(metadata: object) -> dict[str, Any]:
    """The metadata with a name: ``generateName`` plus five random characters when none is given."""
    if not isinstance(metadata, dict):
        return {}
    prefix = metadata.get("generateName")
    if metadata.get("name") or not isinstance(prefix, str) or not prefix:
        return dict(metadata)
    suffix = "".join(secrets.choice(GENERATED_SUFFIX) for _ in range(5))
    return {**metadata, "name": prefix[:NAME_LIMIT - 5] + suffix, "generateName": prefix}


def _check(doc: dict[str, Any], metadata: dict[str, Any], validate: SchemaCheck) -> JobManifest:
    if doc.get("apiVersion") != API_VERSION:
        raise UserError(f"apiVersion {doc.get('apiVersion')!r} is not supported (millpond reads {API_VERSION})")
    kept = check_metadata(KIND, metadata, namespaced=True, generate_name=True)
    if len(kept["name"]) > NAME_LIMIT:
        raise UserError(f"metadata.name: {show(kept['name'])} must be no more than {NAME_LIMIT} characters "
                        "(it is a label value of the Job's pods)")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise UserError("spec: required field is missing")
    validate(SCHEMA, {**doc, "spec": spec})
    for name in _UNSUPPORTED:
        if spec.get(name) is not None:
            raise UserError(f"spec.{name}: not supported by this millpond (its Jobs have backoffLimit, "
                            "activeDeadlineSeconds and completions only)")
    spec = {key: copy.deepcopy(value) for key, value in spec.items() if key not in _DROPPED}
    settings = _settings(spec, kept)
    template = spec["template"]
    pod = dict(template.get("spec") or {})
    _check_pod(pod, template)
    container = read_pod(pod, "", ["spec", "template", "spec"], downward=True)
    if container.resources.shares:
        raise UserError("spec.template.spec.containers: a GPU share (aliyun.com/gpu-mem) is scheduled for "
                        "training jobs and model servers; a Job's pod asks for whole GPUs (nvidia.com/gpu)")
    too_many = pod_room.too_many(settings.pods_wanted, settings.pods_wanted, what="pods")
    if too_many:
        raise UserError(f"spec.parallelism: {settings.parallelism} pods at once can never run here: {too_many}")
    labels = dict(template.get("metadata", {}).get("labels") or {})
    for name in CONTROLLER_LABELS:
        labels.pop(name, None)
    template_metadata = {**(template.get("metadata") or {}), "labels": labels}
    if not labels:
        template_metadata.pop("labels")
    spec["template"] = {**template, "metadata": template_metadata} if template_metadata else \
        {key: value for key, value in template.items() if key != "metadata"}
    body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": kept, "spec": spec}
    return JobManifest(body, settings, container, notes=list(container.notes))


def _count(spec: dict[str, Any], name: str, default: int | None) -> int | None:
    """A count field of the spec, defaulted and filled in; negative refused as the API server does."""
    value = spec.get(name, default)
    if value is None:
        return None
    if int(value) < 0:
        raise UserError(f"spec.{name}: Invalid value: {value}: must be greater than or equal to 0")
    spec[name] = int(value)
    return int(value)


def _settings(spec: dict[str, Any], metadata: dict[str, Any]) -> JobSettings:
    """Defaults as the API server fills them in (both counts unset: 1 and 1; parallelism alone: a work queue)."""
    if "template" not in spec:
        raise UserError("spec.template: Required value")
    both_unset = spec.get("parallelism") is None and spec.get("completions") is None
    parallelism = _count(spec, "parallelism", 1)
    completions = _count(spec, "completions", 1 if both_unset else None)
    backoff = _count(spec, "backoffLimit", 6)
    for name in ("activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        _count(spec, name, None)
    mode = spec.setdefault("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        raise UserError(f'spec.completionMode: Unsupported value: {show(mode)}: supported values: "NonIndexed", '
                        '"Indexed"')
    if mode == "Indexed":
        if completions is None:
            raise UserError("spec.completions: Required value: when completion mode is Indexed")
        if completions > MAX_INDEXED or (parallelism or 0) > MAX_INDEXED:
            raise UserError(f"spec.completions: must be no more than {MAX_INDEXED} for an Indexed Job")
    suspend = spec.setdefault("suspend", False)
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    queue = check_queue_name(str(labels.get(QUEUE_LABEL) or ""), f"metadata.labels[{QUEUE_LABEL}]")
    minimum = annotations.get(MIN_PARALLELISM)
    if minimum is not None:
        if not str(minimum).isdigit() or not 1 <= int(minimum) < max(2, (parallelism or 0) + 1):
            raise UserError(f"metadata.annotations[{MIN_PARALLELISM}]: {show(minimum)} must be a whole number from "
                            f"1 to spec.parallelism ({parallelism})")
    assert parallelism is not None and backoff is not None
    return JobSettings(parallelism=parallelism, completions=completions, indexed=mode == "Indexed",
                       backoff_limit=backoff, active_deadline_s=spec.get("activeDeadlineSeconds"),
                       ttl_s=spec.get("ttlSecondsAfterFinished"), suspend=bool(suspend),
                       restart_on_failure=(spec["template"].get("spec") or {}).get("restartPolicy") == "OnFailure",
                       queue=queue, priority=str(labels.get(PRIORITY_LABEL) or ""),
                       min_parallelism=int(minimum) if minimum is not None else None)


def _check_pod(pod: dict[str, Any], template: dict[str, Any]) -> None:
    """What a Job's pod must be (its restartPolicy), and what cannot exist on this machine."""
    where = ["spec", "template", "spec"]
    restart = pod.get("restartPolicy", "Always")
    if restart not in ("Never", "OnFailure"):
        raise UserError(f'{field_path([*where, "restartPolicy"])}: Unsupported value: {show(restart)}: supported '
                        'values: "OnFailure", "Never"')
    if pod.get("resourceClaims"):
        raise UserError(f"{field_path([*where, 'resourceClaims'])}: a DRA resource claim cannot exist here "
                        "(millpond counts cpu, memory and nvidia.com/gpu)")
    for index, container in enumerate(pod.get("containers") or ()):
        if isinstance(container, dict) and (container.get("resources") or {}).get("claims"):
            raise UserError(f"{field_path([*where, 'containers', index, 'resources', 'claims'])}: a DRA resource "
                            "claim cannot exist here (millpond counts cpu, memory and nvidia.com/gpu)")
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    if REQUIRED_TOPOLOGY in annotations:
        raise UserError(f"spec.template.metadata.annotations[{REQUIRED_TOPOLOGY}]: Topology Aware Scheduling "
                        "needs a cluster's topology levels; this machine has none")
