"""A Notebook as the Jupyter web app's list shows it: JWA's ``notebook_dict_from_k8s_obj`` and ``process_status``.

Upstream (``crud-web-apps/jupyter/backend/apps/common/utils.py`` and ``status.py``) lists each notebook with its
name, image, CPU and memory requests, GPUs, volumes, last activity (the culler's
``notebooks.kubeflow.org/last-activity`` annotation), creation time and a processed status whose phase is
``ready``, ``waiting``, ``warning``, ``stopped`` or ``terminating``. The phases here are the page's words for
the same tests, in the same order: ``stopped`` (the ``kubeflow-resource-stopped`` annotation and no ready
replica; ``waiting`` "stopping" while one is), ``running`` (``readyReplicas`` 1: upstream's ``ready``),
``waiting`` with the reason (no status yet in its first 10 s, not scheduled yet, starting) and ``error`` (a
container state that is neither: ``CrashLoopBackOff``, a supervisor gone: upstream's ``warning``). Simplified:
upstream's last resort, the notebook's Warning events, is not read (the supervisor writes the reason into the
status itself). The GPUs are whole (``nvidia.com/gpu``) or a share (``aliyun.com/gpu-mem`` GiB, with
``aliyun.com/gpu-core.percentage``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.notebooks.kinds import LAST_ACTIVITY_ANNOTATION, STOP_ANNOTATION, base_url
from millpond.training.pod_template import GPU, GPU_CORE, GPU_MEM

WAITING_REASONS = frozenset({"Pending", "ContainerCreating", "PodInitializing"})
FIRST_SECONDS = 10  # upstream shows "waiting" for a notebook with no status yet, this long


def _age_seconds(created: str, now: dt.datetime) -> float:
    try:
        made = dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return float("inf")
    return (now - made).total_seconds()


def status_of(notebook: dict[str, Any], now: dt.datetime | None = None) -> dict[str, str]:
    """``{phase, message}``: running, waiting, stopped or error, with why (upstream's ``process_status`` order)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    metadata = notebook.get("metadata") or {}
    status = notebook.get("status") or {}
    state = status.get("containerState") or {}
    ready = status.get("readyReplicas") or 0
    if not state and not status.get("conditions") and STOP_ANNOTATION not in (metadata.get("annotations") or {}) \
            and _age_seconds(str(metadata.get("creationTimestamp") or ""), now) <= FIRST_SECONDS:
        return {"phase": "waiting", "message": "Waiting for the notebook's server to be started."}
    if STOP_ANNOTATION in (metadata.get("annotations") or {}):
        if ready:
            return {"phase": "waiting", "message": "Notebook Server is stopping."}
        return {"phase": "stopped", "message": "No Pods are currently running for this Notebook Server."}
    if "deletionTimestamp" in metadata:
        return {"phase": "waiting", "message": "Deleting this Notebook Server."}
    if ready == 1:
        return {"phase": "running", "message": "Running"}
    if "running" in state:
        return {"phase": "waiting", "message": "Starting: JupyterLab is not answering yet."}
    for key in ("waiting", "terminated"):
        if key in state:
            reason = str(state[key].get("reason") or key.capitalize())
            message = str(state[key].get("message") or "")
            phase = "waiting" if key == "waiting" and reason in WAITING_REASONS else "error"
            return {"phase": phase, "message": f"{reason}: {message}" if message else reason}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True" and condition.get("reason"):
            return {"phase": "waiting", "message": f"{condition['reason']}: {condition.get('message', '')}"}
    return {"phase": "waiting", "message": "Waiting for the notebook's server to be started."}


def gpus_of(limits: dict[str, Any]) -> dict[str, Any]:
    """``{count, message, shared}``: whole GPUs (``1 NVIDIA``) or a share (``4 GiB of one GPU, 50%``)."""
    if limits.get(GPU_MEM) is not None:
        core = limits.get(GPU_CORE)
        message = f"{limits[GPU_MEM]} GiB of one GPU" + (f", {core}% of its compute" if core is not None else "")
        return {"count": 0, "message": message, "shared": True}
    count = str(limits.get(GPU) or "0")
    whole = int(count) if count.isdigit() else 0
    return {"count": whole, "message": f"{whole} NVIDIA" if whole else "", "shared": False}


def notebook_row(notebook: dict[str, Any]) -> dict[str, Any]:
    """What the list shows of one Notebook (upstream's ``notebook_dict_from_k8s_obj``), and where Connect goes."""
    metadata = notebook.get("metadata") or {}
    pod = ((notebook.get("spec") or {}).get("template") or {}).get("spec") or {}
    container = (pod.get("containers") or [{}])[0]
    spec = container.get("resources") or {}
    requests, limits = spec.get("requests") or {}, spec.get("limits") or {}
    merged = {**requests, **limits}
    annotations = metadata.get("annotations") or {}
    image = str(container.get("image") or "")
    name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "default")
    return {
        "name": name, "namespace": namespace,
        "age": metadata.get("creationTimestamp") or "",
        "last_activity": annotations.get(LAST_ACTIVITY_ANNOTATION, ""),
        "image": image, "shortImage": image.split("/")[-1],
        "cpu": str(requests.get("cpu") or limits.get("cpu") or ""),
        "memory": str(requests.get("memory") or limits.get("memory") or ""),
        "gpus": gpus_of(merged),
        "volumes": [str(mount.get("name") or "") for mount in container.get("volumeMounts") or []],
        "status": status_of(notebook),
        "stopped": STOP_ANNOTATION in annotations,
        "url": f"{base_url(namespace, name)}/lab",
    }
