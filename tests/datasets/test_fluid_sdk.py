"""``from millpond import fluid``: the seed notebook's calls (Fluid's Python SDK), over a local dataset.

Manifests are checked as ``millpond apply`` checks them and land in the same store; dataflows
run as data operations. The end-to-end flows need FUSE and a mount namespace (DataProcess).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from millpond import fluid
from millpond.datasets.mounts import fuse_available
from millpond.errors import UserError
from millpond.fluid import constants, models
from millpond.runners.sandbox import sandbox_problem
from millpond.store.resources import ResourceStore
from millpond.store.secrets import ConfigStore

needs_process = pytest.mark.skipif(
    fuse_available() is not None or sandbox_problem() is not None,
    reason=f"DataProcess needs FUSE and a sandbox: {fuse_available() or sandbox_problem()}",
)


def oss_encrypt_options(secret_name: str) -> list[models.EncryptOption]:
    """As the seed writes them (cell 8)."""
    return [
        models.EncryptOption(name=key, value_from=models.EncryptOptionSource(
            secret_key_ref=models.SecretKeySelector(name=secret_name, key=key)))
        for key in ("access-key", "secret-key")
    ]


@pytest.fixture
def ufs(tmp_path: Path) -> Path:
    folder = tmp_path / "ufs"
    (folder / "MNIST" / "raw").mkdir(parents=True)
    (folder / "MNIST" / "raw" / "train.txt").write_text("0123456789")
    return folder


@pytest.fixture
def client(home: Path) -> Iterator[fluid.FluidClient]:
    """The seed's client; datasets left at the end are cleaned up (a MEM tier lives in /dev/shm, outside the home)."""
    client = fluid.FluidClient(fluid.ClientConfig())
    yield client
    for resource in ResourceStore().list("Dataset", None):
        client.cleanup_dataset(resource.name, resource.namespace)


@pytest.fixture
def dataset(client: fluid.FluidClient, ufs: Path) -> fluid.FluidDataset:
    """A ReadWrite dataset over a local folder, bound to a JuiceFSRuntime (the seed's cells 5-6)."""
    client.create_dataset(dataset_name="mydataset", mount_name="local", mount_point=f"local://{ufs}", mode="ReadWrite")
    ds = client.get_dataset(dataset_name="mydataset")
    ds.bind_runtime(
        runtime_type=constants.JUICEFS_RUNTIME_KIND, replicas=1, cache_capacity_GiB=1, cache_medium="SSD", wait=True
    )
    return ds


def stored(kind: str, name: str) -> dict[str, Any]:
    found = ResourceStore().get(kind, name)
    assert found is not None, f"{kind} {name} not stored"
    return found.manifest


# --- models, constants, client config ---


