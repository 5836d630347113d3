"""Kubernetes' protobuf bodies, read for the built-in kinds ``kubectl create`` sends that way.

kubectl's typed clients (``kubectl create namespace|secret|configmap|serviceaccount|role|rolebinding|
clusterrole|clusterrolebinding|job``, and ``kubectl auth can-i|whoami``'s access reviews) send
``application/vnd.kubernetes.protobuf``: the magic ``k8s\\0``,
then a ``runtime.Unknown`` (its ``typeMeta`` and the object's own message in ``raw``), each field of the
generated ``k8s.io/api`` messages known by number. This module reads the protobuf wire format (varints,
length-delimited fields) and turns the messages of those kinds into the JSON objects the API reads
everywhere else, by a table of each message's fields (number → JSON name and type) written from
upstream's ``generated.proto``. Go's protobuf writes every string field, set or not, so an empty
string is read as an absent field (what JSON's ``omitempty`` leaves out). A field number not in a
table is skipped, as a protobuf reader skips unknown fields; a kind with no table is answered 415 with
the way that works (``kubectl apply -f``). Answers stay JSON, which kubectl accepts.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from millpond.server.kube.status import KubeError

MEDIA = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# A message's fields: number -> (JSON name, type). Types: "string", "bytes" (base64 in JSON), "int", "bool",
# a message name (another table), "map:string"/"map:bytes" (repeated key=1/value=2 entries), and a leading
# "*" for a repeated field.
Fields = dict[int, tuple[str, str]]
MESSAGES: dict[str, Fields] = {
    "TypeMeta": {1: ("apiVersion", "string"), 2: ("kind", "string")},
    "Unknown": {1: ("typeMeta", "TypeMeta"), 2: ("raw", "bytes!"), 3: ("contentEncoding", "string"),
                4: ("contentType", "string")},
    "ObjectMeta": {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
                   11: ("labels", "map:string"), 12: ("annotations", "map:string"), 14: ("finalizers", "*string")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "*string")},
    "ConfigMap": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:string"), 3: ("binaryData", "map:bytes"),
                  4: ("immutable", "bool")},
    "Secret": {1: ("metadata", "ObjectMeta"), 2: ("data", "map:bytes"), 3: ("type", "string"),
               4: ("stringData", "map:string"), 5: ("immutable", "bool")},
    "ServiceAccount": {1: ("metadata", "ObjectMeta"), 3: ("imagePullSecrets", "*LocalObjectReference"),
                       4: ("automountServiceAccountToken", "bool")},
    "LocalObjectReference": {1: ("name", "string")},
    "PolicyRule": {1: ("verbs", "*string"), 2: ("apiGroups", "*string"), 3: ("resources", "*string"),
                   4: ("resourceNames", "*string"), 5: ("nonResourceURLs", "*string")},
    "Role": {1: ("metadata", "ObjectMeta"), 2: ("rules", "*PolicyRule")},
    "ClusterRole": {1: ("metadata", "ObjectMeta"), 2: ("rules", "*PolicyRule")},
    "Subject": {1: ("kind", "string"), 2: ("apiGroup", "string"), 3: ("name", "string"), 4: ("namespace", "string")},
    "RoleRef": {1: ("apiGroup", "string"), 2: ("kind", "string"), 3: ("name", "string")},
    "RoleBinding": {1: ("metadata", "ObjectMeta"), 2: ("subjects", "*Subject"), 3: ("roleRef", "RoleRef")},
    "ClusterRoleBinding": {1: ("metadata", "ObjectMeta"), 2: ("subjects", "*Subject"), 3: ("roleRef", "RoleRef")},
    "Job": {1: ("metadata", "ObjectMeta"), 2: ("spec", "JobSpec")},
    "JobSpec": {1: ("parallelism", "int"), 2: ("completions", "int"), 3: ("activeDeadlineSeconds", "int"),
                6: ("template", "PodTemplateSpec"), 7: ("backoffLimit", "int"), 8: ("ttlSecondsAfterFinished", "int"),
                9: ("completionMode", "string"), 10: ("suspend", "bool")},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta"), 2: ("spec", "PodSpec")},
    "PodSpec": {2: ("containers", "*Container"), 3: ("restartPolicy", "string")},
    "Container": {1: ("name", "string"), 2: ("image", "string"), 3: ("command", "*string"), 4: ("args", "*string"),
                  5: ("workingDir", "string"), 7: ("env", "*EnvVar"), 8: ("resources", "ResourceRequirements"),
                  14: ("imagePullPolicy", "string")},
    "EnvVar": {1: ("name", "string"), 2: ("value", "string")},
    "ResourceRequirements": {1: ("limits", "map:quantity"), 2: ("requests", "map:quantity")},
    "Quantity": {1: ("string", "string")},
    # the access reviews kubectl auth can-i and whoami send (authorization.k8s.io/v1, authentication.k8s.io/v1)
    "ResourceAttributes": {1: ("namespace", "string"), 2: ("verb", "string"), 3: ("group", "string"),
                           4: ("version", "string"), 5: ("resource", "string"), 6: ("subresource", "string"),
                           7: ("name", "string")},
    "NonResourceAttributes": {1: ("path", "string"), 2: ("verb", "string")},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                    2: ("nonResourceAttributes", "NonResourceAttributes")},
    "SubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes"),
                                2: ("nonResourceAttributes", "NonResourceAttributes"), 3: ("user", "string"),
                                4: ("groups", "*string"), 6: ("uid", "string")},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", "string")},
    "SelfSubjectAccessReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SelfSubjectAccessReviewSpec")},
    "SelfSubjectRulesReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SelfSubjectRulesReviewSpec")},
    "SubjectAccessReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SubjectAccessReviewSpec")},
    "LocalSubjectAccessReview": {1: ("metadata", "ObjectMeta"), 2: ("spec", "SubjectAccessReviewSpec")},
    "SelfSubjectReview": {1: ("metadata", "ObjectMeta")},
}
KINDS = {"Namespace", "ConfigMap", "Secret", "ServiceAccount", "Role", "ClusterRole", "RoleBinding",
         "ClusterRoleBinding", "Job", "SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview",
         "LocalSubjectAccessReview", "SelfSubjectReview"}


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a varint runs past the end")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value: an int or the bytes of a length-delimited field) of one message."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise ValueError("a field runs past the end")
            value, at = data[at:at + size], at + size
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire} is not read here")
        yield number, wire, value


def _message(name: str, data: bytes, depth: int = 0) -> dict[str, Any]:
    if depth > 32:
        raise ValueError("nested deeper than 32 messages")
    table = MESSAGES[name]
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        if number not in table:
            continue  # an unknown field: skipped, as protobuf readers do
        key, kind = table[number]
        repeated = kind.startswith("*")
        kind = kind.lstrip("*")
        if isinstance(value, int) != (kind in ("int", "bool")):
            raise ValueError(f"{name}.{key}: wire type {wire} where {kind} was expected")
        if kind.startswith("map:"):
            assert isinstance(value, bytes)
            entry = {n: v for n, _, v in _fields(value)}
            item_key, raw = entry.get(1, b""), entry.get(2, b"")
            if not isinstance(item_key, bytes) or not isinstance(raw, bytes):
                raise ValueError(f"{name}.{key}: a map entry that is not a key and a value")
            item_key = item_key.decode()
            if kind == "map:bytes":
                shown: Any = base64.b64encode(raw).decode()
            elif kind == "map:quantity":
                shown = _message("Quantity", raw, depth + 1).get("string", "")
            else:
                shown = raw.decode()
            out.setdefault(key, {})[item_key] = shown
            continue
        decoded = _scalar(kind, value, depth)
        if decoded == "" and not repeated:
            continue  # Go writes every string field, set or not: an empty one is JSON's omitted field
        if repeated:
            out.setdefault(key, []).append(decoded)
        else:
            out[key] = decoded
    return out


def _scalar(kind: str, value: Any, depth: int) -> Any:
    if kind == "string":
        return value.decode()
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind == "bytes!":
        return value
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "bool":
        return bool(value)
    return _message(kind, value, depth + 1)


def decode(raw: bytes) -> dict[str, Any]:
    """The JSON object of a protobuf body; 415 for a kind this module has no table for, 400 for a broken body."""
    if not raw.startswith(MAGIC):
        raise KubeError(400, "a protobuf body must start with Kubernetes' magic k8s\\0")
    try:
        unknown = _message("Unknown", raw[len(MAGIC):])
        type_meta = unknown.get("typeMeta") or {}
        kind = type_meta.get("kind", "")
        if kind not in KINDS:
            raise KubeError(415, f"a {kind or 'protobuf'} body in protobuf is not read here: send it as JSON or "
                                 "YAML (kubectl apply -f FILE, kubectl create -f FILE)")
        obj = _message(kind, unknown.get("raw", b""))
    except (ValueError, UnicodeDecodeError) as exc:
        raise KubeError(400, f"the protobuf body cannot be read: {exc}") from None
    return {"apiVersion": type_meta.get("apiVersion", ""), "kind": kind, **obj}
