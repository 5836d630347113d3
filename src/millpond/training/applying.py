"""``millpond apply`` / ``get`` / ``delete`` of training kinds, below the CLI (the server can use it too).

Apply is all or nothing, as for Fluid's kinds: every job is checked (``jobs.check``, as a manifest:
what Kubernetes would leave Pending — a claim naming a dataset not there yet, more than this
machine has — is accepted and waits QUEUING; a free name) before anything is stored. A job's spec
cannot change once created (as the operators' webhooks refuse it): applying the same manifest
again is ``unchanged``, a different one a ConflictError. Runtimes are stored in the resource
store, beside Fluid's objects.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from millpond.errors import ConflictError, UserError
from millpond.manifest_envelope import CLUSTER_STORE_NAMESPACE as STORE_NAMESPACE_OF_CLUSTER
from millpond.store.resources import ResourceStore
from millpond.store.training import JobRecord, JobStore
from millpond.training import jobs
from millpond.training.conditions import job_status
from millpond.training.kinds import KINDS, TrainingKind, job_kind
from millpond.training.manifests import RuntimeLookup, TrainingManifest
from millpond.training.spec import spec_from_json


def runtime_lookup(store: ResourceStore, batch: list[TrainingManifest]) -> RuntimeLookup:
    """Find a runtime a TrainJob names: applied in the same batch (earlier), else stored."""

    def lookup(kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        for manifest in reversed(batch):
            if manifest.info.kind == kind and manifest.name == name and manifest.namespace == namespace:
                return manifest.body
        found = store.get(kind, name, namespace or STORE_NAMESPACE_OF_CLUSTER)
        return found.manifest if found is not None else None

    return lookup


def plan_actions(manifests: list[TrainingManifest], store: JobStore) -> list[str]:
    """What applying each job would do ("created" or "unchanged"), everything checked; runtimes "apply"."""
    actions, seen = [], set()
    for manifest in manifests:
        if manifest.spec is None:
            actions.append("apply")
            continue
        key = (manifest.namespace, manifest.name)
        existing = store.get(manifest.name, manifest.namespace)
        if key in seen or (existing is not None and existing.spec.get("manifest") != manifest.body):
            raise ConflictError(f"{manifest.info.kind} {manifest.name}: a job named {manifest.name} already exists "
                                f"in namespace {manifest.namespace}; a job's spec cannot change (delete it first)")
        seen.add(key)
        if existing is not None:
            actions.append("unchanged")
            continue
        try:
            jobs.check(manifest.spec, as_manifest=True)
        except UserError as exc:
            raise type(exc)(f"{manifest.info.kind} {manifest.name}: {exc}") from None
        actions.append("created")
    return actions


def apply(manifests: list[TrainingManifest], actions: list[str], store: JobStore,
          resources: ResourceStore, user: str = "") -> list[tuple[TrainingKind, str, str]]:
    """Store the runtimes, submit the new jobs (as ``user``: the API caller; "": the OS user): (kind, name,
    action) for each, in order."""
    done = []
    for manifest, action in zip(manifests, actions, strict=True):
        if manifest.spec is None:
            [(_, action)] = resources.apply([manifest.body])
        elif action == "created":
            jobs.submit(manifest.spec, store, as_manifest=True, user=user)
        done.append((manifest.info, manifest.name, action))
    return done


def jobs_of_kind(info: TrainingKind, namespace: str | None, store: JobStore) -> list[JobRecord]:
    return [job for job in jobs.list_jobs(namespace, store)
            if job_kind(job.trainer, job.spec.get("manifest") or {}) == info.kind]


def job_object(job: JobRecord, store: JobStore) -> dict[str, Any]:
    """The job as ``kubectl get -o yaml`` shows it: the manifest applied, server metadata, the operator's status."""
    spec = spec_from_json(job.spec)
    kind = job_kind(job.trainer, spec.manifest)
    manifest = spec.manifest or {"apiVersion": KINDS[kind].api_versions()[0], "kind": kind, "spec": {}}
    metadata = {**(manifest.get("metadata") or {}), "name": job.name, "namespace": job.namespace, "uid": job.uid,
                "creationTimestamp": job.created_at.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {"apiVersion": manifest["apiVersion"], "kind": kind, "metadata": metadata,
            "spec": manifest.get("spec") or {}, "status": job_status(job, store.instances(job.uid))}
