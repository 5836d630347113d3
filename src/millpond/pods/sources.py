"""Every family's pods, gathered: the one place a pod source is registered, and how a pod is found by name.

``SOURCES`` names each source's module (its ``SOURCE``, a ``records.PodSource``), loaded when pods
are first listed, so ``millpond get datasets`` never imports the training or serving stack. Adding a
family's pods is one line here (see ``records``). A pod deleted with ``delete pod`` is left out until
its owner made it again (``deletions``).
"""

from __future__ import annotations

import importlib

from millpond.errors import NotFoundError
from millpond.kind_handler import KindContext
from millpond.pods import deletions, sidecars
from millpond.pods.records import PodSource, PodView

SOURCES: tuple[str, ...] = (
    "millpond.pods.training_pods",
    "millpond.pods.batch_pods",
    "millpond.pods.ray_pods",
    "millpond.pods.serving_pods",
    "millpond.pods.pipeline_pods",
    "millpond.pods.notebook_pods",
)


def sources() -> list[PodSource]:
    """Each registered source (its module loaded once)."""
    return [importlib.import_module(module).SOURCE for module in SOURCES]


def all_pods(namespace: str | None, context: KindContext) -> list[PodView]:
    """The pods of ``namespace`` (every namespace: None), each source's in its order, deleted ones left out,
    with the sidecars their templates ask for (``sidecars``)."""
    gone = deletions.read(context.settings)
    found = (deletions.shown(sidecars.injected(pod), gone) for source in sources()
             for pod in source.pods(namespace, context))
    return [pod for pod in found if pod is not None]


def find(name: str, namespace: str, context: KindContext) -> PodView:
    """The pod ``name`` of ``namespace``; kubectl's NotFound line when there is none."""
    for pod in all_pods(namespace, context):
        if pod.name == name:
            return pod
    suffix = f' in namespace "{namespace}"' if namespace != "default" else ""
    raise NotFoundError(f'pods "{name}" not found{suffix}')
