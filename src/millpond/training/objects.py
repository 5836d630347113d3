"""The objects of a training kind as ``millpond apply``/``get``/``delete`` and the server's resource routes see them.

A job kind's objects are the jobs of that kind (an ``arena submit pytorch`` job is a
PyTorchJob); a runtime kind's are the runtimes applied, cluster-scoped ones kept under
``manifest_envelope.CLUSTER_STORE_NAMESPACE``. The CLI prints them as a table or as kubectl's
``-o json/yaml``; the server returns the same JSON.
"""

from __future__ import annotations

from typing import Any

from millpond.manifest_envelope import as_list, found, not_found, store_namespace
from millpond.store.resources import Resource, ResourceStore
from millpond.store.training import JobRecord, JobStore
from millpond.training import applying, jobs
from millpond.training.kinds import TrainingKind
from millpond.training.manifests import TrainingManifest, check_document


def check(documents: list[tuple[str, int, Any]], resources: ResourceStore,
          job_store: JobStore) -> tuple[list[TrainingManifest], list[str]]:
    """Every training document (source, number, document) checked and what applying it does; nothing stored."""
    manifests: list[TrainingManifest] = []
    for source, number, doc in documents:
        manifests.append(check_document(doc, source, number, applying.runtime_lookup(resources, manifests)))
    return manifests, applying.plan_actions(manifests, job_store)


def found_jobs(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
               store: JobStore) -> list[JobRecord]:
    """The jobs of a job kind: the one named (NotFoundError if none), or those of ``namespace`` (or all)."""
    if name is not None:
        named = [job for job in applying.jobs_of_kind(info, namespace, store) if job.name == name]
        if not named:
            raise not_found(info.names, name, namespace)
        return named
    return applying.jobs_of_kind(info, None if all_namespaces else namespace, store)


def found_runtimes(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
                   store: ResourceStore) -> list[Resource]:
    """The runtimes of a runtime kind, as ``found_jobs`` finds jobs."""
    return found(info.names, name, namespace, all_namespaces, store)


def as_objects(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
               job_store: JobStore, resources: ResourceStore) -> dict[str, Any]:
    """The object named, or a kubectl ``List`` of them: what ``get -o json`` prints."""
    if info.trainer is None:
        objects = [resource.as_object({}) for resource in
                   found_runtimes(info, name, namespace, all_namespaces, resources)]
        for one in objects if info.cluster_scoped else ():
            one["metadata"].pop("namespace", None)  # a cluster-scoped object has none
    else:
        objects = [applying.job_object(job, job_store)
                   for job in found_jobs(info, name, namespace, all_namespaces, job_store)]
    return objects[0] if name is not None else as_list(objects)


def delete(info: TrainingKind, name: str, namespace: str, job_store: JobStore, resources: ResourceStore) -> None:
    """Stop a job's processes and forget it, or forget a runtime; NotFoundError when there is none."""
    if info.trainer is None:
        if not resources.delete(info.kind, name, store_namespace(info.names, namespace)):
            raise not_found(info.names, name, namespace)
        return
    found_jobs(info, name, namespace, False, job_store)
    jobs.delete(name, namespace, job_store)
