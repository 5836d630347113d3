"""Fluid manifests: ``millpond apply -f`` / ``get`` / ``delete`` as kubectl would, and every refusal in one line."""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from millpond.cli.resource_tables import human_age
from millpond.datasets import kinds as fluid_kinds  # noqa: F401 - registers Fluid's kinds
from millpond.datasets.mount_points import parse_mount_point
from millpond.errors import UserError
from millpond.kinds import REGISTRY
from millpond.scheduling.queues import kinds as queue_kinds  # noqa: F401 - the table holds every owner's kinds
from millpond.serving import kinds as serving_kinds  # noqa: F401 - the table holds every owner's kinds
from millpond.store.secrets import ConfigStore
from millpond.training import kinds as training_kinds  # noqa: F401 - the table holds every owner's kinds

REPO = Path(__file__).parents[2]
CORPUS = (REPO / "../shared/conformance/fluid-manifests").resolve()
CRDS = (REPO / "../shared/reference/fluid-crds").resolve()
SCHEMAS = REPO / "src/millpond/datasets/schemas"

# Each corpus file: "applied", or a piece of the one error line that refuses it.
CORPUS_OUTCOMES = {
    "docs_en_samples_accelerate_pvc_7.yaml": "applied",
    "docs_en_samples_accelerate_s3_minio_8.yaml":
        'Dataset demo: spec.mounts[0].options[alluxio.underfs.s3.endpoint]: "http://{{$demo-minio-addr}}:9000" '
        "holds an unfilled template placeholder",
    "docs_en_samples_accelerate_s3_minio_9.yaml": "applied",
    "docs_en_samples_alluxio_s3_high_concurrency_10.yaml": "applied",
    "docs_en_samples_alluxio_s3_high_concurrency_11.yaml":
        "Dataset my-s3: spec.mounts[0].mountPoint: \"s3://<bucket-name>/<path-to-data>/\" "
        "holds an unfilled template placeholder <bucket-name>",
    "docs_en_samples_api_proxy_12.yaml": "applied",
    "docs_en_samples_arm64_13.yaml": "applied",
    "docs_en_samples_arm64_14.yaml": "applied",
    "docs_en_samples_automatic_clean_up_data_operation_15.yaml": "applied",
    "docs_en_samples_automatic_clean_up_data_operation_16.yaml": "applied",
    "docs_en_samples_cacheruntime_data_operations_17.yaml": "CacheRuntimeClass is a cluster-wide template",
    "docs_en_samples_data_accessmodes_18.yaml": "applied",
    "docs_en_samples_data_warmup_21.yaml": "applied",
    "docs_en_samples_data_warmup_22.yaml": "applied",
    "docs_en_samples_data_warmup_23.yaml": "applied",
    "docs_en_samples_dataflow_affinity_24.yaml": "DataLoad loadA: metadata.name: invalid DataLoad name 'loadA'",
    "docs_en_samples_dataflow_affinity_25.yaml": "DataLoad loadA: metadata.name: invalid DataLoad name 'loadA'",
    "docs_en_samples_dataset_scaling_28.yaml": "applied",
    "docs_en_samples_fuse_affinity_29.yaml": "applied",
    "docs_en_samples_fuse_affinity_30.yaml": "applied",
    "docs_en_samples_fuse_clean_policy_31.yaml": "applied",
    "docs_en_samples_hostpath_33.yaml": "applied",
    "docs_en_samples_juicefs_runtime_34.yaml":
        'Dataset jfsdemo: spec.mounts[0].options.bucket: "<bucket>" holds an unfilled template placeholder',
    "docs_en_samples_juicefs_runtime_35.yaml": "applied",
    "docs_en_samples_juicefs_runtime_36.yaml":
        'Dataset jfsdemo: spec.mounts[0].options.bucket: "<bucket>" holds an unfilled template placeholder',
    "docs_en_samples_juicefs_runtime_37.yaml": "applied",
    "docs_en_samples_juicefs_runtime_38.yaml": "applied",
    "docs_en_samples_knative_39.yaml": "applied",
    "docs_en_samples_machinelearning_41.yaml":
        'Dataset imagenet: spec.mounts[0].mountPoint: "oss://<OSS_BUCKET>/<OSS_DIRECTORY>/" '
        "holds an unfilled template placeholder",
    "docs_en_samples_nonroot_access_42.yaml": "applied",
    # encryptOptions written inside options (a documentation slip): options hold strings only.
    "docs_en_samples_s3_configuration_43.yaml":
        "Dataset my-s3: spec.mounts[0].options.encryptOptions: an array is not of type string",
    "docs_en_samples_s3_configuration_44.yaml": 'AlluxioRuntime my-s3: spec: "..." is not of type object',
    "docs_en_samples_vineyard_accelerate_kubeflow_pipelines_49.yaml": "applied",
    "docs_en_samples_vineyard_configure_cache_size_of_vineyard_fuse_50.yaml": "applied",
    "docs_en_samples_vineyard_configure_cache_size_of_vineyard_fuse_51.yaml": "applied",
    "docs_en_samples_vineyard_vineyard_runtime_52.yaml": "applied",
}

