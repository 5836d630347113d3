"""PATCH bodies, by their media type, as the API server applies them to the live object.

- ``application/merge-patch+json``: RFC 7386 (``kubectl patch --type merge``, ``kubectl label`` and
  ``annotate`` and client-side ``kubectl apply`` on custom resources).
- ``application/json-patch+json``: RFC 6902 operations (``--type json``), by the ``jsonpatch`` library.
- ``application/strategic-merge-patch+json``: for the built-in kinds only, as upstream (a custom
  resource answers 415). Lists of objects merge by their patch merge key (``containers``, ``env``,
  ``volumes``… by ``name``; ``volumeMounts`` by ``mountPath``), ``$patch: delete|replace`` and
  ``$deleteFromPrimitiveList`` are honoured, ``$setElementOrder`` and ``$retainKeys`` are read and
  dropped (simplified: order is kept as merged).
- ``application/apply-patch+yaml``: server-side apply (``ssa``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonpatch

from millpond.documents import load_json, load_yaml_documents
from millpond.errors import UserError
from millpond.server.kube.status import KubeError

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TYPES = (MERGE, JSON_PATCH, STRATEGIC, APPLY)
# Built-in list fields whose items merge by a key (k8s.io/api's patchMergeKey tags); the rest are replaced.
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
               "volumes": "name", "ports": "containerPort", "volumeMounts": "mountPath", "imagePullSecrets": "name",
               "conditions": "type", "hostAliases": "ip", "volumeDevices": "devicePath"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: a mapping merges key by key, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902; a failed ``test`` or a path that is not there is 422, as upstream answers it."""
    if not isinstance(operations, list):
        raise KubeError(400, "json patch: the body must be a JSON array of operations")
    try:
        patched = jsonpatch.JsonPatch(operations).apply(copy.deepcopy(target))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
        raise KubeError(422, f"the server rejected our request due to an error in our request: {exc}") from None
    if not isinstance(patched, dict):
        raise KubeError(422, "json patch: the result is not an object")
    return patched


def strategic_merge_patch(target: Any, patch: Any, field_name: str = "") -> Any:
    """A strategic merge patch of the built-in kinds (see the module's docstring for what is simplified)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(result.get(name), list) and isinstance(value, list):
                result[name] = [item for item in result[name] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and _MERGE_KEYS.get(key) and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        else:
            result[key] = strategic_merge_patch(result.get(key), value, key)
    return result


def _merge_list(live: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in live]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            merged.append(copy.deepcopy(item))
            continue
        at = next((i for i, old in enumerate(merged)
                   if isinstance(old, dict) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                merged.pop(at)
        elif at is None:
            merged.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            merged[at] = strategic_merge_patch(merged[at], item)
    return merged


def body_json(raw: bytes) -> Any:
    """A JSON body, within millpond's document limits (size, depth: ``documents``); 400 with the problem."""
    return _loaded(raw, load_json)


def body_yaml(raw: bytes) -> Any:
    """A YAML body of one document (server-side apply's, ``kubectl create`` with YAML), within the same limits."""
    documents = _loaded(raw, load_yaml_documents)
    if len(documents) != 1:
        raise KubeError(400, f"the body must hold one YAML document, not {len(documents)}")
    return documents[0]


def _loaded(raw: bytes, load: Callable[[str, str], Any]) -> Any:
    try:
        return load(raw.decode("utf-8"), "request body")
    except UnicodeDecodeError:
        raise KubeError(400, "the body of the request is not UTF-8 text") from None
    except UserError as exc:
        raise KubeError(400, " ".join(str(exc).split())) from None
