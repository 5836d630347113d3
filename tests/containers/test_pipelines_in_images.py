"""Pipeline tasks in their images (issue 31): what exists only in an image is found there, the sandbox's
contract holds inside the container, and nothing of millpond's is left running however a task ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from millpond.datasets.mounts import is_mounted
from millpond.runners.containers import sweep
from millpond.runners.containers.command import HOME_LABEL
from tests.conftest import MILLPOND_BIN, spawn_cli, task
from tests.containers_support import Registry, build_image, free_ports, podman
from tests.datasets_support import manifest

HERE = Path(__file__).parent / "pipelines"
ENTRYPOINT = ('#!/bin/sh\necho "custom entrypoint says: $1"\nmkdir -p "$(dirname "$2")"\n'
              'echo "$1 from the image" > "$2"\n')
# Seed 002's shape in kfp 1.x's Argo form: a ContainerOp whose command exists only in its image, its
# file_outputs read by the next step (also in the image), the image's pull policy as the seed sets it.
V1_WORKFLOW = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: entrypoint-in-image-
  annotations: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22,
    pipelines.kubeflow.org/pipeline_spec: '{"name": "entrypoint-in-image"}'}
  labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}
spec:
  entrypoint: entrypoint-in-image
  templates:
  - name: custom
    container:
      image: IMAGE
      command: [/bin/custom-entrypoint.sh]
      args: [hello, /tmp/outputs/said/data]
      imagePullPolicy: IfNotPresent
    outputs:
      parameters:
      - name: custom-said
        valueFrom: {path: /tmp/outputs/said/data}
      artifacts:
      - {name: custom-said, path: /tmp/outputs/said/data}
  - name: consume
    container:
      image: IMAGE
      command: [python3, -c, 'import only_in_image, sys; print("consumed", only_in_image.VALUE, sys.argv[1])',
                '{{inputs.parameters.custom-said}}']
    inputs:
      parameters:
      - {name: custom-said}
  - name: entrypoint-in-image
    dag:
      tasks:
      - {name: custom, template: custom}
      - name: consume
        template: consume
        dependencies: [custom]
        arguments:
          parameters:
          - {name: custom-said, value: '{{tasks.custom.outputs.parameters.custom-said}}'}
  arguments:
    parameters: []
  serviceAccountName: pipeline-runner
  imagePullSecrets:
  - {name: not-created}
"""


@pytest.fixture(scope="module")
def only_in_image(python_image: str) -> str:
    """An image holding a Python module and an entrypoint script that exist nowhere else."""
    return build_image(
        "localhost/millpond-test/only-in-image:1",
        f"FROM {python_image}\nCOPY only_in_image.py /usr/lib/python3/dist-packages/only_in_image.py\n"
        "COPY custom-entrypoint.sh /bin/custom-entrypoint.sh\nRUN chmod +x /bin/custom-entrypoint.sh\n"
        'ENTRYPOINT ["/bin/custom-entrypoint.sh"]\n',
        {"only_in_image.py": "VALUE = 41\n", "custom-entrypoint.sh": ENTRYPOINT},
    )


def _of_this_home() -> list[str]:
    """The running containers this test's home started (other tests' run beside it under xdist)."""
    home = Path(os.environ['MILLPOND_HOME']).expanduser().resolve()
    return sweep.labelled(podman(), f"{HOME_LABEL}={home}", running_only=True)


def _wait_until_none_left(seconds: float = 20.0) -> list[str]:
    deadline = time.monotonic() + seconds
    left = _of_this_home()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = _of_this_home()
    return left


def test_what_exists_only_in_the_image_is_found_there(cli, home: Path, only_in_image: str, monkeypatch) -> None:
    monkeypatch.setenv("TEST_IMAGE", only_in_image)
    monkeypatch.setenv("MILLPOND_RUNTIME", "auto")
    result = cli("run", HERE / "only_in_image.py", "-o", "json")
    assert result.code == 0, result.err
    run = result.json()
    assert run["state"] == "SUCCEEDED", run
    assert run["outputs"]["Output"] == "42:hello from the image"
    log = (home / "logs").rglob("entrypoint.log")
    text = next(log).read_text()
    assert f"running in image {only_in_image} (podman)" in text
    assert "custom entrypoint says: hello" in text  # the image's ENTRYPOINT ran the args
    assert task(run, "uses-module")["image"] == only_in_image
    assert task(run, "uses-module")["ran_in"] == "podman"
    # the second run is answered from the cache: no container at all
    again = cli("run", HERE / "only_in_image.py", "-o", "json").json()
    assert again["state"] == "SUCCEEDED" and again["outputs"]["Output"] == "42:hello from the image"
    assert {t["state"] for t in again["tasks"]} == {"CACHED"} or all(t.get("cached") for t in again["tasks"]), again
    assert _wait_until_none_left() == []


