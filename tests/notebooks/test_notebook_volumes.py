"""A Notebook's volumes, applied with the real ``kubectl`` to a real ``millpond server``, seen from a real kernel
driven over the proxied WebSocket: the workspace PVC at /home/jovyan (the kernel's working folder, its files
kept across stop/start and a delete and re-create of the Notebook, in the PVC's folder), a Fluid dataset's
PVC (its FUSE mount, read-only for a ReadOnly dataset), a Secret's files and env from it; a claim or Secret
that does not exist keeps the notebook waiting with the scheduler's or kubelet's words, and it starts once
the object is made."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.mounts import fuse_available
from millpond.notebooks import paths
from millpond.runners.sandbox import sandbox_problem
from millpond.settings import load_settings
from millpond.store.resources import ResourceStore
from tests.kube_support import Kubectl, kubectl_for
from tests.notebooks.support import ending_notebooks, execute, kernel_channels
from tests.server_support import Served, module_home

MISSING = sandbox_problem() or fuse_available()
pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(MISSING is not None, reason=f"needs bwrap and FUSE: {MISSING}")]


def notebook(name: str, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]],
             env: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({
        "apiVersion": "kubeflow.org/v1", "kind": "Notebook", "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"volumes": volumes, "containers": [{
            "name": name, "image": "kubeflownotebookswg/jupyter-scipy:v1.8.0", "volumeMounts": mounts,
            "env": env or [], "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]}}}})


def claim(name: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                       "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "notebook-volumes")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    yield from ending_notebooks(Served())


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(served, tmp_path_factory.mktemp("kubectl"))


def status_of(kubectl: Kubectl, name: str) -> dict[str, Any]:
    return dict(kubectl.json("get", "notebook", name).get("status") or {})


def wait_until(kubectl: Kubectl, name: str, test: Any, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = status_of(kubectl, name)
        if test(status):
            return status
        assert time.monotonic() < deadline, f"notebook {name}: {status}\n{server_log(name)}"
        time.sleep(0.5)


def server_log(name: str) -> str:
    resource = ResourceStore(load_settings()).get("Notebook", name, "default")
    log = paths.server_log(load_settings(), resource.uid) if resource else None
    return log.read_text()[-3000:] if log and log.is_file() else ""


def ready(status: dict[str, Any]) -> bool:
    return status.get("readyReplicas") == 1


def kernel(served: Served, name: str) -> str:
    return kernel_channels(f"{served.url}/notebook/default/{name}")


WORKSPACE = ([{"name": "workspace", "persistentVolumeClaim": {"claimName": "ws-lab"}}],
             [{"name": "workspace", "mountPath": "/home/jovyan"}])


def test_the_workspace_dataset_and_secret_are_at_their_paths_and_the_workspace_outlives_the_notebook(
        served: Served, kubectl: Kubectl, home: Path, tmp_path: Path) -> None:
    source = tmp_path / "digits"
    source.mkdir()
    (source / "train.csv").write_text("1,2,3\n")
    kubectl.ok("apply", "-f", "-", stdin=claim("ws-lab"))
    kubectl.ok("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "digits"},
        "spec": {"mounts": [{"mountPoint": f"local://{source}", "name": "digits"}]}}))  # ReadOnlyMany: read-only
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    kubectl.ok("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "scratch"},
        "spec": {"accessModes": ["ReadWriteMany"], "mounts": [{"mountPoint": f"local://{scratch}", "name": "s"}]}}))
    kubectl.ok("create", "secret", "generic", "creds", "--from-literal=password=s3cr3t")
    volumes, mounts = WORKSPACE
    document = notebook("lab", [*volumes, {"name": "data", "persistentVolumeClaim": {"claimName": "digits"}},
                                {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}},
                                {"name": "creds", "secret": {"secretName": "creds"}},
                                {"name": "dshm", "emptyDir": {"medium": "Memory"}}],
                        [*mounts, {"name": "data", "mountPath": "/data"}, {"name": "scratch", "mountPath": "/scratch"},
                         {"name": "creds", "mountPath": "/etc/creds"}, {"name": "dshm", "mountPath": "/dev/shm"}],
                        [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                         {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}])
    kubectl.ok("apply", "-f", "-", stdin=document)
    wait_until(kubectl, "lab", ready)
    channels = kernel(served, "lab")
    assert execute(channels, "import os; os.getcwd(), os.environ['HOME']") == "('/home/jovyan', '/home/jovyan')"
    assert execute(channels, "open('/home/jovyan/notes.txt', 'w').write('kept'); 'notes.txt' in os.listdir()") \
        == "True"
    assert execute(channels, "open('/data/digits/train.csv').read()") == "'1,2,3\\n'"
    read_only = "try:\n    open('/data/digits/new.txt', 'w')\nexcept OSError as e:\n    r = e.errno\nr"
    assert execute(channels, read_only) == "30"  # EROFS: a ReadOnlyMany dataset
    assert execute(channels, "open('/scratch/s/out.txt', 'w').write('rw')") == "2"  # a ReadWriteMany dataset
    deadline = time.monotonic() + 30
    while not (scratch / "out.txt").is_file():  # written through the dataset's mount to its storage
        assert time.monotonic() < deadline, sorted(p.name for p in scratch.iterdir())
        time.sleep(0.5)
    assert execute(channels, "open('/etc/creds/password').read(), os.environ['PASSWORD'], os.environ['POD']") \
        == "('s3cr3t', 's3cr3t', 'lab-0')"
    assert (home / "volumes" / "default" / "ws-lab" / "notes.txt").read_text() == "kept"  # the PVC's folder
    assert execute(channels, "import multiprocessing.shared_memory as m; b = m.SharedMemory(create=True, size=8); "
                             "b.unlink(); b.size") == "8"  # an emptyDir of medium Memory at /dev/shm: shared memory
    assert "s3cr3t" not in json.dumps(status_of(kubectl, "lab")) + kubectl.ok("describe", "notebook", "lab")

    kubectl.ok("annotate", "notebook", "lab", "kubeflow-resource-stopped=now")
    wait_until(kubectl, "lab", lambda status: not status.get("conditions"))
    kubectl.ok("annotate", "notebook", "lab", "kubeflow-resource-stopped-")
    wait_until(kubectl, "lab", ready)
    assert execute(kernel(served, "lab"), "open('notes.txt').read()") == "'kept'"

    kubectl.ok("delete", "notebook", "lab")
    kubectl.ok("apply", "-f", "-", stdin=document)
    wait_until(kubectl, "lab", ready)
    assert execute(kernel(served, "lab"), "open('/home/jovyan/notes.txt').read()") == "'kept'"
    kubectl.ok("delete", "notebook", "lab")


def test_a_missing_claim_or_secret_keeps_it_waiting_with_the_kubelet_s_words_until_it_exists(
        served: Served, kubectl: Kubectl) -> None:
    kubectl.ok("apply", "-f", "-", stdin=notebook(
        "nopvc", [{"name": "workspace", "persistentVolumeClaim": {"claimName": "ws-nopvc"}}],
        [{"name": "workspace", "mountPath": "/home/jovyan"}]))
    status = wait_until(kubectl, "nopvc", lambda s: any(c["type"] == "PodScheduled" and c["status"] == "False"
                                                        for c in s.get("conditions") or ()))
    scheduled = next(c for c in status["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["reason"] == "Unschedulable"
    assert scheduled["message"] == '0/1 nodes are available: persistentvolumeclaim "ws-nopvc" not found'
    kubectl.ok("apply", "-f", "-", stdin=claim("ws-nopvc"))
    wait_until(kubectl, "nopvc", ready)
    kubectl.ok("delete", "notebook", "nopvc")

    kubectl.ok("apply", "-f", "-", stdin=notebook(
        "nosecret", [{"name": "token", "secret": {"secretName": "later"}}], [{"name": "token", "mountPath": "/etc/t"}]))
    status = wait_until(kubectl, "nosecret", lambda s: "waiting" in (s.get("containerState") or {})
                        and s["containerState"]["waiting"]["reason"] == "ContainerCreating")
    assert status["containerState"]["waiting"]["message"] == \
        'MountVolume.SetUp failed for volume "token" : secret "later" not found'
    kubectl.ok("create", "secret", "generic", "later", "--from-literal=t=1")
    wait_until(kubectl, "nosecret", ready)
    assert execute(kernel(served, "nosecret"), "open('/etc/t/t').read()") == "'1'"
    kubectl.ok("delete", "notebook", "nosecret")


def test_a_volume_that_cannot_exist_is_refused_at_apply(kubectl: Kubectl) -> None:
    refused = kubectl.run("apply", "-f", "-", stdin=notebook(
        "bad", [{"name": "h", "hostPath": {"path": "/etc"}}], [{"name": "h", "mountPath": "/host"}]))
    assert refused.returncode != 0 and "a hostPath volume cannot exist here" in refused.stderr, refused.stderr
    refused = kubectl.run("apply", "-f", "-", stdin=notebook("bad", [], [{"name": "nope", "mountPath": "/x"}]))
    assert refused.returncode != 0 and "no such volume" in refused.stderr, refused.stderr
    hostile = notebook("bad", [{"name": "c", "secret": {"secretName": "creds", "items": [
        {"key": "password", "path": "../../escape"}]}}], [{"name": "c", "mountPath": "/etc/c"}])
    refused = kubectl.run("apply", "-f", "-", stdin=hostile)
    assert refused.returncode != 0 and "a relative path without '..'" in refused.stderr, refused.stderr
    refused = kubectl.run("apply", "-f", "-", stdin=notebook("bad", [], [], [
        {"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}]))
    assert refused.returncode != 0 and "only secretKeyRef, configMapKeyRef and fieldRef" in refused.stderr, \
        refused.stderr
    assert kubectl.run("get", "notebook", "bad").returncode != 0  # nothing stored
