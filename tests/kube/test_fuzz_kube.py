"""Fuzzing the Kubernetes API: whatever the path, the body or the patch, the answer is never a 500 and every
refusal is a ``kind: Status`` with Kubernetes' reason.

Bodies are mutations of valid Fluid and Kueue objects (created as dry runs, so hundreds of examples
store nothing) and random JSON; patches of every media type go to one real object; paths are random
segments under ``/api`` and ``/apis``. Hostile cases: a document nested 100,000 deep, names that are
not DNS-1123, wrong types where the schema wants objects.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz_support import fuzz_settings, json_values, mutated
from tests.server_support import Served, module_home

SEEDS: list[dict[str, Any]] = [
    {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "fz", "labels": {"a": "b"}},
     "spec": {"mounts": [{"mountPoint": "local:///tmp", "name": "tmp"}]}},
    {"apiVersion": "data.fluid.io/v1alpha1", "kind": "AlluxioRuntime", "metadata": {"name": "fz"},
     "spec": {"replicas": 1, "tieredstore": {"levels": [{"mediumtype": "MEM", "path": "/dev/shm", "quota": "1Gi"}]}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "fz"},
     "spec": {"clusterQueue": "cq"}},
]
COLLECTIONS = {"Dataset": "/apis/data.fluid.io/v1alpha1/namespaces/default/datasets",
               "AlluxioRuntime": "/apis/data.fluid.io/v1alpha1/namespaces/default/alluxioruntimes",
               "LocalQueue": "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues"}
PATCH_TYPES = ["application/merge-patch+json", "application/json-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml", "application/json"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "fuzz-kube"):
        server = Served()
        answer = send(server, "POST", COLLECTIONS["LocalQueue"], json.dumps(SEEDS[2]).encode())
        assert answer[0] == 201, answer
        yield server
        server.stop()


def send(served: Served, method: str, path: str, body: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(served.url + path, data=body, method=method,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def assert_status(code: int, text: str) -> None:
    assert code < 500, (code, text[:2000])
    if code >= 400:
        answer = json.loads(text)
        assert answer["kind"] == "Status" and answer["reason"] and answer["message"], text[:2000]


@fuzz_settings(120)
@given(doc=mutated(SEEDS))
def test_mutated_objects_created_as_dry_runs(served: Served, doc: Any) -> None:
    kind = doc.get("kind") if isinstance(doc, dict) else None
    path = COLLECTIONS.get(kind if isinstance(kind, str) else "", COLLECTIONS["Dataset"])
    assert_status(*send(served, "POST", path + "?dryRun=All", json.dumps(doc, allow_nan=True).encode()))


@fuzz_settings(80)
@given(body=json_values, media=st.sampled_from(PATCH_TYPES))
def test_random_patches_of_a_real_object(served: Served, body: Any, media: str) -> None:
    raw = json.dumps(body, allow_nan=True).encode()
    path = COLLECTIONS["LocalQueue"] + "/fz?fieldManager=fuzz&dryRun=All"
    assert_status(*send(served, "PATCH", path, raw, media))


@fuzz_settings(80)
@given(segments=st.lists(st.sampled_from(["api", "apis", "v1", "namespaces", "default", "datasets", "data.fluid.io",
                                          "v1alpha1", "status", "log", "x", "..", "%2e%2e", "kubeflow.org",
                                          "pytorchjobs", "Bad_Name", "watch"]), min_size=1, max_size=7),
       method=st.sampled_from(["GET", "DELETE", "POST", "PUT", "PATCH"]),
       query=st.sampled_from(["", "?watch=1&timeoutSeconds=0", "?limit=-1", "?limit=x", "?continue=zz",
                              "?labelSelector=a%20in%20(", "?fieldSelector=%3D%3D", "?fieldValidation=Maybe",
                              "?dryRun=Some", "?resourceVersion=abc&watch=1"]))
def test_random_paths(served: Served, segments: list[str], method: str, query: str) -> None:
    path = "/" + "/".join(segments) + query
    body = b"{}" if method in ("POST", "PUT", "PATCH") else None
    media = "application/merge-patch+json" if method == "PATCH" else "application/json"
    code, text = send(served, method, path, body, media)
    assert code < 500, (path, code, text[:500])


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"1" + b"]" * 100_000,
    b'{"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "' + b"a" * 300 + b'"}}',
    b'{"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": "not-a-map"}',
    b'{"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "x"}, "spec": [1]}',
    b'{"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "x\\ny"}}',
    b"\xff\xfe not utf-8",
], ids=["deep", "long-name", "metadata-string", "spec-list", "newline-name", "not-utf8"])
def test_hostile_bodies(served: Served, body: bytes, tmp_path: Path) -> None:
    code, text = send(served, "POST", COLLECTIONS["Dataset"], body)
    assert 400 <= code < 500, (code, text[:500])
    assert_status(code, text)
    assert "\n" not in json.loads(text)["message"]


@fuzz_settings(150)
@given(body=st.one_of(st.binary(max_size=200), st.binary(max_size=200).map(lambda tail: b"k8s\x00" + tail),
                      st.sampled_from([b"k8s\x00\x0a\x10\x0a\x02v1\x12\x0aConfigMap\x12\x05\x0a\x03\x0a\x01x",
                                       b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\xff\xff\xff\xff\x0f",
                                       b"k8s\x00" + b"\x12\x80\x01" * 60])))
def test_protobuf_bodies(served: Served, body: bytes) -> None:
    path = "/api/v1/namespaces/default/configmaps?dryRun=All"
    assert_status(*send(served, "POST", path, body, "application/vnd.kubernetes.protobuf"))
