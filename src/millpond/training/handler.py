"""Kubeflow's training kinds in the one registry of kinds: the handler ``apply``/``get``/``delete``/``describe``
and the server's resource routes call for PyTorchJob, MPIJob, TFJob, TrainJob and the runtimes.

Importing this module registers it (``millpond.kinds`` imports it when a command first reaches one of
these kinds).
A job kind's objects are the jobs of that kind (an ``arena submit pytorch`` job is a PyTorchJob),
found through ``training.objects``; a runtime kind's are the runtimes applied. Jobs are applied
after the batch's queues and datasets (a job may name either) and start at once, as the caller
(``KindContext.user``: the API caller, "" for the OS user); their supervisor's events are
``describe``'s Events.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
from millpond.store.resources import ResourceStore
from millpond.store.training import JobStore
from millpond.tables import age_since
from millpond.training import applying, objects
from millpond.training.conditions import state
from millpond.training.kinds import KINDS, OWNER
from millpond.training.manifests import TrainingManifest
from millpond.training.views import short_duration


@dataclass(frozen=True)
class _Plan:
    manifests: list[TrainingManifest]
    actions: list[str]

    def apply(self, batch: ApplyBatch) -> ApplyOutcome:
        settings = batch.context.settings
        done = applying.apply(self.manifests, self.actions, JobStore(settings), ResourceStore(settings),
                              user=batch.context.user)
        outcome = ApplyOutcome()
        for manifest, (info, name, action) in zip(self.manifests, done, strict=True):
            outcome.applied.append(Applied(info.names, name, manifest.namespace, action,
                                           started=manifest.spec is not None and action == "created"))
            outcome.notes.extend(Note(note, (f"{info.kind} {name}",)) for note in manifest.notes)
        return outcome


class TrainingHandler(HandlerBase):
    owner = OWNER
    apply_order = 30
    kinds = tuple(info.names for info in KINDS.values())

    def claims(self, doc: object) -> bool:
        return isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"] in KINDS

    def check(self, documents: Sequence[Document], batch: ApplyBatch) -> _Plan:
        settings = batch.context.settings
        manifests, actions = objects.check(list(documents), ResourceStore(settings), JobStore(settings))
        return _Plan(manifests, actions)

    def get(self, kind: KindName, name: str, namespace: str, context: KindContext) -> dict[str, Any]:
        return objects.as_objects(KINDS[kind.kind], name, namespace, False, JobStore(context.settings),
                                  ResourceStore(context.settings))

    def list_objects(self, kind: KindName, namespace: str, all_namespaces: bool,
             context: KindContext) -> list[dict[str, Any]]:
        listed = objects.as_objects(KINDS[kind.kind], None, namespace, all_namespaces, JobStore(context.settings),
                                    ResourceStore(context.settings))
        return list(listed["items"])

    def printer_columns(self, kind: KindName) -> tuple[str, ...]:
        return ("NAME", "AGE") if KINDS[kind.kind].trainer is None else ("NAME", "STATE", "AGE")

    def table(self, kind: KindName, name: str | None, namespace: str, all_namespaces: bool,
              context: KindContext) -> Table:
        info = KINDS[kind.kind]
        now = dt.datetime.now(dt.timezone.utc)
        if info.trainer is None:
            runtimes = objects.found_runtimes(info, name, namespace, all_namespaces, ResourceStore(context.settings))
            return Table.listing(self.printer_columns(kind), [
                (one.namespace, [one.name, short_duration((now - one.created_at).total_seconds())])
                for one in runtimes], cluster_scoped=kind.cluster_scoped, all_namespaces=False)
        jobs = objects.found_jobs(info, name, namespace, all_namespaces, JobStore(context.settings))
        return Table.listing(self.printer_columns(kind), [
            (job.namespace, [job.name, state(job), short_duration((now - job.created_at).total_seconds())])
            for job in jobs], cluster_scoped=kind.cluster_scoped, all_namespaces=all_namespaces)

    def delete(self, kind: KindName, name: str, namespace: str, context: KindContext) -> None:
        """Stop a job's processes and forget it, or forget a runtime."""
        objects.delete(KINDS[kind.kind], name, namespace, JobStore(context.settings), ResourceStore(context.settings))

    def events(self, kind: KindName, name: str, namespace: str, context: KindContext) -> list[KindEvent]:
        """A job's events as its supervisor recorded them (a runtime has none)."""
        info = KINDS[kind.kind]
        if info.trainer is None:
            return []
        store = JobStore(context.settings)
        now = dt.datetime.now(dt.timezone.utc)
        return [KindEvent(event.type, event.reason, age_since(event.at, now), "millpond-training", event.message,
                          event.at)
                for job in objects.found_jobs(info, name, namespace, False, store)
                for event in store.events(job.uid)]


REGISTRY.register_handler(TrainingHandler())
