"""The Notebooks page's routes (the Jupyter web app's API under ``/ui-api``) on a real ``millpond server``: a body
as the JWA's form posts it makes the Notebook the JWA's backend makes; every bad or hostile input is one 4xx
naming its field, with nothing created (no Notebook, no workspace PVC); stop, start and delete as the JWA's
PATCH and DELETE."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from millpond.notebooks import objects
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.server_support import Served, call, module_home

pytestmark = pytest.mark.timeout(600)
NOTEBOOKS = "/ui-api/namespaces/default/notebooks"
IMAGE = "ghcr.io/kubeflow/kubeflow/notebook-servers/jupyter-scipy:latest"


def form(**changes: Any) -> dict[str, Any]:
    """A body as the JWA's spawner form posts it (its fields, the ones millpond ignores included)."""
    body: dict[str, Any] = {
        "name": "api-lab", "namespace": "default", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "customImage": "", "customImageCheck": False, "serverType": "jupyter", "allowCustomImage": True,
        "cpu": "0.5", "cpuLimit": "", "memory": "1.0Gi", "memoryLimit": "", "gpus": {"vendor": "", "num": "none"},
        "workspace": {"mount": "/home/jovyan", "newPvc": {"metadata": {"name": "{notebook-name}-workspace"}, "spec": {
            "resources": {"requests": {"storage": "5Gi"}}, "accessModes": ["ReadWriteOnce"]}}},
        "datavols": [], "shm": True, "configurations": [], "affinityConfig": "", "tolerationGroup": "",
    }
    body.update(changes)
    return body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "spawner-routes"):
        served = Served()
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                 "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}}
        other = {**claim, "metadata": {"name": "theirs", "namespace": "team-b"}}
        status, answer = call(served.url, "POST", "/apis/millpond/v1/fluid/apply", body=[claim, other])
        assert status == 200, answer
        yield served
        for resource in ResourceStore(load_settings()).list("Notebook", None):
            objects.delete(load_settings(), resource.namespace, resource.name)
        served.stop()


def _created(server: Served) -> tuple[list[str], list[str]]:
    """The namespace's notebooks and PVCs, by name."""
    notebooks = call(server.url, "GET", NOTEBOOKS)[1]["notebooks"]
    pvcs = call(server.url, "GET", "/ui-api/namespaces/default/pvcs")[1]["pvcs"]
    return [one["name"] for one in notebooks], sorted(one["name"] for one in pvcs)


def _volume(claim: str, mount: str = "/home/jovyan/data") -> dict[str, Any]:
    return {"mount": mount, "existingSource": {"persistentVolumeClaim": {"claimName": claim}}}