CORPUS_SECRETS = {
    "mysecret": {"aws.accessKeyId": "AKIA-corpus", "aws.secretKey": "corpus-secret-key"},
    "jfs-secret": {"metaurl": "redis://corpus", "access-key": "ak", "secret-key": "sk", "token": "tk"},
}

GOOD_DATASET = """\
apiVersion: data.fluid.io/v1alpha1
kind: Dataset
metadata:
  name: good
spec:
  mounts:
    - mountPoint: https://mirrors.example.org/apache/hbase/
      name: hbase
"""

RUNTIME = """\
apiVersion: data.fluid.io/v1alpha1
kind: AlluxioRuntime
metadata:
  name: {name}
spec:
  replicas: {replicas}
  tieredstore:
    levels:
      - mediumtype: {medium}
        path: {path}
        quota: {quota}
        high: "{high}"
        low: "{low}"
"""


def runtime(name: str = "good", replicas: object = 1, medium: str = "MEM", path: str = "/dev/shm",
            quota: object = "2Gi", high: str = "0.95", low: str = "0.7") -> str:
    return RUNTIME.format(name=name, replicas=replicas, medium=medium, path=path, quota=quota, high=high, low=low)


def dataset(mount_point: str, extra: str = "", name: str = "bad") -> str:
    return textwrap.dedent(f"""\
        apiVersion: data.fluid.io/v1alpha1
        kind: Dataset
        metadata:
          name: {name}
        spec:
          mounts:
            - mountPoint: {mount_point}
              name: m
        """) + textwrap.indent(textwrap.dedent(extra), "      ")


def with_secret(name: str, key: str) -> str:
    return dataset("s3://bucket/data", f"""\
        encryptOptions:
          - name: aws.secretKey
            valueFrom:
              secretKeyRef:
                name: {name}
                key: {key}
        """)


def dataload(extra: str) -> str:
    return textwrap.dedent("""\
        apiVersion: data.fluid.io/v1alpha1
        kind: DataLoad
        metadata:
          name: bad
        spec:
          dataset:
            name: good
            namespace: default
        """) + textwrap.indent(textwrap.dedent(extra), "  ")