def test_a_kfp_v1_containerop_whose_entrypoint_exists_only_in_its_image(
    cli, home: Path, tmp_path: Path, only_in_image: str, monkeypatch
) -> None:
    monkeypatch.setenv("MILLPOND_RUNTIME", "auto")
    workflow = tmp_path / "entrypoint.yaml"
    workflow.write_text(V1_WORKFLOW.replace("IMAGE", only_in_image))
    result = cli("run", workflow, "-o", "json")
    assert result.code == 0, result.err
    run = result.json()
    assert run["state"] == "SUCCEEDED", run
    said = task(run, "custom")
    assert said["ran_in"] == "podman"
    consumed = Path(task(run, "consume")["log"]).read_text()
    assert "consumed 41 hello from the image" in consumed
    # the workflow's imagePullSecrets name a secret that does not exist: pulled without it, as the kubelet does
    assert "imagePullSecret 'not-created' not found: pulling without it" in Path(said["log"]).read_text()


SIDECAR_WORKFLOW = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: sidecar-in-image-
  annotations: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22,
    pipelines.kubeflow.org/pipeline_spec: '{"name": "sidecar-in-image"}'}
  labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}
spec:
  entrypoint: sidecar-in-image
  templates:
  - name: fetch
    container:
      image: MAIN
      command: [python3, -c]
      args:
      - |
        import time, urllib.request
        for _ in range(100):
            try:
                print("fetched:", urllib.request.urlopen("http://127.0.0.1:PORT/hello.txt").read().decode().strip())
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("the sidecar never answered")
    sidecars:
    - name: web
      image: SIDECAR
      command: [sh, -c]
      args: ['mkdir -p /www && echo "from the busybox sidecar" > /www/hello.txt && exec httpd -f -p PORT -h /www']
  - name: sidecar-in-image
    dag:
      tasks:
      - {name: fetch, template: fetch}
  arguments:
    parameters: []
