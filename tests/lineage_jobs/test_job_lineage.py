"""Lineage beyond pipeline tasks, with real jobs through a real home and server: a ``batch/v1`` Job reading a Fluid
dataset's PVC and writing a checkpoint into another, an InferenceService served from that checkpoint's ``pvc://``
URI, the lineage API walking from the service back to the dataset; an ``arena submit`` PyTorchJob that fails, one
whose supervisor is killed (``kill -9``) and whose end is recorded again (no row twice); a DataLoad; and
``MILLPOND_LINEAGE=0`` recording nothing; a database refusing the lineage, the job's end standing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import func, select, text

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.errors import NotFoundError
from millpond.runners.sandbox import sandbox_problem
from millpond.settings import load_settings
from millpond.store.db import session_factory
from millpond.store.lineage import artifact_id, derived_id
from millpond.store.lineage_store import LineageStore
from millpond.store.lineage_tables import LineageArtifact, LineageEvent, LineageExecution
from millpond.store.resources import ResourceStore
from millpond.training import lineage as training_lineage
from millpond.training.paths import supervisor_log
from tests.datasets_support import manifest
from tests.lineage.support import filtered, links, ok
from tests.queues_support import until
from tests.server_support import Served, serving
from tests.training_support import arena, gone, job_json, record, wait_status

PY = sys.executable
needs_mounts = pytest.mark.skipif(
    fuse_available() is not None or sandbox_problem() is not None,
    reason=f"needs FUSE and bubblewrap: {fuse_available() or sandbox_problem()}",
)


@pytest.fixture
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture
def datasets(cli: Callable[..., Any], home: Path, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """``mnist`` (read-only, a local folder holding ``train/hello.txt``) and ``ckpt`` (read-write, an empty folder)."""
    source, checkpoints = tmp_path / "mnist-source", tmp_path / "ckpt-store"
    (source / "train").mkdir(parents=True)
    (source / "train" / "hello.txt").write_text("digits")
    checkpoints.mkdir()
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels) + "---\n"
                                      + manifest("ckpt", f"local://{checkpoints}", secret=False, levels=levels,
                                                 access="ReadWriteMany"))
    applied = cli("apply", "-f", tmp_path / "ds.yaml")
    assert applied.code == 0, applied.err
    yield {"mnist": source, "ckpt": checkpoints}
    for name in ("mnist", "ckpt"):
        folder = home / "mnt" / "default" / name
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def count(model: Any, **where: Any) -> int:
    """Rows of a lineage table (with these column values) in the home's database."""
    query = select(func.count()).select_from(model)
    for column, value in where.items():
        query = query.where(getattr(model, column) == value)
    with session_factory(load_settings().database_url)() as session:
        return int(session.scalar(query) or 0)


def recorded(execution_id: str) -> LineageExecution:
    """The execution, once recorded: its job's end is written first, its lineage a moment later."""
    lineage = LineageStore(load_settings().database_url)

    def found() -> LineageExecution | None:
        try:
            return lineage.find_execution(execution_id)
        except NotFoundError:
            return None

    return until(found, 30, f"execution {execution_id} recorded")


def apply(cli: Callable[..., Any], tmp_path: Path, name: str, *docs: dict[str, Any]) -> None:
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump_all(list(docs)))
    result = cli("apply", "-f", tmp_path / f"{name}.yaml")
    assert result.code == 0, result.err


def batch_job(name: str, script: str) -> dict[str, Any]:
    """A Job mounting ``mnist`` at /data and ``ckpt`` at /ckpt, running ``script`` with this Python."""
    container = {"name": "main", "image": "python:3.12", "command": [PY, "-c", script],
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "out", "mountPath": "/ckpt"}]}
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "mnist"}},
               {"name": "out", "persistentVolumeClaim": {"claimName": "ckpt"}}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [container], "volumes": volumes,
                                                              "restartPolicy": "Never"}}}}