def test_models_give_fluids_manifest_fields() -> None:
    storage = models.ExternalStorage(uri="s3://bucket/mnist/", encrypt_options=oss_encrypt_options("oss-creds"))
    assert storage.to_dict() == {
        "encryptOptions": [
            {"name": "access-key", "valueFrom": {"secretKeyRef": {"key": "access-key", "name": "oss-creds"}}},
            {"name": "secret-key", "valueFrom": {"secretKeyRef": {"key": "secret-key", "name": "oss-creds"}}},
        ],
        "uri": "s3://bucket/mnist/",
    }
    processor = models.Processor(service_account_name="fluid-demo", script=models.ScriptProcessor(
        command=["bash"], source="echo hi", image="debian", image_tag="buster",
        env=[{"name": "A", "value": "1"}], volume_mounts=[{"name": "v", "mountPath": "/v"}]))
    assert processor.to_dict() == {
        "script": {"command": ["bash"], "env": [{"name": "A", "value": "1"}], "image": "debian", "imageTag": "buster",
                   "source": "echo hi", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
        "serviceAccountName": "fluid-demo",
    }
    # Fluid's generated models take fields in alphabetical order; its own code relies on it.
    assert models.SecretKeySelector("the-key", "the-secret").to_dict() == {"key": "the-key", "name": "the-secret"}
    with pytest.raises(TypeError, match="uri="):
        models.ExternalStorage("s3://bucket/x")  # type: ignore[arg-type]


def test_kubernetes_client_objects_become_camel_case() -> None:
    k8s = pytest.importorskip("kubernetes.client")
    script = models.ScriptProcessor(source="x", env=[k8s.V1EnvVar(name="A", value="1")],
                                    volume_mounts=[k8s.V1VolumeMount(name="v", mount_path="/v", read_only=True)])
    assert script.to_dict()["env"] == [{"name": "A", "value": "1"}]
    assert script.to_dict()["volumeMounts"] == [{"mountPath": "/v", "name": "v", "readOnly": True}]


def test_constants_and_version() -> None:
    assert fluid.__version__
    assert (constants.DATA_MIGRATE_DIRECTION_FROM, constants.DATA_MIGRATE_DIRECTION_TO) == ("from", "to")
    assert constants.JUICEFS_RUNTIME_KIND == "JuiceFSRuntime" and constants.API_VERSION == "data.fluid.io/v1alpha1"


def test_client_config_ignores_kubernetes_settings(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="fluidsdk"):
        config = fluid.ClientConfig(namespace="team", kube_config_file="~/.kube/config", kube_context="prod")
    assert "kube_config_file, kube_context ignored" in caplog.text
    assert fluid.FluidClient(config).config.namespace == "team"
    with pytest.raises(ValueError, match="Unsupported runtime kind"):
        fluid.ClientConfig(runtime_kind="nosuch")


# --- datasets and runtimes ---


def test_create_dataset_as_the_seed_does(
    client: fluid.FluidClient, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ConfigStore(home).create("secret", "jfs-secret", {"access-key": "a", "secret-key": "s", "metaurl": "redis://r"})
    options = {"bucket": "http://minio:9000/minio/test", "storage": "minio"}
    cred = {"access-key": "access-key", "secret-key": "secret-key", "metaurl": "metaurl"}
    with caplog.at_level(logging.DEBUG, logger="fluidsdk"):
        result = client.create_dataset(dataset_name="mydataset", mount_name="minio", mount_point="juicefs:///",
                                       mode="ReadWrite", options=options, cred_secret_name="jfs-secret",
                                       cred_secret_options=cred)
    assert result is None
    assert 'Dataset "default/mydataset" created' in caplog.text
    spec = stored("Dataset", "mydataset")["spec"]
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["mounts"] == [{
        "encryptOptions": [{"name": option, "valueFrom": {"secretKeyRef": {"key": key, "name": "jfs-secret"}}}
                           for option, key in cred.items()],
        "mountPoint": "juicefs:///", "name": "minio", "options": options, "path": "/",
    }]
    with pytest.raises(fluid.AlreadyExists, match='datasets.data.fluid.io "mydataset" already exists'):
        client.create_dataset(dataset_name="mydataset", mount_name="minio", mount_point="juicefs:///")


def test_create_dataset_is_checked_as_apply_checks(client: fluid.FluidClient, ufs: Path) -> None:
    with pytest.raises(UserError) as missing:
        client.create_dataset("ds", "data", f"local://{ufs}", cred_secret_name="nosuch", cred_secret_options={"k": "k"})
    assert str(missing.value).startswith(
        "create_dataset: Dataset ds: spec.mounts[0].encryptOptions[0].valueFrom.secretKeyRef.name: "
    )
    assert "\n" not in str(missing.value) and "millpond secret create nosuch" in str(missing.value)
    with pytest.raises(UserError, match="create_dataset: Dataset ds: spec.mounts\\[0\\].mountPoint: .*placeholder"):
        client.create_dataset("ds", "data", "s3://<BUCKET>/mnist")
    with pytest.raises(UserError, match="metadata.name"):
        client.create_dataset("My_Dataset", "data", f"local://{ufs}")
    with pytest.raises(ValueError, match="mode must be ReadOnly or ReadWrite"):
        client.create_dataset("ds", "data", f"local://{ufs}", mode="WriteOnly")
    with pytest.raises(ValueError, match="set together"):
        client.create_dataset("ds", "data", f"local://{ufs}", cred_secret_name="jfs-secret")
    assert ResourceStore().list("Dataset") == []
    with pytest.raises(fluid.NotFound, match='datasets.data.fluid.io "ds" not found'):
        client.get_dataset("ds")


def test_bind_runtime_and_report_status(
    client: fluid.FluidClient, ufs: Path, home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client.create_dataset(dataset_name="mydataset", mount_name="local", mount_point=f"local://{ufs}")
    ds = client.get_dataset(dataset_name="mydataset")
    assert ds.report_status("binding_status") == {"phase": "NotBound", "runtimes": []}
    with caplog.at_level(logging.INFO, logger="fluidsdk"):
        ds.bind_runtime(runtime_type=constants.JUICEFS_RUNTIME_KIND, replicas=2, cache_capacity_GiB=10,
                        cache_medium="MEM", wait=True)
    assert "JuiceFSRuntime mydataset: not applicable on one machine, recorded only: replicas: 2" in caplog.text
    runtime = stored("JuiceFSRuntime", "mydataset")
    assert runtime["spec"] == {
        "replicas": 2, "tieredstore": {"levels": [{"mediumtype": "MEM", "path": "/dev/shm", "quota": "10Gi"}]}
    }
    assert ds.report_status("binding_status") == {  # the seed's cell 7
        "phase": "Bound",
        "runtimes": [
            {"category": "Accelerate", "master_replicas": 2, "name": "mydataset", "namespace": "default",
             "type": "juicefs"},
        ],
    }
    cache = ds.report_status("cache")
    assert cache["cacheCapacity"] == "10.00GiB"
    assert cache["dataset file num"] == "1" and cache["dataset total size"] == "10.00B"
    assert ds.report_status("cache_status") == cache
    assert ds.report_status("mount") == [{"mountPoint": f"local://{ufs}", "name": "local", "path": "/"}]
    assert ds.report_status("full")["phase"] == "Bound"
    assert ds.obj["metadata"]["uid"] == ds.uid and ds.obj["status"]["phase"] == "Bound"
    assert client.get_runtime("mydataset")["kind"] == "JuiceFSRuntime"
    with pytest.raises(ValueError, match="status_type must be one of"):
        ds.report_status("nosuch")
    with pytest.raises(fluid.AlreadyExists, match="juicefsruntimes.data.fluid.io"):
        ds.bind_runtime(runtime_type="alluxio")
    # The same again: fine.
    ds.bind_runtime(runtime_type="juicefs", replicas=2, cache_capacity_GiB=10, cache_medium="MEM")


def test_bind_runtime_disk_media_live_under_the_home(client: fluid.FluidClient, ufs: Path, home: Path) -> None:
    client.create_dataset("ds", "local", f"local://{ufs}")
    client.get_dataset("ds").bind_runtime(
        runtime_type=constants.ALLUXIO_RUNTIME_KIND, cache_capacity_GiB=0.5, cache_medium="SSD"
    )
    level = stored("AlluxioRuntime", "ds")["spec"]["tieredstore"]["levels"][0]
    assert level == {
        "high": "0.99", "low": "0.95", "mediumtype": "SSD", "path": str(home.resolve() / "cache" / "ssd"),
        "quota": "512Mi",
    }
    with pytest.raises(ValueError, match="cache_medium"):
        client.get_dataset("ds").bind_runtime(runtime_type="alluxio", cache_medium="TAPE")
    with pytest.raises(ValueError, match="Unsupported runtime kind"):
        client.get_dataset("ds").bind_runtime(runtime_type="nosuch")


def test_bind_failure_says_why(client: fluid.FluidClient, tmp_path: Path) -> None:
    client.create_dataset("ds", "local", f"local://{tmp_path / 'missing'}")
    with pytest.raises(UserError, match='Dataset "default/ds" is Failed: cannot list local://.*no such folder'):
        client.get_dataset("ds").bind_runtime(runtime_type="alluxio", wait=True)


def test_clean_up_removes_dataset_runtime_and_cache(client: fluid.FluidClient, dataset: fluid.FluidDataset,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    dataset.clean_up(wait=True)
    assert ResourceStore().list("Dataset") == [] and ResourceStore().list("JuiceFSRuntime") == []
    with pytest.raises(fluid.NotFound):
        client.get_dataset("mydataset")
    dataset.clean_up()  # gone already: nothing to do
    client.cleanup_dataset("mydataset")
    with caplog.at_level(logging.WARNING, logger="fluidsdk"):
        client.delete_dataset("mydataset")
    assert "not found. Maybe already deleted." in caplog.text


def test_clean_up_leaves_a_newer_dataset_of_the_same_name(client: fluid.FluidClient, ufs: Path) -> None:
    client.create_dataset("ds", "local", f"local://{ufs}")
    old = client.get_dataset("ds")
    client.cleanup_dataset("ds")
    client.create_dataset("ds", "local", f"local://{ufs}")
    old.clean_up()
    assert client.get_dataset("ds").uid != old.uid


# --- dataflows ---


def test_flow_steps_chain_with_run_after(dataset: fluid.FluidDataset, ufs: Path) -> None:
    flow = dataset.migrate(path="/MNIST/raw/", migrate_direction=constants.DATA_MIGRATE_DIRECTION_FROM,
                           external_storage=models.ExternalStorage(uri=f"local://{ufs}/MNIST/raw/"))
    flow = flow.process(dataset_mountpath="/data/mnist/", sub_path="MNIST/raw/", processor=models.Processor(
        script=models.ScriptProcessor(command=["bash"], source="ls", image="debian", image_tag="buster")))
    flow = flow.preload(target_path="/MNIST/raw")
    flow = flow.migrate(path="/ckpt/mnist_cnn.pt", migrate_direction=constants.DATA_MIGRATE_DIRECTION_TO,
                        external_storage={"uri": "local:///tmp/ckpt/mnist_cnn.pt"})
    steps = flow.manifests("torch-mnist-training")
    assert [(s["kind"], s["metadata"]["name"]) for s in steps] == [
        ("DataMigrate", "torch-mnist-training-step1"), ("DataProcess", "torch-mnist-training-step2"),
        ("DataLoad", "torch-mnist-training-step3"), ("DataMigrate", "torch-mnist-training-step4"),
    ]
    assert "runAfter" not in steps[0]["spec"]
    for before, step in itertools.pairwise(steps):
        assert step["spec"]["runAfter"] == {
            "kind": before["kind"], "name": before["metadata"]["name"], "namespace": "default"
        }
    assert all(s["metadata"]["labels"] == {"fluid.io/dataflow": "torch-mnist-training"} for s in steps)
    assert steps[0]["spec"] == {
        "from": {"externalStorage": {"uri": f"local://{ufs}/MNIST/raw/"}},
        "to": {"dataset": {"name": "mydataset", "namespace": "default", "path": "/MNIST/raw/"}},
    }
    assert steps[1]["spec"]["dataset"] == {
        "name": "mydataset", "namespace": "default", "mountPath": "/data/mnist/", "subPath": "MNIST/raw/"
    }
    assert steps[1]["spec"]["processor"]["script"]["imageTag"] == "buster"
    assert steps[2]["spec"]["target"] == [{"path": "/MNIST/raw", "replicas": 1}]
    assert steps[2]["spec"]["loadMetadata"] is False
    assert steps[3]["spec"]["from"]["dataset"]["path"] == "/ckpt/mnist_cnn.pt"
    assert steps[3]["spec"]["to"] == {"externalStorage": {"uri": "local:///tmp/ckpt/mnist_cnn.pt"}}
    assert flow.manifests("again")[1]["spec"]["runAfter"]["name"] == "again-step1"  # a flow runs again under another id


def test_flow_steps_are_checked_when_added(dataset: fluid.FluidDataset) -> None:
    with pytest.raises(UserError, match="migrate: DataMigrate step1: spec.from.externalStorage.uri: .*placeholder"):
        dataset.migrate(path="/MNIST/raw/", migrate_direction="from",
                        external_storage=models.ExternalStorage(uri="oss://<OSS_BUCKET>.<OSS_ENDPOINT>.aliyuncs.com/mnist/",
                                                                encrypt_options=oss_encrypt_options("oss-access-creds")))
    with pytest.raises(UserError, match='secretKeyRef.name: secret "oss-access-creds" not found'):
        dataset.migrate(path="/x", migrate_direction="from", external_storage=models.ExternalStorage(
            uri="s3://bucket/mnist/", encrypt_options=oss_encrypt_options("oss-access-creds")))
    with pytest.raises(ValueError, match="migrate_direction"):
        dataset.migrate(path="/x", migrate_direction="sideways", external_storage=models.ExternalStorage(uri="local:///x"))
    with pytest.raises(UserError, match="preload: DataLoad step1: spec.target\\[0\\].path: .*absolute"):
        dataset.preload(target_path="relative/path")


def test_run_needs_a_bound_dataset(client: fluid.FluidClient, ufs: Path) -> None:
    client.create_dataset("ds", "local", f"local://{ufs}")
    with pytest.raises(UserError, match="dataset ds is not bound"):
        client.get_dataset("ds").preload("/MNIST").run(run_id="r1")
    assert ResourceStore().list("DataLoad") == []


def write_marker(folder: str, text: str) -> None:
    """A DataProcess step written as a Python function (make_processor_from_func)."""
    import pathlib

    pathlib.Path(folder, "from-python.txt").write_text(text)


def test_make_processor_from_func_writes_a_python_script() -> None:
    processor = fluid.make_processor_from_func(
        write_marker, {"folder": "/data", "text": "hi"}, base_image="python:3.12", env=[{"name": "A", "value": "1"}]
    )
    script = processor.script
    assert script is not None and script.command == ["python3", "-u"]
    assert (script.image, script.image_tag, script.env) == ("python", "3.12", [{"name": "A", "value": "1"}])
    assert script.source.startswith("def write_marker(folder: str, text: str) -> None:")
    assert script.source.rstrip().endswith("write_marker(**{'folder': '/data', 'text': 'hi'})")
    compile(script.source, "script", "exec")
    with_pip = fluid.make_processor_from_func(write_marker, packages_to_install=["tqdm"]).script
    assert with_pip is not None and "'pip', 'install'" in with_pip.source and "'tqdm'" in with_pip.source
    with pytest.raises(ValueError, match="cannot be written into a script"):
        fluid.make_processor_from_func(write_marker, {"folder": object()})
    with pytest.raises(ValueError, match="named function"):
        fluid.make_processor_from_func(lambda: None)


@needs_process
def test_flow_runs_preload_then_processes(
    dataset: fluid.FluidDataset, ufs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = "set -e\ncd /data/mnist\ntest -f train.txt\ncat train.txt train.txt > doubled.txt\n"
    flow = dataset.preload(target_path="/MNIST/raw")
    flow = flow.process(dataset_mountpath="/data/mnist", sub_path="MNIST/raw", processor=models.Processor(
        script=models.ScriptProcessor(command=["bash"], source=script, image="debian", image_tag="buster")))
    flow = flow.process(dataset_mountpath="/data", processor=fluid.make_processor_from_func(
        write_marker, {"folder": "/data/MNIST/raw", "text": "written by python"}))
    with caplog.at_level(logging.INFO, logger="fluidsdk"):
        run = flow.run(run_id="mnist")
        assert run.wait(timeout=120) is None
    assert [record.getMessage() for record in caplog.records if "completed" in record.getMessage()] == [
        "DataLoad mnist-step1 completed", "DataProcess mnist-step2 completed", "DataProcess mnist-step3 completed"]
    statuses = run.get_current_status()
    assert [list(s) for s in statuses] == [["mnist-step1"], ["mnist-step2"], ["mnist-step3"]]
    assert [next(iter(s.values()))["phase"] for s in statuses] == ["Complete"] * 3
    assert (ufs / "MNIST" / "raw" / "doubled.txt").read_text() == "0123456789" * 2  # ReadWrite: written through
    assert (ufs / "MNIST" / "raw" / "from-python.txt").read_text() == "written by python"
    assert fluid.FluidClient().get_data_operation("mnist-step1", "dataload")["status"]["phase"] == "Complete"
    with pytest.raises(fluid.AlreadyExists, match='dataloads.data.fluid.io "mnist-step1" already exists'):
        flow.run(run_id="mnist")


@needs_process
def test_a_failed_step_fails_the_flow_and_names_it(dataset: fluid.FluidDataset, ufs: Path) -> None:
    failing = models.Processor(script=models.ScriptProcessor(command=["bash"], source="echo broken >&2; exit 3"))
    flow = dataset.preload().process(dataset_mountpath="/data", processor=failing).preload(target_path="/MNIST")
    run = flow.run(run_id="broken")
    with pytest.raises(fluid.DataFlowFailed) as failed:
        run.wait(timeout=120)
    assert failed.value.step == "broken-step2" and failed.value.kind == "DataProcess"
    message = str(failed.value)
    assert message.startswith('failed to wait data operation broken-step2: DataProcess "default/broken-step2" failed: ')
    assert "exited with status 3" in message and "broken" in message
    phases = [next(iter(s.values()))["phase"] for s in run.get_current_status()]
    assert phases[:2] == ["Complete", "Failed"]
