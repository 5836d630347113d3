"""Namespaces are DNS-1123 labels everywhere: every kind, both CLIs and the REST API (issue 28, defect 4).

``arena submit pytorch --name f1 -n '../x' "echo hi"`` used to record a job the REST API listed but could
neither reach nor delete (404). A namespace that is no label (and an object name that breaks its kind's
rule) is now refused where it comes in: the CLI with one ``error:`` line naming the option and the
value, exit 2; ``millpond apply`` naming the document's field; the API with 400 and kube-apiserver's
words; and nothing is stored. A valid one round-trips: created, reachable over HTTP, deletable.
Everything runs for real: the CLIs in this process, a real server over the same home, real job supervisors.
"""

from __future__ import annotations

import json
import string
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from millpond.cli.main import main as millpond_main
from millpond.errors import UserError
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore
from millpond.store.training import JobStore
from millpond.training import PytorchJobBuilder, TrainingClient
from tests.conftest import CliResult
from tests.server_support import Served, module_home, serving
from tests.training_support import arena

API = "/apis/millpond/v1"
BAD = ["../x", "KUBE", "<img src=x>"]
KUBE_LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"
STORED_KINDS = ("Dataset", "AlluxioRuntime", "DataLoad", "LocalQueue", "InferenceService", "TrainJob", "PyTorchJob")


# --- oracles, written apart from the code under test ----------------------------------------------------------
_LABEL_CHARS = set(string.ascii_lowercase + string.digits + "-")


def is_label(value: str) -> bool:
    return 0 < len(value) <= 63 and set(value) <= _LABEL_CHARS and value[0] != "-" and value[-1] != "-"


def shown(value: str) -> str:
    """How an error line quotes a value: JSON, escaped to ASCII when it holds anything not printable."""
    return json.dumps(value, ensure_ascii=not value.isprintable())


def is_subdomain(value: str) -> bool:
    """IsDNS1123Subdomain: at most 253 characters, labels joined by '.' (their 63 is not checked, as there)."""
    return 0 < len(value) <= 253 and all(is_label(part) or is_label(part[:63]) and is_label(part[-63:])
                                         for part in value.split("."))


# --- helpers ----------------------------------------------------------------------------------------------------
def millpond(capsys: Any, *args: Any) -> CliResult:
    """``millpond ARGS`` in this process: exit code and what it printed."""
    capsys.readouterr()
    try:
        millpond_main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return CliResult(code, out, err)


def refused(result: CliResult, *words: str) -> str:
    """The one ``error:`` line of a refused command (exit 2, nothing on stdout, no traceback), holding ``words``."""
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err and result.out == ""
    assert all(word in lines[0] for word in words), (words, lines[0])
    return lines[0]


def nothing_stored(home: Path) -> bool:
    """No job, no object of any kind tried here, no secret or config map, no job folder."""
    store = ResourceStore()
    return (JobStore().list(None) == [] and all(store.list(kind, None) == [] for kind in STORED_KINDS)
            and ConfigStore(home).list("configmap") == [] and ConfigStore(home).list("secret") == []
            and not (home / "training").exists())


def call(server: Served, path: str, method: str = "GET", body: bytes | None = None,
         content_type: str = "application/json") -> tuple[int, Any]:
    request = urllib.request.Request(server.url + path, method=method, data=body,
                                     headers={"Content-Type": content_type} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            text = answer.read().decode()
            return answer.status, json.loads(text) if text.startswith(("{", "[")) else text
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def documents(name: str, namespace: str, folder: Path) -> dict[str, dict[str, Any]]:
    """One small manifest of each kind, named ``name`` in ``namespace``."""
    meta = {"name": name, "namespace": namespace}
    container = {"name": "pytorch", "image": "x", "command": ["true"]}
    return {
        "Dataset": {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": meta,
                    "spec": {"mounts": [{"mountPoint": folder.as_uri(), "name": "data"}]}},
        "AlluxioRuntime": {"apiVersion": "data.fluid.io/v1alpha1", "kind": "AlluxioRuntime", "metadata": meta,
                           "spec": {"replicas": 1}},
        "DataLoad": {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataLoad", "metadata": meta,
                     "spec": {"dataset": {"name": "ds", "namespace": namespace}}},
        "LocalQueue": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": meta,
                       "spec": {"clusterQueue": "cq"}},
        "InferenceService": {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": meta,
                             "spec": {"predictor": {"sklearn": {"storageUri": "pvc://nothing/model"}}}},
        "PyTorchJob": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta,
                       "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                           "containers": [container]}}}}}},
        "TrainJob": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta,
                     "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"command": ["true"]}}},
        "ConfigMap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}},
        "Secret": {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": {"k": "v"}},
    }


def write(folder: Path, document: dict[str, Any]) -> Path:
    path = folder / "manifest.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")  # any string survives, escaped
    return path


