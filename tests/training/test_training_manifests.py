"""Kubeflow's training manifests at ``millpond apply -f``: PyTorchJob and TrainJob run for real (their
instances check the environment the operators set), ``get`` shows the operators' conditions,
bad manifests are one ``error:`` line with nothing stored, and the conformance corpus's training
rows apply or are refused as EXPECTED.tsv says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.scheduling.ledger import Request
from millpond.store.training import JobStore
from millpond.training.kinds import KINDS
from millpond.training.launch import PLANNERS
from millpond.training.manifests import replica_job_spec
from millpond.training.spec import Trainer, spec_from_json, spec_to_json
from tests.datasets_support import create_s3_dataset

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "k8s-manifests"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/k8s-manifests")
TRAINING_KINDS = {"PyTorchJob", "MPIJob", "TFJob", "TrainJob", "ClusterTrainingRuntime", "TrainingRuntime"}
VENV_BIN = str(Path(sys.executable).parent)

CHECK_PYTORCH_ENV = """
import os, sys
role, rank = os.environ["ROLE"], int(os.environ["RANK"])
assert os.environ["WORLD_SIZE"] == "2", os.environ["WORLD_SIZE"]
assert rank == (0 if role == "master" else 1), (role, rank)
assert os.environ["MASTER_ADDR"] == os.environ["PET_MASTER_ADDR"] == "127.0.0.1"
assert os.environ["MASTER_PORT"] == os.environ["PET_MASTER_PORT"] and int(os.environ["MASTER_PORT"]) > 0
assert os.environ["PET_NNODES"] == "2" and os.environ["PET_NODE_RANK"] == str(rank)
assert open("/inputs/hello.txt").read() == "hello"
print("env ok", role, rank)
"""

CHECK_TORCHRUN_ENV = """
import os
# torchrun read PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_ADDR/PORT and set these:
assert os.environ["WORLD_SIZE"] == "2", os.environ["WORLD_SIZE"]
assert os.environ["RANK"] == os.environ["PET_NODE_RANK"] == os.environ["GROUP_RANK"]
assert os.environ["LOCAL_RANK"] == "0" and os.environ["LOCAL_WORLD_SIZE"] == "1"
assert os.environ["PET_NNODES"] == "2" and os.environ["PET_NPROC_PER_NODE"] == "1"
print("torchrun env ok", os.environ["RANK"])
"""


def pytorchjob(name: str, script: str, inputs: Path) -> dict[str, Any]:
    def replica(role: str) -> dict[str, Any]:
        return {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": "python:3.11", "command": [sys.executable, "-c", script],
                            "env": [{"name": "ROLE", "value": role}],
                            "resources": {"limits": {"cpu": "100m", "memory": "256Mi"}},
                            "volumeMounts": [{"name": "inputs", "mountPath": "/inputs"}]}],
            "volumes": [{"name": "inputs", "hostPath": {"path": str(inputs)}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
            "spec": {"pytorchReplicaSpecs": {"Master": replica("master"), "Worker": replica("worker")}}}


def write(tmp_path: Path, *documents: dict[str, Any]) -> Path:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def wait_state(cli: Any, kind: str, name: str, wanted: tuple[str, ...], timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        result = cli("get", kind, name, "-o", "json")
        assert result.code == 0, result.err
        job = result.json()
        last = (job["status"]["conditions"] or [{"type": "(none: running)"}])[-1]  # a running TrainJob has none
        if last["type"] in wanted:
            return job
        assert time.monotonic() < deadline, f"{name} still {last['type']} after {timeout}s"
        time.sleep(0.3)


@pytest.fixture
def venv_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instances find torchrun where millpond's interpreter is, as in an activated virtual environment."""
    monkeypatch.setenv("PATH", f"{VENV_BIN}:{os.environ.get('PATH', '')}")


