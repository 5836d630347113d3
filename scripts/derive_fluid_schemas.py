"""Write millpond's JSON Schemas for Fluid manifests from Fluid's CRDs.

Schemas derived from Fluid's CRDs (github.com/fluid-cloudnative/fluid), Apache-2.0.

A pip-installed millpond has no CRDs beside it, so the compact schemas this writes are
committed under ``src/millpond/datasets/schemas/``. Run it again when the CRDs change:

    .venv/bin/python scripts/derive_fluid_schemas.py [--crds DIR] [--out DIR]

Descriptions are dropped and the structure kept. Two Kubernetes extensions become plain
JSON Schema: ``x-kubernetes-int-or-string`` is ``anyOf: [integer, string]`` and
``x-kubernetes-preserve-unknown-fields`` an open object. Every other object that lists its
``properties`` gets ``additionalProperties: false``, so a misspelt field is an error (the
API server prunes it silently; a user who wrote it meant something). ``status`` is written
by millpond, never applied, so it is an open object here.

Kinds with no CRD in the reference (JindoRuntime, EFCRuntime, VineyardRuntime, CacheRuntime)
are put together from the runtime pieces every Fluid runtime shares (replicas, tieredstore,
runAs, volumes, …), taken from the AlluxioRuntime CRD, plus open objects for their
engine-specific components.

Where a CRD is silent about a value that cannot work, ``STRICTER`` adds the rule Kubernetes or
Fluid's controllers apply later (a negative count or TTL, a tieredstore with no level, a data
operation that names no dataset), so ``apply`` refuses it at once with the field's path
instead of storing an object that fails, or is silently deleted, afterwards.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CRDS = ROOT.parent / "shared" / "reference" / "fluid-crds"
DEFAULT_OUT = ROOT / "src" / "millpond" / "datasets" / "schemas"

# Keywords kept from the CRDs; everything else (description, x-kubernetes-list-type, …) is dropped.
KEPT = ("type", "enum", "format", "pattern", "minimum", "maximum", "minLength", "maxLength",
        "minItems", "maxItems", "required", "default")

OPEN: dict[str, Any] = {"type": "object"}
STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}

# The spec fields of runtimes without a CRD here: Fluid's API reference (api_doc.md) and Go types.
# "shared" fields are copied from AlluxioRuntime's spec; the engine's own components are open objects.
SHARED = ("replicas", "tieredstore", "runAs", "podMetadata", "volumes", "imagePullSecrets", "management")
HAND_WRITTEN: dict[str, dict[str, Any]] = {
    "JindoRuntime": {
        "open": ("master", "worker", "fuse", "jindoVersion", "cleanCachePolicy"),
        "string": ("hadoopConfig", "networkmode", "secret", "user"),
        "string_map": ("properties", "labels", "logConfig"),
    },
    "EFCRuntime": {
        "open": ("master", "worker", "fuse", "initFuse", "osAdvise", "cleanCachePolicy"),
        "string": (),
        "string_map": (),
    },
    "VineyardRuntime": {
        "open": ("master", "worker", "fuse"),
        "string": (),
        "string_map": (),
        "boolean": ("disablePrometheus",),
    },
    "CacheRuntime": {
        "open": ("master", "worker", "client"),
        "string": ("runtimeClassName",),
        "string_map": ("options",),
        "open_list": ("workerGroup",),
    },
}


# Rules added to the CRDs' schemas: (kinds, or None for every kind with the field; path under spec; keywords).
STRICTER: tuple[tuple[frozenset[str] | None, tuple[str, ...], dict[str, Any]], ...] = (
    # A count of cache workers: Kubernetes refuses a negative StatefulSet replicas (0 is "none").
    (None, ("replicas",), {"minimum": 0}),
    # As Kubernetes validates a Job's ttlSecondsAfterFinished: 0 deletes at once, negative means nothing.
    (None, ("ttlSecondsAfterFinished",), {"minimum": 0}),
    # Fluid's Jindo, EFC and Vineyard engines refuse a runtime with no level ("the TieredStore is null");
    # an empty list written out is a mistake (leave tieredstore out for the default tier).
    (None, ("tieredstore", "levels"), {"minItems": 1}),
    # The dataset a DataLoad or DataBackup works on: Fluid's controllers fail the operation without one.
    (frozenset({"DataLoad"}), (), {"required": ["dataset"]}),
    (frozenset({"DataBackup"}), (), {"required": ["dataset"]}),
    (frozenset({"DataBackup"}), ("dataset",), {"minLength": 1}),
)


def stricter(kind: str, schema: dict[str, Any]) -> None:
    """Add ``STRICTER``'s rules to a kind's schema, where the kind has the field."""
    for kinds, path, keywords in STRICTER:
        if kinds is not None and kind not in kinds:
            continue
        node: dict[str, Any] | None = schema["properties"]["spec"]
        for name in path:
            node = node.get("properties", {}).get(name) if node is not None else None
        if node is None:
            continue
        if "required" in keywords:
            node["required"] = sorted({*node.get("required", ()), *keywords["required"]})
        node.update({key: value for key, value in keywords.items() if key != "required"})


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """One CRD schema node as plain JSON Schema: structure kept, prose dropped, unknown fields closed."""
    out: dict[str, Any] = {key: schema[key] for key in KEPT if key in schema}
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    elif "anyOf" in schema:
        out["anyOf"] = [compact(item) for item in schema["anyOf"]]
    if "items" in schema:
        out["items"] = compact(schema["items"])
    preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    if "properties" in schema:
        out["properties"] = {name: compact(child) for name, child in schema["properties"].items()}
    if isinstance(schema.get("additionalProperties"), dict):
        out["additionalProperties"] = compact(schema["additionalProperties"])
    elif "properties" in schema and not preserve:
        out["additionalProperties"] = False
    return out


def crd_schema(path: Path, version_name: str = "v1alpha1") -> tuple[str, dict[str, Any]]:
    """A CRD's kind and the compact schema of its ``version_name``; ``status`` is open (millpond writes it)."""
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    kind = crd["spec"]["names"]["kind"]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == version_name]
    schema = compact(version["schema"]["openAPIV3Schema"])
    schema["properties"]["status"] = dict(OPEN)
    return kind, schema


