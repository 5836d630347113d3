"""Resource templates: the PersistentVolumeClaim of a VolumeOp and the VolumeSnapshot of a VolumeSnapshotOp.

kfp 1.x writes both as Argo ``resource`` templates (``action: create`` and a manifest), with
``jsonPath`` outputs the next steps read (the claim's name, size, the manifest). Locally a claim
is a named volume and a snapshot a copy of one; nothing else a resource template may create
(kfp's ``dsl.ResourceOp`` of a Job, a Deployment…) can be honoured, so it is refused here.
"""

from __future__ import annotations

import re
from typing import Any

from millpond.documents import load_yaml_documents
from millpond.pipelines.argo.fields import Fields
from millpond.pipelines.argo.model import ClaimRequest, Resource, SnapshotRequest

_JSON_PATH = re.compile(r"\{((?:\.[A-Za-z0-9_-]+)*)\}")


class ResourceFields(Fields):
    """The accessors for a resource template and its jsonPath outputs."""

    def resource(self, raw: Any, where: str) -> Resource:
        raw = self.mapping(raw, where)
        self.fields(raw, where, ("action", "manifest", "successCondition", "failureCondition"),
                    ("setOwnerReference", "flags", "mergeStrategy"))
        action = self.text(raw.get("action"), f"{where}.action", required=True)
        manifest_text = self.text(raw.get("manifest"), f"{where}.manifest", required=True)
        documents = [d for d in load_yaml_documents(manifest_text, f"{self.source}: {where}.manifest") if d is not None]
        if len(documents) != 1:
            self.fail(f"{where}.manifest", "expected one Kubernetes object")
        manifest = self.mapping(documents[0], f"{where}.manifest")
        kind = self.text(manifest.get("kind"), f"{where}.manifest.kind")
        api = self.text(manifest.get("apiVersion"), f"{where}.manifest.apiVersion")
        claim = snapshot = None
        volume_kind = (kind == "PersistentVolumeClaim" and api == "v1") or (
            kind == "VolumeSnapshot" and api.startswith("snapshot.storage.k8s.io/")
        )
        if not volume_kind or action != "create":
            self.fail(where, f"a resource template that does {action[:20]!r} on a {api[:60]} {kind[:60]}: "
                             "millpond does not drive arbitrary Kubernetes objects (only VolumeOp's "
                             "PersistentVolumeClaim and VolumeSnapshotOp's VolumeSnapshot, created)")
        metadata = self.mapping(manifest.get("metadata"), f"{where}.manifest.metadata")
        named = metadata.get("name") or metadata.get("generateName")
        name = self.text(named, f"{where}.manifest.metadata.name", required=True)
        generate = not metadata.get("name")
        spec = self.mapping(manifest.get("spec"), f"{where}.manifest.spec")
        if kind == "PersistentVolumeClaim":
            resources = self.mapping(spec.get("resources"), f"{where}.manifest.spec.resources")
            requests = self.mapping(resources.get("requests"), f"{where}.manifest.spec.resources.requests")
            source = self.mapping(spec.get("dataSource"), f"{where}.manifest.spec.dataSource")
            if source and source.get("kind") != "VolumeSnapshot":
                self.fail(f"{where}.manifest.spec.dataSource", "a claim starts empty or from a VolumeSnapshot")
            claim = ClaimRequest(
                name=name, generate_name=generate,
                size=self.text(requests.get("storage"), f"{where}.manifest.spec.resources.requests.storage"),
                access_modes=self.strings(spec.get("accessModes"), f"{where}.manifest.spec.accessModes"),
                storage_class=self.text(spec.get("storageClassName"), f"{where}.manifest.spec.storageClassName"),
                snapshot=self.text(source.get("name"), f"{where}.manifest.spec.dataSource.name"),
            )
        else:
            source = self.mapping(spec.get("source"), f"{where}.manifest.spec.source")
            claim_name = source.get("persistentVolumeClaimName") or (
                source.get("name") if source.get("kind", "PersistentVolumeClaim") == "PersistentVolumeClaim" else None
            )
            source_claim = self.text(claim_name, f"{where}.manifest.spec.source", required=True)
            snapshot = SnapshotRequest(name, generate, source_claim)
        return Resource(
            action=action, manifest=manifest, claim=claim, snapshot=snapshot,
            success_condition=self.text(raw.get("successCondition"), f"{where}.successCondition"),
            failure_condition=self.text(raw.get("failureCondition"), f"{where}.failureCondition"),
        )

    def json_path(self, text: str, where: str) -> tuple[str, ...]:
        """kfp's jsonPath outputs are plain field paths (``{.metadata.name}``, ``{}``); nothing fancier is read."""
        match = _JSON_PATH.fullmatch(text.strip())
        if match is None:
            self.fail(where, f"jsonPath {text[:60]!r} is not a plain field path like {{.metadata.name}}")
        return tuple(part for part in match.group(1).split(".") if part)