def test_pytorchjob_master_and_worker_run_to_succeeded(cli, tmp_path: Path, venv_path: None) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "hello.txt").write_text("hello")
    manifest = write(tmp_path, pytorchjob("envcheck", CHECK_PYTORCH_ENV, inputs))
    applied = cli("apply", "-f", manifest)
    assert applied.code == 0, applied.err
    assert applied.out.strip() == "pytorchjob.kubeflow.org/envcheck created"
    job = wait_state(cli, "pytorchjobs", "envcheck", ("Succeeded", "Failed"))
    types = [c["type"] for c in job["status"]["conditions"]]
    assert types == ["Created", "Running", "Succeeded"], job["status"]
    assert job["status"]["conditions"][0]["reason"] == "PyTorchJobCreated"
    assert job["status"]["replicaStatuses"] == {"Master": {"succeeded": 1}, "Worker": {"succeeded": 1}}
    assert job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] == 1 and job["metadata"]["uid"]
    table = cli("get", "pytorchjobs")
    assert table.out.split("\n")[0].split() == ["NAME", "STATE", "AGE"]
    assert table.out.split("\n")[1].split()[:2] == ["envcheck", "Succeeded"]
    listed = cli("get", "pytorchjob", "-o", "yaml")
    assert yaml.safe_load(listed.out)["items"][0]["metadata"]["name"] == "envcheck"
    assert cli("get", "trainjobs").out == ""  # a PyTorchJob is not a TrainJob
    again = cli("apply", "-f", manifest)
    assert again.code == 0 and again.out.strip() == "pytorchjob.kubeflow.org/envcheck unchanged"
    deleted = cli("delete", "pytorchjob", "envcheck")
    assert deleted.code == 0 and 'pytorchjob.kubeflow.org "envcheck" deleted' in deleted.out
    assert JobStore().get("envcheck") is None


def test_a_worker_only_pytorchjob_numbers_its_workers_from_rank_0(cli, tmp_path: Path) -> None:
    """As the operator does with no Master (an elastic job): worker 0 is rank 0, not 1."""
    script = ("import os; r = os.environ['RANK']; assert r == os.environ['PET_NODE_RANK'] and r in '01', r; "
              "assert os.environ['WORLD_SIZE'] == '2'")
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "workers"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {
               "containers": [{"name": "pytorch", "image": "x", "command": [sys.executable, "-c", script]}]}}}}}}
    assert cli("apply", "-f", write(tmp_path, job)).code == 0
    done = wait_state(cli, "pytorchjobs", "workers", ("Succeeded", "Failed"))
    assert done["status"]["conditions"][-1]["type"] == "Succeeded", done["status"]
    assert done["status"]["replicaStatuses"] == {"Worker": {"succeeded": 2}}


def test_a_manifest_asking_more_than_the_machine_is_accepted_and_waits_saying_why(cli, tmp_path: Path) -> None:
    """As Kubernetes accepts it and leaves the pods Pending ("Insufficient cpu"); ``arena submit`` refuses it."""
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "huge"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [{
               "name": "pytorch", "image": "x", "command": [sys.executable, "-c", "pass"],
               "resources": {"limits": {"cpu": "100000"}}}]}}}}}}
    applied = cli("apply", "-f", write(tmp_path, job))
    assert applied.code == 0, applied.err
    deadline = time.monotonic() + 60
    events = cli("train", "get", "huge", "-e")
    while "Queuing" not in events.out and time.monotonic() < deadline:
        time.sleep(0.2)
        events = cli("train", "get", "huge", "-e")
    assert cli("train", "get", "huge", "-o", "json").json()["status"] == "QUEUING", events.out
    assert "Queuing" in events.out and "cpu" in events.out.lower(), events.out  # what it waits for
    refused = cli("train", "submit", "pytorch", "--name", "huge2", "--cpu", "100000", "true")
    assert refused.code == 2 and "can never run here" in refused.err, refused.err
    assert cli("delete", "pytorchjob", "huge").code == 0


def test_trainjob_num_nodes_2_runs_torchrun_with_its_pet_variables(cli, tmp_path: Path, venv_path: None) -> None:
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
                "spec": {"runtimeRef": {"name": "torch-distributed"},
                         "trainer": {"numNodes": 2, "command": ["torchrun", "--no-python", sys.executable, "-c",
                                                                CHECK_TORCHRUN_ENV]}}}
    applied = cli("apply", "-f", write(tmp_path, trainjob))
    assert applied.code == 0, applied.err
    assert applied.out.strip() == "trainjob.trainer.kubeflow.org/tj created"
    job = wait_state(cli, "trainjobs", "tj", ("Complete", "Failed"))
    assert [c["type"] for c in job["status"]["conditions"]] == ["Complete"], job["status"]  # Trainer v2's types
    assert job["status"]["replicaStatuses"] == {"Node": {"succeeded": 2}}
    stored = JobStore().get("tj")
    assert stored is not None
    logs = [Path(str(i.log_path)).read_text() for i in JobStore().instances(stored.uid)]
    ranks = [line.split()[-1] for log in logs for line in log.splitlines() if "torchrun env ok" in line]
    assert sorted(ranks) == ["0", "1"], logs
    assert cli("get", "pytorchjobs").out == ""  # a TrainJob lists as a TrainJob only


