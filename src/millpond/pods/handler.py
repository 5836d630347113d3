"""The ``v1`` Pod kind in the one registry of kinds: ``get``/``describe``/``delete`` (and the Kubernetes API's
``/api/v1/.../pods``) of the pods every family's source shows (``pods.sources``).

Importing this module registers it. Pods are views: applying one is refused with one line (a pod
is made by its owner: apply the job, InferenceService or pipeline that runs it); deleting one stops
its processes (``pods.stopping``) and its owner restarts it where its controller would.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from millpond.errors import UserError
from millpond.kind_handler import ApplyBatch, ApplyOutcome, Document, HandlerBase, KindContext, KindName, Table
from millpond.kinds import REGISTRY
from millpond.pods import objects, sources, stopping
from millpond.pods.kinds import OWNER, POD


class _Refused:
    """No plan: ``check`` refuses every Pod document before anything is stored."""

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        return ApplyOutcome()


class PodHandler(HandlerBase):
    owner = OWNER
    apply_order = 90
    kinds = (POD,)

    def claims(self, doc: object) -> bool:
        return isinstance(doc, dict) and doc.get("kind") == "Pod" and doc.get("apiVersion") == "v1"

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Refused:
        for source, number, doc in documents:
            name = ((doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None) or "(no name)"
            raise UserError(f"{source}: document {number}: Pod {name}: pods here are the processes millpond runs, "
                            "made by their owners: apply the Job, PyTorchJob, TrainJob, InferenceService or "
                            "pipeline that runs it")
        return _Refused()

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return objects.as_object(sources.find(name, namespace, context))

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [objects.as_object(pod) for pod in sources.all_pods(None if all_namespaces else namespace, context)]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return objects.COLUMNS

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        pods = ([sources.find(name, namespace, context)] if name is not None
                else sources.all_pods(None if all_namespaces else namespace, context))
        now = dt.datetime.now(dt.timezone.utc)
        return Table.listing(objects.COLUMNS, [(pod.namespace, objects.cells(pod, now)) for pod in pods],
                             cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Stop the pod's processes as the kubelet would; its owner restarts it where its controller would."""
        stopping.delete_pod(sources.find(name, namespace, context), context)


REGISTRY.register_handler(PodHandler())
