"""Seed 000's Fluid SDK calls, through the ``kubernetes`` client against a real server.

The seed drives its dataset with Fluid's Python SDK (``fluid.FluidClient``: ``create_dataset``,
``get_dataset``, ``bind_runtime(wait=True)``, ``report_status``, then data operations). That SDK
(fluid-cloudnative/fluid-client-python) is not on PyPI — the ``fluid`` package there is an unrelated
geophysics library — so it cannot be installed here; what it sends is the ``kubernetes`` client's
CustomObjectsApi (and CoreV1Api for the credentials' Secret), which this test sends the same way:
create the Secret and the Dataset, bind a runtime and wait for ``Bound`` by polling the Dataset as
``bind_runtime(wait=True)`` does, read the binding status, then preload it with a DataLoad and wait
for it to complete.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.server_support import Served, module_home

GROUP, VERSION = "data.fluid.io", "v1alpha1"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _home in module_home(tmp_path_factory, "fluid-sdk-calls"):
        server = Served()
        yield server
        server.stop()


def until(read: Any, done: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"still {value.get('status')}"
        time.sleep(0.5)


def test_seed_000s_fluid_sdk_calls_through_the_kubernetes_client(served: Served, tmp_path: Path) -> None:
    configuration = client.Configuration()
    configuration.host = served.url
    api = client.ApiClient(configuration)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    data = tmp_path / "mnist"
    data.mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "train-images-idx3-ubyte.gz"):
        (data / name).write_bytes(b"\x1f\x8b" + bytes(range(256)) * 8)
    core.create_namespaced_secret("default", client.V1Secret(
        metadata=client.V1ObjectMeta(name="jfs-secret"), string_data={"access-key": "ak", "secret-key": "sk"}))
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "datasets", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Dataset", "metadata": {"name": "mydataset"},
        "spec": {"mounts": [{"mountPoint": f"local://{data}", "name": "minio"}], "accessModes": ["ReadWriteMany"]}})
    dataset = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "datasets", "mydataset")
    assert dataset["status"]["phase"] == "NotBound"
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "alluxioruntimes", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "AlluxioRuntime", "metadata": {"name": "mydataset"},
        "spec": {"replicas": 2, "tieredstore": {"levels": [{"mediumtype": "MEM", "path": "/dev/shm",
                                                             "quota": "10Gi"}]}}})
    bound = until(lambda: custom.get_namespaced_custom_object(GROUP, VERSION, "default", "datasets", "mydataset"),
                  lambda obj: obj.get("status", {}).get("phase") == "Bound")
    runtime = bound["status"]["runtimes"][0]
    assert (runtime["name"], runtime["category"], runtime["type"]) == ("mydataset", "Accelerate", "alluxio")
    custom.create_namespaced_custom_object(GROUP, VERSION, "default", "dataloads", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "DataLoad", "metadata": {"name": "mydataset-load"},
        "spec": {"dataset": {"name": "mydataset", "namespace": "default"}}})
    loaded = until(lambda: custom.get_namespaced_custom_object(GROUP, VERSION, "default", "dataloads",
                                                               "mydataset-load"),
                   lambda obj: obj.get("status", {}).get("phase") in ("Complete", "Failed"))
    assert loaded["status"]["phase"] == "Complete", loaded["status"]
    cached = custom.get_namespaced_custom_object(GROUP, VERSION, "default", "datasets", "mydataset")
    assert cached["status"]["cacheStates"]["cachedPercentage"] == "100.0%"
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "default", "datasets")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["mydataset"]
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "datasets", "mydataset")
    custom.delete_namespaced_custom_object(GROUP, VERSION, "default", "alluxioruntimes", "mydataset")