def write(tmp_path: Path, text: str, name: str = "manifest.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def make_secrets(home: Path, secrets: dict[str, dict[str, str]]) -> None:
    store = ConfigStore(home)
    for name, data in secrets.items():
        store.create("secret", name, data)


def error_line(result: Any) -> str:
    """The one line a refusal prints (and nothing else)."""
    lines = result.err.splitlines()
    assert result.code == 2, (result.code, result.out, result.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


def stored(cli: Any, kind: str) -> list[str]:
    result = cli("get", kind, "-o", "json")
    assert result.code == 0, result.err
    return [item["metadata"]["name"] for item in result.json()["items"]]


# --- the corpus -----------------------------------------------------------------------------


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared Fluid manifest corpus is not beside the repository")
def test_every_corpus_manifest_is_applied_or_refused_in_one_line(cli, home: Path) -> None:
    assert sorted(p.name for p in CORPUS.glob("*.yaml")) == sorted(CORPUS_OUTCOMES)
    make_secrets(home, CORPUS_SECRETS)
    outcomes: dict[str, str] = {}
    for path in sorted(CORPUS.glob("*.yaml")):
        result = cli("apply", "-f", path)
        if result.code == 0:
            documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
            assert len(result.out.splitlines()) == len(documents), result.out
            assert all(line.startswith("info: ") for line in result.err.splitlines()), result.err
            outcomes[path.name] = "applied"
        else:
            outcomes[path.name] = error_line(result)
    for name, expected in CORPUS_OUTCOMES.items():
        if expected == "applied":
            assert outcomes[name] == "applied", (name, outcomes[name])
        else:
            assert expected in outcomes[name], (name, outcomes[name])
            assert outcomes[name].startswith(f"error: {CORPUS / name}: "), outcomes[name]
    # nothing of a refused file was stored: loadA/loadB (24, 25) share their file with a Dataset "phy"
    assert "phy" not in stored(cli, "datasets")
    assert "loadb" not in stored(cli, "dataloads")


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared Fluid manifest corpus is not beside the repository")
def test_corpus_manifest_without_its_secret_is_refused(cli) -> None:
    result = cli("apply", "-f", CORPUS / "docs_en_samples_arm64_13.yaml")
    line = error_line(result)
    assert (
        'Dataset jfsdemo: spec.mounts[0].encryptOptions[0].valueFrom.secretKeyRef.name: secret "jfs-secret" not found'
        in line
    )
    assert stored(cli, "dataset") == []


# --- bad input: one line, exit 2, nothing stored --------------------------------------------

BAD_DOCUMENTS = {
    "unknown kind": ("apiVersion: data.fluid.io/v1alpha1\nkind: Datasett\nmetadata:\n  name: bad\n",
                     'unknown kind "Datasett"'),
    "wrong apiVersion": (GOOD_DATASET.replace("v1alpha1", "v1beta1").replace("good", "bad"),
                         'Dataset: apiVersion "data.fluid.io/v1beta1" is not supported'),
    "unknown field": (dataset("https://example.org/x", "") + "  foo: 1\n", 'Dataset bad: unknown field "spec.foo"'),
    "wrong type": (runtime("bad", replicas="two"), 'AlluxioRuntime bad: spec.replicas: "two" is not of type integer'),
    "quota not a quantity": (runtime("bad", quota="lots"),
                             'spec.tieredstore.levels[0].quota: "lots" is not a quantity'),
    "quota not a size": (runtime("bad", quota="-1Gi"),
                         'spec.tieredstore.levels[0].quota: "-1Gi": a cache tier needs a size above 0'),
    "unknown medium": (runtime("bad", medium="RAM"),
                       'spec.tieredstore.levels[0].mediumtype: "RAM" is not one of "MEM"'),
    "relative tier path": (runtime("bad", path="cache"),
                           'spec.tieredstore.levels[0].path: "cache": the path must be absolute'),
    "watermark above 1": (runtime("bad", high="1.5"), 'spec.tieredstore.levels[0].high: "1.5" is outside 0-1'),
    "watermark not a number": (runtime("bad", low="lots"), 'spec.tieredstore.levels[0].low: "lots" is not a number'),
    "low above high": (runtime("bad", high="0.5", low="0.9"),
                       'spec.tieredstore.levels[0].low: "0.9" is above high "0.5"'),
    "unknown mount scheme": (dataset("foo://bucket/data"), 'spec.mounts[0].mountPoint: unknown scheme "foo"'),
    "bad bucket name": (dataset("s3://My_Bucket/data"), '"My_Bucket" is not a valid bucket name'),
    "relative local path": (dataset("local://data/x"),
                            'spec.mounts[0].mountPoint: "local://data/x": the path must be absolute'),
    "mount point escaping": (dataset("local:///data/../../etc"),
                             "spec.mounts[0].mountPoint: \"local:///data/../../etc\": '..' climbs above"),
    "dataset path escaping": (dataset("https://example.org/x", "path: ../../etc\n"),
                              "spec.mounts[0].path: \"../../etc\": '..' climbs out of the dataset"),
    "target escaping": (dataload("target:\n  - path: /data/../../etc\n"),
                        "DataLoad bad: spec.target[0].path: \"/data/../../etc\": '..' climbs above /"),
    "relative target": (dataload("target:\n  - path: data\n"),
                        'spec.target[0].path: "data": the path must be absolute'),
    "bad schedule": (dataload("policy: Cron\nschedule: \"61 * * * *\"\n"),
                     'spec.schedule: "61 * * * *" is not a cron schedule'),
    "schedule without Cron": (dataload("schedule: \"0 * * * *\"\n"), "spec.schedule: only used with policy: Cron"),
    "template placeholder": (dataset("https://example.org/x",
                                     "options:\n  endpoint: \"http://{{ .Values.host }}:9000\"\n"),
                             "spec.mounts[0].options.endpoint: \"http://{{ .Values.host }}:9000\" "
                             "holds an unfilled template placeholder {{ .Values.host }}"),
    "angle placeholder": (dataset("s3://<bucket-name>/data"),
                          "spec.mounts[0].mountPoint: \"s3://<bucket-name>/data\" "
                          "holds an unfilled template placeholder <bucket-name>"),
    "missing secret": (with_secret("nosuch", "aws.secretKey"),
                       'spec.mounts[0].encryptOptions[0].valueFrom.secretKeyRef.name: secret "nosuch" not found'),
    "missing secret key": (with_secret("mysecret", "missing"),
                           'spec.mounts[0].encryptOptions[0].valueFrom.secretKeyRef.key: '
                           'secret "mysecret" has no key "missing"'),
    "invalid name": (GOOD_DATASET.replace("name: good", "name: Bad_Name"),
                     "Dataset Bad_Name: metadata.name: invalid Dataset name"),
    "unknown metadata": (GOOD_DATASET.replace("  name: good", "  name: bad\n  lables: {a: b}"),
                         'unknown field "metadata.lables"'),
    "cluster-only kind": ("apiVersion: data.fluid.io/v1alpha1\nkind: CacheRuntimeClass\nmetadata:\n  name: c\n",
                          "CacheRuntimeClass is a cluster-wide template"),
}


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_a_bad_document_refuses_the_whole_file_in_one_line(cli, home: Path, tmp_path: Path, case: str) -> None:
    make_secrets(home, {"mysecret": {"aws.secretKey": "s3cr3t-value"}})
    bad, expected = BAD_DOCUMENTS[case]
    path = write(tmp_path, GOOD_DATASET + "---\n" + runtime() + "---\n" + bad)
    line = error_line(cli("apply", "-f", path))
    assert line.startswith(f"error: {path}: ") and expected in line, line
    assert "s3cr3t-value" not in line
    assert stored(cli, "datasets") == [] and stored(cli, "alluxioruntimes") == [] and stored(cli, "dataloads") == []


def test_malformed_yaml_names_file_and_line(cli, tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_DATASET + "---\nkind: Dataset\nmetadata: {name: [unclosed\nspec: {}\n")
    line = error_line(cli("apply", "-f", path))
    assert line.startswith(f"error: {path}:12:") and ": malformed YAML: " in line, line
    assert stored(cli, "dataset") == []


def test_one_bad_file_refuses_the_good_file_beside_it(cli, tmp_path: Path) -> None:
    good = write(tmp_path, GOOD_DATASET, "good.yaml")
    bad = write(tmp_path, runtime("bad", replicas="two"), "bad.yaml")
    assert "bad.yaml: AlluxioRuntime bad" in error_line(cli("apply", "-f", good, "-f", bad))
    assert stored(cli, "dataset") == []


def test_missing_file_and_empty_file(cli, tmp_path: Path) -> None:
    assert "nope.yaml: no such file" in error_line(cli("apply", "-f", tmp_path / "nope.yaml"))
    assert "no manifests found" in error_line(cli("apply", "-f", write(tmp_path, "---\n---\n")))


# --- the lifecycle ---------------------------------------------------------------------------


def test_apply_get_reapply_change_delete(cli, tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_DATASET + "---\n" + runtime())
    result = cli("apply", "-f", path)
    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "dataset.data.fluid.io/good created",
        "alluxioruntime.data.fluid.io/good created",
    ]

    table = cli("get", "datasets")
    assert table.code == 0, table.err
    header, line = table.out.splitlines()
    assert header.split("   ")[0:2] == ["NAME", "UFS TOTAL SIZE"]
    assert "CACHED PERCENTAGE" in header and header.endswith("AGE")
    assert line.startswith("good") and "[Calculating]" in line
    assert cli("get", "alluxio").out.splitlines()[0].split() == [
        "NAME", "MASTER", "PHASE", "WORKER", "PHASE", "FUSE", "PHASE", "AGE",
    ]

    one = cli("get", "dataset", "good", "-o", "json").json()
    assert one["apiVersion"] == "data.fluid.io/v1alpha1" and one["kind"] == "Dataset"
    assert one["metadata"]["name"] == "good" and one["metadata"]["namespace"] == "default"
    assert one["metadata"]["uid"] and one["metadata"]["creationTimestamp"].endswith("Z")
    assert one["spec"]["mounts"][0]["mountPoint"] == "https://mirrors.example.org/apache/hbase/"
    # The mirror cannot be reached from here: the dataset is Failed and its condition says so.
    assert one["status"]["phase"] == "Failed"
    assert "mirrors.example.org" in one["status"]["conditions"][0]["message"]
    as_yaml = yaml.safe_load(cli("get", "dataset", "good", "-o", "yaml").out)
    assert as_yaml == one
    listing = cli("get", "dataset", "-o", "json").json()
    assert listing["kind"] == "List" and listing["apiVersion"] == "v1" and listing["items"] == [one]

    again = cli("apply", "-f", path)
    assert again.out.splitlines() == [
        "dataset.data.fluid.io/good unchanged",
        "alluxioruntime.data.fluid.io/good unchanged",
    ]
    changed = write(tmp_path, GOOD_DATASET.replace("name: hbase", "name: hbase2"), "changed.yaml")
    assert cli("apply", "-f", changed).out.strip() == "dataset.data.fluid.io/good configured"
    after = cli("get", "dataset", "good", "-o", "json").json()
    assert after["metadata"]["uid"] == one["metadata"]["uid"]
    assert after["metadata"]["creationTimestamp"] == one["metadata"]["creationTimestamp"]
    assert after["spec"]["mounts"][0]["name"] == "hbase2"

    # what get -o yaml prints applies back unchanged
    exported = write(tmp_path, cli("get", "dataset", "-o", "yaml").out, "exported.yaml")
    assert cli("apply", "-f", exported).out.strip() == "dataset.data.fluid.io/good unchanged"

    deleted = cli("delete", "dataset", "good")
    assert deleted.code == 0 and deleted.out.strip() == 'dataset.data.fluid.io "good" deleted'
    assert error_line(cli("get", "dataset", "good")) == 'error: datasets.data.fluid.io "good" not found'
    assert error_line(cli("delete", "dataset", "good")) == 'error: datasets.data.fluid.io "good" not found'
    empty = cli("get", "dataset")
    assert empty.code == 0 and empty.out == "" and "No resources found" in empty.err


def test_apply_from_stdin(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(GOOD_DATASET))
    result = cli("apply", "-f", "-")
    assert result.code == 0 and result.out.strip() == "dataset.data.fluid.io/good created"
    monkeypatch.setattr(sys, "stdin", io.StringIO(runtime("bad", quota="lots")))
    assert error_line(cli("apply", "-f", "-")).startswith("error: STDIN: AlluxioRuntime bad: ")


def test_engine_settings_and_missing_dataset_are_reported_once_each(cli, tmp_path: Path) -> None:
    text = runtime() + "  properties:\n    alluxio.user.block.size.bytes.default: 64MB\n  jvmOptions: [-Xmx4G]\n" \
        + "---\n" + dataload("target:\n  - path: /spark\n").replace("name: good", "name: later")
    result = cli("apply", "-f", write(tmp_path, text))
    assert result.code == 0, result.err
    assert result.err.splitlines() == [
        "info: AlluxioRuntime good: not applicable on one machine, recorded only: properties, jvmOptions",
        'info: DataLoad bad: dataset "later" does not exist yet; recorded, it runs once the dataset is applied',
    ]
    table = cli("get", "dataload").out.splitlines()
    assert table[0].split() == ["NAME", "DATASET", "PHASE", "AGE", "DURATION"]
    assert table[1].split()[:3] == ["bad", "later", "Pending"]  # nothing has run it yet


def test_get_shows_the_status_the_engine_reports(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from millpond.datasets import handler as fluid_handler

    status = {"phase": "Bound", "ufsTotal": "52.18MiB", "cacheStates": {
        "cacheCapacity": "2.00GiB", "cached": "0.00B", "cachedPercentage": "0.0%"}}
    monkeypatch.setattr(fluid_handler, "resource_status", lambda resource, store: status)
    assert cli("apply", "-f", write(tmp_path, GOOD_DATASET)).code == 0
    assert cli("get", "dataset").out.splitlines()[1].split() == [
        "good", "52.18MiB", "0.00B", "2.00GiB", "0.0%", "Bound", "0s",
    ]
    assert cli("get", "dataset", "good", "-o", "json").json()["status"] == status


def test_status_is_kept_across_reapply(home: Path) -> None:
    from millpond.settings import load_settings
    from millpond.store.resources import ResourceStore

    store = ResourceStore(load_settings())
    body = yaml.safe_load(GOOD_DATASET)
    [(created, action)] = store.apply([body])
    assert action == "created" and created.spec == body["spec"] and created.namespace == "default"
    store.set_status("Dataset", "good", {"phase": "Bound"})
    [(again, action)] = store.apply([body])
    assert action == "unchanged" and again.status == {"phase": "Bound"} and again.uid == created.uid
    assert [r.name for r in store.list("Dataset")] == ["good"] and store.list("Dataset", "other") == []
    assert store.delete("Dataset", "good") and not store.delete("Dataset", "good")
    store.set_status("Dataset", "good", {"phase": "Bound"})  # deleted meanwhile: nothing comes back
    assert store.get("Dataset", "good") is None


def test_secret_values_stay_out_of_output_and_database(cli, home: Path, tmp_path: Path) -> None:
    make_secrets(home, {"mysecret": {"aws.secretKey": "V3RY-S3CR3T"}})
    result = cli("apply", "-f", write(tmp_path, with_secret("mysecret", "aws.secretKey")))
    assert result.code == 0, result.err
    shown = cli("get", "dataset", "bad", "-o", "yaml")
    assert "V3RY-S3CR3T" not in result.out + result.err + shown.out + shown.err
    for file in home.glob("millpond.db*"):
        assert b"V3RY-S3CR3T" not in file.read_bytes()


# --- the pieces ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kind"), [
    ("dataset", "Dataset"), ("datasets", "Dataset"), ("Dataset", "Dataset"), ("datasets.data.fluid.io", "Dataset"),
    ("alluxioruntime", "AlluxioRuntime"), ("alluxioruntimes", "AlluxioRuntime"), ("alluxio", "AlluxioRuntime"),
    ("juicefsruntimes", "JuiceFSRuntime"), ("dataload", "DataLoad"), ("dataloads", "DataLoad"),
    ("datamigrates", "DataMigrate"), ("dataprocesses", "DataProcess"), ("databackup", "DataBackup"),
    ("vineyardruntime", "VineyardRuntime"), ("dataset.v1alpha1.data.fluid.io", "Dataset"),
    ("pytorchjobs", "PyTorchJob"), ("MPIJob", "MPIJob"), ("tfjob.kubeflow.org", "TFJob"),
    ("trainjobs.v1alpha1.trainer.kubeflow.org", "TrainJob"), ("clustertrainingruntimes", "ClusterTrainingRuntime"),
    ("cq", "ClusterQueue"), ("queues", "LocalQueue"), ("rf", "ResourceFlavor"), ("wpc", "WorkloadPriorityClass"),
    ("cohorts.v1beta1.kueue.x-k8s.io", "Cohort"),
])
def test_every_kind_resolves_by_kubectls_names(text: str, kind: str) -> None:
    assert REGISTRY.resolve(text).kind == kind