# --- the reported cases ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("namespace", BAD)
def test_arena_submit_refuses_a_namespace_that_is_no_label_and_stores_nothing(
        home: Path, capsys: Any, namespace: str) -> None:
    result = arena(capsys, "submit", "pytorch", "--name", "f1", "-n", namespace, "echo hi")
    refused(result, f"-n/--namespace: Invalid value: {shown(namespace)}: {KUBE_LABEL}")
    assert JobStore().list(None) == [] and not (home / "training").exists()


def namespace_commands(capsys: Any, namespace: str) -> list[tuple[Any, tuple[str, ...]]]:
    """Every command that takes ``-n``, as (runner, arguments), the namespace given as ``--namespace=VALUE``."""
    option = f"--namespace={namespace}"

    def on_arena(*args: str) -> CliResult:
        return arena(capsys, *args)

    def on_millpond(*args: str) -> CliResult:
        return millpond(capsys, *args)

    return [(on_arena, args) for args in (
        ("list", option), ("get", option, "f1"), ("logs", option, "f1"), ("delete", option, "f1"), ("prune", option),
        ("top", "job", option), ("submit", "pytorch", "--name", "f1", option, "true"),
        ("serve", "custom", "--name", "m", option, "run"), ("serve", "list", option), ("serve", "delete", option, "m"),
    )] + [(on_millpond, args) for args in (
        ("get", "datasets", option), ("delete", "dataset", option, "d"), ("dataset", "ls", option, "d"),
        ("dataset", "sync", option, "d"), ("dataset", "mount", option, "d", "/nonexistent-folder"),
        ("queue", "create", "q", "--cpu", "1", option), ("train", "submit", "pytorch", "--name", "f1", option, "true"),
        ("serve", "--from-run", "r", "--artifact", "t.m", option),
    )]


@pytest.mark.parametrize("namespace", [*BAD, "a.b", "a" * 64])
def test_every_namespace_option_refuses_it(home: Path, capsys: Any, namespace: str) -> None:
    """Each command that takes ``-n`` refuses it while parsing, before it touches anything."""
    for run, args in namespace_commands(capsys, namespace):
        refused(run(*args), shown(namespace), "--namespace")
    assert nothing_stored(home)


@pytest.mark.parametrize("kind", ["Dataset", "AlluxioRuntime", "DataLoad", "LocalQueue", "InferenceService",
                                  "PyTorchJob", "TrainJob", "ConfigMap", "Secret"])
@pytest.mark.parametrize("namespace", [*BAD, "a.b"])
def test_apply_refuses_a_manifest_whose_namespace_is_no_label(
        home: Path, capsys: Any, tmp_path: Path, kind: str, namespace: str) -> None:
    line = refused(millpond(capsys, "apply", "-f", write(tmp_path, documents("ok", namespace, tmp_path)[kind])),
                   "metadata.namespace", repr(namespace), KUBE_LABEL)
    assert kind in line
    assert nothing_stored(home)


def test_apply_refuses_a_namespace_longer_than_63_characters(home: Path, capsys: Any, tmp_path: Path) -> None:
    refused(millpond(capsys, "apply", "-f", write(tmp_path, documents("ok", "a" * 64, tmp_path)["LocalQueue"])),
            "metadata.namespace", "must be no more than 63 characters")
    assert nothing_stored(home)


