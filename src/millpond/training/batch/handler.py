"""``batch/v1`` Job in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe`` and the
Kubernetes API call for Jobs.

Apply: every Job of the batch checked (``manifest``), then stored in one transaction and a controller
started for each Job created. Applying an existing Job again is ``unchanged`` or ``configured``: what
Kubernetes lets change (``parallelism``, ``suspend``, ``activeDeadlineSeconds``, ``backoffLimit``,
``ttlSecondsAfterFinished``, labels and annotations) is stored and its controller acts on it at its
next step; a changed ``template``, ``completions`` or ``completionMode`` is refused, as the API server
refuses it ("field is immutable"). A Job applied with only ``generateName`` is a new Job each time.

Shown as ``kubectl get job -o yaml`` shows one: the spec with its defaults, the generated selector
and the labels the controller puts on the pod template, ``suspend: true`` while Kueue holds a queued
Job back, and the status its controller wrote (``status``), observed first (``lifecycle.observed``).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from millpond.errors import UserError
from millpond.kind_handler import (
    Applied,
    ApplyBatch,
    ApplyOutcome,
    Document,
    HandlerBase,
    KindContext,
    KindEvent,
    KindName,
    Note,
    Table,
)
from millpond.kinds import REGISTRY
from millpond.manifest_envelope import found, not_found
from millpond.scheduling.queues.model import QUEUE_LABEL
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since
from millpond.training.batch import events, lifecycle
from millpond.training.batch import status as job_status
from millpond.training.batch.kinds import JOB, KIND, OWNER
from millpond.training.batch.manifest import JobManifest, check_document

IMMUTABLE = ("template", "completions", "completionMode")


@dataclass(frozen=True)
class _Plan:
    manifests: list[JobManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        store = ResourceStore(settings)
        outcome = ApplyOutcome()
        done = store.apply([manifest.body for manifest in self.manifests]) if self.manifests else []
        for manifest, (resource, action) in zip(self.manifests, done, strict=True):
            if action == "created":
                lifecycle.start(store, resource, settings, batch.context.user)
            outcome.applied.append(Applied(JOB, resource.name, resource.namespace, action,
                                           started=action == "created", uid=resource.uid))
            outcome.notes.extend(Note(note, (f"{KIND} {resource.name}",)) for note in manifest.notes)
        return outcome


def _check_update(manifest: JobManifest, existing: Resource) -> None:
    """What the API server refuses in an update of a Job (a change to a field that cannot change), and what
    Kueue's webhook refuses (another queue for a Job that is not suspended)."""
    for name in IMMUTABLE:
        if manifest.body["spec"].get(name) != existing.spec.get(name):
            raise UserError(f"{KIND} {manifest.name}: spec.{name}: Invalid value: field is immutable "
                            "(delete the Job and create it again)")
    before = (existing.manifest["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    if manifest.settings.queue != (before or "") and not job_status.has(existing.status or {}, "Suspended"):
        raise UserError(f"{KIND} {manifest.name}: metadata.labels[{QUEUE_LABEL}]: Invalid value: field is immutable "
                        "while the Job is not suspended")


def shown(resource: Resource) -> dict[str, Any]:
    """The Job as ``kubectl get job NAME -o json`` shows it."""
    shown_object = resource.as_object(dict(resource.status or {}))
    spec = copy.deepcopy(shown_object["spec"])
    status = shown_object["status"]
    labels = {"batch.kubernetes.io/controller-uid": resource.uid, "batch.kubernetes.io/job-name": resource.name,
              "controller-uid": resource.uid, "job-name": resource.name}
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": resource.uid}}
    template = spec.setdefault("template", {})
    template["metadata"] = {**(template.get("metadata") or {}),
                            "labels": {**((template.get("metadata") or {}).get("labels") or {}), **labels}}
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if job_status.has(status, "Suspended") and not job_status.finished(status):
        spec["suspend"] = True  # a queued Job Kueue has not admitted (yet) is held suspended
    shown_object["spec"] = spec
    return shown_object


class BatchHandler(HandlerBase):
    owner = OWNER
    apply_order = 35  # after Kueue's queues (10) and the training jobs (30): a Job may name a queue
    kinds = (JOB,)

    def claims(self, doc: object) -> bool:
        return isinstance(doc, dict) and doc.get("kind") == KIND  # another apiVersion: refused by the check

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        store = ResourceStore(batch.context.settings)
        manifests = []
        for source, number, doc in documents:
            manifest = check_document(doc, source, number, batch.validate)
            existing = store.get(KIND, manifest.name, manifest.namespace)
            if existing is not None:
                try:
                    _check_update(manifest, existing)
                except UserError as exc:
                    raise UserError(f"{source}: document {number}: {exc}") from None
            manifests.append(manifest)
        return _Plan(manifests)

    def _found(self, name: str | None, namespace: str, all_namespaces: bool, context: KindContext) -> list[Resource]:
        store = ResourceStore(context.settings)
        jobs = []
        for resource in found(JOB, name, namespace, all_namespaces, store):
            current = lifecycle.observed(store, resource)
            if current is not None:
                jobs.append(current)
        if name is not None and not jobs:
            raise not_found(JOB, name, namespace)
        return jobs

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return shown(self._found(name, namespace, False, context)[0])

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [shown(resource) for resource in self._found(None, namespace, all_namespaces, context)]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return job_status.COLUMNS

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        now = dt.datetime.now(dt.timezone.utc)
        rows = [(resource.namespace, job_status.row(shown(resource), now))
                for resource in self._found(name, namespace, all_namespaces, context)]
        return Table.listing(job_status.COLUMNS, rows, cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Stop the Job's controller and pods, then forget it (its pods go with it, as the default
        ``propagationPolicy`` of ``kubectl delete job`` deletes them)."""
        store = ResourceStore(context.settings)
        resource = store.get(KIND, name, namespace)
        if resource is None:
            raise not_found(JOB, name, namespace)
        lifecycle.delete(store, resource)

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        now = dt.datetime.now(dt.timezone.utc)
        resource = self._found(name, namespace, False, context)[0]
        return [KindEvent(event.type, event.reason, age_since(_at(event.at), now), events.SOURCE, event.message,
                          _at(event.at))
                for event in events.read(resource.uid, context.settings)]


def _at(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


REGISTRY.register_handler(BatchHandler())
