"""The real ``kubectl`` against a real ``millpond server``: discovery, apply (client- and server-side), get
(tables, JSON, jsonpath, selectors), describe, label, annotate, patch, edit, diff, explain, wait, watch
and delete, on Fluid's and Kubeflow's kinds; and the API's refusals as kubectl prints them."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube_support import Kubectl, kubectl_binary, kubectl_for
from tests.server_support import Served, module_home


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "kubectl")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    server = Served()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubectl(served: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(served, tmp_path_factory.mktemp("kubectl"))


def dataset_files(folder: Path, name: str, mount_name: str = "data") -> Path:
    data = folder / f"{name}-ufs"
    data.mkdir(exist_ok=True)
    (data / "a.txt").write_text("hello")
    manifest = folder / f"{name}.yaml"
    manifest.write_text(textwrap.dedent(f"""\
        apiVersion: data.fluid.io/v1alpha1
        kind: Dataset
        metadata:
          name: {name}
        spec:
          mounts:
          - mountPoint: local://{data}
            name: {mount_name}
        ---
        apiVersion: data.fluid.io/v1alpha1
        kind: AlluxioRuntime
        metadata:
          name: {name}
        spec:
          replicas: 1
          tieredstore:
            levels:
            - mediumtype: MEM
              path: /dev/shm
              quota: 1Gi
        """))
    return manifest


def test_api_resources_lists_every_kind_with_its_short_names(kubectl: Kubectl) -> None:
    out = kubectl.ok("api-resources")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    for plural in ("datasets", "alluxioruntimes", "pytorchjobs", "trainjobs", "clusterqueues", "inferenceservices"):
        assert plural in rows
    assert "lq" in rows["localqueues"] and "isvc" in rows["inferenceservices"]
    assert kubectl.ok("version", "-o", "json")  # /version answers what kubectl reads
    assert '"gitVersion"' in kubectl.ok("version", "-o", "json")


def test_apply_get_describe_and_delete_a_dataset(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = dataset_files(tmp_path, "flowers")
    assert kubectl.ok("apply", "-f", str(manifest)).splitlines() == [
        "dataset.data.fluid.io/flowers created", "alluxioruntime.data.fluid.io/flowers created"]
    table = kubectl.ok("get", "datasets").splitlines()
    assert table[0].split()[:4] == ["NAME", "UFS", "TOTAL", "SIZE"] and table[1].startswith("flowers ")
    obj = kubectl.json("get", "dataset", "flowers")
    meta = obj["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["generation"] == 1 and meta["creationTimestamp"]
    assert obj["status"]["phase"] == "Bound"
    assert kubectl.ok("apply", "-f", str(manifest)).splitlines() == [
        "dataset.data.fluid.io/flowers unchanged", "alluxioruntime.data.fluid.io/flowers unchanged"]
    assert kubectl.ok("get", "dataset", "flowers", "-o", "jsonpath={.status.phase}") == "Bound"
    described = kubectl.ok("describe", "dataset", "flowers")
    assert "Name:         flowers" in described and "Phase:" in described
    wide = kubectl.ok("get", "datasets", "-A", "-o", "wide").splitlines()
    assert wide[0].startswith("NAMESPACE") and any(line.split()[:2] == ["default", "flowers"] for line in wide)
    assert "deleted" in kubectl.ok("delete", "-f", str(manifest))
    missing = kubectl.run("get", "dataset", "flowers")
    assert missing.returncode == 1
    assert 'Error from server (NotFound): datasets.data.fluid.io "flowers" not found' in missing.stderr


def test_label_annotate_patch_edit_and_diff(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = dataset_files(tmp_path, "edits")
    kubectl.ok("apply", "-f", str(manifest))
    kubectl.ok("label", "dataset", "edits", "team=vision")
    kubectl.ok("annotate", "dataset", "edits", "owner=alice")
    assert kubectl.ok("get", "datasets", "-l", "team=vision", "-o", "name") == "dataset.data.fluid.io/edits\n"
    assert kubectl.ok("get", "datasets", "-l", "team in (nlp)", "-o", "name") == ""
    assert kubectl.ok("get", "datasets", "-l", "team!=nlp,owner-less", "-o", "name") == ""
    before = kubectl.json("get", "dataset", "edits")
    kubectl.ok("patch", "dataset", "edits", "--type", "merge", "-p",
               json.dumps({"spec": {"mounts": [{"mountPoint": before["spec"]["mounts"][0]["mountPoint"],
                                                "name": "renamed"}]}}))
    after = kubectl.json("get", "dataset", "edits")
    assert after["spec"]["mounts"][0]["name"] == "renamed"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1  # spec changed
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    kubectl.ok("patch", "dataset", "edits", "--type", "json", "-p",
               '[{"op": "replace", "path": "/metadata/labels/team", "value": "nlp"}]')
    assert kubectl.json("get", "dataset", "edits")["metadata"]["labels"] == {"team": "nlp"}
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/name: renamed/name: edited/' \"$1\"\n")
    editor.chmod(0o755)
    assert "edited" in kubectl.ok("edit", "dataset", "edits", env={"EDITOR": str(editor), "KUBE_EDITOR": str(editor)})
    assert kubectl.json("get", "dataset", "edits")["spec"]["mounts"][0]["name"] == "edited"
    changed = tmp_path / "changed.yaml"
    changed.write_text(manifest.read_text().replace("name: data", "name: proposed"))
    diff = kubectl.run("diff", "-f", str(changed))
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "-    name: edited" in diff.stdout and "+    name: proposed" in diff.stdout
    assert "status:" not in "".join(line for line in diff.stdout.splitlines() if line.startswith(("-", "+")))
    assert kubectl.json("get", "dataset", "edits")["spec"]["mounts"][0]["name"] == "edited"  # diff is a dry run
    kubectl.ok("delete", "-f", str(manifest))


def test_server_side_apply_conflicts_and_force(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = dataset_files(tmp_path, "ssa")
    assert "serverside-applied" in kubectl.ok("apply", "--server-side", "-f", str(manifest))
    managers = {entry["manager"] for entry in kubectl.json("get", "dataset", "ssa", "--show-managed-fields")[
        "metadata"]["managedFields"]}
    assert "kubectl" in managers
    kubectl.ok("patch", "dataset", "ssa", "--type", "merge", "--field-manager", "someone-else", "-p",
               json.dumps({"spec": {"mounts": [{"mountPoint": f"local://{tmp_path}/ssa-ufs", "name": "theirs"}]}}))
    refused = kubectl.run("apply", "--server-side", "-f", str(manifest))
    assert refused.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "someone-else"' in refused.stderr.replace("\n", " ").replace(
        ": - conflict", ": conflict")
    assert "--force-conflicts" in refused.stderr
    assert kubectl.json("get", "dataset", "ssa")["spec"]["mounts"][0]["name"] == "theirs"  # nothing changed
    kubectl.ok("apply", "--server-side", "--force-conflicts", "-f", str(manifest))
    obj = kubectl.json("get", "dataset", "ssa", "--show-managed-fields")
    assert obj["spec"]["mounts"][0]["name"] == "data"
    owners = {entry["manager"]: entry for entry in obj["metadata"]["managedFields"]}
    assert "f:spec" in owners["kubectl"]["fieldsV1"] and "someone-else" not in owners
    kubectl.ok("delete", "-f", str(manifest))


def test_watch_sees_the_changes_millponds_supervisor_makes(kubectl: Kubectl, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(textwrap.dedent("""\
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata:
          name: watched
        spec:
          pytorchReplicaSpecs:
            Master:
              replicas: 1
              restartPolicy: Never
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: docker.io/pytorch/pytorch:2.5.1
                    command: ["python", "-c", "import time; time.sleep(1.5); print('done')"]
        """))
    watcher = subprocess.Popen([kubectl_binary(), "--kubeconfig", str(kubectl.config), "--cache-dir",
                                str(kubectl.cache), "get", "pytorchjobs", "-w", "--request-timeout", "60s"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1)
        kubectl.ok("apply", "-f", str(job))
        assert "condition met" in kubectl.ok("wait", "--for=condition=Succeeded", "pytorchjob/watched",
                                             "--timeout=90s")
        time.sleep(1)
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
    states = [line.split()[1] for line in out.splitlines()[1:] if line.startswith("watched ")]
    assert states[-1] == "Succeeded" and "Running" in states, out
    kubectl.ok("delete", "pytorchjob", "watched")


def test_explain_reads_the_kinds_schema(kubectl: Kubectl) -> None:
    out = kubectl.ok("explain", "pytorchjob.spec.pytorchReplicaSpecs")
    assert "KIND:       PyTorchJob" in out and "VERSION:    v1" in out
    assert "mountPoint" in kubectl.ok("explain", "datasets.spec.mounts")


def test_refusals_are_statuses_kubectl_prints(kubectl: Kubectl, tmp_path: Path) -> None:
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(dataset_files(tmp_path, "strict").read_text().replace("replicas: 1", "replicas: 1\n  bogus: 2"))
    refused = kubectl.run("apply", "-f", str(unknown))
    assert refused.returncode == 1 and "Error from server (BadRequest)" in refused.stderr
    assert 'unknown field "spec.bogus"' in refused.stderr
    assert kubectl.run("get", "alluxioruntime", "strict").returncode == 1  # the refused document: not stored
    warned = kubectl.run("apply", "--validate=warn", "-f", str(unknown))
    assert warned.returncode == 0 and 'unknown field "spec.bogus"' in warned.stderr
    bad_name = tmp_path / "bad.yaml"
    first = dataset_files(tmp_path, "ok").read_text().split("---")[0]
    bad_name.write_text(first.replace("name: ok\n", "name: Bad_Name\n"))
    invalid = kubectl.run("create", "-f", str(bad_name))
    assert invalid.returncode == 1, invalid.stderr
    assert invalid.stderr.startswith('The Dataset "Bad_Name" is invalid: metadata.name: '), invalid.stderr
    assert "request body" not in invalid.stderr
    kubectl.ok("delete", "-f", str(unknown))
    exists = kubectl.run("create", "-f", str(dataset_files(tmp_path, "twice")))
    assert exists.returncode == 0
    again = kubectl.run("create", "-f", str(dataset_files(tmp_path, "twice")))
    assert "Error from server (AlreadyExists)" in again.stderr
    kubectl.ok("delete", "-f", str(dataset_files(tmp_path, "twice")))


def test_pods_of_a_job_and_their_logs(kubectl: Kubectl, tmp_path: Path) -> None:
    job = tmp_path / "logged.yaml"
    job.write_text(textwrap.dedent("""\
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata:
          name: logged
        spec:
          pytorchReplicaSpecs:
            Master:
              replicas: 1
              restartPolicy: Never
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: docker.io/pytorch/pytorch:2.5.1
                    command: ["python", "-u", "-c",
                              "import time\\nfor i in range(3):\\n  print('line', i)\\n  time.sleep(1)"]
        """))
    kubectl.ok("apply", "-f", str(job))
    deadline = time.monotonic() + 60
    while "logged-master-0" not in kubectl.ok("get", "pods", "-l", "training.kubeflow.org/job-name=logged",
                                               "-o", "name"):
        assert time.monotonic() < deadline, "the job's pod never showed"
        time.sleep(0.3)
    followed = kubectl.ok("logs", "-f", "logged-master-0")  # returns when the process ends
    assert followed.splitlines() == ["line 0", "line 1", "line 2"]
    assert kubectl.ok("logs", "logged-master-0", "--tail", "1").splitlines() == ["line 2"]
    pod = kubectl.json("get", "pod", "logged-master-0")
    assert pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == "master"
    assert pod["metadata"]["ownerReferences"][0]["name"] == "logged"
    wrong = kubectl.run("logs", "logged-master-0", "-c", "nope")
    assert wrong.returncode == 1 and "container nope is not valid for pod logged-master-0" in wrong.stderr
    kubectl.ok("wait", "--for=condition=Succeeded", "pytorchjob/logged", "--timeout=60s")
    assert kubectl.json("get", "pod", "logged-master-0")["status"]["phase"] == "Succeeded"
    kubectl.ok("delete", "-f", str(job))


def test_a_batch_job_its_indexed_pods_and_their_logs(kubectl: Kubectl, tmp_path: Path) -> None:
    job = tmp_path / "indexed.yaml"
    job.write_text(textwrap.dedent("""\
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: indexed
        spec:
          completions: 2
          parallelism: 2
          completionMode: Indexed
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: work
                image: busybox
                command: ["sh", "-c", "echo index $JOB_COMPLETION_INDEX"]
        """))
    assert kubectl.ok("apply", "-f", str(job)).strip() == "job.batch/indexed created"
    kubectl.ok("wait", "--for=condition=Complete", "job/indexed", "--timeout=90s")
    assert kubectl.ok("get", "job", "indexed", "-o", "jsonpath={.status.succeeded}") == "2"
    pods = kubectl.json("get", "pods", "-l", "batch.kubernetes.io/job-name=indexed")["items"]
    by_index = {pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: pod for pod in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert pod["status"]["phase"] == "Succeeded"
        assert kubectl.ok("logs", pod["metadata"]["name"]).strip() == f"index {index}"
    assert "COMPLETIONS" in kubectl.ok("get", "jobs").splitlines()[0]
    kubectl.ok("delete", "job", "indexed")
    assert kubectl.ok("get", "pods", "-l", "batch.kubernetes.io/job-name=indexed", "-o", "name") == ""


def test_kubectl_create_of_built_in_kinds_in_protobuf(kubectl: Kubectl) -> None:
    """kubectl create namespace|configmap|secret|serviceaccount|role|rolebinding|job send protobuf bodies."""
    for args in (("namespace", "proto-ns"),
                 ("configmap", "settings", "--from-literal=mode=fast", "-n", "proto-ns"),
                 ("secret", "generic", "creds", "--from-literal=user=alice", "-n", "proto-ns"),
                 ("serviceaccount", "runner", "-n", "proto-ns"),
                 ("role", "reader", "--verb=get,list", "--resource=pods", "-n", "proto-ns"),
                 ("rolebinding", "read", "--role=reader", "--serviceaccount=proto-ns:runner", "-n", "proto-ns"),
                 ("job", "proto-job", "-n", "proto-ns", "--image=busybox", "--", "echo", "from protobuf")):
        assert " created" in kubectl.ok("create", *args)
    assert kubectl.json("get", "configmap", "settings", "-n", "proto-ns")["data"] == {"mode": "fast"}
    secret = kubectl.json("get", "secret", "creds", "-n", "proto-ns")
    assert secret["data"] == {"user": "YWxpY2U="} and secret["type"] == "Opaque"
    binding = kubectl.json("get", "rolebinding", "read", "-n", "proto-ns")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "runner", "namespace": "proto-ns"}]
    kubectl.ok("wait", "--for=condition=Complete", "job/proto-job", "-n", "proto-ns", "--timeout=90s")
    assert kubectl.ok("logs", "-l", "job-name=proto-job", "-n", "proto-ns").strip() == "from protobuf"
    refused = kubectl.run("create", "deployment", "web", "--image=nginx")  # a kind not served here
    assert refused.returncode == 1 and "the server could not find the requested resource" in refused.stderr
    kubectl.ok("delete", "namespace", "proto-ns")
    assert kubectl.run("get", "configmap", "settings", "-n", "proto-ns").returncode == 1