def test_an_unknown_kind_is_one_line_naming_every_known_kind() -> None:
    # (pods became a kind with issue 30's v1 Pod: an unknown kind is now spelt widgets)
    with pytest.raises(UserError, match="unknown resource type 'widgets': use one of dataset \\(datasets\\)") as info:
        REGISTRY.resolve("widgets")
    assert "\n" not in str(info.value) and "cohort (cohorts)" in str(info.value)
    assert all(f"{kind.kind.lower()} ({kind.plural})" in str(info.value) for kind in REGISTRY)  # every kind
    with pytest.raises(UserError, match="CacheRuntimeClass is a cluster-wide template"):
        REGISTRY.resolve("cacheruntimeclasses")


def test_parse_mount_point() -> None:
    mount = parse_mount_point("s3://spark/fluid-data", "here")
    assert (mount.scheme, mount.netloc, mount.bucket, mount.path, mount.uri) == (
        "s3", "spark", "spark", "/fluid-data", "s3://spark/fluid-data")
    assert parse_mount_point("pvc://nfs-imagenet/sub", "here").netloc == "nfs-imagenet"
    assert parse_mount_point("local:///mnt/data", "here").path == "/mnt/data"
    assert parse_mount_point("juicefs:///", "here").bucket is None
    assert parse_mount_point("memory://scratch/x", "here").scheme == "memory"  # a protocol fsspec knows
    with pytest.raises(UserError, match='^here: "pvc://Bad_Claim": invalid PersistentVolumeClaim name'):
        parse_mount_point("pvc://Bad_Claim", "here")
    with pytest.raises(UserError, match="^here: .*is not a URI"):
        parse_mount_point("/just/a/path", "here")