@pytest.mark.s3
def test_a_pvc_naming_a_dataset_not_there_yet_waits_then_mounts_it_read_write(cli, home: Path, tmp_path: Path,
                                                                               s3_server) -> None:
    """As Kubernetes leaves a pod whose claim does not exist Pending: the job waits QUEUING, saying for which
    dataset, and starts once it is applied; ``arena submit --data`` of an unknown dataset is still refused."""
    if fuse_available() is not None:
        pytest.skip(f"FUSE unavailable: {fuse_available()}")
    script = "d = open('/data/in.txt').read(); open('/data/out.txt', 'w').write(d.upper())"
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pvc"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
               "containers": [{"name": "pytorch", "image": "x", "command": [sys.executable, "-c", script],
                               "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
               "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "work"}}]}}}}}}
    try:
        applied = cli("apply", "-f", write(tmp_path, job))
        assert applied.code == 0, applied.err
        deadline = time.monotonic() + 60
        while "WaitingForDataset" not in (events := cli("train", "get", "pvc", "-e").out):
            assert time.monotonic() < deadline, events
            time.sleep(0.2)
        assert "waiting for dataset work (namespace default)" in events, events
        waiting = wait_state(cli, "pytorchjobs", "pvc", ("Created",))
        created = waiting["status"]["conditions"][0]
        assert "Waiting: waiting for dataset work" in created["message"], created
        assert cli("train", "get", "pvc", "-o", "json").json()["status"] == "QUEUING"
        refused = cli("train", "submit", "pytorch", "--name", "eager", "--data", "work:/data", "true")
        assert refused.code == 2 and refused.err == "error: --data work:/data: no dataset work in namespace " \
            "default (millpond get datasets)\n", refused.err
        dataset = create_s3_dataset(cli, home, tmp_path, s3_server, {"in.txt": b"from the bucket"}, name="work",
                                    access="ReadWriteMany")
        done = wait_state(cli, "pytorchjobs", "pvc", ("Succeeded", "Failed"))
        assert done["status"]["conditions"][-1]["type"] == "Succeeded", done["status"]
        assert dataset.object("out.txt") == b"FROM THE BUCKET"  # written through the mount into the bucket
    finally:
        folder = home / "mnt" / "default" / "work"
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_mpijob_and_tfjob_become_the_operators_replica_groups() -> None:
    """The conversion the launchers will run (refused at apply only while their planners are missing)."""
    mpi = yaml.safe_load((CORPUS / "mpi-operator__examples_v2beta1_pi_pi.yaml").read_text())
    spec, _ = replica_job_spec(KINDS["MPIJob"], {**mpi, "metadata": {"name": "pi", "namespace": "default"}})
    assert spec.trainer is Trainer.MPI and [(r.role, r.replicas) for r in spec.replicas] == [("launcher", 1),
                                                                                            ("worker", 2)]
    assert spec.replicas[0].command[0] == "mpirun" and spec.replicas[0].resources.cpu_millis == 1000
    assert spec.ttl_after_finished_s == 60 and spec.image.startswith("mpioperator/mpi-pi")
    tf = yaml.safe_load((CORPUS / "kueue__site_static_examples_jobs_sample-tfjob.yaml").read_text())
    spec, _ = replica_job_spec(KINDS["TFJob"], {**tf, "metadata": {**tf["metadata"], "namespace": "default"}})
    assert [(r.role, r.replicas) for r in spec.replicas] == [("worker", 2), ("ps", 1)]
    assert spec.replicas[0].resources.memory_bytes == 200 * 2**20 and spec.queue == "user-queue"
    assert spec.replicas[0].command[:2] == ("sh", "-c") and "no command" in spec.replicas[0].command[2]


def test_a_spec_stored_before_resources_became_the_ledgers_request_reads_back_the_same() -> None:
    """A job's spec column as the code before this one wrote it (each replica's ``resources``
    with cpu_millis, memory_bytes, gpus) reads back, and is written again byte for byte."""
    old = {"name": "j", "namespace": "default", "trainer": "pytorchjob", "replicas": [
        {"role": "master", "replicas": 1, "command": ["true"], "env": [],
         "resources": {"cpu_millis": 500, "memory_bytes": 2**20, "gpus": 1}},
        {"role": "worker", "replicas": 2, "command": ["true"], "env": [["A", "1"]],
         "resources": {"cpu_millis": 0, "memory_bytes": 0, "gpus": 0}}],
        "image": "", "working_dir": "", "env": [], "data": [], "data_dirs": [], "retry": 0,
        "running_timeout_s": None, "ttl_after_finished_s": None, "clean_task_policy": "Running",
        "nproc_per_node": None, "priority": "", "queue": "", "labels": [], "annotations": [], "share_memory": 0,
        "source": "arena", "manifest": {}}
    spec = spec_from_json(old)
    assert spec.replicas[0].resources == Request(500, 2**20, 1) and spec.total == Request(500, 2**20, 1)
    assert json.dumps(spec_to_json(spec), sort_keys=True) == json.dumps(old, sort_keys=True)


def _pod(container: dict[str, Any], **pod: Any) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bad"},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {
                "containers": [{"name": "pytorch", "image": "x", "command": ["true"], **container}], **pod}}}}}}


