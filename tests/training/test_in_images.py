"""Training-job instances in their container images, with real Podman: a 2-worker PyTorch job whose script and
rendezvous exist only in its image, a 2-rank MPIJob whose launcher runs mpirun in its image, a batch/v1 Job
of parallelism 2 (one pod on the image's entrypoint), the runtime policy (host; container with a missing
image and ``imagePullPolicy: Never``) and a job deleted mid-run leaving no container.

The images come from the shared container test support (``tests/containers_support.py``: Debian packages,
no image registry), cached between runs.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.runners.containers.runtimes import ContainerRuntime
from tests.containers_support import build_image, ensure_debian_image
from tests.training_support import arena, record, wait_status

pytestmark = pytest.mark.containers

TRAIN_IMAGE = "localhost/millpond-test/train:1"
MPI_IMAGE = "localhost/millpond-test/mpi:1"
MARKER = "/etc/millpond-test-image"  # exists only in the test images: proves a process ran in one

RENDEZVOUS = textwrap.dedent("""\
    # A TCP rendezvous between the ranks of a job (what torch's env:// does first), only in this image.
    import os, socket, sys, time
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    marker = open("/etc/millpond-test-image").read().strip()
    if rank == 0:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((addr, port))
        server.listen(world)
        total, peers = rank + 1, []
        for _ in range(world - 1):
            conn, _ = server.accept()
            total += int(conn.recv(64).decode())
            peers.append(conn)
        for conn in peers:
            conn.sendall(str(total).encode())
    else:
        deadline = time.time() + 60
        while True:
            try:
                conn = socket.create_connection((addr, port), timeout=5)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        conn.sendall(str(rank + 1).encode())
        total = int(conn.recv(64).decode())
    print(f"rank {rank} of {world} in image {marker}: sum {total} in {os.getcwd()}", flush=True)
    sys.exit(0 if total == world * (world + 1) // 2 else 1)
""")
ENTRYPOINT = textwrap.dedent("""\
    #!/bin/sh
    # The image's entrypoint: a container given args alone runs them through it.
    echo "entrypoint of $(cat /etc/millpond-test-image): $* index=${JOB_COMPLETION_INDEX}"
""")


@pytest.fixture(scope="session")
def train_image(python_image: str) -> str:
    """An image holding the rendezvous script and an entrypoint, FROM the tests' Debian Python image."""
    return build_image(
        TRAIN_IMAGE,
        f"FROM {python_image}\nCOPY rendezvous.py entry.sh /opt/train/\nRUN chmod +x /opt/train/entry.sh "
        f"&& echo train-image > {MARKER}\nWORKDIR /opt/train\nENTRYPOINT [\"/opt/train/entry.sh\"]\n",
        {"rendezvous.py": RENDEZVOUS, "entry.sh": ENTRYPOINT},
    )


@pytest.fixture(scope="session")
def mpi_image(podman: ContainerRuntime) -> str:
    """Debian's python3 and openmpi-bin (mmdebstrap: no image registry here), with the test images' marker."""
    base = ensure_debian_image(podman, MPI_IMAGE + "-base", ("python3", "openmpi-bin"))
    return build_image(MPI_IMAGE, f"FROM {base}\nRUN echo mpi-image > {MARKER}\n")


def _containers(runtime: ContainerRuntime, owner: str, running_only: bool = False) -> list[str]:
    words = ["ps", "--format", "{{.Names}}", "--filter", f"label=io.millpond.owner={owner}"]
    if not running_only:
        words.insert(1, "-a")
    done = subprocess.run(runtime.argv(*words), capture_output=True, text=True, check=True)
    return done.stdout.split()


def _log(uid: str, instance: str, home: Path) -> str:
    return (home / "training" / uid / "logs" / f"{instance}.log").read_text()


def _apply(cli: Any, tmp_path: Path, *docs: dict[str, Any]) -> None:
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err


def test_a_two_worker_pytorch_job_runs_its_image_only_script_and_its_ranks_meet_over_the_host_network(
        capsys, cli, home: Path, train_image: str, podman: ContainerRuntime) -> None:
    submitted = arena(capsys, "submit", "pytorch", "--name", "ddp", "--workers", "2", "--image", train_image,
                      "--memory", "256Mi", "python3", "/opt/train/rendezvous.py")
    assert submitted.code == 0, submitted.err
    info = wait_status(capsys, "ddp")
    uid = record("ddp").uid
    logs = {name: _log(uid, name, home) for name in ("ddp-master-0", "ddp-worker-0")}
    assert info["status"] == "SUCCEEDED", logs
    assert "rank 0 of 2 in image train-image: sum 3 in /opt/train" in logs["ddp-master-0"]  # the image's WORKDIR
    assert "rank 1 of 2 in image train-image: sum 3" in logs["ddp-worker-0"]
    got = arena(capsys, "get", "ddp", "-e").out
    assert f'Container image "{train_image}" is present: master, worker run in it (podman)' in got
    assert json.loads((home / "training" / uid / "images.json").read_text())["worker"]["runtime"] == "podman"
    assert _containers(podman, "PyTorchJob/default/ddp") == []  # each removed when its instance ended
    pod = json.loads(cli("get", "pod", "ddp-worker-0", "-o", "json").out)
    assert pod["metadata"]["annotations"]["millpond.io/ran-in"] == "podman"
    assert pod["spec"]["containers"][0]["image"] == train_image


def test_an_mpijob_launcher_runs_mpirun_in_its_image_and_both_ranks_run_there(
        capsys, cli, home: Path, tmp_path: Path, mpi_image: str, podman: ContainerRuntime) -> None:
    """The workers are the launcher's ranks (as millpond runs MPIJobs on one machine): they run in its container."""
    # one write per line (the task's Python is unbuffered: print's separate words would interleave between ranks)
    rank = ("import os; e = os.environ; print(f\"rank {e['OMPI_COMM_WORLD_RANK']} of {e['OMPI_COMM_WORLD_SIZE']} in "
            "{open('/etc/millpond-test-image').read().strip()}\")")
    worker = {"replicas": 2, "template": {"spec": {"containers": [{"name": "mpi", "image": mpi_image}]}}}
    launcher = {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "mpi", "image": mpi_image, "command": ["mpirun", "-n", "2", "python3", "-c", rank]}]}}}
    _apply(cli, tmp_path, {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "pi"},
                           "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {"Launcher": launcher, "Worker": worker}}})
    info = wait_status(capsys, "pi")
    uid = record("pi").uid
    assert info["status"] == "SUCCEEDED", _log(uid, "pi-launcher-0", home)
    launcher_log = _log(uid, "pi-launcher-0", home)  # every rank's tagged lines, untagged; and each in its worker's
    assert "rank 0 of 2 in mpi-image" in launcher_log and "rank 1 of 2 in mpi-image" in launcher_log, launcher_log
    assert "rank 0 of 2 in mpi-image" in _log(uid, "pi-worker-0", home)
    assert "rank 1 of 2 in mpi-image" in _log(uid, "pi-worker-1", home)


def _job(image: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "indexed"}, "spec": {
        "parallelism": 2, "completions": 2, "completionMode": "Indexed", **spec,
        "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": image,
                                                                       **container}]}}}}