@pytest.mark.parametrize("claim", ["../../x", "KUBE", "a/b"])
def test_a_job_whose_volume_claims_a_dataset_that_can_never_exist_is_refused(
        home: Path, capsys: Any, tmp_path: Path, claim: str) -> None:
    """A claim names a dataset (and a folder of it): one that no Dataset can be named would wait forever."""
    job = documents("pv", "default", tmp_path)["PyTorchJob"]
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    pod["containers"][0]["volumeMounts"] = [{"name": "d", "mountPath": "/d"}]
    pod["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]
    refused(millpond(capsys, "apply", "-f", write(tmp_path, job)),
            f"volumes[0].persistentVolumeClaim.claimName: Invalid value: {shown(claim)}: a lowercase RFC 1123")
    assert nothing_stored(home)


def test_the_stores_refuse_what_no_check_above_them_caught(home: Path) -> None:
    """The SDK (and any caller) reaches the stores: they are the last line, so every kind is covered."""
    with pytest.raises(UserError, match=r'^metadata.namespace: Invalid value: "KUBE": a lowercase RFC 1123 label'):
        TrainingClient("KUBE").submit(PytorchJobBuilder().with_name("f1").with_command("true").build())
    with pytest.raises(UserError, match=r'^metadata.name: Invalid value: "F1"'):
        JobStore().create("F1", "default", "pytorchjob", {}, "QUEUING")
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "spec": {"clusterQueue": "cq"}}
    with pytest.raises(UserError, match=r'^LocalQueue ok: metadata.namespace: Invalid value: "\.\./x"'):
        ResourceStore().apply([{**lq, "metadata": {"name": "ok"}},
                               {**lq, "metadata": {"name": "ok", "namespace": "../x"}}])
    with pytest.raises(UserError, match=r'^LocalQueue metadata.name: Invalid value: "a/b"'):
        ResourceStore().create({**lq, "metadata": {"name": "a/b"}})
    assert nothing_stored(home)


# --- the REST API ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for home in module_home(tmp_path_factory, "namespaces-api"):
        yield from serving()
        _end_left_over(home)


def _end_left_over(home: Path) -> None:
    from tests.conftest import _end_background_processes

    _end_background_processes(home)


@pytest.mark.parametrize("namespace", BAD)
def test_api_refuses_a_namespace_in_a_path_a_query_or_a_body_with_400(server: Served, namespace: str) -> None:
    for method, path in (("GET", f"{API}/jobs?namespace={q(namespace)}"),
                         ("GET", f"{API}/datasets?namespace={q(namespace)}"),
                         ("GET", f"{API}/localqueues/x?namespace={q(namespace)}"),
                         ("DELETE", f"{API}/datasets/x?namespace={q(namespace)}"),
                         ("GET", f"/apis/v2beta1/experiments?namespace={q(namespace)}")):
        status, body = call(server, path, method)
        assert status == 400 and body["message"].startswith("query parameter namespace: Invalid value: "), body
        assert KUBE_LABEL in body["message"]
    for method in ("GET", "DELETE"):
        status, body = call(server, f"{API}/jobs/{q(namespace)}/f1", method)
        assert 400 <= status < 500 and body["message"], (status, body)  # '../x' names no route: 404
        if "/" not in namespace:
            assert status == 400 and body["message"].startswith("path namespace: Invalid value: "), body
    status, body = call(server, "/apis/v2beta1/experiments", "POST",
                        json.dumps({"display_name": f"e-{q(namespace)}", "namespace": namespace}).encode())
    assert status == 400 and "namespace: Invalid value" in body["message"], body
    status, body = call(server, "/apis/v2beta1/pipelines", "POST",
                        json.dumps({"display_name": "p-bad", "namespace": namespace}).encode())
    assert status == 400 and "namespace: Invalid value" in body["message"], body
    assert not any(e["display_name"].startswith("e-") for e in call(server, "/apis/v2beta1/experiments")[1].get(
        "experiments", []))
    assert not any(p["display_name"] == "p-bad" for p in call(server, "/apis/v2beta1/pipelines")[1].get(
        "pipelines", []))


@pytest.mark.parametrize("kind", ["Dataset", "LocalQueue", "PyTorchJob", "ConfigMap"])
def test_api_apply_refuses_a_manifest_whose_namespace_is_no_label(server: Served, tmp_path: Path, kind: str) -> None:
    status, body = call(server, f"{API}/fluid/apply", "POST",
                        json.dumps(documents("ok", "KUBE", tmp_path)[kind]).encode())
    assert status == 400 and "metadata.namespace" in body["message"] and KUBE_LABEL in body["message"], body
    assert call(server, f"{API}/{kind.lower()}s/ok?namespace=KUBE")[0] == 400