BAD: list[tuple[dict[str, Any], str]] = [
    (_pod({"bogus": 1}), 'unknown field "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].bogus"'),
    ({**_pod({}), "metadata": {"name": "../evil"}}, "invalid PyTorchJob name '../evil'"),
    ({**_pod({}), "metadata": {"name": "ok", "namespace": "../../etc"}}, "invalid namespace name"),
    (_pod({"resources": {"limits": {"google.com/tpu": 4}}}), "resources.limits[google.com/tpu]: the resource"),
    (_pod({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}), "env[0].valueFrom"),
    (_pod({"volumeMounts": [{"name": "c", "mountPath": "/c"}]}, volumes=[{"name": "c", "configMap": {"name": "m"}}]),
     "spec.pytorchReplicaSpecs.Master.template.spec.volumes[0].configMap: a configMap volume cannot exist here"),
    (_pod({"volumeMounts": [{"name": "h", "mountPath": "/h/../../etc"}]},
          volumes=[{"name": "h", "hostPath": {"path": "/tmp"}}]),
     "mountPath"),
    ({**_pod({}), "apiVersion": "kubeflow.org/v2"}, "apiVersion 'kubeflow.org/v2' is not supported"),
    ({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
      "spec": {"runtimeRef": {"name": "nosuch-runtime"}, "trainer": {"command": ["true"]}}},
     "no ClusterTrainingRuntime"),
]


@pytest.mark.parametrize(("document", "says"), BAD, ids=[says[:40] for _, says in BAD])
def test_a_bad_manifest_is_one_error_line_exit_2_and_nothing_stored(cli, tmp_path: Path, document: dict[str, Any],
                                                                    says: str) -> None:
    result = cli("apply", "-f", write(tmp_path, document))
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert JobStore().list(None) == []


def test_all_or_nothing_a_bad_document_after_a_good_one_stores_neither(cli, tmp_path: Path) -> None:
    good = {**_pod({}), "metadata": {"name": "good"}}
    result = cli("apply", "-f", write(tmp_path, good, _pod({"bogus": 1})))
    assert result.code == 2 and JobStore().list(None) == []


def _corpus_rows() -> list[tuple[str, str, str]]:
    if not (CORPUS / "EXPECTED.tsv").is_file():
        return []
    rows = []
    for line in (CORPUS / "EXPECTED.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        file, expected, kinds = line.split("\t")[:3]
        if set(kinds.split(",")) & TRAINING_KINDS:
            rows.append((file, expected, kinds))
    return rows


@pytest.mark.skipif(not _corpus_rows(), reason="the shared conformance corpus is not beside this checkout")
@pytest.mark.parametrize(("file", "expected", "kinds"), _corpus_rows(), ids=[row[0][:60] for row in _corpus_rows()])
def test_corpus_training_rows_apply_or_are_refused_as_expected(cli, monkeypatch: pytest.MonkeyPatch, file: str,
                                                              expected: str, kinds: str) -> None:
    """EXPECTED.tsv's protocol (a GPU-less machine follows it with gpu-fallback cpu); the jobs are deleted at once."""
    monkeypatch.setenv("MILLPOND_GPU_FALLBACK", "cpu")
    result = cli("apply", "-f", CORPUS / file)
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 4, result.err
    waiting = {"MPIJob": Trainer.MPI, "TFJob": Trainer.TF}
    not_yet = [kind for kind in kinds.split(",") if kind in waiting and waiting[kind] not in PLANNERS]
    try:
        if not_yet:  # refused until the trainer's planner lands in launch.PLANNERS
            assert result.code == 2 and "is not runnable yet" in result.err, result.err
        elif expected == "apply":
            assert result.code == 0, result.err
        elif expected == "refuse":
            assert result.code == 2 and result.err.startswith("error: "), result.err
        else:
            assert result.code in (0, 2), result.err
        if result.code == 2:
            assert len(result.err.strip().splitlines()) == 1 and JobStore().list(None) == []
    finally:
        for line in result.out.splitlines():
            resource, _, action = line.partition(" ")
            kind, _, name = resource.partition("/")
            if action == "created" and kind.split(".")[0] in ("pytorchjob", "mpijob", "tfjob", "trainjob"):
                namespace = next((j.namespace for j in JobStore().list(None) if j.name == name), "default")
                deleted = cli("delete", kind.split(".")[0], name, "-n", namespace)
                assert deleted.code == 0, deleted.err