BAD = [
    # (what the form says, the field named, words of the message, the status)
    (form(name="Not_DNS"), "name", "RFC 1123 label", 400),
    (form(name="../../etc"), "name", "RFC 1123 label", 400),
    (form(name="x" * 100_000), "name", "no more than", 400),
    (form(name=None), "name", "Required value", 400),
    (form(image=""), "image", "Required value", 400),
    (form(image="bad image;rm -rf /"), "image", "not a valid image reference", 400),
    (form(image=["a"]), "image", "a string is required", 400),
    (form(customImage="UPPER::case"), "customImage", "not a valid image reference", 400),
    (form(cpu="nan"), "cpu", "not a Kubernetes quantity", 400),
    (form(cpu="-1"), "cpu", "must be more than 0", 400),
    (form(cpu=10**400), "cpu", "no more than 64 characters", 400),
    (form(cpu=1e308), "cpu", "too large", 400),
    (form(cpu="100000"), "cpu", "can never run on this machine: requests 100000 CPUs", 400),
    (form(cpu="1", cpuLimit="0.5"), "cpuLimit", "must not be less than the request", 400),
    (form(memory="9" * 60), "memory", "too large", 400),
    (form(memory="100Ti"), "memory", "can never run on this machine", 400),
    (form(gpus={"num": "1", "vendor": "nvidia.com/gpu"}), "gpus", "this machine has none", 400),
    (form(gpus={"num": "1.5", "vendor": "nvidia.com/gpu"}), "gpus", "not a whole number of GPUs", 400),
    (form(gpus={"num": "1", "vendor": "amd.com/gpu"}), "gpus", "is not one of", 400),
    (form(gpus={"num": "4", "vendor": "aliyun.com/gpu-mem"}), "gpus", "requests a share of a GPU", 400),
    (form(gpus="lots"), "gpus", "'num' field", 400),
    (form(workspace={"mount": "/home/jovyan"}), "workspace", "either newPvc or existingSource", 400),
    (form(workspace={"mount": "/home/jovyan", "existingSource": {"persistentVolumeClaim": {"claimName": "nope"}}}),
     "workspace", "no PVC 'nope' in namespace default", 404),
    (form(workspace={"mount": "/home/jovyan", "newPvc": {"metadata": {"name": "data"}, "spec": {}}}),
     "workspace", "PVC 'data' already exists", 409),
    (form(workspace={"mount": "/", "newPvc": {"metadata": {"name": "w"}, "spec": {}}}), "workspace",
     "absolute path other than /", 400),
    (form(workspace={"mount": "/home/jovyan", "newPvc": {"metadata": {"name": "w", "namespace": "team-b"},
                                                         "spec": {}}}), "workspace", "should not specify", 400),
    (form(workspace={"mount": "/home/jovyan", "newPvc": {"metadata": {"name": "w"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}}}), "workspace",
     "must be greater than zero", 422),  # the Kubernetes API's dry run: Invalid
    (form(datavols=[_volume("team-b/theirs")]), "datavols[0]", "is a PVC of another namespace ('team-b')", 400),
    (form(datavols=[{"mount": "/d", "existingSource": {"persistentVolumeClaim": {"claimName": "theirs",
                                                                                 "namespace": "team-b"}}}]),
     "datavols[0]", "another namespace", 400),
    (form(datavols=[_volume("theirs")]), "datavols[0]", "no PVC 'theirs' in namespace default", 404),
    (form(datavols=[_volume("data"), _volume("../../secrets", "/home/jovyan/s")]), "datavols[1]",
     "another namespace", 400),
    (form(datavols=[_volume("data", "/home/jovyan/../../etc")]), "datavols[0]", "without '..'", 400),
    (form(datavols=[_volume("data", "/home/jovyan")]), "datavols[0]", "mounted once", 400),
    (form(datavols=[{"mount": "/d", "existingSource": {"nfs": {"server": "x", "path": "/"}}}]), "datavols[0]",
     "only PVCs mount here", 400),
    (form(datavols=[_volume("data", f"/d/{n}") for n in range(10_000)]), "datavols", "at most 32", 400),
    (form(datavols="data"), "datavols", "must be a list", 400),
    ([form()], "body", "JSON object", 400),
]


@pytest.mark.parametrize("body,field,words,status", BAD, ids=[f"{n}-{case[1]}" for n, case in enumerate(BAD)])
def test_bad_input_is_one_error_naming_its_field_and_nothing_is_created(server: Served, body: Any, field: str,
                                                                         words: str, status: int) -> None:
    before = _created(server)
    answer_status, answer = call(server.url, "POST", NOTEBOOKS, body=body)
    assert answer_status == status, answer
    assert answer["field"] == field and words in answer["message"], answer
    assert answer["message"].startswith(f"{field}: ") and "\n" not in answer["message"]
    assert _created(server) == before


def test_hostile_paths_and_bodies_are_refused_without_a_500(server: Served) -> None:
    for method, path, body in (
        ("PATCH", f"{NOTEBOOKS}/..%2F..%2Fetc", {"stopped": True}),
        ("DELETE", f"{NOTEBOOKS}/..%2F..%2Fetc", None),
        ("DELETE", f"{NOTEBOOKS}/{urllib.parse.quote('<img src=x>')}", None),
        ("PATCH", f"{NOTEBOOKS}/{'a' * 300}", {"stopped": True}),
        ("GET", "/ui-api/namespaces/..%2Fteam-b/notebooks", None),
        ("GET", "/ui-api/namespaces/Team_B/pvcs", None),
        ("POST", "/ui-api/namespaces/NOT-A-NAMESPACE/notebooks", form()),
        ("PATCH", f"{NOTEBOOKS}/no-such", {"stopped": "yes"}),
        ("PATCH", f"{NOTEBOOKS}/no-such", [1, 2]),
        ("PATCH", f"{NOTEBOOKS}/no-such", {"stopped": True}),
        ("DELETE", f"{NOTEBOOKS}/no-such", None),
    ):
        status, answer = call(server.url, method, path, body=body)
        assert 400 <= status < 500, (method, path, status, answer)
    status, answer = call(server.url, "POST", NOTEBOOKS, body=None, headers={"Content-Type": "application/json"})
    assert status == 400, answer
    assert _created(server)[0] == []


