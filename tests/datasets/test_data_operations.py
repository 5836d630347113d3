"""Data operations and dataflows: DataMigrate (S3 in and out, parallel, checked), DataProcess with
the dataset mounted, DataLoad, DataBackup, runAfter chains that stop at the first failure."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.store.secrets import ConfigStore
from tests.datasets_support import SECRET, manifest, payload

pytestmark = [
    pytest.mark.s3,
    pytest.mark.usefixtures("database"),  # on SQLite and on PostgreSQL
    pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}"),
]


def _encrypt(secret: str = SECRET) -> str:
    return (
        "      encryptOptions:\n"
        f"        - {{name: aws.accessKeyId, valueFrom: {{secretKeyRef: {{name: {secret}, key: aws.accessKeyId}}}}}}\n"
        f"        - {{name: aws.secretKey, valueFrom: {{secretKeyRef: {{name: {secret}, key: aws.secretKey}}}}}}\n"
    )


@pytest.fixture
def workspace(cli, home: Path, tmp_path: Path, s3_server):
    """A ReadWrite dataset over a local folder, a bucket with raw files, and the S3 keys as a secret."""
    ConfigStore(home).create(
        "secret", SECRET, {"aws.accessKeyId": s3_server.access_key, "aws.secretKey": s3_server.secret_key}
    )
    bucket = s3_server.create_bucket()
    fs = s3_server.filesystem()
    raw = {f"raw/part-{i:03d}.bin": payload(f"part{i}", 40_000 + i) for i in range(40)}
    for key, data in raw.items():
        fs.pipe_file(f"{bucket}/{key}", data)
    store = tmp_path / "store"
    store.mkdir()
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "512Mi"}]
    (tmp_path / "ds.yaml").write_text(
        manifest("work", f"local://{store}", secret=False, levels=levels, access="ReadWriteMany")
    )
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    yield {"bucket": bucket, "raw": raw, "store": store, "host": s3_server.endpoint_url.split("://", 1)[1]}
    folder = home / "mnt" / "default" / "work"
    if is_mounted(str(folder)):
        subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def _apply(cli, tmp_path: Path, text: str, name: str = "ops.yaml"):
    (tmp_path / name).write_text(text)
    return cli("apply", "--wait", "-f", tmp_path / name)


def _status(cli, kind: str, name: str) -> dict:
    return cli("get", kind, name, "-o", "json").json()["status"]


def test_migrate_in_process_load_and_migrate_out_as_one_flow(cli, home, tmp_path, workspace, s3_server) -> None:
    host, bucket = workspace["host"], workspace["bucket"]
    flow = f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataMigrate
metadata: {{name: flow-step1}}
spec:
  from:
    externalStorage:
      uri: minio://{host}/{bucket}/raw/
{_encrypt()}  to:
    dataset: {{name: work, namespace: default, path: /raw/}}
  parallelism: 4
---
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {{name: flow-step2}}
spec:
  dataset: {{name: work, namespace: default, mountPath: /data/work, subPath: raw}}
  runAfter: {{kind: DataMigrate, name: flow-step1}}
  processor:
    script:
      image: debian
      imageTag: buster
      command: [bash]
      source: |
        set -ex
        cd /data/work
        cat part-000.bin part-001.bin > joined.bin
        mkdir -p out && ls part-* | wc -l > out/count.txt
---
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {{name: flow-step3}}
spec:
  dataset: {{name: work, namespace: default}}
  target: [{{path: /raw}}]
  runAfter: {{kind: DataProcess, name: flow-step2}}
---
apiVersion: data.fluid.io/v1alpha1
kind: DataMigrate
metadata: {{name: flow-step4}}
spec:
  from:
    dataset: {{name: work, namespace: default, path: /raw/joined.bin}}
  to:
    externalStorage:
      uri: s3://{bucket}/archive/joined.bin
      encryptOptions:
        - {{name: alluxio.underfs.s3.endpoint, valueFrom: {{secretKeyRef: {{name: endpoint, key: url}}}}}}
        - {{name: aws.accessKeyId, valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.accessKeyId}}}}}}
        - {{name: aws.secretKey, valueFrom: {{secretKeyRef: {{name: {SECRET}, key: aws.secretKey}}}}}}
  runAfter: {{kind: DataLoad, name: flow-step3}}
"""
    ConfigStore(home).create("secret", "endpoint", {"url": s3_server.endpoint_url})
    result = _apply(cli, tmp_path, flow)
    assert result.code == 0, result.err
    store = workspace["store"]
    parts = sorted(p.name for p in (store / "raw").iterdir() if p.name.startswith("part-"))
    assert parts == sorted(Path(k).name for k in workspace["raw"])
    joined = workspace["raw"]["raw/part-000.bin"] + workspace["raw"]["raw/part-001.bin"]
    assert (store / "raw" / "joined.bin").read_bytes() == joined
    assert (store / "raw" / "out" / "count.txt").read_text().strip() == "40"  # every part, seen through the mount
    assert s3_server.filesystem().cat_file(f"{bucket}/archive/joined.bin") == joined
    steps = (
        ("datamigrate", "flow-step1"), ("dataprocess", "flow-step2"), ("dataload", "flow-step3"),
        ("datamigrate", "flow-step4"),
    )
    for kind, name in steps:
        status = _status(cli, kind, name)
        assert status["phase"] == "Complete" and status["duration"].endswith("s"), (name, status)
    assert _status(cli, "datamigrate", "flow-step1")["infos"]["parallelism"] == "4"
    table = cli("get", "datamigrates").out.splitlines()
    assert table[0].split() == ["NAME", "DATASET", "PHASE", "AGE", "DURATION"]
    assert all("Complete" in line for line in table[1:])
    assert json.dumps(_status(cli, "datamigrate", "flow-step4")).count(s3_server.secret_key) == 0


