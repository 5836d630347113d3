"""Hostile input (issue 11, defect 6): every such document is refused in one line, never a crash, a 500 or a hang.

The CLI runs as a real process (a segmentation fault in the YAML loader must show as exit 139,
not kill the test run); the API cases go to a real ``millpond server`` in a thread, which must
answer 4xx and stay up. The limits themselves are documented in ``millpond.documents``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.forked import millpond_process
from tests.server_support import Served, module_home

# A small valid IR; DEFAULT_N and DEFAULT_ITEMS are replaced by each case.
PIPELINE = """\
pipelineInfo:
  name: hostile
root:
  inputDefinitions:
    parameters:
      n: {parameterType: NUMBER_INTEGER, defaultValue: DEFAULT_N}
      items: {parameterType: LIST, defaultValue: DEFAULT_ITEMS}
  dag:
    tasks:
      echo:
        taskInfo: {name: echo}
        componentRef: {name: comp-echo}
        inputs: {parameters: {n: {componentInputParameter: n}}}
components:
  comp-echo:
    executorLabel: exec-echo
    inputDefinitions: {parameters: {n: {parameterType: NUMBER_INTEGER}}}
deploymentSpec:
  executors:
    exec-echo:
      container: {image: "python:3.11", command: [sh, -c, "echo {{$.inputs.parameters['n']}}"]}