"""


def test_a_kfp_v1_sidecar_runs_in_its_own_image_beside_the_step(
    cli, tmp_path: Path, python_image: str, busybox_image: str, monkeypatch
) -> None:
    monkeypatch.setenv("MILLPOND_RUNTIME", "container")
    workflow = tmp_path / "sidecar.yaml"
    workflow.write_text(SIDECAR_WORKFLOW.replace("MAIN", python_image).replace("SIDECAR", busybox_image)
                        .replace("PORT", str(free_ports(1)[0])))
    result = cli("run", workflow, "-o", "json")
    assert result.code == 0, result.err
    run = result.json()
    assert run["state"] == "SUCCEEDED", run
    log = Path(task(run, "fetch")["log"]).read_text()
    assert "fetched: from the busybox sidecar" in log  # httpd exists only in the sidecar's image
    assert _wait_until_none_left() == []


def test_host_policy_says_which_image_was_not_used(cli, only_in_image: str, monkeypatch) -> None:
    monkeypatch.setenv("TEST_IMAGE", only_in_image)
    monkeypatch.setenv("MILLPOND_RUNTIME", "host")
    result = cli("run", HERE / "only_in_image.py", "--no-cache", "-o", "json")
    run = result.json()
    assert run["state"] == "FAILED"
    error = task(run, "uses-module")["error"]
    assert "No module named 'only_in_image'" in error
    assert error.endswith(f"; image {only_in_image} was not used: the runtime policy is host")
    assert task(run, "uses-module")["ran_in"] == "host: the runtime policy is host"
    assert f"ran on this machine, not in these images: {only_in_image} (the runtime policy is host)" in result.err


def test_auto_without_a_working_runtime_runs_on_the_host_and_says_so_once(cli, tmp_path: Path, monkeypatch) -> None:
    broken = tmp_path / "containers.conf"
    broken.write_text("[engine\nthis is not toml\n")
    monkeypatch.setenv("CONTAINERS_CONF", str(broken))  # podman refuses to start: no runtime works here
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setenv("MILLPOND_RUNTIME", "auto")
    from millpond.runners.containers import runtimes

    runtimes.probe.cache_clear()
    try:
        result = cli("run", HERE / "limits.py", "--no-cache", "-o", "json")
    finally:
        runtimes.probe.cache_clear()
    assert "ran on this machine, not in these images: localhost/millpond-test/python:3.11 (no container runtime " \
           "works here: podman does not work here" in result.err
    assert result.err.count("ran on this machine") == 1


def test_a_memory_limit_is_enforced_and_an_oom_kill_reported(cli, python_image: str, monkeypatch) -> None:
    monkeypatch.setenv("TEST_IMAGE", python_image)
    monkeypatch.setenv("TEST_CASE", "oom")
    monkeypatch.setenv("MILLPOND_RUNTIME", "container")
    run = cli("run", HERE / "limits.py", "--no-cache", "-o", "json").json()
    assert run["state"] == "FAILED"
    assert "OOMKilled" in task(run, "hog")["error"], run
    assert _wait_until_none_left() == []


def test_a_time_limit_stops_the_container(cli, python_image: str, monkeypatch) -> None:
    monkeypatch.setenv("TEST_IMAGE", python_image)
    monkeypatch.setenv("TEST_CASE", "timeout")
    monkeypatch.setenv("MILLPOND_RUNTIME", "container")
    started = time.monotonic()
    run = cli("run", HERE / "limits.py", "--no-cache", "-o", "json").json()
    assert run["state"] == "FAILED"
    assert time.monotonic() - started < 120
    assert _wait_until_none_left() == []


def test_the_engine_killed_with_sigkill_leaves_no_container(home: Path, python_image: str) -> None:
    engine = spawn_cli(home, "run", HERE / "limits.py", "--no-cache",
                       env={"TEST_IMAGE": python_image, "TEST_CASE": "long", "MILLPOND_RUNTIME": "container"})
    try:
        deadline = time.monotonic() + 60
        while not _of_this_home() and time.monotonic() < deadline:
            assert engine.poll() is None, engine.communicate()
            time.sleep(0.2)
        assert _of_this_home(), "the task's container never started"
        listed = subprocess.run([str(MILLPOND_BIN), "ps", "-o", "json"], capture_output=True, text=True, check=True,
                                env={**os.environ, "MILLPOND_HOME": str(home)})
        rows = [row for row in json.loads(listed.stdout) if row["kind"] == "container"]
        assert len(rows) == 1 and python_image in rows[0]["object"] and rows[0]["object"].startswith("run/"), rows
        engine.send_signal(signal.SIGKILL)
        engine.wait(10)
        assert _wait_until_none_left() == []
    finally:
        if engine.poll() is None:
            engine.kill()
        engine.communicate()


def test_a_pull_with_an_image_pull_secret(cli, registry: Registry, python_image: str, monkeypatch) -> None:
    remote = registry.push(python_image, "team/python:pull-secret")
    subprocess.run(registry.runtime.argv("rmi", "-f", remote), capture_output=True)
    for key, value in registry.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TEST_IMAGE", remote)
    monkeypatch.setenv("MILLPOND_RUNTIME", "container")
    created = cli("secret", "create", "regcred", "--from-literal", f".dockerconfigjson={registry.dockerconfigjson()}")
    assert created.code == 0, created.err
    run = cli("run", HERE / "pull_secret.py", "--no-cache", "-o", "json").json()
    assert run["state"] == "SUCCEEDED", run
    assert run["outputs"]["Output"].strip() == "from the registry"

    # a wrong password: ErrImagePull with the registry's own words
    subprocess.run(registry.runtime.argv("rmi", "-f", remote), capture_output=True)
    wrong = cli("secret", "create", "badcred", "--from-literal",
                f".dockerconfigjson={registry.dockerconfigjson(password='wrong')}")
    assert wrong.code == 0, wrong.err
    monkeypatch.setenv("TEST_SECRET", "badcred")
    failed = cli("run", HERE / "pull_secret.py", "--no-cache", "-o", "json").json()
    error = task(failed, "hello")["error"]
    assert failed["state"] == "FAILED" and "ErrImagePull" in error, failed
    assert "unauthorized" in error.lower() or "authentication required" in error.lower(), error

    # Never, with the image absent: ErrImageNeverPull, nothing pulled
    monkeypatch.setenv("TEST_SECRET", "regcred")
    monkeypatch.setenv("TEST_PULL_POLICY", "Never")
    never = cli("run", HERE / "pull_secret.py", "--no-cache", "-o", "json").json()
    assert "ErrImageNeverPull" in task(never, "hello")["error"], never


def test_a_dataset_is_read_and_a_readwrite_one_written_in_a_container(
    cli, home: Path, tmp_path: Path, python_image: str, monkeypatch
) -> None:
    source = tmp_path / "mnist-source"
    (source / "train").mkdir(parents=True)
    (source / "train" / "hello.txt").write_text("digits")
    scratch = tmp_path / "scratch-source"
    scratch.mkdir()
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "shm"), "quota": "64Mi"}]
    (tmp_path / "ds.yaml").write_text(manifest("mnist", f"local://{source}", secret=False, levels=levels))
    (tmp_path / "rw.yaml").write_text(manifest("scratch", f"local://{scratch}", secret=False, levels=levels,
                                               access="ReadWriteMany"))
    assert cli("apply", "-f", tmp_path / "ds.yaml").code == 0
    applied = cli("apply", "-f", tmp_path / "rw.yaml")
    assert applied.code == 0, applied.err
    monkeypatch.setenv("TEST_IMAGE", python_image)
    monkeypatch.setenv("MILLPOND_RUNTIME", "container")
    try:
        run = cli("run", HERE / "dataset_in_image.py", "-o", "json").json()
        assert run["state"] == "SUCCEEDED", json.dumps(run)[:2000]
        assert run["outputs"]["Output"].startswith("digits|PRETTY_NAME=\"Debian GNU/Linux 12")
        assert (scratch / "from-container.txt").read_text().strip() == "written-in-a-container"
    finally:
        for name in ("mnist", "scratch"):
            folder = home / "mnt" / "default" / name
            if is_mounted(str(folder)):
                subprocess.run(["fusermount3", "-u", "-z", str(folder)], check=False)