def test_a_job_in_a_valid_namespace_is_reachable_and_deletable_over_http(server: Served, capsys: Any) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "f1", "-n", "team-1", "echo hi").code == 0
    _round_trip_job(server, "team-1", "f1")


def _round_trip_job(server: Served, namespace: str, name: str, wait: bool = True) -> None:
    """The job is read over HTTP (until it ended, with ``wait``), listed in its namespace, deleted, gone."""
    deadline = time.monotonic() + 120
    while True:
        status, info = call(server, f"{API}/jobs/{namespace}/{name}")
        assert status == 200 and (info["namespace"], info["name"]) == (namespace, name), info
        if not wait or info["status"] in ("SUCCEEDED", "FAILED"):
            break
        assert time.monotonic() < deadline, info
        time.sleep(0.1)
    assert [j["name"] for j in call(server, f"{API}/jobs?namespace={namespace}")[1]["jobs"]] == [name]
    assert call(server, f"{API}/jobs/{namespace}/{name}", "DELETE")[0] == 200
    assert call(server, f"{API}/jobs/{namespace}/{name}")[0] == 404
    assert JobStore().list(namespace) == []


# --- the property: any string as a namespace or a name, on every command and kind covered ---------------------
HOSTILE = ["../x", "KUBE", "<img src=x>", "a.b", "-a", "a-", "", ".", "..", "a/b", "a b", "é", "x\ny", "%2e%2e",
           "a" * 63, "a" * 64, "0", "a--b", "default", "Default", "a_b", "ａ"]
STRINGS = st.one_of(
    st.sampled_from(HOSTILE),
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=70),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(namespace=STRINGS, name=STRINGS)
@example(namespace="team-1", name="f1")
@example(namespace="", name="f1")
@example(namespace="../x", name="f1")
@example(namespace="KUBE", name="f1")
@example(namespace="<img src=x>", name="f1")
@example(namespace="default", name="../x")
def test_any_namespace_and_name_is_refused_with_nothing_stored_or_round_trips(
        server: Served, capsys: Any, tmp_path_factory: pytest.TempPathFactory, namespace: str, name: str) -> None:
    folder = tmp_path_factory.mktemp("ns")
    good_ns = is_label(namespace)
    # arena submit: a job's name is a label too
    submitted = arena(capsys, "submit", "pytorch", f"--name={name}", f"--namespace={namespace}", "true")
    if good_ns and is_label(name):
        assert submitted.code == 0, submitted.err
        _round_trip_job(server, namespace, name, wait=False)  # deleted while it runs: its supervisor is stopped
    else:
        refused(submitted, f"{shown(namespace)}: " if not good_ns else "--name")
        assert JobStore().list(None) == []
    # millpond apply, per kind: a Dataset's and a LocalQueue's names are subdomains
    for kind in ("Dataset", "LocalQueue"):
        applied = millpond(capsys, "apply", "-f", write(folder, documents(name, namespace, folder)[kind]))
        path = f"{API}/{kind.lower()}s/{q(name)}?namespace={q(namespace or 'default')}"
        if (good_ns or namespace == "") and is_subdomain(name):  # a manifest's empty namespace is "default"
            assert applied.code == 0, applied.err
            status, found = call(server, path)
            assert status == 200 and found["metadata"]["namespace"] == (namespace or "default"), found
            assert call(server, path, "DELETE")[0] == 200
            assert call(server, path)[0] == 404
        else:
            refused(applied, "metadata.namespace" if is_subdomain(name) else "metadata.name")
            assert ResourceStore().list(kind, None) == []
            if namespace and not good_ns and is_subdomain(name):  # an empty name or one with '/' names no route
                assert call(server, path)[0] == 400
    # every other command with -n: refused while parsing, or it answers as for any namespace
    if not good_ns:
        for run, args in namespace_commands(capsys, namespace):
            refused(run(*args), shown(namespace), "--namespace")
    listed = arena(capsys, "list", f"--namespace={namespace}")
    if good_ns:
        assert listed.code == 0, listed.err
    else:
        refused(listed, shown(namespace))
    got = millpond(capsys, "get", "datasets", f"--namespace={namespace}")
    assert got.code == 0 if good_ns else refused(got, shown(namespace))
    assert JobStore().list(None) == [] and ResourceStore().list("Dataset", None) == []