def envelope(spec: dict[str, Any]) -> dict[str, Any]:
    """The object around a spec: what a CRD's openAPIV3Schema holds at its top."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": dict(OPEN),
            "spec": spec, "status": dict(OPEN),
        },
        "additionalProperties": False,
    }


def hand_written(kind: str, alluxio: dict[str, Any]) -> dict[str, Any]:
    fields = HAND_WRITTEN[kind]
    shared = alluxio["properties"]["spec"]["properties"]
    properties: dict[str, Any] = {name: shared[name] for name in SHARED}
    properties.update({name: dict(OPEN) for name in fields["open"]})
    properties.update({name: {"type": "string"} for name in fields["string"]})
    properties.update({name: dict(STRING_MAP) for name in fields["string_map"]})
    properties.update({name: {"type": "boolean"} for name in fields.get("boolean", ())})
    properties.update({name: {"type": "array", "items": dict(OPEN)} for name in fields.get("open_list", ())})
    return envelope({"type": "object", "properties": dict(sorted(properties.items())), "additionalProperties": False})


def derive_versions(doc: str, reference: Path, out: Path, sources: Sequence[tuple[str, str]],
                    patch: Callable[[dict[str, Any]], dict[str, Any]] = lambda schema: schema) -> None:
    """The command line of a family's script (``--reference``, ``--out``): one ``KIND.VERSION.json`` per
    ``(CRD file under the reference folder, version)`` in ``sources``, each through ``patch`` (the install's
    validation patches a CRD leaves out)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--reference", type=Path, default=reference, help="the folder the CRD files are read from")
    parser.add_argument("--out", type=Path, default=out, help="where the JSON Schemas go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for file, version in sources:
        kind, schema = crd_schema(args.reference / file, version)
        write_schema(args.out / f"{kind.lower()}.{version}.json", patch(schema))


def write_schema(target: Path, schema: dict[str, Any]) -> None:
    """One compact JSON Schema file (sorted keys, no spaces: the committed form), and its path printed."""
    target.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--crds", type=Path, default=DEFAULT_CRDS, help="folder of Fluid CRD YAMLs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the JSON Schemas go")
    args = parser.parse_args()
    schemas = dict(crd_schema(path) for path in sorted(args.crds.glob("data.fluid.io_*.yaml")))
    for kind in HAND_WRITTEN:
        schemas[kind] = hand_written(kind, schemas["AlluxioRuntime"])
    for kind, schema in schemas.items():
        stricter(kind, schema)
    args.out.mkdir(parents=True, exist_ok=True)
    for kind, schema in sorted(schemas.items()):
        write_schema(args.out / f"{kind.lower()}.json", schema)


if __name__ == "__main__":
    main()
