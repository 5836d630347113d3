"""dsl.importer: make an existing URI an artifact of the run, optionally copied into the workspace."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from millpond.pipelines.graph import Outputs
from millpond.pipelines.launcher import TaskError
from millpond.pipelines.placeholders import PlaceholderContext, local_path
from millpond.pipelines.views import ComponentSpec, ImporterSpec
from millpond.store import artifacts as store
from millpond.store.paths import contained_path

# Sources this machine cannot fetch from; importing them fails the task with their name.
UNREACHABLE = {"oci": "an OCI registry", "hf": "the Hugging Face hub"}


def importer_uri(importer: ImporterSpec, parameters: Mapping[str, object]) -> str:
    """The URI the importer imports: its constant, or the value of its runtime parameter."""
    source = importer.raw.get("artifactUri", {})
    if "constant" in source:
        return str(source["constant"])
    if "runtimeParameter" in source:
        name = source["runtimeParameter"]
        if name not in parameters:
            raise TaskError(f"importer: input parameter {name!r} (the URI) has no value")
        return str(parameters[name])
    raise TaskError("importer: no artifactUri")


def run_importer(
    importer: ImporterSpec, component: ComponentSpec, parameters: Mapping[str, object], workspace: Path | None
) -> Outputs:
    uri = importer_uri(importer, parameters)
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme in UNREACHABLE:
        raise TaskError(f"importer: cannot import {uri}: {UNREACHABLE[scheme]} is not reachable from this machine")
    context = PlaceholderContext({"inputs": {"parameterValues": dict(parameters)}})
    metadata = _substitute(importer.raw.get("metadata") or {}, context)
    if importer.download_to_workspace:
        if workspace is None:
            raise TaskError("importer: download_to_workspace needs the pipeline to declare a workspace")
        _copy_into_workspace(uri, workspace)
        metadata["_kfp_workspace"] = True
    outputs = component.output_artifacts
    key = next(iter(outputs), "artifact")
    type_schema = importer.raw.get("typeSchema") or {}
    artifact = {
        "name": key,
        "uri": uri,
        "type": {
            "schemaTitle": type_schema.get("schemaTitle", "system.Artifact"),
            "schemaVersion": type_schema.get("schemaVersion", "0.0.1"),
        },
        "metadata": metadata,
    }
    return Outputs(artifacts={key: [artifact]})


def _substitute(value: Any, context: PlaceholderContext) -> Any:
    if isinstance(value, str):
        return context.substitute(value)
    if isinstance(value, dict):
        return {context.substitute(str(k)): _substitute(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, context) for v in value]
    return value


def _copy_into_workspace(uri: str, workspace: Path) -> None:
    """Where kfp's Artifact.path looks for an artifact marked _kfp_workspace."""
    target = contained_path(workspace / ".artifacts", local_path(uri).lstrip("/"), what="importer URI")
    if store.is_remote(uri):
        store.download(uri, target)
        if not target.exists():
            raise TaskError(f"importer: {uri} does not exist")
        return
    source = Path(uri)
    if not source.exists():
        raise TaskError(f"importer: {uri} does not exist")
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)