def job_finished(cli: Callable[..., Any], name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        found = json.loads(cli("get", "job", name, "-o", "json").out)
        kinds = {c["type"] for c in found["status"].get("conditions") or [] if c["status"] == "True"}
        return found if kinds & {"Complete", "Failed"} else None

    return until(done, 60, f"job {name} finished")


@needs_mounts
def test_a_served_checkpoint_leads_back_through_the_job_to_its_dataset(
        cli: Callable[..., Any], server: Served, datasets: dict[str, Path], tmp_path: Path) -> None:
    train = ("import os; text = open('/data/train/hello.txt').read(); os.makedirs('/ckpt/models', exist_ok=True); "
             "open('/ckpt/models/model.pt', 'w').write(text.upper())")
    apply(cli, tmp_path, "train", batch_job("train", train))
    job = job_finished(cli, "train")
    assert job["status"].get("succeeded") == 1, job["status"]
    assert (datasets["ckpt"] / "models" / "model.pt").read_text() == "DIGITS"
    recorded(derived_id("millpond.TrainingJob", "Job", job["metadata"]["uid"]))  # before the service is applied
    service = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
               "metadata": {"name": "digits", "namespace": "default"},
               "spec": {"predictor": {"sklearn": {"storageUri": "pvc://ckpt/models/model.pt"}}}}
    apply(cli, tmp_path, "digits", service)
    try:
        # the model: its URI names no artifact; the service reads the volume the job wrote
        by_uri = ok(server, "/artifacts?filter=" + filtered(
            {"key": "uri", "operation": "EQUALS", "string_value": "pvc://ckpt/models/model.pt"}))
        assert by_uri.get("artifacts", []) == []
        volume = ok(server, f"/artifacts/{artifact_id('pvc://ckpt', 'default')}")
        assert (volume["uri"], volume["type"], volume["namespace"]) == ("pvc://ckpt", "Dataset", "default")
        served, written = sorted(links(server, artifact_ids=[volume["artifact_id"]]), key=lambda link: link["type"])
        assert (served["type"], served["key"], written["type"], written["key"]) == (
            "COMPONENT_INPUT", "model", "OUTPUT", "ckpt")
        lineage = LineageStore(load_settings().database_url)
        deployment = lineage.find_execution(served["task_id"])
        assert (deployment.type, deployment.name) == ("millpond.Deployment", "default/digits")
        assert deployment.custom_properties["model_path"] == "pvc://ckpt/models/model.pt"
        training = lineage.find_execution(written["task_id"])
        assert (training.type, training.state, training.name) == ("millpond.TrainingJob", "COMPLETE", "default/train")
        assert training.properties == {"kind": "Job", "name": "train", "namespace": "default"}
        assert training.custom_properties["uid"] == job["metadata"]["uid"]
        assert training.custom_properties["state"] == "Complete"
        read = [link for link in links(server, task_ids=[training.id]) if link["type"] != "OUTPUT"]
        assert [(link["key"], link["type"]) for link in read] == [("mnist", "COMPONENT_INPUT")]
        dataset = ok(server, f"/artifacts/{read[0]['artifact_id']}")
        assert (dataset["uri"], dataset["type"]) == ("pvc://mnist", "Dataset")
    finally:
        assert cli("delete", "inferenceservice", "digits").code == 0


@needs_mounts
def test_a_failed_job_and_a_killed_supervisor_are_recorded_failed_once(
        capsys: Any, datasets: dict[str, Path]) -> None:
    assert arena(capsys, "submit", "pytorch", "--name", "broken", "--data", "mnist:/data", "--data", "ckpt:/ckpt",
                 "cat /data/train/hello.txt; exit 3").code == 0
    assert wait_status(capsys, "broken")["status"] == "FAILED"
    broken = recorded(derived_id("millpond.TrainingJob", "PyTorchJob", record("broken").uid))
    assert (broken.state, broken.custom_properties["state"], broken.properties["kind"]) == (
        "FAILED", "FAILED", "PyTorchJob")
    events = count(LineageEvent, execution_id=broken.id)
    assert events == 1 and count(LineageEvent, execution_id=broken.id, type="INPUT", path="mnist") == 1  # no output

    assert arena(capsys, "submit", "pytorch", "--name", "orphan", "--data", "mnist:/data", "sleep 300; true").code == 0
    wait_status(capsys, "orphan", ("RUNNING",), timeout=60)
    job = record("orphan")
    os.kill(job.supervisor_pid or 0, signal.SIGKILL)
    assert gone(job.supervisor_pid, job.supervisor_start)
    assert job_json(capsys, "orphan")["status"] == "FAILED"  # the reader that saw it dead ended it, and recorded it
    orphan = recorded(derived_id("millpond.TrainingJob", "PyTorchJob", job.uid))
    assert (orphan.state, orphan.custom_properties["reason"]) == ("FAILED", "SupervisorDied")
    before = (count(LineageExecution), count(LineageArtifact), count(LineageEvent))
    assert training_lineage.job_ended(record("orphan"))  # the same end recorded again (a supervisor restarted)
    assert (count(LineageExecution), count(LineageArtifact), count(LineageEvent)) == before == (2, 1, 2)


