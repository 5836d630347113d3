"""Fuzzing the REST routes that take documents: whatever the body, the answer is never a 500.

Bodies are random JSON values and mutations of valid ones: create-run with an inline
pipeline spec and runtime parameters, pipeline uploads (mutated YAML text), and Fluid apply
(mutated manifests as JSON, and mutated YAML text). schemathesis covers every route's schema
(tests/test_server_openapi_fuzz.py); this goes deeper into the documents those routes parse.

The seed run names a secret that does not exist, so a valid run is refused (400) just before it
would be recorded: the fuzzing reaches every check without starting hundreds of runs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz_support import SEEDS, fuzz_settings, hostile_values, mutated, mutated_text
from tests.server.test_hostile_input import pipeline
from tests.server_support import Served, module_home

PLATFORM = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": {"exec-echo": {
    "secretAsEnv": [{"secretName": "fuzz-missing-secret", "keyToEnv": [{"secretKey": "k", "envVar": "K"}]}],
}}}}}}
SPEC = yaml.safe_load(pipeline())
RUN_BODIES = [
    {"display_name": "fuzz", "pipeline_spec": {"pipeline_spec": SPEC, "platform_spec": PLATFORM},
     "runtime_config": {"parameters": {"n": 3, "items": [1, "two"]}}},
    {"display_name": "fuzz", "pipeline_spec": SPEC, "platform_spec": PLATFORM},
]
UPLOAD_TEXTS = [pipeline(), json.dumps(SPEC), pipeline() + "---\n" + yaml.safe_dump(PLATFORM)]
# Datasets and runtimes only: an applied data operation would start work in the background.
MANIFEST_TEXTS = [path.read_text() for path in sorted((SEEDS / "fluid").glob("*.yaml"))]
MANIFESTS = [doc for text in MANIFEST_TEXTS for doc in yaml.safe_load_all(text)
             if isinstance(doc, dict)
             and (doc.get("kind") == "Dataset" or str(doc.get("kind", "")).endswith("Runtime"))]

SAFE_TEXTS = [text for text in MANIFEST_TEXTS
              if all(isinstance(doc, dict)
                     and (doc.get("kind") == "Dataset" or str(doc.get("kind")).endswith("Runtime"))
                     for doc in yaml.safe_load_all(text) if doc is not None)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "fuzz-api"):
        served = Served()
        yield served
        served.stop()


def post(server: Served, path: str, body: bytes, content_type: str) -> tuple[int, str]:
    request = urllib.request.Request(f"{server.url}{path}", data=body, method="POST",
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def assert_answered(status: int, text: str) -> None:
    assert status < 500, (status, text[:2000])
    if status >= 400:
        assert json.loads(text).get("message") or json.loads(text).get("detail"), text[:2000]


def as_json(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


def test_the_seed_run_is_refused_only_for_its_missing_secret(server: Served) -> None:
    status, text = post(server, "/apis/v2beta1/runs", as_json(RUN_BODIES[0]), "application/json")
    assert status == 400 and "fuzz-missing-secret" in text, text


@fuzz_settings(examples=400)
@given(body=st.one_of(mutated(RUN_BODIES, rounds=4), hostile_values))
def test_create_run_never_answers_500(server: Served, body: Any) -> None:
    assert_answered(*post(server, "/apis/v2beta1/runs", as_json(body), "application/json"))


@fuzz_settings(examples=300)
@given(text=mutated_text(UPLOAD_TEXTS))
def test_upload_never_answers_500(server: Served, text: str) -> None:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadfile\"; filename=\"fuzz.yaml\"\r\n\r\n"
            ).encode() + text.encode(errors="surrogatepass") + f"\r\n--{boundary}--\r\n".encode()
    name = f"fuzz-{uuid.uuid4().hex[:12]}"
    assert_answered(*post(server, f"/apis/v2beta1/pipelines/upload?name={name}", body,
                          f"multipart/form-data; boundary={boundary}"))


@fuzz_settings(examples=400)
@given(body=st.one_of(mutated(MANIFESTS), st.lists(mutated(MANIFESTS), max_size=3), hostile_values))
def test_fluid_apply_of_json_never_answers_500(server: Served, body: Any) -> None:
    assert_answered(*post(server, "/apis/millpond/v1/fluid/apply", as_json(body), "application/json"))


@fuzz_settings(examples=300)
@given(text=mutated_text(SAFE_TEXTS))
def test_fluid_apply_of_yaml_never_answers_500(server: Served, text: str) -> None:
    assert_answered(*post(server, "/apis/millpond/v1/fluid/apply", text.encode(errors="surrogatepass"),
                          "application/yaml"))
