"""The downward API of a Job's pod: what the kubelet puts in a container's env for ``valueFrom.fieldRef``.

The pod template names the fields (``training.pod_template.field_refs`` checked them at apply); the Job's
controller resolves them as each pod starts, from that pod's own metadata: its name and namespace, its
uid (the pod's record has none: the Job's uid and the pod's name stand for it), the labels and annotations
the Job controller put on it (``batch.kubernetes.io/job-completion-index`` of an Indexed Job's pod, a
JobSet's ``jobset.sigs.k8s.io/*``) beside the template's; the node is this machine and every pod's address
is the loopback one, as on one host. A label or annotation the pod does not carry is the empty string, as
the kubelet gives it.
"""

from __future__ import annotations

from dataclasses import dataclass

from millpond.training.pod_template import FIELD_ENTRY
from millpond.training.views import node_name

LOCAL_IP = "127.0.0.1"


@dataclass(frozen=True)
class PodFacts:
    """What a pod's fields resolve from."""

    name: str
    namespace: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    service_account: str = "default"


def resolve(path: str, pod: PodFacts) -> str:
    """The value of ``fieldPath`` ``path`` (one the apply accepted) for ``pod``."""
    entry = FIELD_ENTRY.fullmatch(path)
    if entry is not None:
        table = pod.labels if entry.group(1) == "labels" else pod.annotations
        return table.get(entry.group(2), "")
    values = {"metadata.name": pod.name, "metadata.namespace": pod.namespace, "metadata.uid": pod.uid,
              "spec.nodeName": node_name().lower(), "spec.serviceAccountName": pod.service_account,
              "status.hostIP": LOCAL_IP, "status.hostIPs": LOCAL_IP, "status.podIP": LOCAL_IP,
              "status.podIPs": LOCAL_IP}
    return values.get(path, "")


def environment(fields: tuple[tuple[str, str], ...], pod: PodFacts) -> dict[str, str]:
    """Each (name, fieldPath) of the container's env resolved for ``pod``."""
    return {name: resolve(path, pod) for name, path in fields}
