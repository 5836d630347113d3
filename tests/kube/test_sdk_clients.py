"""The Kubeflow SDK's ``TrainerClient`` and the KServe SDK's ``KServeClient``, unchanged, against ``millpond server``.

Each runs in the SDKs' own side environment (``tests/kube_sdk_env.py``: ``kubeflow`` 0.5.0, ``kserve`` 0.21.0,
``kubernetes`` < 36) with the kubeconfig ``millpond kubeconfig`` writes for ``millpond server --tls`` with a
token (its CA, its token), as a user's notebook would: TrainerClient lists
Trainer's upstream ``torch-distributed`` runtime, trains a Python function on two nodes (torchrun on
this machine, the two nodes joining one gloo process group), reads its job, steps and node logs, waits
for it and deletes it; KServeClient creates an sklearn InferenceService over a local model, watches and
waits until it is ready, patches it (a new generation the watch waits to see observed) and deletes it, and the
model answers through the server's gateway.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from millpond.serving import lifecycle
from tests.kube_sdk_env import VENV_NAME, SdkEnv, build, is_complete, run_sdk
from tests.kube_support import Kubectl, kubeconfig_of_server
from tests.server_support import Served, module_home
from tests.serving_support import train_digits

# Kubeflow Trainer's default ClusterTrainingRuntime as upstream ships it (manifests/base/runtimes/torch_distributed.yaml
# of kubeflow/trainer at 8c0f505, as in /work/shared/reference/kubeflow-trainer/runtimes)
TORCH_DISTRIBUTED = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime
"""

TOKEN = "sdk-clients-token"

TRAIN = """\
    import json
    import time

    from kubeflow.trainer import CustomTrainer, TrainerClient


    def train_on_two_nodes():
        # What each node runs (the SDK sends its source): the two nodes join one process group and sum their ranks.
        import os

        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo")
        total = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(total)
        print(f"node {os.environ['PET_NODE_RANK']} of {os.environ['PET_NNODES']}: rank {dist.get_rank()} "
              f"of {dist.get_world_size()}, sum {int(total.item())}", flush=True)
        dist.destroy_process_group()


    started = time.monotonic()
    client = TrainerClient()
    runtimes = [(r.name, r.kind.value, r.trainer.framework, r.trainer.num_nodes) for r in client.list_runtimes()]
    runtime = client.get_runtime("torch-distributed")
    name = client.train(runtime=runtime, trainer=CustomTrainer(func=train_on_two_nodes, num_nodes=2))
    first = client.get_job(name)
    running = client.wait_for_job_status(name, {"Running", "Complete"}, timeout=120, polling_interval=1)
    done = client.wait_for_job_status(name, timeout=120, polling_interval=1)
    listed = [job.name for job in client.list_jobs()]
    logs = {step: "\\n".join(client.get_job_logs(name, step=step)) for step in ("node-0", "node-1")}
    client.delete_job(name)
    try:
        client.get_job(name)
        gone = "still there"
    except RuntimeError as exc:
        gone = str(exc.__cause__ or exc)
    print(json.dumps({
        "runtimes": runtimes, "name": name, "first": [first.status, first.num_nodes, first.runtime.name],
        "running": running.status,
        "done": done.status, "steps": [[s.name, s.status, s.pod_name] for s in done.steps], "listed": listed,
        "logs": logs, "gone": gone, "seconds": round(time.monotonic() - started, 1)}))
"""

