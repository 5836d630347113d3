"""The model registry's JSON, as its OpenAPI (``kubeflow/model-registry`` ``api/openapi/model-registry.yaml``)
spells it: request bodies checked into the store's records, records written back as the API's objects.

Every field is checked against its type (strings, string lists, the ``state`` enums, a metric's double,
``customProperties`` as the ``MetadataValue`` union by its ``metadataType``); a wrong one is a UserError
(400) naming it, so nothing malformed is stored and nothing stored fails to render. Output-only fields a
client echoes back (``id``, ``createTimeSinceEpoch``, ``registeredModelId`` on an update…) and fields of
no schema are ignored, as the Python client sends whole objects on update. ``name`` cannot be changed
once set (upstream's rule): an update naming another is refused.

Simplified: a metric's history and an artifact's ``experimentId``/``experimentRunId`` are not kept.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from millpond.errors import UserError
from millpond.store.model_registry import ARTIFACT, MODEL, VERSION, Changes, Draft, Entry

LIVE_STATES = ("LIVE", "ARCHIVED")
ARTIFACT_STATES = ("UNKNOWN", "PENDING", "LIVE", "MARKED_FOR_DELETION", "DELETED", "ABANDONED", "REFERENCE")
ARTIFACT_TYPES = ("model-artifact", "doc-artifact", "dataset-artifact", "metric", "parameter")
MODEL_ARTIFACT = "model-artifact"
ID_PATTERN = re.compile(r"^[1-9][0-9]{0,8}$")
MAX_TEXT = 65536
MAX_NAME = 255
MAX_PROPERTIES = 256
_INT64 = (-(2**63), 2**63 - 1)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise UserError(f"{where}: expected a string, got {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise UserError(f"{where}: longer than {MAX_TEXT} characters")
    if "\x00" in value:  # PostgreSQL's text cannot hold it
        raise UserError(f"{where}: contains a NUL character")
    return value


def _texts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_PROPERTIES:
        raise UserError(f"{where}: expected a list of at most {MAX_PROPERTIES} strings")
    return [_text(item, f"{where}[{index}]") for index, item in enumerate(value)]


def _double(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError(f"{where}: expected a finite number")
    return float(value)


def _int64(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise UserError(f"{where}: expected an integer")
    try:
        number = int(value)
    except ValueError:
        raise UserError(f"{where}: {value!r} is not an integer") from None
    if not _INT64[0] <= number <= _INT64[1]:
        raise UserError(f"{where}: {number} is outside int64")
    return number


def _int64_text(value: Any, where: str) -> str:
    return str(_int64(value, where))


def _enum(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, where: str) -> str:
        if value not in choices:
            raise UserError(f"{where}: {value!r} is not one of {', '.join(choices)}")
        return str(value)
    return check


def _name(value: Any, where: str) -> str:
    text = _text(value, where)
    if not text or len(text) > MAX_NAME or any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise UserError(f"{where}: expected 1 to {MAX_NAME} printable characters")
    return text


def searched(value: str | None, where: str) -> str | None:
    """A name or external id to search by, checked as the stored ones are (None or empty: not searched)."""
    return _name(value, where) if value else None


def _base64(value: Any, where: str) -> str:
    text = _text(value, where)
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UserError(f"{where}: not base64") from None
    return text


# The MetadataValue union: its discriminator → the fields it carries and how each is checked.
_METADATA: dict[str, dict[str, Callable[[Any, str], Any]]] = {
    "MetadataIntValue": {"int_value": _int64_text},
    "MetadataDoubleValue": {"double_value": _double},
    "MetadataStringValue": {"string_value": _text},
    "MetadataBoolValue": {"bool_value": lambda v, w: v if isinstance(v, bool) else _bad(w, "a boolean")},
    "MetadataStructValue": {"struct_value": _base64},
    "MetadataProtoValue": {"type": _text, "proto_value": _base64},
}


def _bad(where: str, expected: str) -> Any:
    raise UserError(f"{where}: expected {expected}")


def custom_properties(value: Any, where: str = "customProperties") -> dict[str, Any]:
    """``customProperties`` checked: a map of at most 256 names to MetadataValues (``metadataType`` says which)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or len(value) > MAX_PROPERTIES:
        raise UserError(f"{where}: expected an object of at most {MAX_PROPERTIES} properties")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        at = f"{where}.{key}"
        _name(key, f"{where}: a property's name")
        if not isinstance(item, dict):
            raise UserError(f"{at}: expected a MetadataValue object")
        kind = item.get("metadataType")
        fields = _METADATA.get(kind) if isinstance(kind, str) else None
        if fields is None:
            raise UserError(f"{at}.metadataType: {kind!r} is not one of {', '.join(_METADATA)}")
        entry: dict[str, Any] = {"metadataType": kind}
        for field, check in fields.items():
            if field not in item:
                raise UserError(f"{at}: a {kind} needs {field}")
            entry[field] = check(item[field], f"{at}.{field}")
        checked[key] = entry
    return checked


_STR = _text
MODEL_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "owner": _STR, "readme": _STR, "maturity": _STR, "language": _texts, "tasks": _texts, "provider": _STR,
    "logo": _STR, "license": _STR, "licenseLink": _STR, "libraryName": _STR}
