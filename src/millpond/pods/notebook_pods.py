"""A Notebook's pod as the notebook controller makes it: its StatefulSet's one pod ``NAME-0``, labelled
``statefulset: NAME`` and ``notebook-name: NAME`` beside the template's labels, its container the
notebook's (the template's first: name and image), owned by the StatefulSet ``NAME``.

Read from what the notebook's supervisor last wrote (``notebooks.objects.view``); a stopped notebook
(``kubeflow-resource-stopped``: the StatefulSet scaled to 0) has no pod. Deleting the running pod
stops the Jupyter server: its supervisor starts it again, as the StatefulSet makes the pod again.
The server's log is Jupyter's own output (its lines carry Jupyter's own times, not a stamp each). The pod
carries ``millpond.io/ran-in``: the runtime its server ran in (``podman``, ``docker``), or ``host: WHY``
(``notebooks.in_image``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from millpond.kind_handler import KindContext
from millpond.notebooks import objects
from millpond.notebooks.kinds import NAME_LABEL, NOTEBOOK, STATEFULSET_LABEL, STOP_ANNOTATION
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
    pod_uid,
)
from millpond.runners.containers.policy import RAN_IN
from millpond.store.resources import Resource, ResourceStore


class NotebookPods:
    """The pod of every running (or starting) Notebook."""

    def pods(self, namespace: str | None, context: KindContext) -> list[PodView]:
        found = []
        for resource in ResourceStore(context.settings).list(NOTEBOOK.kind, namespace):
            annotations = resource.manifest.get("metadata", {}).get("annotations") or {}
            view = objects.view(context.settings, resource.uid)
            if STOP_ANNOTATION not in annotations and view is not None and not view.get("stopped"):
                found.append(_pod(resource, view))
        return found


SOURCE = NotebookPods()


def _moment(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _state(shown: dict[str, Any]) -> ContainerState:
    state = shown.get("container_state") or {}
    if "running" in state:
        return Running(_moment(state["running"].get("startedAt")) or dt.datetime.now(dt.timezone.utc))
    if "terminated" in state:
        ended = state["terminated"]
        return Terminated(int(ended.get("exitCode", 1)), str(ended.get("reason") or "Error"),
                          _moment(ended.get("startedAt")), _moment(ended.get("finishedAt")))
    waiting = state.get("waiting") or {}
    return Waiting(str(waiting.get("reason") or "ContainerCreating"), str(waiting.get("message") or ""))


def _pod(resource: Resource, shown: dict[str, Any]) -> PodView:
    pod = (resource.spec.get("template") or {})
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    state = _state(shown)
    pid = shown.get("pid")
    container = ContainerView(
        name=str(containers[0].get("name") or resource.name), image=str(containers[0].get("image") or ""),
        state=state, restart_count=int(shown.get("restarts") or 0), ready=bool(shown.get("ready")),
        log=LogFile(Path(shown["log"]), stamped=False) if shown.get("log") else None,
        process=ProcessRef(pid, shown.get("ticks")) if isinstance(pid, int) else None)
    labels = {**((pod.get("metadata") or {}).get("labels") or {}),
              STATEFULSET_LABEL: resource.name, NAME_LABEL: resource.name}
    owner_uid = pod_uid(resource.uid, "statefulset")
    return PodView(
        name=f"{resource.name}-0", namespace=resource.namespace, uid=pod_uid(resource.uid, f"{resource.name}-0"),
        created_at=resource.created_at, containers=(container,),
        owner=OwnerRef("apps/v1", "StatefulSet", resource.name, owner_uid), labels=labels,
        annotations={RAN_IN: str(shown["ran_in"])} if shown.get("ran_in") else {},
        started_at=_moment(shown.get("started_at")), restart_policy="Always")
