"""OpenAPI v3 documents (``/openapi/v3``, ``/openapi/v3/apis/GROUP/VERSION``), built from the schemas the
kinds' checks already use (each family's ``schemas/*.json``, derived from the upstream CRDs).

Two clients read them. ``kubectl explain`` renders a kind's schema (the component carrying the
kind's ``x-kubernetes-group-version-kind``). ``kubectl apply``/``create`` (``--validate=strict``, its
default) first asks whether the server validates fields itself: a PATCH operation of the kind that
declares the ``fieldValidation`` query parameter means yes, and kubectl sends
``fieldValidation=Strict`` instead of validating on its side, which would need the full upstream
documents. A kind with no schema file (a built-in kind) is described as an object that keeps
unknown fields; its family's checks still decide what it accepts.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from millpond.kind_handler import KindName
from millpond.server.kube import discovery

_WRITE_PARAMETERS = [{"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
                     for name in ("dryRun", "fieldManager", "fieldValidation")]
_JSON = {"application/json": {"schema": {"type": "object"}}}


def root() -> dict[str, Any]:
    """``/openapi/v3``: where each group-version's document is."""
    found = {}
    for group, versions in discovery.groups().items():
        for version in versions:
            where = f"apis/{group}/{version}" if group else f"api/{version}"
            found[where] = {"serverRelativeURL": f"/openapi/v3/{where}"}
    return {"paths": found}


def document(group: str, version: str) -> dict[str, Any] | None:
    """``/openapi/v3/apis/GROUP/VERSION`` (``/openapi/v3/api/v1`` for the core group); None if nothing is there."""
    kinds = discovery.kinds_of(group, version)
    if not kinds:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for kind in kinds:
        name = schema_name(kind, version)
        schemas[name] = _schema(kind, version)
        ref = {"$ref": f"#/components/schemas/{name}"}
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        scope = "" if kind.cluster_scoped else "/namespaces/{namespace}"
        gvk = {"group": kind.group, "version": version, "kind": kind.kind}
        paths[f"{prefix}{scope}/{kind.plural}"] = {
            "get": _operation(gvk, "list", ref), "post": _operation(gvk, "post", ref, write=True)}
        paths[f"{prefix}{scope}/{kind.plural}/{{name}}"] = {
            "get": _operation(gvk, "get", ref),
            "put": _operation(gvk, "put", ref, write=True),
            "patch": _operation(gvk, "patch", ref, write=True),
            "delete": _operation(gvk, "delete", ref)}
    info = {"title": "Kubernetes (millpond)", "version": discovery.version()["gitVersion"]}
    return {"openapi": "3.0.0", "info": info,
            "paths": paths, "components": {"schemas": schemas}}


def schema_name(kind: KindName, version: str) -> str:
    """The component's name as the API server spells it: ``io.fluid.data.v1alpha1.Dataset``."""
    if not kind.group:
        return f"io.k8s.api.core.{version}.{kind.kind}"
    return ".".join([*reversed(kind.group.split(".")), version, kind.kind])


def _operation(gvk: dict[str, str], action: str, ref: dict[str, str], write: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}}
    if write:
        operation["parameters"] = _WRITE_PARAMETERS
        operation["requestBody"] = {"content": {"application/json": {"schema": ref}}}
    return operation


def _schema(kind: KindName, version: str) -> dict[str, Any]:
    found = _schema_file(kind.owner, kind.kind.lower(), version)
    schema = dict(found) if found else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema.setdefault("description", f"{kind.kind} ({kind.group or 'core'}/{version}), as millpond serves it.")
    schema["x-kubernetes-group-version-kind"] = [{"group": kind.group, "version": version, "kind": kind.kind}]
    return schema


@functools.cache
def _schema_file(owner: str, kind: str, version: str) -> dict[str, Any] | None:
    """The family's JSON Schema of ``kind`` at ``version`` (``KIND.VERSION.json`` or ``KIND.json``), if it has one."""
    folder = resources.files(f"millpond.{owner}").joinpath("schemas")
    for name in (f"{kind}.{version}.json", f"{kind}.json"):
        candidate = folder.joinpath(name)
        if candidate.is_file():
            loaded = json.loads(candidate.read_text())
            return loaded if isinstance(loaded, dict) else None
    return None