schemaVersion: 2.1.0
sdkVersion: kfp-2.17.0
"""


def pipeline(n: str = "1", items: str = "[1]") -> str:
    return PIPELINE.replace("DEFAULT_N", n).replace("DEFAULT_ITEMS", items)


def laughs(levels: int) -> str:
    """A LIST default of nine-way aliases, ``levels`` deep: 9**(levels+1) strings once expanded."""
    parts = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    parts += [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "[" + ", ".join(parts) + "]"


DEEP_200K = "[" * 200_000 + "]" * 200_000
DEEP_3000 = "[" * 3_000 + "]" * 3_000
BIG_INT = "9" * 400

# (case id, document text, a piece of the one error line)
HOSTILE_PIPELINES = [
    ("brackets-200000", pipeline(items=DEEP_200K), "nested deeper than 100 levels"),
    ("brackets-3000", pipeline(items=DEEP_3000), "nested deeper than 100 levels"),
    ("laughs-7", pipeline(items=laughs(7)), "aliases counted as expanded"),
    ("laughs-8", pipeline(items=laughs(8)), "aliases counted as expanded"),
    ("recursive-alias", pipeline(items="&loop [1, *loop]"), "refers to a node that contains it"),
    ("int-400-digits", pipeline(n=BIG_INT), "does not fit in 64 bits"),
    ("int-beyond-int64", pipeline(n=str(2**63)), "does not fit in 64 bits"),
    ("nan-default", pipeline(items="[.nan]"), "not a finite number"),
    ("components-null", pipeline().split("components:")[0] + "components: null\nschemaVersion: 2.1.0\n",
     "which is not defined"),
    ("dag-null", pipeline().split("  dag:")[0] + "  dag: null\ncomponents:" + pipeline().split("components:")[1],
     "root has no dag"),
    ("nul-in-string", pipeline(items='["a\\0b"]'), "NUL character"),
    ("long-pipeline-name", pipeline().replace("name: hostile", "name: " + "p" * 10_000, 1), "longer than 128"),
    ("long-task-name", pipeline().replace("      echo:\n", "      " + "t" * 300 + ":\n", 1), "longer than 253"),
]


# --- the CLI ---------------------------------------------------------------------------------


def millpond(home: Path, *args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return millpond_process(list(args), {**os.environ, "MILLPOND_HOME": str(home)}, stdin=stdin)


def assert_refused(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    assert fragment in lines[0], lines[0]
    assert result.stdout == ""


def assert_no_runs(home: Path) -> None:
    listing = millpond(home, "runs", "list", "-o", "json")
    assert listing.returncode == 0 and json.loads(listing.stdout) == [], listing


@pytest.mark.parametrize(("text", "fragment"), [(t, f) for _, t, f in HOSTILE_PIPELINES],
                         ids=[case for case, _, _ in HOSTILE_PIPELINES])
def test_run_refuses_a_hostile_pipeline_in_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    assert_refused(millpond(tmp_path / "home", "run", path), fragment)
    assert_no_runs(tmp_path / "home")


def test_the_valid_pipeline_those_cases_start_from_is_accepted(tmp_path: Path) -> None:
    from millpond.pipelines.loader import load_ir_text

    loaded = load_ir_text(pipeline(n=str(2**63 - 1), items='[1, "two", {"k": [3]}]'), "valid.yaml")
    assert loaded.spec["root"]["inputDefinitions"]["parameters"]["n"]["defaultValue"] == 2**63 - 1


@pytest.mark.parametrize(
    ("assignment", "fragment"),
    [
        (f"n={BIG_INT}", "-p n: integer 9999"),
        (f"n={-(2**63) - 1}", "does not fit in 64 bits"),
        (f"items={DEEP_3000}", "-p items: expected a JSON list, got invalid JSON (nested deeper than 100 levels)"),
        ('items=["a\\u0000b"]', "NUL character"),
        ("items=[NaN]", "not a finite number"),
    ],
    ids=["int-400-digits", "int-below-int64", "list-3000-deep", "nul", "nan"],
)
def test_run_refuses_hostile_parameter_values(tmp_path: Path, assignment: str, fragment: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(pipeline())
    assert_refused(millpond(tmp_path / "home", "run", path, "-p", assignment), fragment)
    assert_no_runs(tmp_path / "home")


@pytest.mark.parametrize(
    ("params", "fragment"),
    [('{"items": ' + DEEP_200K + "}", "nested deeper than 100 levels"), ('{"n": ' + BIG_INT + "}", "64 bits")],
    ids=["deep", "big-int"],
)
def test_run_refuses_a_hostile_params_file(tmp_path: Path, params: str, fragment: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(pipeline())
    (tmp_path / "params.json").write_text(params)
    assert_refused(millpond(tmp_path / "home", "run", path, "--params-file", tmp_path / "params.json"), fragment)


DATASET = "apiVersion: data.fluid.io/v1alpha1\nkind: Dataset\nmetadata:\n  name: hostile\nspec:\n  mounts:\n"
HOSTILE_MANIFESTS = [
    ("brackets-200000", DATASET + "  - mountPoint: " + DEEP_200K + "\n", "nested deeper than 100 levels"),
    ("laughs-8", DATASET + "  - mountPoint: s3://b/\n    options: {x: " + laughs(8) + "}\n",
     "aliases counted as expanded"),
    ("nul", DATASET.replace("  name: hostile\n", '  name: hostile\n  annotations: {note: "a\\0b"}\n')
     + "  - mountPoint: s3://bucket/\n", "NUL character"),
    # refused by the schema before the fix too; kept so that stays true
    ("big-int", DATASET + "  - mountPoint: s3://b/\n    options: {x: " + BIG_INT + "}\n", ""),
]


@pytest.mark.parametrize(("text", "fragment"), [(t, f) for _, t, f in HOSTILE_MANIFESTS],
                         ids=[case for case, _, _ in HOSTILE_MANIFESTS])
def test_apply_refuses_a_hostile_manifest_in_one_line(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "dataset.yaml"
    path.write_text(text)
    assert_refused(millpond(tmp_path / "home", "apply", "-f", path), fragment)
    listing = millpond(tmp_path / "home", "get", "datasets", "-o", "json")
    assert "hostile" not in listing.stdout


# --- the API ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "hostile-server"):
        served = Served()
        yield served
        served.stop()


def request(server: Served, path: str, body: bytes, content_type: str) -> tuple[int, dict[str, Any]]:
    call = urllib.request.Request(
        f"{server.url}{path}", data=body, method="POST", headers={"Content-Type": content_type}
    )
    try:
        with urllib.request.urlopen(call, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def message(answer: dict[str, Any]) -> str:
    """The error's text: KFP's ``message``, or FastAPI's ``detail`` for a body it could not parse as JSON at all."""
    return str(answer.get("message") or answer["detail"])


