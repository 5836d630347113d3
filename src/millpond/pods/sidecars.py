"""Injected sidecars: a container a mutating webhook would add to a pod, shown as a view of another container.

Some controllers' webhooks add a container to the pods they care about (Katib's metrics collector,
``metrics-logger-and-collector``, prints the training container's output or its metrics file). millpond
runs no webhook and no second process for it: the owner of the pod template says so with the annotation
:data:`ANNOTATION` (a JSON :class:`MirrorSidecar`), and every pod whose labels match its ``selector``
gets that container, whose state follows the container it watches (running while it runs; ended when it
ends: ``Completed``, or ``Error`` with ``failed_exit_code`` when that one failed) and whose log is that
container's log (``mirrors``) or a file (``file``). The Pod kind applies it to every family's pods
(``sources.all_pods``) without knowing who asked; the annotation itself is not shown on the pod, as a
webhook leaves none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from millpond.pods.records import ContainerView, LogFile, PodView, Running, Terminated

ANNOTATION = "millpond.io/injected-sidecar"


@dataclass(frozen=True)
class MirrorSidecar:
    """The container to add: ``name``, ``image`` and ``args`` as the webhook writes them; its log is container
    ``mirrors``' (or, with ``file``, that file's lines as written); only on pods whose labels include ``selector``."""

    name: str
    image: str
    mirrors: str
    args: tuple[str, ...] = ()
    file: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    failed_exit_code: int = 1


def annotation(sidecar: MirrorSidecar) -> str:
    """The annotation's value for ``sidecar`` (what a pod template carries)."""
    return json.dumps({"name": sidecar.name, "image": sidecar.image, "mirrors": sidecar.mirrors,
                       "args": list(sidecar.args), "file": sidecar.file, "selector": dict(sidecar.selector),
                       "failedExitCode": sidecar.failed_exit_code}, sort_keys=True)


def read(annotations: Mapping[str, str]) -> MirrorSidecar | None:
    """The sidecar a pod's annotations ask for; None when none does or the value is not one (nothing is added)."""
    text = annotations.get(ANNOTATION)
    if not text:
        return None
    try:
        value = json.loads(text)
        return MirrorSidecar(str(value["name"]), str(value["image"]), str(value["mirrors"]),
                             tuple(str(arg) for arg in value.get("args") or ()), str(value.get("file") or ""),
                             {str(k): str(v) for k, v in (value.get("selector") or {}).items()},
                             int(value.get("failedExitCode", 1)))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def injected(pod: PodView) -> PodView:
    """``pod`` with the sidecar its annotations ask for (when its labels match and the mirrored container is
    there), the annotation left out."""
    sidecar = read(pod.annotations)
    if sidecar is None:
        return pod
    shown = replace(pod, annotations={k: v for k, v in pod.annotations.items() if k != ANNOTATION})
    watched = pod.container(sidecar.mirrors)
    if watched is None or pod.container(sidecar.name) is not None or \
            any(pod.labels.get(key) != value for key, value in sidecar.selector.items()):
        return shown
    return replace(shown, containers=(*pod.containers, _container(sidecar, watched)))


def _container(sidecar: MirrorSidecar, watched: ContainerView) -> ContainerView:
    state = watched.state
    if isinstance(state, Terminated):
        state = Terminated(0, "Completed", state.started_at, state.finished_at) if state.exit_code == 0 else \
            Terminated(sidecar.failed_exit_code, "Error", state.started_at, state.finished_at)
    log = watched.log
    if sidecar.file:
        log = LogFile(Path(sidecar.file), stamped=False)
    return ContainerView(name=sidecar.name, image=sidecar.image, state=state, args=sidecar.args,
                         ready=isinstance(state, Running), log=log)
