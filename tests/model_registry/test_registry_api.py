"""The model registry's REST API over HTTP: the OpenAPI's shapes (every MetadataValue, artifact types, paging,
search), its error shape, and bad input — malformed, hostile and fuzzed bodies — answered 4xx, never 500."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server_support import Served, call

API = "/api/model_registry/v1alpha3"


def _ok(server: Served, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
    status, answer = call(server.url, method, API + path, body=body)
    assert status == expect, (status, answer)
    return answer


def _refused(server: Served, method: str, path: str, body: Any = None, expect: int = 400) -> str:
    status, answer = call(server.url, method, API + path, body=body)
    assert status == expect, (status, answer)
    assert isinstance(answer, dict) and set(answer) == {"code", "message"} and answer["message"], answer
    return str(answer["message"])


def test_entities_properties_paging_and_search(server: Served, models_root: Path) -> None:
    struct = base64.b64encode(b'{"a": 1}').decode()
    properties = {
        "count": {"metadataType": "MetadataIntValue", "int_value": "9007199254740993"},
        "score": {"metadataType": "MetadataDoubleValue", "double_value": 0.5},
        "team": {"metadataType": "MetadataStringValue", "string_value": "vision"},
        "ok": {"metadataType": "MetadataBoolValue", "bool_value": False},
        "blob": {"metadataType": "MetadataStructValue", "struct_value": struct},
        "proto": {"metadataType": "MetadataProtoValue", "type": "type.googleapis.com/x.Y", "proto_value": struct},
    }
    model = _ok(server, "POST", "/registered_models", {"name": "api-model", "owner": "bob", "externalId": "ext-1",
                                                      "language": ["en"], "customProperties": properties}, 201)
    assert model["customProperties"] == properties and model["state"] == "LIVE" and model["language"] == ["en"]
    assert model["id"].isdigit() and model["createTimeSinceEpoch"] == model["lastUpdateTimeSinceEpoch"]
    assert _ok(server, "GET", "/registered_model?externalId=ext-1")["id"] == model["id"]
    assert _ok(server, "GET", "/registered_model?name=api-model")["owner"] == "bob"
    version = _ok(server, "POST", "/model_versions", {"name": "1", "registeredModelId": model["id"],
                                                      "author": "bob"}, 201)
    assert version["registeredModelId"] == model["id"] and version["state"] == "LIVE"
    uri = f"file://{models_root}/api-model"
    artifact = _ok(server, "POST", f"/model_versions/{version['id']}/artifacts",
                   {"artifactType": "model-artifact", "name": "weights", "uri": uri, "modelFormatName": "onnx"}, 201)
    assert artifact["artifactType"] == "model-artifact" and artifact["state"] == "UNKNOWN"
    doc = _ok(server, "POST", "/artifacts", {"artifactType": "doc-artifact", "name": "card", "uri": "https://x.org/c"},
              201)
    metric = _ok(server, "POST", "/artifacts", {"artifactType": "metric", "name": "acc", "value": 0.9, "step": 3}, 201)
    assert metric["value"] == 0.9 and metric["step"] == 3
    attached = _ok(server, "POST", f"/model_versions/{version['id']}/artifacts",
                   {"id": doc["id"], "artifactType": "doc-artifact", "description": "the card"})
    assert attached["id"] == doc["id"] and attached["description"] == "the card"
    listed = _ok(server, "GET", f"/model_versions/{version['id']}/artifacts")
    assert [a["name"] for a in listed["items"]] == ["weights", "card"]
    only_docs = _ok(server, "GET", f"/model_versions/{version['id']}/artifacts?artifactType=doc-artifact")
    assert [a["name"] for a in only_docs["items"]] == ["card"]
    assert [a["name"] for a in _ok(server, "GET", "/model_artifacts")["items"]] == ["weights"]
    _refused(server, "GET", f"/model_artifacts/{doc['id']}", expect=404)  # a doc is no model artifact
    found = _ok(server, "GET", f"/model_artifact?name=weights&parentResourceId={version['id']}")
    assert found["uri"] == uri

    patched = _ok(server, "PATCH", f"/model_artifacts/{artifact['id']}", {"state": "LIVE", "modelFormatVersion": "17"})
    assert patched["state"] == "LIVE" and patched["modelFormatVersion"] == "17" and patched["modelFormatName"] == "onnx"
    assert int(patched["lastUpdateTimeSinceEpoch"]) >= int(artifact["lastUpdateTimeSinceEpoch"])

    for index in range(5):
        _ok(server, "POST", f"/registered_models/{model['id']}/versions", {"name": f"p{index}"}, 201)
    seen, token = [], ""
    while True:
        page = _ok(server, "GET", f"/registered_models/{model['id']}/versions?pageSize=2&sortOrder=DESC"
                                  f"&orderBy=CREATE_TIME&nextPageToken={token}")
        seen += [v["name"] for v in page["items"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == ["p4", "p3", "p2", "p1", "p0", "1"]
    # filterQuery: the entity's own fields and its custom properties, AND/OR, IN, LIKE, typed access
    for query, names in (
        ("name LIKE 'p%' AND name != 'p0'", ["p1", "p2", "p3", "p4"]), ("name IN ('1', 'p3')", ["1", "p3"]),
        ("author = 'bob' OR name = 'p4'", ["1", "p4"]),
        ("(name = 'p1' OR name = 'p2') AND state = 'LIVE'", ["p1", "p2"]),
        ("id > 0 AND name ILIKE 'P_'", ["p0", "p1", "p2", "p3", "p4"]), ("nothing = 1", [])):
        page = _ok(server, "GET", f"/registered_models/{model['id']}/versions?filterQuery={urllib.parse.quote(query)}")
        assert [v["name"] for v in page["items"]] == names, query
    for query, count in (("team = 'vision'", 1), ("score.double_value >= 0.5 AND ok = false", 1),
                         ("count.int_value = 9007199254740993", 1), ("`team` = 'other'", 0)):
        assert _ok(server, "GET", f"/registered_models?filterQuery={urllib.parse.quote(query)}")["size"] == count, query
    # the v1 prefix (the PyPI client's) is the same registry
    status, same = call(server.url, "GET", f"/api/model_registry/v1/registered_models/{model['id']}")
    assert status == 200 and same == _ok(server, "GET", f"/registered_models/{model['id']}")


def test_bad_requests_are_refused_with_the_registrys_error_shape(server: Served, models_root: Path) -> None:
    model = _ok(server, "POST", "/registered_models", {"name": "strict"}, 201)
    version = _ok(server, "POST", f"/registered_models/{model['id']}/versions", {"name": "1"}, 201)
    versions = f"/model_versions/{version['id']}/artifacts"
    assert "already exists" in _refused(server, "POST", "/registered_models", {"name": "strict"}, 409)
    again = f"/registered_models/{model['id']}/versions"
    assert "already exists" in _refused(server, "POST", again, {"name": "1"}, 409)
    for body, says in (
        (None, "JSON object"), ([1], "JSON object"), ({}, "name: required"), ({"name": ""}, "name"),
        ({"name": "x" * 300}, "name"), ({"name": "a\nb"}, "name"), ({"name": 5}, "name"),
        ({"name": "s", "state": "GONE"}, "state"), ({"name": "s", "language": "en"}, "language"),
        ({"name": "s", "customProperties": {"k": {"string_value": "v"}}}, "metadataType"),
        ({"name": "s", "customProperties": {"k": {"metadataType": "MetadataIntValue", "int_value": "1.5"}}}, "int"),
        ({"name": "s", "customProperties": {"k": {"metadataType": "MetadataIntValue", "int_value": str(2**64)}}},
         "int64"),
        ({"name": "s", "customProperties": {"k": {"metadataType": "MetadataBoolValue", "bool_value": "yes"}}}, "bool"),
        ({"name": "s", "customProperties": {"k": {"metadataType": "MetadataStructValue", "struct_value": "%%"}}},
         "base64"),
        ({"name": "s", "customProperties": {"k": {"metadataType": "MetadataDoubleValue"}}}, "double_value"),
        ({"name": "s", "customProperties": []}, "customProperties"),
    ):
        assert says in _refused(server, "POST", "/registered_models", body), body
    assert "name cannot be changed" in _refused(server, "PATCH", f"/registered_models/{model['id']}",
                                                {"name": "other"})
    for path, expect in (("/registered_models/0", 400), ("/registered_models/abc", 400),
                         ("/registered_models/999999", 404), ("/model_versions/1234567890", 400),
                         ("/registered_model", 400), ("/registered_model?name=nope", 404),
                         ("/model_version?name=1", 400), ("/registered_models?orderBy=NAME", 400),
                         ("/registered_models?sortOrder=UP", 400), ("/registered_models?pageSize=0", 400),
                         ("/registered_models?nextPageToken=forged", 400), ("/artifacts?artifactType=x", 400),
                         ("/registered_models?filterQuery=name%20%3D", 400),
                         ("/registered_models?filterQuery=name%20%3D%20'x'%20AND", 400),
                         ("/registered_models?filterQuery=(name%20%3D%20'x'", 400),
                         ("/registered_models?filterQuery=name%20~%20'x'", 400),
                         ("/registered_models/999999/versions", 404), ("/registered_models?namespace=Bad_NS", 400)):
        _refused(server, "GET", path, expect=expect)
    # a URI that climbs out of its root, or lies outside the folders a model may come from: 400, nothing stored
    for uri in (f"file://{models_root}/../../../etc", "/etc/passwd", "file:///etc/shadow", "s3://bucket/../x",
                "https://host/a/../../b", "relative/model", "model-registry://strict/1", "ftp://x/y",
                f"file://{models_root}/\x00x"):
        _refused(server, "POST", versions, {"artifactType": "model-artifact", "name": "m", "uri": uri})
    assert _ok(server, "GET", versions)["items"] == []
    link = models_root / "escape"
    link.symlink_to("/etc")
    assert "outside" in _refused(server, "POST", versions, {"artifactType": "model-artifact", "uri": f"file://{link}"})
    _refused(server, "POST", versions, {"name": "untyped"})  # an artifact needs its artifactType
    _refused(server, "POST", "/model_artifacts", {"artifactType": "metric", "name": "m"})
    _refused(server, "POST", "/artifacts", {"artifactType": "metric", "value": float("inf")})
    _refused(server, "POST", "/model_versions", {"name": "x", "registeredModelId": "999999"}, 404)
    # a body that is not JSON at all
    request = urllib.request.Request(server.url + API + "/registered_models", b"{not json", method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400 and set(json.loads(refused.value.read())) == {"code", "message"}


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                 max_size=4), max_leaves=12)
_FIELDS = st.sampled_from(["name", "state", "customProperties", "externalId", "artifactType", "uri", "value",
                           "registeredModelId", "language", "author", "owner", "description", "id", "step"])
_BODIES = _JSON | st.dictionaries(_FIELDS, _JSON, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_BODIES, target=st.sampled_from(["/registered_models", "/model_versions", "/model_artifacts",
                                             "/artifacts", "/registered_models/1", "/model_versions/1/artifacts"]),
       method=st.sampled_from(["POST", "PATCH"]))
def test_fuzzed_bodies_never_answer_500(server: Served, body: Any, target: str, method: str) -> None:
    status, answer = call(server.url, method, API + target, body=body)
    assert status < 500, (status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and answer.get("message"), answer


_QUERY_PARTS = st.sampled_from(["name", "state", "`a b`", "x.int_value", "=", "!=", "<>", ">=", "LIKE", "IN", "AND",
                                "OR", "(", ")", ",", "'p%'", '"q"', "1", "-2.5e3", "true", "'", "`", "~", "\\"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.lists(_QUERY_PARTS, max_size=12).map(" ".join) | st.text(max_size=40))
def test_fuzzed_filter_queries_never_answer_500(server: Served, query: str) -> None:
    status, answer = call(server.url, "GET", f"{API}/registered_models?filterQuery={urllib.parse.quote(query)}")
    assert status in (200, 400), (status, answer)