def upload(server: Served, text: str, name: str) -> tuple[int, dict[str, Any]]:
    boundary = uuid.uuid4().hex
    body = (
        (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadfile\"; filename=\"{name}.yaml\"\r\n"
         f"Content-Type: application/octet-stream\r\n\r\n").encode()
        + text.encode()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return request(
        server, f"/apis/v2beta1/pipelines/upload?name={name}", body, f"multipart/form-data; boundary={boundary}"
    )


def alive(server: Served) -> bool:
    with urllib.request.urlopen(f"{server.url}/apis/v2beta1/healthz", timeout=60) as response:
        return response.status == 200


@pytest.mark.parametrize(("text", "fragment"), [(t, f) for _, t, f in HOSTILE_PIPELINES],
                         ids=[case for case, _, _ in HOSTILE_PIPELINES])
def test_upload_refuses_a_hostile_pipeline_with_400(server: Served, text: str, fragment: str) -> None:
    status, body = upload(server, text, f"hostile-{uuid.uuid4().hex[:8]}")
    assert status == 400, body
    assert fragment in message(body), body
    assert alive(server)


def test_upload_of_the_valid_pipeline_is_accepted(server: Served) -> None:
    status, body = upload(server, pipeline(), "valid-base")
    assert status == 200, body


def inline_run(spec: dict[str, Any], runtime_parameters: str | None = None) -> bytes:
    body = '{"display_name": "hostile", "pipeline_spec": ' + json.dumps(spec)
    if runtime_parameters is not None:
        body += ', "runtime_config": {"parameters": ' + runtime_parameters + "}"
    return (body + "}").encode()


def base_spec() -> dict[str, Any]:
    from millpond.pipelines.loader import load_ir_text

    return load_ir_text(pipeline(), "base").spec


def test_create_run_refuses_an_inline_spec_with_a_400_digit_default_with_400(server: Served) -> None:
    body = inline_run(base_spec()).replace(b'"defaultValue": 1}', b'"defaultValue": ' + BIG_INT.encode() + b"}", 1)
    assert BIG_INT.encode() in body
    status, answer = request(server, "/apis/v2beta1/runs", body, "application/json")
    assert status == 400, answer
    assert "does not fit in 64 bits" in message(answer), answer


def test_create_run_refuses_an_inline_spec_with_null_components_with_400(server: Served) -> None:
    status, answer = request(server, "/apis/v2beta1/runs", inline_run({**base_spec(), "components": None}),
                             "application/json")
    assert status == 400, answer
    assert "which is not defined" in message(answer), answer


def test_create_run_refuses_an_inline_spec_nested_3000_deep_with_400(server: Served) -> None:
    """FastAPI's JSON reading already refused this before the fix; kept so that stays true."""
    body = inline_run(base_spec()).replace(b'"defaultValue": [1]', b'"defaultValue": ' + DEEP_3000.encode(), 1)
    status, answer = request(server, "/apis/v2beta1/runs", body, "application/json")
    assert status == 400, answer


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [('{"n": ' + BIG_INT + "}", "64 bits"), ('{"items": ["a\\u0000b"]}', "NUL character"),
     ('{"items": ' + "[" * 900 + "]" * 900 + "}", "nested deeper than 100 levels")],
    ids=["int-400-digits", "nul", "nesting-900"],
)
def test_create_run_refuses_hostile_runtime_parameters_with_400(server: Served, parameters: str, fragment: str) -> None:
    status, answer = request(server, "/apis/v2beta1/runs", inline_run(base_spec(), parameters), "application/json")
    assert status == 400, answer
    assert fragment in message(answer), answer


@pytest.mark.parametrize(("text", "fragment"), [(t, f) for _, t, f in HOSTILE_MANIFESTS],
                         ids=[case for case, _, _ in HOSTILE_MANIFESTS])