VERSION_FIELDS: dict[str, Callable[[Any, str], Any]] = {"author": _STR}
ARTIFACT_FIELDS: dict[str, dict[str, Callable[[Any, str], Any]]] = {
    "model-artifact": {name: _STR for name in (
        "modelFormatName", "storageKey", "storagePath", "modelFormatVersion", "serviceAccountName", "modelSourceKind",
        "modelSourceClass", "modelSourceGroup", "modelSourceId", "modelSourceName")},
    "doc-artifact": {},
    "dataset-artifact": {name: _STR for name in ("digest", "sourceType", "source", "schema", "profile")},
    "metric": {"value": _double, "timestamp": _int64_text, "step": _int64},
    "parameter": {"value": _STR, "parameterType": _enum(("string", "number", "boolean", "object"))},
}


def _object(body: Any, what: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise UserError(f"the request body must be a JSON object (a {what})")
    return body


def _optional(body: Mapping[str, Any], key: str, check: Callable[[Any, str], Any]) -> Any:
    value = body.get(key)
    return None if value is None else check(value, key)


def _own_fields(body: Mapping[str, Any], fields: Mapping[str, Callable[[Any, str], Any]]) -> dict[str, Any]:
    return {key: check(body[key], key) for key, check in fields.items() if body.get(key) is not None}


def artifact_type_of(body: Mapping[str, Any], required: str | None = None) -> str:
    """The body's ``artifactType`` (``required`` when the path says which, e.g. ``/model_artifacts``)."""
    value = body.get("artifactType", required)
    if value is None:
        raise UserError(f"artifactType: required, one of {', '.join(ARTIFACT_TYPES)}")
    kind = _enum(ARTIFACT_TYPES)(value, "artifactType")
    if required is not None and kind != required:
        raise UserError(f"artifactType: {kind!r} where a {required} is expected")
    return kind


def parse_id(value: Any, where: str) -> int:
    """An id as the API writes it: a string of 1 to 9 digits, not led by 0."""
    if isinstance(value, bool) or not isinstance(value, str | int) or not ID_PATTERN.match(str(value)):
        raise UserError(f"{where}: {value!r} is not an id (1 to 9 digits)")
    return int(value)


def draft(kind: str, body: Any, parent_id: int | None = None, artifact_type: str | None = None,
          check_uri: Callable[[str], Any] | None = None) -> Draft:
    """A create request's record. ``parent_id``: the registered model (a version) or model version (an artifact)
    the path names; a version's ``registeredModelId`` otherwise."""
    data = _object(body, kind)
    name = _optional(data, "name", _name)
    common = {"external_id": _optional(data, "externalId", _name), "description": _optional(data, "description", _text),
              "custom_properties": custom_properties(data.get("customProperties"))}
    if kind == MODEL:
        if name is None:
            raise UserError("name: required")
        return Draft(name=name, state=_optional(data, "state", _enum(LIVE_STATES)) or "LIVE",
                     properties=_own_fields(data, MODEL_FIELDS), **common)
    if kind == VERSION:
        if name is None:
            raise UserError("name: required")
        parent = parent_id if parent_id is not None else parse_id(data.get("registeredModelId"), "registeredModelId")
        return Draft(name=name, parent_id=parent, state=_optional(data, "state", _enum(LIVE_STATES)) or "LIVE",
                     properties=_own_fields(data, VERSION_FIELDS), **common)
    chosen = artifact_type_of(data, artifact_type)
    uri = _optional(data, "uri", _text)
    if uri and check_uri is not None:
        check_uri(uri)
    return Draft(name=name, parent_id=parent_id, artifact_type=chosen, uri=uri or None,
                 state=_optional(data, "state", _enum(ARTIFACT_STATES)) or "UNKNOWN",
                 properties=_own_fields(data, ARTIFACT_FIELDS[chosen]), **common)


def changes(current: Entry, body: Any, check_uri: Callable[[str], Any] | None = None) -> Changes:
    """An update request's changes to ``current``."""
    data = _object(body, current.kind)
    name = data.get("name")
    if name is not None and name != current.name:
        raise UserError(f"name: {current.kind} {current.id} is named {current.name!r}; a name cannot be changed")
    states: tuple[str, ...]
    if current.kind == MODEL:
        fields, states = MODEL_FIELDS, LIVE_STATES
    elif current.kind == VERSION:
        fields, states = VERSION_FIELDS, LIVE_STATES
    else:
        artifact_type_of({"artifactType": data.get("artifactType") or current.artifact_type}, current.artifact_type)
        fields, states = ARTIFACT_FIELDS[current.artifact_type or MODEL_ARTIFACT], ARTIFACT_STATES
    uri = _optional(data, "uri", _text) if current.kind == ARTIFACT else None
    if uri and check_uri is not None:
        check_uri(uri)
    return Changes(state=_optional(data, "state", _enum(states)),
                   external_id=_optional(data, "externalId", _name),
                   description=_optional(data, "description", _text),
                   properties=_own_fields(data, fields),
                   custom_properties=custom_properties(data["customProperties"])
                   if data.get("customProperties") is not None else None,
                   uri=uri)


def render(entry: Entry) -> dict[str, Any]:
    """The entity as the API answers it (absent fields left out, ids and times as strings)."""
    shown: dict[str, Any] = {
        "id": str(entry.id), "name": entry.name, "externalId": entry.external_id, "description": entry.description,
        "customProperties": dict(entry.custom_properties), "createTimeSinceEpoch": str(entry.created_ms),
        "lastUpdateTimeSinceEpoch": str(entry.updated_ms), "state": entry.state, **entry.properties}
    if entry.kind == VERSION:
        shown["registeredModelId"] = str(entry.parent_id)
    if entry.kind == ARTIFACT:
        shown.update(artifactType=entry.artifact_type, uri=entry.uri)
    return {key: value for key, value in shown.items() if value is not None}