def test_the_jwa_form_makes_the_jwa_notebook_then_stop_start_and_delete(server: Served) -> None:
    status, answer = call(server.url, "POST", NOTEBOOKS, body=form(datavols=[_volume("data")]))
    assert status == 200, answer
    status, made = call(server.url, "GET", "/apis/millpond/v1/notebooks.kubeflow.org/api-lab?namespace=default")
    assert status == 200, made
    assert made["apiVersion"] == "kubeflow.org/v1beta1"
    assert made["metadata"]["labels"] == {"app": "api-lab"}
    assert made["metadata"]["annotations"] == {"notebooks.kubeflow.org/server-type": "jupyter",
                                               "notebooks.kubeflow.org/creator": "anonymous"}
    pod = made["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "default-editor"
    container = pod["containers"][0]
    assert container["name"] == "api-lab" and container["image"] == IMAGE
    assert container["resources"] == {"requests": {"cpu": "0.5", "memory": "1.0Gi"},
                                      "limits": {"cpu": "0.5", "memory": "1.0Gi"}}  # limitFactor 1.0
    assert pod["volumes"] == [
        {"name": "api-lab-workspace", "persistentVolumeClaim": {"claimName": "api-lab-workspace"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    assert container["volumeMounts"] == [{"name": "api-lab-workspace", "mountPath": "/home/jovyan"},
                                         {"name": "data", "mountPath": "/home/jovyan/data"}]
    assert _created(server) == (["api-lab"], ["api-lab-workspace", "data"])

    # the same name again: the name is refused (before its workspace, which exists too), nothing else made
    status, answer = call(server.url, "POST", NOTEBOOKS, body=form())
    assert status == 409 and answer["field"] == "name", answer

    # the culler's annotation, written through the Kubernetes API as the culler writes it, is the list's last activity
    patch = json.dumps({"metadata": {"annotations": {"notebooks.kubeflow.org/last-activity": "2026-01-02T03:04:05Z"}}})
    sent = urllib.request.Request(f"{server.url}/apis/kubeflow.org/v1/namespaces/default/notebooks/api-lab",
                                  data=patch.encode(), method="PATCH",
                                  headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(sent, timeout=30) as answer:
        assert answer.status == 200
    [row] = call(server.url, "GET", NOTEBOOKS)[1]["notebooks"]
    assert row["last_activity"] == "2026-01-02T03:04:05Z"
    assert row["cpu"] == "0.5" and row["memory"] == "1.0Gi" and row["volumes"] == ["api-lab-workspace", "data"]

    path = f"{NOTEBOOKS}/api-lab"
    assert call(server.url, "PATCH", path, body={"stopped": True})[0] == 200
    status, shown = call(server.url, "GET", "/apis/millpond/v1/notebooks.kubeflow.org/api-lab?namespace=default")
    assert "kubeflow-resource-stopped" in shown["metadata"]["annotations"]
    status, answer = call(server.url, "PATCH", path, body={"stopped": True})
    assert status == 409 and "already stopped" in answer["message"]  # as the JWA answers
    [row] = call(server.url, "GET", NOTEBOOKS)[1]["notebooks"]
    assert row["stopped"] and row["url"] == "/notebook/default/api-lab/lab"
    assert call(server.url, "PATCH", path, body={"stopped": False})[0] == 200
    status, shown = call(server.url, "GET", "/apis/millpond/v1/notebooks.kubeflow.org/api-lab?namespace=default")
    assert "kubeflow-resource-stopped" not in shown["metadata"]["annotations"]

    assert call(server.url, "DELETE", path)[0] == 200
    assert call(server.url, "DELETE", path)[0] == 404
    assert _created(server) == ([], ["api-lab-workspace", "data"])  # the workspace PVC stays
    # a notebook of the same name finds its workspace: mounted as an existing volume
    status, answer = call(server.url, "POST", NOTEBOOKS, body=form(workspace={
        "mount": "/home/jovyan", "existingSource": {"persistentVolumeClaim": {"claimName": "api-lab-workspace"}}}))
    assert status == 200, answer
    assert call(server.url, "DELETE", path)[0] == 200


def test_the_config_offers_the_jwa_images_and_this_machine(server: Served) -> None:
    status, answer = call(server.url, "GET", "/ui-api/notebooks/config")
    assert status == 200
    config = answer["config"]
    assert config["image"]["value"] == IMAGE and IMAGE in config["image"]["options"]
    assert config["workspaceVolume"]["value"]["newPvc"]["metadata"]["name"] == "{notebook-name}-workspace"
    assert [vendor["limitsKey"] for vendor in config["gpus"]["value"]["vendors"]] == [
        "nvidia.com/gpu", "aliyun.com/gpu-mem"]
    assert config["machine"]["cpu"] > 0 and config["machine"]["memoryBytes"] > 0
