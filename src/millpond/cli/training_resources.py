"""The training kinds at ``millpond apply``, ``get`` and ``delete`` (PyTorchJob, MPIJob, TFJob, TrainJob, runtimes).

``resources`` resolves every kind through ``millpond.kinds.REGISTRY`` and hands the training
ones here (apply's documents, ``get`` and ``delete``); what they find is ``training.objects``'s,
which the server's resource routes share.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from millpond.training import applying, objects
from millpond.training.conditions import state
from millpond.training.kinds import TrainingKind
from millpond.training.manifests import TrainingManifest
from millpond.training.views import short_duration


def check(documents: list[tuple[str, int, Any]], resources: ResourceStore) -> tuple[list[TrainingManifest], list[str]]:
    """Every training document checked and what applying it does; nothing stored."""
    return objects.check(documents, resources, JobStore())


def apply(manifests: list[TrainingManifest], actions: list[str], resources: ResourceStore) -> None:
    for info, name, action in applying.apply(manifests, actions, JobStore(), resources):
        print(f"{info.resource}/{name} {action}")
    for manifest in manifests:
        for note in manifest.notes:
            print(f"info: {manifest.info.kind} {manifest.name}: {note}", file=sys.stderr)


def get(info: TrainingKind, name: str | None, namespace: str, all_namespaces: bool,
        output: str) -> tuple[list[str], list[list[str]], Any] | None:
    """(headers, rows, None) for a table, or (.., .., value) for -o json/yaml; None when nothing was found."""
    job_store, resources = JobStore(), ResourceStore()
    if output in ("json", "yaml"):
        return [], [], objects.as_objects(info, name, namespace, all_namespaces, job_store, resources)
    now = dt.datetime.now(dt.timezone.utc)
    if info.trainer is None:
        runtimes = objects.found_runtimes(info, name, namespace, all_namespaces, resources)
        if not runtimes:
            return None
        return ["NAME", "AGE"], [[r.name, short_duration((now - r.created_at).total_seconds())] for r in runtimes], None
    found = objects.found_jobs(info, name, namespace, all_namespaces, job_store)
    if not found:
        return None
    rows = [[job.name, state(job), short_duration((now - job.created_at).total_seconds())] for job in found]
    headers = ["NAME", "STATE", "AGE"]
    if all_namespaces:
        headers = ["NAMESPACE", *headers]
        rows = [[job.namespace, *cells] for job, cells in zip(found, rows, strict=True)]
    return headers, rows, None


def delete(info: TrainingKind, name: str, namespace: str) -> None:
    """Stop a job's processes and forget it, or forget a runtime."""
    objects.delete(info, name, namespace, JobStore(), ResourceStore())
    print(f'{info.resource} "{name}" deleted')
