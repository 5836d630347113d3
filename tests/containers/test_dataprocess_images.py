"""Fluid DataProcess scripts and job containers in their images, with the dataset's mount at ``mountPath``.

A dataset over a local folder is mounted (FUSE) as Fluid mounts it; the processor's tool exists only in
its image (built here on the Debian Python base). A ReadOnly dataset is read from the container and
cannot be written; a ReadWrite one is written from it and the file is in the dataset's storage afterwards.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from millpond.datasets.mounts import fuse_available, is_mounted
from millpond.runners.containers import runtimes, sweep
from millpond.runners.containers.command import OWNER_LABEL
from tests.containers_support import build_image
from tests.datasets_support import manifest
from tests.queues_support import until

pytestmark = [
    pytest.mark.containers,
    pytest.mark.skipif(fuse_available() is not None, reason=f"FUSE unavailable: {fuse_available()}"),
]

TOOL = """\
import pathlib, sys
source, target = pathlib.Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None
words = len(source.read_text().split())
print(f"counted {words} words in {source}", flush=True)
if target:
    pathlib.Path(target).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(target).write_text(f"{words}\\n")
"""


@pytest.fixture(scope="module")
def tool_image(python_image: str) -> str:
    """An image whose /opt/tools/count.py exists nowhere on this host."""
    return build_image("localhost/millpond-test/fluid-tools:1",
                       f"FROM {python_image}\nCOPY count.py /opt/tools/count.py\n", {"count.py": TOOL})


def dataset(cli: Any, tmp_path: Path, name: str, access: str) -> Path:
    source = tmp_path / f"ufs-{name}"
    source.mkdir()
    (source / "text.txt").write_text("one two three four five\n")
    levels = [{"mediumtype": "SSD", "path": str(tmp_path / f"cache-{name}"), "quota": "64Mi"}]
    (tmp_path / f"{name}.yaml").write_text(manifest(name, f"local://{source}", secret=False, levels=levels,
                                                    access=access))
    applied = cli("apply", "-f", tmp_path / f"{name}.yaml")
    assert applied.code == 0, applied.err
    return source


def process(cli: Any, tmp_path: Path, name: str, dataset_name: str, processor: str, runtime: str = "container") -> Any:
    text = f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata:
  name: {name}
  annotations: {{millpond.io/runtime: {runtime}}}
spec:
  dataset: {{name: {dataset_name}, namespace: default, mountPath: /data}}
  processor:
{processor}"""
    (tmp_path / f"{name}.yaml").write_text(text)
    return cli("apply", "--wait", "-f", tmp_path / f"{name}.yaml")


def log_of(home: Path, name: str) -> str:
    return (home / "operations" / f"default_DataProcess_{name}.out").read_text()


def no_container_of(name: str) -> bool:
    runtime = runtimes.find()
    assert not isinstance(runtime, str)
    return sweep.labelled(runtime, f"{OWNER_LABEL}=DataProcess/default/{name}") == []


@pytest.fixture
def unmount(home: Path):
    yield
    for folder in (home / "mnt" / "default").glob("*") if (home / "mnt" / "default").is_dir() else []:
        if is_mounted(str(folder)):
            subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)


def test_a_script_in_its_image_reads_the_dataset_through_its_mount_and_cannot_write_a_read_only_one(
        cli, home: Path, tmp_path: Path, tool_image: str, unmount) -> None:
    dataset(cli, tmp_path, "texts", "ReadOnlyMany")
    script = f"""\
    script:
      image: {tool_image.rsplit(':', 1)[0]}
      imageTag: "1"
      imagePullPolicy: Never
      command: [bash]
      source: |
        set -e
        python3 /opt/tools/count.py /data/text.txt
        if touch /data/new.txt 2>/dev/null; then echo WROTE; else echo read-only as asked; fi
"""
    result = process(cli, tmp_path, "count", "texts", script)
    assert result.code == 0, result.err
    log = log_of(home, "count")
    assert "counted 5 words in /data/text.txt" in log and "read-only as asked" in log and "WROTE" not in log, log
    assert "not used" not in log
    assert no_container_of("count")