def _wait_job(cli: Any, name: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = json.loads(cli("get", "job", name, "-o", "json").out)
        kinds = {c["type"] for c in (shown.get("status") or {}).get("conditions") or () if c["status"] == "True"}
        if kinds & {"Complete", "Failed"}:
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)


def test_a_batch_job_of_parallelism_two_runs_its_pods_on_the_images_entrypoint(
        cli, home: Path, tmp_path: Path, train_image: str, podman: ContainerRuntime) -> None:
    """``args`` alone: the image's ENTRYPOINT runs them, with JOB_COMPLETION_INDEX, as the kubelet runs it."""
    _apply(cli, tmp_path, _job(train_image, {"args": ["hello"]}))
    shown = _wait_job(cli, "indexed")
    logs = sorted((home / "batch" / shown["metadata"]["uid"] / "logs").glob("*.log"))
    text = " ".join(path.read_text() for path in logs)
    assert shown["status"]["succeeded"] == 2, text
    assert "entrypoint of train-image: hello index=0" in text and "entrypoint of train-image: hello index=1" in text
    assert _containers(podman, "Job/default/indexed") == []


def test_runtime_host_runs_on_this_machine_and_says_the_image_was_not_used(
        capsys, cli, home: Path, train_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_RUNTIME", "host")
    assert arena(capsys, "submit", "pytorch", "--name", "onhost", "--image", train_image,
                 "python3", "/opt/train/rendezvous.py").code == 0
    info = wait_status(capsys, "onhost")
    log = _log(record("onhost").uid, "onhost-master-0", home)
    assert info["status"] == "FAILED"
    assert "/opt/train/rendezvous.py" in log and "No such file" in log
    described = arena(capsys, "get", "onhost", "-e").out
    assert "Message:    onhost-master-0 exited with code 2\n" in described  # the status as before images ran
    assert (f"onhost-master-0 exited with code 2 (it ran on this machine, not in its image {train_image}: "
            "the runtime policy is host)") in described  # the JobFailed event
    assert f"not in these images: {train_image} (the runtime policy is host)" in described  # ImageNotUsed
    pod = json.loads(cli("get", "pod", "onhost-master-0", "-o", "json").out)
    assert pod["metadata"]["annotations"]["millpond.io/ran-in"] == "host: the runtime policy is host"


def test_a_missing_image_that_must_not_be_pulled_fails_the_job_with_err_image_never_pull(
        capsys, cli, home: Path, tmp_path: Path, podman: ContainerRuntime) -> None:
    """The pod template's annotation insists on the container; ``imagePullPolicy: Never`` and no such image."""
    _apply(cli, tmp_path, {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "never"},
                           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {
                               "metadata": {"annotations": {"millpond.io/runtime": "container"}},
                               "spec": {"containers": [{"name": "pytorch", "image": "localhost/no-such-image:1",
                                                        "imagePullPolicy": "Never", "command": ["true"]}]}}}}}})
    info = wait_status(capsys, "never")
    assert info["status"] == "FAILED"
    got = arena(capsys, "get", "never").out
    assert "Reason:     ErrImageNeverPull" in got
    assert 'Container image "localhost/no-such-image:1" is not present with pull policy of Never' in got
    shown = json.loads(cli("get", "pytorchjob", "never", "-o", "json").out)
    assert shown["status"]["conditions"][-1]["reason"] == "ErrImageNeverPull"


def test_a_job_deleted_mid_run_leaves_no_container_of_it(
        capsys, home: Path, train_image: str, podman: ContainerRuntime) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "doomed", "--workers", "2", "--image", train_image,
                 "sleep", "300").code == 0
    wait_status(capsys, "doomed", ("RUNNING",))
    deadline = time.monotonic() + 30
    while len(_containers(podman, "PyTorchJob/default/doomed", running_only=True)) < 2:
        assert time.monotonic() < deadline, "the job's two containers never ran"
        time.sleep(0.2)
    assert arena(capsys, "delete", "doomed").code == 0
    assert _containers(podman, "PyTorchJob/default/doomed") == []