def test_fsspec_protocol_without_its_package_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from fsspec.registry import known_implementations

    monkeypatch.setitem(known_implementations, "zzfs", {"class": "zzfs_not_installed.ZZFileSystem",
                                                        "err": "Install zzfs_not_installed to access ZZ"})
    with pytest.raises(
        UserError, match=r'scheme "zzfs" needs a package that is not installed: .*pip install zzfs_not_installed'
    ):
        parse_mount_point("zzfs://bucket/x", "here")


@pytest.mark.parametrize(("seconds", "age"), [
    (5, "5s"), (119, "119s"), (182, "3m2s"), (600, "10m"), (3 * 3600 + 60, "3h1m"), (30 * 3600, "30h"),
    (2 * 86400, "2d"), (3 * 86400 + 3600 * 5, "3d5h"), (400 * 86400, "400d"), (3 * 365 * 86400, "3y"),
])
def test_human_age_like_kubectl(seconds: int, age: str) -> None:
    assert human_age(dt.timedelta(seconds=seconds).total_seconds()) == age


@pytest.mark.skipif(not CRDS.is_dir(), reason="Fluid's CRDs are not beside the repository")
def test_committed_schemas_are_what_the_script_derives(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(REPO / "scripts/derive_fluid_schemas.py"), "--crds", str(CRDS),
                    "--out", str(tmp_path)], check=True, capture_output=True)
    derived = {p.name: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    committed = {p.name: json.loads(p.read_text()) for p in SCHEMAS.glob("*.json")}
    assert derived == committed