def test_fluid_apply_refuses_a_hostile_manifest_with_400(server: Served, text: str, fragment: str) -> None:
    status, body = request(server, "/apis/millpond/v1/fluid/apply", text.encode(), "application/yaml")
    assert status == 400, body
    assert fragment in message(body), body
    assert alive(server)


JSON_DATASET = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset",
                "metadata": {"name": "hostile-json", "annotations": {"note": "a\u0000b"}},
                "spec": {"mounts": [{"mountPoint": "s3://bucket/"}]}}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [("[" * 3_000 + "]" * 3_000, "nested deeper than 100 levels"), (json.dumps(JSON_DATASET), "NUL character")],
    ids=["nesting-3000", "nul"],
)
def test_fluid_apply_refuses_hostile_json_with_400(server: Served, body: str, fragment: str) -> None:
    status, answer = request(server, "/apis/millpond/v1/fluid/apply", body.encode(), "application/json")
    assert status == 400, answer
    assert fragment in message(answer), answer


def test_parsing_an_upload_does_not_stall_other_requests(server: Served) -> None:
    """A large (valid) upload is parsed off the event loop: a request sent meanwhile is answered first.

    The document is 900,000 values, within the limits; parsing and validating it takes seconds.
    The health check is sent once the whole upload is on the wire, so on a server that parsed
    on its event loop it would wait for the upload's answer.
    """
    text = pipeline(items="[" + ",".join(["1"] * 900_000) + "]")
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadfile\"; filename=\"big.yaml\"\r\n\r\n"
            ).encode() + text.encode() + f"\r\n--{boundary}--\r\n".encode()
    head = (f"POST /apis/v2beta1/pipelines/upload?name=big HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    order: list[str] = []
    with socket.create_connection(("127.0.0.1", server.port)) as connection:
        connection.sendall(head + body)
        answered = threading.Event()

        def read_upload() -> None:
            reply = b""
            while chunk := connection.recv(65536):
                reply += chunk
            order.append("upload " + reply.split(b"\r\n", 1)[0].decode())
            answered.set()

        reader = threading.Thread(target=read_upload)
        reader.start()
        answered.wait(0.5)  # let the server take the upload in before asking
        assert alive(server)
        order.append("healthz")
        reader.join(300)
    assert order == ["healthz", "upload HTTP/1.1 200 OK"], order


def test_apply_refuses_a_mount_point_with_a_bracketed_host(tmp_path: Path) -> None:
    """Found by tests/test_fuzz_manifests.py: urlsplit raises ValueError on ``[host]`` that is no IPv6 address."""
    path = tmp_path / "dataset.yaml"
    path.write_text(DATASET + "  - mountPoint: s3://[nfs-imagenet]/data\n")
    assert_refused(millpond(tmp_path / "home", "apply", "-f", path), "is not a valid URI")


@pytest.mark.parametrize("flag", ["--run-name", "--experiment"])
def test_run_refuses_a_name_longer_than_its_column(tmp_path: Path, flag: str) -> None:
    """Run and experiment names go into String(255) columns, which PostgreSQL enforces: refuse before anything."""
    path = tmp_path / "valid.yaml"
    path.write_text(pipeline())
    assert_refused(millpond(tmp_path / "home", "run", path, flag, "x" * 300), "longer than 255 characters")
    assert_no_runs(tmp_path / "home")


def test_api_refuses_run_and_experiment_names_longer_than_their_column(server: Served) -> None:
    body = json.loads(inline_run(base_spec()))
    body["display_name"] = "r" * 300
    status, answer = request(server, "/apis/v2beta1/runs", json.dumps(body).encode(), "application/json")
    assert status == 400 and "longer than 255 characters" in message(answer), answer
    experiment = json.dumps({"display_name": "e" * 300}).encode()
    status, answer = request(server, "/apis/v2beta1/experiments", experiment, "application/json")
    assert status == 400 and "longer than 255 characters" in message(answer), answer
    experiment = json.dumps({"display_name": "a\u0000b"}).encode()
    status, answer = request(server, "/apis/v2beta1/experiments", experiment, "application/json")
    assert status == 400 and "NUL" in message(answer), answer