def test_a_job_container_writes_a_read_write_dataset_and_the_file_is_there_afterwards(
        cli, home: Path, tmp_path: Path, tool_image: str, unmount) -> None:
    source = dataset(cli, tmp_path, "outputs", "ReadWriteMany")
    job = f"""\
    job:
      podSpec:
        containers:
          - name: counter
            image: {tool_image}
            imagePullPolicy: IfNotPresent
            command: [python3, /opt/tools/count.py]
            args: [/data/text.txt, /data/out/count.txt]
            resources: {{limits: {{memory: 128Mi}}}}
"""
    result = process(cli, tmp_path, "write", "outputs", job)
    assert result.code == 0, result.err
    assert (source / "out" / "count.txt").read_text() == "5\n"
    assert no_container_of("write")


@pytest.mark.parametrize("runtime", ["container", "host"])
def test_a_jobs_host_path_volume_is_bound_at_its_mount_path_in_the_image_and_on_the_host(
        cli, home: Path, tmp_path: Path, tool_image: str, runtime: str, unmount) -> None:
    dataset(cli, tmp_path, "vols", "ReadOnlyMany")
    out = tmp_path / "out"
    out.mkdir()
    job = f"""\
    job:
      podSpec:
        volumes:
          - {{name: results, hostPath: {{path: {out}}}}}
          - {{name: scratch, emptyDir: {{}}}}
        containers:
          - name: copier
            image: {tool_image}
            imagePullPolicy: Never
            command: [bash, -c]
            args: ["cp /data/text.txt /scratch/t && wc -w < /scratch/t > /results/words.txt"]
            volumeMounts:
              - {{name: results, mountPath: /results}}
              - {{name: scratch, mountPath: /scratch}}
"""
    result = process(cli, tmp_path, f"vols-{runtime}", "vols", job, runtime)
    assert result.code == 0, result.err
    assert (out / "words.txt").read_text().strip() == "5"
    assert not Path("/results").exists() and not Path("/scratch").exists()  # bound for the step only


def test_a_missing_image_under_an_insisting_policy_fails_the_step_with_kubernetes_reason(
        cli, home: Path, tmp_path: Path, python_image: str, unmount) -> None:
    dataset(cli, tmp_path, "plain", "ReadOnlyMany")
    script = """\
    script:
      image: localhost/millpond-test/nowhere
      imageTag: "9"
      imagePullPolicy: Never
      source: ls /data
"""
    result = process(cli, tmp_path, "missing", "plain", script)
    assert result.code != 0
    shown = cli("get", "dataprocess", "missing", "-o", "json").json()["status"]
    assert shown["phase"] == "Failed", shown
    assert "ErrImageNeverPull" in str(shown), shown


def test_a_step_deleted_while_its_container_runs_leaves_no_container(
        cli, home: Path, tmp_path: Path, tool_image: str, unmount) -> None:
    dataset(cli, tmp_path, "slow", "ReadOnlyMany")
    text = f"""\
apiVersion: data.fluid.io/v1alpha1
kind: DataProcess
metadata:
  name: sleeper
  annotations: {{millpond.io/runtime: container}}
spec:
  dataset: {{name: slow, namespace: default, mountPath: /data}}
  processor:
    script: {{image: {tool_image}, imagePullPolicy: Never, command: [bash], source: "sleep 120"}}
"""
    (tmp_path / "sleeper.yaml").write_text(text)
    assert cli("apply", "-f", tmp_path / "sleeper.yaml").code == 0
    until(lambda: not no_container_of("sleeper"), 60, "its container running")
    assert cli("delete", "dataprocess", "sleeper").code == 0
    until(lambda: no_container_of("sleeper"), 30, "no container left")