def test_a_failing_step_stops_the_flow_and_leaves_the_data_alone(cli, tmp_path, workspace) -> None:
    (workspace["store"] / "keep.txt").write_text("precious")
    flow = """\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata: {name: bad-step1}
spec:
  dataset: {name: work, namespace: default, mountPath: /data}
  processor:
    script: {image: debian, command: [bash], source: "set -e\\necho about to fail\\nfalse\\n"}
---
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {name: bad-step2}
spec:
  dataset: {name: work, namespace: default}
  runAfter: {kind: DataProcess, name: bad-step1}
"""
    result = _apply(cli, tmp_path, flow)
    assert result.code == 1
    first = _status(cli, "dataprocess", "bad-step1")
    cause = "the script exited with status 1: about to fail"
    assert first["phase"] == "Failed" and first["conditions"][0]["message"] == f"DataProcess bad-step1: {cause}"
    second = _status(cli, "dataload", "bad-step2")
    assert second["phase"] == "Failed"
    assert second["conditions"][0]["message"] == f"DataLoad bad-step2: runAfter DataProcess bad-step1 failed: {cause}"
    # One error line, the cause's; the step not run says why on a plain line.
    assert [line for line in result.err.splitlines() if line.startswith("error:")] == [
        f"error: DataProcess bad-step1: {cause}"
    ]
    assert f"DataLoad bad-step2: runAfter DataProcess bad-step1 failed: {cause}" in result.err.splitlines()
    assert (workspace["store"] / "keep.txt").read_text() == "precious"


def test_migrate_without_credentials_and_a_missing_dataset_fail_in_one_line(cli, tmp_path, workspace) -> None:
    bucket, host = workspace["bucket"], workspace["host"]
    result = _apply(cli, tmp_path, f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataMigrate
metadata: {{name: nocreds}}
spec:
  from: {{dataset: {{name: work, namespace: default, path: /}}}}
  to: {{externalStorage: {{uri: "minio://{host}/{bucket}/out/"}}}}
---
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {{name: nodataset}}
spec:
  dataset: {{name: absent, namespace: default}}
""")
    assert result.code == 1
    message = _status(cli, "datamigrate", "nocreds")["conditions"][0]["message"]
    assert "has no credentials" in message and "encryptOptions" in message
    assert "dataset 'absent' not found" in _status(cli, "dataload", "nodataset")["conditions"][0]["message"]


def test_backup_writes_metadata_and_the_cache_index(cli, home, tmp_path, workspace) -> None:
    (workspace["store"] / "a.txt").write_text("a")
    target = tmp_path / "backups"
    result = _apply(cli, tmp_path, f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataBackup
metadata: {{name: nightly}}
spec:
  dataset: work
  backupPath: local://{target}
""")
    assert result.code == 0, result.err
    metadata = json.loads((target / "metadata-backup-default-work.json").read_text())
    assert metadata["manifest"]["metadata"]["name"] == "work" and metadata["status"]["fileNum"] == "1"
    assert (target / "index-backup-default-work.db").stat().st_size > 0


def test_a_finished_operation_is_deleted_after_its_ttl(cli, tmp_path, workspace) -> None:
    import time

    (workspace["store"] / "a.txt").write_text("a")
    result = _apply(cli, tmp_path, """\
apiVersion: data.fluid.io/v1alpha1
kind: DataLoad
metadata: {name: shortlived}
spec:
  dataset: {name: work, namespace: default}
  ttlSecondsAfterFinished: 1
""")
    assert result.code == 0, result.err
    deadline = time.monotonic() + 20
    while cli("get", "dataload", "shortlived").code == 0 and time.monotonic() < deadline:
        time.sleep(0.3)
    assert cli("get", "dataload", "shortlived").code == 2


def test_migrate_from_a_dataset_sees_files_another_machine_wrote_to_its_ufs(cli, tmp_path, workspace) -> None:
    """A training instance on a Ray node writes through its own node's mount, straight to the UFS; this
    machine's listing of the dataset was made before. A DataMigrate from the dataset must find the file."""
    assert cli("dataset", "sync", "work").code == 0  # this machine's listing, without the file
    (workspace["store"] / "ckpt").mkdir()
    (workspace["store"] / "ckpt" / "model.pt").write_bytes(payload("late", 12_345))  # another machine's write
    migrate = f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataMigrate
metadata: {{name: archive-late}}
spec:
  from:
    dataset: {{name: work, namespace: default, path: /ckpt/model.pt}}
  to:
    externalStorage:
      uri: minio://{workspace["host"]}/{workspace["bucket"]}/archive/
{_encrypt()}"""
    result = _apply(cli, tmp_path, migrate)
    assert result.code == 0, result.err
    assert _status(cli, "datamigrate", "archive-late")["phase"] == "Complete"
