"""The training kinds at ``millpond apply``, ``get`` and ``delete`` (PyTorchJob, MPIJob, TFJob, TrainJob, runtimes).

``resources`` splits an apply's documents by kind (``training.kinds.KINDS`` beside Fluid's
``datasets.kinds.KINDS``) and hands the training ones here; ``get``/``delete`` of a training
kind come here too. Imported only when such a kind is named.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from millpond.errors import NotFoundError
from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from millpond.training import applying, jobs
from millpond.training.conditions import state
from millpond.training.kinds import KINDS, TrainingKind
from millpond.training.manifests import TrainingManifest, check_document
from millpond.training.views import short_duration


def is_training(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("kind") in KINDS


def check(documents: list[tuple[str, int, Any]], resources: ResourceStore) -> tuple[list[TrainingManifest], list[str]]:
    """Every training document checked and what applying it does; nothing stored."""
    manifests: list[TrainingManifest] = []
    for source, number, doc in documents:
        manifests.append(check_document(doc, source, number, applying.runtime_lookup(resources, manifests)))
    return manifests, applying.plan_actions(manifests, JobStore())


def apply(manifests: list[TrainingManifest], actions: list[str], resources: ResourceStore) -> None:
    for info, name, action in applying.apply(manifests, actions, JobStore(), resources):
        print(f"{info.resource}/{name} {action}")
    for manifest in manifests:
        for note in manifest.notes:
            print(f"info: {manifest.info.kind} {manifest.name}: {note}", file=sys.stderr)


def _not_found(info: TrainingKind, name: str, namespace: str) -> str:
    return f'{info.plural}.{info.group} "{name}" not found' + (
        f' in namespace "{namespace}"' if namespace != "default" else "")


def get(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> tuple[list[str], list[list[str]], Any] | None:
    """(headers, rows, None) for a table, or (.., .., value) for -o json/yaml; None when nothing was found."""
    if info.trainer is None:
        return _get_runtimes(info, name, namespace, all_namespaces, output)
    store = JobStore()
    if name is not None:
        found = [job for job in applying.jobs_of_kind(info, namespace, store) if job.name == name]
        if not found:
            raise NotFoundError(_not_found(info, name, namespace))
    else:
        found = applying.jobs_of_kind(info, None if all_namespaces else namespace, store)
    if output in ("json", "yaml"):
        objects = [applying.job_object(job, store) for job in found]
        return [], [], objects[0] if name is not None else {"apiVersion": "v1", "kind": "List", "items": objects}
    if not found:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    rows = [[job.name, state(job), short_duration((now - job.created_at).total_seconds())] for job in found]
    headers = ["NAME", "STATE", "AGE"]
    if all_namespaces:
        headers = ["NAMESPACE", *headers]
        rows = [[job.namespace, *cells] for job, cells in zip(found, rows, strict=True)]
    return headers, rows, None


def _get_runtimes(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
                  output: str) -> tuple[list[str], list[list[str]], Any] | None:
    store = ResourceStore()
    where = applying.STORE_NAMESPACE_OF_CLUSTER if info.cluster_scoped else namespace
    if name is not None:
        one = store.get(info.kind, name, where)
        if one is None:
            raise NotFoundError(_not_found(info, name, namespace))
        found = [one]
    else:
        found = store.list(info.kind, None if all_namespaces and not info.cluster_scoped else where)
    if output in ("json", "yaml"):
        objects = [resource.as_object({}) for resource in found]
        for one in objects if info.cluster_scoped else ():
            one["metadata"].pop("namespace", None)  # a cluster-scoped object has none
        return [], [], objects[0] if name is not None else {"apiVersion": "v1", "kind": "List", "items": objects}
    if not found:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    return ["NAME", "AGE"], [[r.name, short_duration((now - r.created_at).total_seconds())] for r in found], None


def delete(info: TrainingKind, name: str, namespace: str) -> None:
    """Stop a job's processes and forget it, or forget a runtime."""
    if info.trainer is None:
        where = applying.STORE_NAMESPACE_OF_CLUSTER if info.cluster_scoped else namespace
        if not ResourceStore().delete(info.kind, name, where):
            raise NotFoundError(_not_found(info, name, namespace))
    else:
        if not any(job.name == name for job in applying.jobs_of_kind(info, namespace, JobStore())):
            raise NotFoundError(_not_found(info, name, namespace))
        jobs.delete(name, namespace)
    print(f'{info.resource} "{name}" deleted')