def test_data_operations_read_and_write_datasets_and_remote_storage(
        cli: Callable[..., Any], home: Path, tmp_path: Path) -> None:
    source = tmp_path / "remote"
    source.mkdir()
    (source / "a.txt").write_text("a")
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("warm", f"local://{source}", secret=False, levels=levels))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    load = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataLoad", "metadata": {"name": "preload"},
            "spec": {"dataset": {"name": "warm", "namespace": "default"}}}
    (tmp_path / "load.yaml").write_text(yaml.safe_dump(load))
    loaded = cli("apply", "--wait", "-f", tmp_path / "load.yaml")
    assert loaded.code == 0, loaded.err
    uid = cli("get", "dataload", "preload", "-o", "json").json()["metadata"]["uid"]
    lineage = LineageStore(load_settings().database_url)
    execution = recorded(derived_id("millpond.DataOperation", "DataLoad", uid))
    assert (execution.type, execution.state, execution.properties["kind"]) == (
        "millpond.DataOperation", "COMPLETE", "DataLoad")
    with session_factory(load_settings().database_url)() as session:
        events = {event.type: event for event in session.scalars(
            select(LineageEvent).where(LineageEvent.execution_id == execution.id))}
    assert sorted(events) == ["INPUT", "OUTPUT"]
    remote, dataset = (lineage.find_artifact(events[kind].artifact_id) for kind in ("INPUT", "OUTPUT"))
    assert (events["INPUT"].path, remote.uri.removeprefix("local://").rstrip("/")) == ("data", str(source))
    assert (dataset.id, dataset.type, events["OUTPUT"].path) == (
        artifact_id("pvc://warm", "default"), "system.Dataset", "warm")

    # a DataMigrate reads the dataset and writes its target; a DataBackup reads it and writes its backupPath
    out, backups = tmp_path / "out", tmp_path / "backups"
    out.mkdir()
    operations = [{"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataMigrate", "metadata": {"name": "export"},
                   "spec": {"from": {"dataset": {"name": "warm", "namespace": "default", "path": "/"}},
                            "to": {"externalStorage": {"uri": f"local://{out}/"}}}},
                  {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataBackup", "metadata": {"name": "nightly"},
                   "spec": {"dataset": "warm", "backupPath": f"local://{backups}"}}]
    (tmp_path / "ops.yaml").write_text(yaml.safe_dump_all(operations))
    done = cli("apply", "--wait", "-f", tmp_path / "ops.yaml")
    assert done.code == 0, done.err
    assert (out / "a.txt").read_text() == "a"
    for kind, name, target in (("DataMigrate", "export", f"local://{out}/"), ("DataBackup", "nightly",
                                                                              f"local://{backups}")):
        uid = cli("get", kind.lower(), name, "-o", "json").json()["metadata"]["uid"]
        operation = recorded(derived_id("millpond.DataOperation", kind, uid))
        with session_factory(load_settings().database_url)() as session:
            used = {event.type: event.artifact_id for event in session.scalars(
                select(LineageEvent).where(LineageEvent.execution_id == operation.id))}
        assert (operation.state, used["INPUT"]) == ("COMPLETE", artifact_id("pvc://warm", "default"))
        assert lineage.find_artifact(used["OUTPUT"]).uri == target

def test_lineage_off_records_no_job_and_no_operation(cli: Callable[..., Any], capsys: Any, home: Path,
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILLPOND_LINEAGE", "0")
    assert arena(capsys, "submit", "pytorch", "--name", "quiet", "true").code == 0
    assert wait_status(capsys, "quiet")["status"] == "SUCCEEDED"
    apply(cli, tmp_path, "quiet-job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "quiet"},
                                       "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                                           {"name": "main", "image": "python:3.12", "command": ["true"]}]}}}})
    assert "Complete" in {c["type"] for c in job_finished(cli, "quiet")["status"]["conditions"]}
    (tmp_path / "src").mkdir()
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("cold", f"local://{tmp_path / 'src'}", secret=False, levels=levels)
                                      + "---\n"
                                      "apiVersion: data.fluid.io/v1alpha1\nkind: DataLoad\nmetadata: {name: cold}\n"
                                      "spec:\n  dataset: {name: cold, namespace: default}\n")
    assert cli("apply", "--wait", "-f", tmp_path / "ds.yaml").code == 0
    quiet = record("quiet")
    assert gone(quiet.supervisor_pid, quiet.supervisor_start)  # each process ended past where it would record
    for kind, name in (("Job", "quiet"), ("DataLoad", "cold")):
        found = ResourceStore().get(kind, name, "default")
        process = found.process if found is not None else None
        assert process is None or gone(process.pid, process.start)
    assert (count(LineageExecution), count(LineageArtifact), count(LineageEvent)) == (0, 0, 0)


def test_a_database_refusing_the_lineage_leaves_the_job_succeeded_and_says_so_once(capsys: Any, home: Path) -> None:
    """The database refuses every execution (a trigger: a real refusal, not a stand-in): the job's end stands."""
    count(LineageExecution)  # the home's database, migrated
    with session_factory(load_settings().database_url)() as session:
        session.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON lineage_executions "
                             "BEGIN SELECT RAISE(ABORT, 'lineage refused'); END"))
        session.commit()
    assert arena(capsys, "submit", "pytorch", "--name", "unrecorded", "echo trained").code == 0
    assert wait_status(capsys, "unrecorded")["status"] == "SUCCEEDED"
    job = record("unrecorded")
    assert gone(job.supervisor_pid, job.supervisor_start)
    log = supervisor_log(job.uid).read_text()
    assert log.count("lineage of job default/unrecorded not recorded: IntegrityError") == 1, log
    assert "Traceback" not in log and "lineage refused" in log
    assert count(LineageExecution) == 0 and record("unrecorded").status == "SUCCEEDED"
