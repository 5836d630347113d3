"""Model-server replicas as the pods KServe (serverless, on Knative) would run for an InferenceService.

Each replica of each revision (``NAME-predictor-00001``…) is one pod, named as a Knative revision's
Deployment names its pods (``NAME-predictor-00001-deployment-xxxxxxxxxx-xxxxx``, the suffixes derived
from the InferenceService and the replica, stable), labelled as KServe and Knative label them
(``serving.kserve.io/inferenceservice``, ``component: predictor``, ``app`` and
``serving.knative.dev/revision``: the revision), with one container ``kserve-container``.
A replica's process dying and restarting is a container restart (its ``restartCount``), as the kubelet
restarts a crashed container in the same pod (CrashLoopBackOff between).

Read from what the InferenceService's live supervisor publishes (``serving.endpoints``): an
InferenceService no supervisor serves has no pods. Simplified: the owner reference names the
InferenceService (no ReplicaSet exists here), and every revision shows the current predictor's
container (image, command, args).
"""

from __future__ import annotations

import datetime as dt
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
    Waiting,
    name_suffix,
    pod_uid,
)
from millpond.scheduling.queues.model import QUEUE_LABEL
from millpond.serving import endpoints
from millpond.serving.spec import predictor_spec
from millpond.store.resources import Resource, ResourceStore

INFERENCE_SERVICE = "serving.kserve.io/inferenceservice"
CONTAINER = "kserve-container"


class ServingPods:
    """The replicas of every InferenceService a supervisor serves now."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        found: list[PodView] = []
        for resource in ResourceStore(context.settings).list("InferenceService", namespace):
            served = endpoints.read(resource.namespace, resource.name)
            if served is None or served.uid != resource.uid:
                continue
            for replica in served.extra.get("replicas") or []:
                if isinstance(replica, dict):
                    found.append(replica_pod(resource, replica))
        return found


SOURCE = ServingPods()


def replica_pod(resource: Resource, replica: dict[str, Any]) -> PodView:
    """One replica (as ``serving.supervisor`` publishes it) as its pod."""
    revision, index = str(replica["revision"]), int(replica["index"])
    name = (f"{revision}-deployment-{name_suffix(f'{resource.uid}/{revision}', 10)}-"
            f"{name_suffix(f'{resource.uid}/{revision}/{index}')}")
    started = _moment(replica.get("started"))
    state = _state(replica, started)
    pid = replica.get("pid")
    container_spec = predictor_spec(resource.manifest).container
    container = ContainerView(
        name=CONTAINER, image=container_spec.image or "", state=state, command=container_spec.command,
        args=container_spec.args, ready=bool(replica.get("url")), restart_count=int(replica.get("restarts") or 0),
        log=LogFile(Path(str(replica["log"]))) if replica.get("log") else None,
        process=ProcessRef(int(pid), replica.get("ticks")) if pid else None)
    knative = f"{resource.name}-predictor"
    labels = {INFERENCE_SERVICE: resource.name, "component": "predictor", "app": revision,
              "serving.knative.dev/revision": revision, "serving.knative.dev/configuration": knative,
              "serving.knative.dev/service": knative}
    queue = ((resource.manifest.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    if queue:
        labels[QUEUE_LABEL] = str(queue)
    return PodView(
        name=name, namespace=resource.namespace, uid=pod_uid(resource.uid, name), created_at=resource.created_at,
        containers=(container,), owner=OwnerRef("serving.kserve.io/v1beta1", "InferenceService", resource.name,
                                                resource.uid),
        labels=labels, started_at=started, restart_policy="Always")


def _state(replica: dict[str, Any], started: dt.datetime | None) -> ContainerState:
    """Running while its process lives; between restarts CrashLoopBackOff (or why it cannot start); before
    its first start ContainerCreating (its model being fetched, its resources waited for)."""
    if replica.get("pid"):
        return Running(started or dt.datetime.now(dt.timezone.utc))
    if replica.get("blocked"):
        return Waiting(str(replica["blocked"]), str(replica.get("failure") or ""))
    if int(replica.get("restarts") or 0):
        return Waiting("CrashLoopBackOff", str(replica.get("failure") or ""))
    return Waiting("ContainerCreating", str(replica.get("failure") or ""))


def _moment(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None