SERVE = """\
    import json
    import ssl
    import sys
    import time
    import urllib.request

    from kserve import (KServeClient, V1beta1InferenceService, V1beta1InferenceServiceSpec, V1beta1PredictorSpec,
                        V1beta1SKLearnSpec, constants)
    from kubernetes import client as k8s

    model_dir, gateway, rows = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])


    def digits(replicas):
        return V1beta1InferenceService(
            api_version=constants.KSERVE_V1BETA1, kind=constants.KSERVE_KIND_INFERENCESERVICE,
            metadata=k8s.V1ObjectMeta(name="digits", namespace="default"),
            spec=V1beta1InferenceServiceSpec(predictor=V1beta1PredictorSpec(
                min_replicas=replicas, sklearn=V1beta1SKLearnSpec(storage_uri=f"file://{model_dir}"))))


    started = time.monotonic()
    kserve = KServeClient()
    created = kserve.create(digits(1))
    kserve.wait_isvc_ready("digits", watch=True, timeout_seconds=90)  # the watch: ADDED, then MODIFIED until Ready
    kserve.wait_isvc_ready("digits", timeout_seconds=30, polling_interval=1)
    first = kserve.get("digits")
    # a new spec: generation 2, and the watch waits for the status that observed it
    kserve.patch("digits", digits(2), watch=True, timeout_seconds=90)
    kserve.wait_isvc_ready("digits", timeout_seconds=60, polling_interval=1, expected_generation=2)
    got = kserve.get("digits")
    ready = kserve.is_isvc_ready("digits", expected_generation=2)
    listed = [item["metadata"]["name"] for item in kserve.get()["items"]]
    # the gateway is the same server: the kubeconfig's CA and token reach it too
    loaded = k8s.Configuration.get_default_copy()
    request = urllib.request.Request(f"{gateway}/v1/models/digits:predict",
                                     data=json.dumps({"instances": rows}).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": loaded.api_key["authorization"]})
    trusted = ssl.create_default_context(cafile=loaded.ssl_ca_cert)
    with urllib.request.urlopen(request, timeout=30, context=trusted) as answer:
        predictions = json.loads(answer.read())["predictions"]
    deleted = kserve.delete("digits")
    try:
        kserve.get("digits")
        gone = "still there"
    except RuntimeError as exc:
        gone = str(exc)
    print(json.dumps({
        "created": created["metadata"], "ready": ready,
        "first": [first["metadata"]["generation"], first["status"]["observedGeneration"]],
        "status": got["status"], "generation": got["metadata"]["generation"], "listed": listed,
        "predictions": predictions, "deleted": deleted["status"], "gone": gone,
        "seconds": round(time.monotonic() - started, 1)}))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "sdk-clients")


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[Served]:
    """As a user would start it for these clients: ``millpond server --tls`` with a token."""
    server = Served(token=TOKEN, tls=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kubectl(served: Served, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    """kubectl with the kubeconfig ``millpond kubeconfig`` writes for the server (its CA and token)."""
    return kubeconfig_of_server(served, home, tmp_path_factory.mktemp("sdk-kubectl"), TOKEN)


def test_trainer_client_trains_a_function_on_two_nodes_reads_its_logs_and_deletes_it(
        kube_sdks: SdkEnv, kubectl: Kubectl, tmp_path: Path) -> None:
    runtime = tmp_path / "torch_distributed.yaml"
    runtime.write_text(TORCH_DISTRIBUTED)
    assert kubectl.ok("apply", "-f", str(runtime)).strip() == (
        "clustertrainingruntime.trainer.kubeflow.org/torch-distributed created")
    seen = run_sdk(kube_sdks, kubectl.config, tmp_path, "train", TRAIN)
    assert seen["runtimes"] == [["torch-distributed", "ClusterTrainingRuntime", "torch", 1]]
    name = seen["name"]
    assert seen["first"][1:] == [2, "torch-distributed"] and seen["first"][0] in ("Created", "Running", "Complete")
    assert seen["running"] in ("Running", "Complete")  # a running TrainJob has no condition: the SDK's Running
    assert seen["done"] == "Complete" and name in seen["listed"]
    steps = {step: (status, pod) for step, status, pod in seen["steps"]}
    assert sorted(steps) == ["node-0", "node-1"] and {status for status, _ in steps.values()} == {"Succeeded"}
    assert all(pod.startswith(f"{name}-node-0-{step[-1]}-") for step, (_, pod) in steps.items())
    # each node printed its own line, both summed 1 + 2 over the process group the two of them formed
    assert "node 0 of 2: rank 0 of 2, sum 3" in seen["logs"]["node-0"]
    assert "node 1 of 2: rank 1 of 2, sum 3" in seen["logs"]["node-1"]
    assert "404" in seen["gone"] or "not found" in seen["gone"].lower(), seen["gone"]
    # the TrainJob's node pods went with it
    left = kubectl.json("get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={name}")
    assert left["items"] == []


def test_kserve_client_creates_waits_for_and_deletes_an_sklearn_model_served_through_the_gateway(
        kube_sdks: SdkEnv, served: Served, kubectl: Kubectl, tmp_path: Path) -> None:
    model_dir, model, rows = train_digits(tmp_path)
    seen = run_sdk(kube_sdks, kubectl.config, tmp_path, "serve", SERVE, str(model_dir), served.url,
                   json.dumps(rows.tolist()))
    assert seen["created"]["name"] == "digits" and seen["created"]["generation"] == 1 and seen["created"]["uid"]
    status = seen["status"]
    assert seen["ready"] is True and seen["first"] == [1, 1] and status["observedGeneration"] == seen["generation"] == 2
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"PredictorReady": "True", "Ready": "True"}
    assert status["modelStatus"]["states"]["activeModelState"] == "Loaded"
    assert status["components"]["predictor"]["latestCreatedRevision"] == "digits-predictor-00002"
    assert seen["listed"] == ["digits"]
    assert seen["predictions"] == model.predict(rows).tolist()
    assert seen["deleted"] == "Success" and "404" in seen["gone"], seen["gone"]
    deadline = time.monotonic() + 20
    while lifecycle.supervisors("digits"):  # its supervisor and model server end with it
        assert time.monotonic() < deadline, "the deleted InferenceService's supervisor still runs"
        time.sleep(0.2)


def test_a_killed_or_half_made_sdk_environment_is_built_again_and_a_complete_one_reused(tmp_path: Path) -> None:
    """What a build killed halfway leaves (its ``.building-PID`` folder, its process gone) is removed, a folder
    without the ``complete`` file is not trusted, another build still running keeps its folder, and a complete
    environment is reused as it is."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = tmp_path / f"{VENV_NAME}.building-{dead.pid}"
    (killed / "bin").mkdir(parents=True)
    running = tmp_path / f"{VENV_NAME}.building-{os.getppid()}"  # pytest's parent: alive
    running.mkdir()
    half_made = tmp_path / VENV_NAME
    (half_made / "bin").mkdir(parents=True)
    (half_made / "bin" / "python").symlink_to(sys.executable)
    assert not is_complete(half_made)
    built = build(tmp_path, requirements=())
    assert built == half_made and is_complete(built)
    assert not killed.exists() and running.is_dir()
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        [VENV_NAME, running.name, f"{VENV_NAME}.log"])
    (built / "marker").write_text("kept")
    assert build(tmp_path, requirements=()) == built and (built / "marker").read_text() == "kept"
