"""One multi-user server per test module, its team, and objects of both teams (applied by the server token)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from millpond.settings import load_settings
from millpond.store.runs import RunStore
from tests.routes_multiuser.support import API, TEAM_A, TEAM_B, Caller, MultiUserServer, team
from tests.server_support import module_home


def dataset(name: str, namespace: str, folder: Path) -> dict[str, Any]:
    return {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mounts": [{"mountPoint": f"local://{folder}", "name": "files"}]}}


def config(kind: str, name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "data": {"key": "dmFsdWU=" if kind == "Secret" else "value"}}


def model(namespace: str) -> dict[str, Any]:
    """An InferenceService stored and not served (no runtime for xgboost from gs://): the gateway says 503."""
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "model", "namespace": namespace},
            "spec": {"predictor": {"xgboost": {"storageUri": "gs://bucket/model"}}}}


def job(namespace: str) -> dict[str, Any]:
    """A PyTorchJob whose one process ends at once (its log: one line)."""
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "train", "namespace": namespace},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "pytorch", "image": "x", "command": ["sh", "-c", f"echo trained in {namespace}"]}]}}}}}}


def queues() -> list[dict[str, Any]]:
    """A ClusterQueue both teams reach through a LocalQueue of their own namespace."""
    kueue = "kueue.x-k8s.io/v1beta1"
    return [{"apiVersion": kueue, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
            {"apiVersion": kueue, "kind": "ClusterQueue", "metadata": {"name": "shared"},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                 {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]}},
            *({"apiVersion": kueue, "kind": "LocalQueue", "metadata": {"name": "queue", "namespace": namespace},
               "spec": {"clusterQueue": "shared"}} for namespace in (TEAM_A, TEAM_B))]


# Runs and experiments gain a namespace with the KFP API's part of issue 32 (RunStore.create_run(namespace=)):
# the test run is then team-a's, before that it names none (and only administrators reach it).
NAMESPACED_RUNS = "namespace" in inspect.signature(RunStore.create_run).parameters


@dataclass(frozen=True)
class StoredRun:
    """A finished run with one task, its log and one artifact, as an engine leaves them in the store."""

    id: str
    task: str
    uri: str
    namespace: str  # "" before runs had one


def a_run(home: Path) -> StoredRun:
    store = RunStore(load_settings().database_url)
    where = {"namespace": TEAM_A} if NAMESPACED_RUNS else {}
    run = store.create_run(name="secret-run", experiment="Default", pipeline_name="p", pipeline_spec={},
                           platform_spec=None, parameters={}, pipeline_root=str(home / "root"), **where)
    log = home / "task.log"
    log.write_text("a line only the run's readers may see\n")
    artifact = home / "root" / "out.txt"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text("artifact content\n")
    task = store.start_task(run_id=run.id, path="train", name="train", kind="container", component="c",
                            parent_id=None, log_path=str(log))
    recorded = {"name": "out", "type": {"schemaTitle": "system.Artifact"}, "uri": str(artifact), "metadata": {}}
    store.finish_task(task, state="SUCCEEDED", run_id=run.id, outputs={"artifacts": {"out": [{"uri": str(artifact)}]}},
                      artifacts=[recorded])
    store.update_run(run.id, state="SUCCEEDED")
    return StoredRun(run.id, task, str(artifact), where.get("namespace", ""))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "routes-multiuser")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[MultiUserServer]:
    served = MultiUserServer()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def callers(server: MultiUserServer, home: Path) -> dict[str, Caller]:
    """The team, and one of each object in team-a and team-b."""
    found = team(server)
    folder = home / "files"
    folder.mkdir(exist_ok=True)
    (folder / "a.txt").write_text("data\n")
    objects = [doc for namespace, suffix in ((TEAM_A, "a"), (TEAM_B, "b")) for doc in (
        dataset("data", namespace, folder), config("ConfigMap", f"settings-{suffix}", namespace),
        config("Secret", f"creds-{suffix}", namespace), model(namespace), job(namespace))]
    applied = found["admin"].apply(*objects, *queues())
    assert applied.status == 200, applied.text
    deadline = time.monotonic() + 120
    for namespace in (TEAM_A, TEAM_B):  # each job's one process has run and left its line
        while f"trained in {namespace}" not in found["admin"].call(f"{API}/jobs/{namespace}/train/logs").text:
            assert time.monotonic() < deadline, found["admin"].call(f"{API}/jobs/{namespace}/train").text
            time.sleep(0.5)
    return found


@pytest.fixture(scope="module")
def run(callers: dict[str, Caller], home: Path) -> StoredRun:
    return a_run(home)
