"""``jobset.x-k8s.io/v1alpha2`` JobSet in the one registry of kinds: the handler ``apply``/``get``/``delete``/
``describe`` and the Kubernetes API call for JobSets.

Apply: every JobSet of the batch checked (``manifest``), stored in one transaction, a controller started for
each one created. Applying an existing JobSet again is ``unchanged`` or ``configured``: ``suspend``, labels
and annotations may change (its controller acts on them at its next step); a changed ``replicatedJobs``
(unless the JobSet is suspended, where Kueue may change its pod templates' labels, annotations, node
selectors and tolerations), ``successPolicy``, ``failurePolicy``, ``startupPolicy``, ``network``,
``coordinator`` or ``managedBy`` is refused as JobSet's webhook and CEL rules refuse it ("field is immutable").

Shown as ``kubectl get jobset -o yaml`` shows one: the spec with the webhook's defaults and the status its
controller wrote, read through ``lifecycle.observed`` (a dead controller resumed first).
"""

from __future__ import annotations

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
from millpond.store.resources import Resource, ResourceStore
from millpond.tables import age_since
from millpond.training.batch import events
from millpond.training.jobset import lifecycle
from millpond.training.jobset import status as jobset_status
from millpond.training.jobset.kinds import JOBSET, KIND, OWNER
from millpond.training.jobset.manifest import JobSetManifest, check_document

IMMUTABLE = ("replicatedJobs", "successPolicy", "failurePolicy", "startupPolicy", "network", "coordinator",
             "managedBy", "volumeClaimPolicies")
SOURCE = "jobset-controller"


@dataclass(frozen=True)
class _Plan:
    manifests: list[JobSetManifest]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        store = ResourceStore(settings)
        outcome = ApplyOutcome()
        done = store.apply([manifest.body for manifest in self.manifests]) if self.manifests else []
        for manifest, (resource, action) in zip(self.manifests, done, strict=True):
            if action == "created":
                lifecycle.start(store, resource, settings, batch.context.user)
            outcome.applied.append(Applied(JOBSET, resource.name, resource.namespace, action,
                                           started=action == "created", uid=resource.uid))
            outcome.notes.extend(Note(note, (f"{KIND} {resource.name}",)) for note in manifest.notes)
        return outcome


def _check_update(manifest: JobSetManifest, existing: Resource) -> None:
    """What JobSet's webhook refuses in an update: a change to a field that cannot change."""
    suspended = bool(existing.spec.get("suspend")) or bool(manifest.body["spec"].get("suspend"))
    for name in IMMUTABLE:
        before, after = existing.spec.get(name), manifest.body["spec"].get(name)
        if name == "replicatedJobs" and suspended:
            before, after = _without_kueue_fields(before), _without_kueue_fields(after)
        if before != after:
            raise UserError(f"{KIND} {manifest.name}: spec.{name}: Invalid value: field is immutable "
                            "(delete the JobSet and create it again)")


def _without_kueue_fields(rjobs: Any) -> Any:
    """replicatedJobs less what Kueue may change in a suspended JobSet's pod templates."""
    out = []
    for rjob in rjobs or ():
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in ("nodeSelector", "tolerations",
                                                                             "schedulingGates")}
        job = {**(rjob["template"].get("spec") or {}), "template": {"spec": spec}}
        out.append({**rjob, "template": {**rjob["template"], "spec": job}})
    return out


def shown(resource: Resource) -> dict[str, Any]:
    """The JobSet as ``kubectl get jobset NAME -o json`` shows it."""
    return resource.as_object(dict(resource.status or {}))


class JobSetHandler(HandlerBase):
    owner = OWNER
    apply_order = 38  # after Kueue's queues (10), the batch Jobs (35) and the quotas (37)
    kinds = (JOBSET,)

    def claims(self, doc: object) -> bool:
        return isinstance(doc, dict) and doc.get("kind") == KIND

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
        sets = [lifecycle.observed(store, resource) for resource in found(JOBSET, name, namespace, all_namespaces,
                                                                            store)]
        if name is not None and not sets:
            raise not_found(JOBSET, name, namespace)
        return sets

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return shown(self._found(name, namespace, False, context)[0])

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
                     context: KindContext) -> list[dict[str, Any]]:
        return [shown(resource) for resource in self._found(None, namespace, all_namespaces, context)]

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return jobset_status.COLUMNS

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        now = dt.datetime.now(dt.timezone.utc)
        rows = [(resource.namespace, jobset_status.row(shown(resource), now))
                for resource in self._found(name, namespace, all_namespaces, context)]
        return Table.listing(jobset_status.COLUMNS, rows, cluster_scoped=False, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Stop the JobSet's controller, delete its Jobs (their pods go with them), then forget it."""
        store = ResourceStore(context.settings)
        resource = store.get(KIND, name, namespace)
        if resource is None:
            raise not_found(JOBSET, name, namespace)
        lifecycle.delete(store, resource)

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        now = dt.datetime.now(dt.timezone.utc)
        resource = self._found(name, namespace, False, context)[0]
        return [KindEvent(event.type, event.reason, age_since(_at(event.at), now), SOURCE, event.message,
                          _at(event.at))
                for event in events.read(resource.uid, context.settings)]


def _at(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)


REGISTRY.register_handler(JobSetHandler())
