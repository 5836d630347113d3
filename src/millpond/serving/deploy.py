"""Deploy an InferenceService built in code: the same checks and store as ``millpond apply -f``, then start it.

``arena serve``, ``millpond serve --from-run`` and the ``deploy_model`` pipeline component build a
manifest (a dict) rather than read one from a file; here it goes through exactly what an applied
file goes through (``serving.objects.check`` with the CRD's schema and KServe's webhook rules,
``serving.objects.apply``), so the stored object is the one ``kubectl apply -f`` of the printed
manifest would give, and then ``serving.lifecycle.start`` starts its supervisor (which writes its
status: Ready True with its URL once a replica answers).

An InferenceService millpond cannot serve here (a format without a runtime, a custom container
with only an image) is stored, as ``apply`` stores it, with its Ready False status, and not started:
:attr:`Deployed.notes` says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from millpond.datasets.schema_check import check_schema_file
from millpond.errors import UserError
from millpond.serving import capacity, lifecycle, objects
from millpond.serving.manifests import ServingManifest
from millpond.store.resources import ResourceStore


@dataclass(frozen=True)
class Deployed:
    """What deploying did: the checked manifest, the store's action (created, configured, unchanged),
    whether a supervisor was started, and the info lines (why not, what is not run here)."""

    manifest: ServingManifest
    action: str
    started: bool
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def namespace(self) -> str:
        return self.manifest.namespace


def check(body: dict[str, Any], source: str) -> ServingManifest:
    """The manifest checked as ``apply -f`` checks a document (UserError: one line naming ``source``)."""
    return objects.check([(source, 1, body)], check_schema_file)[0]


def deploy(body: dict[str, Any], store: ResourceStore, source: str, volumes_dir: Any = None) -> Deployed:
    """Check, store and start the InferenceService ``body``; nothing is stored when the check fails, or when its
    replicas' resources together can never be granted on this machine, as ``arena submit`` refuses a job that
    can never run (a manifest's replicas would wait, as a pod waits to be scheduled)."""
    manifest = check(body, source)
    why = capacity.resource_refusal(manifest.predictor) if manifest.predictor is not None else None
    if why is not None:
        raise UserError(f"{source}: InferenceService {manifest.name}: {why}")
    (_, action), = objects.apply([manifest], store)
    notes = list(manifest.notes)
    if volumes_dir is not None:
        notes += objects.missing_notes([manifest], store, volumes_dir)
    servable = manifest.predictor is not None and manifest.predictor.unservable is None
    if servable:
        lifecycle.start(store, manifest.name, manifest.namespace)
    return Deployed(manifest, action, servable, notes)


def ready_url(store: ResourceStore, name: str, namespace: str, timeout_s: float) -> str:
    """Wait until the InferenceService is Ready and answer its URL (``lifecycle.wait_ready``'s errors otherwise)."""
    resource = lifecycle.wait_ready(store, name, namespace, timeout_s)
    return str((resource.status or {}).get("url") or "")
