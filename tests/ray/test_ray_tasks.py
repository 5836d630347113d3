"""The kinds of KFP task that need more than a workspace, on a real local Ray cluster (root on real S3).

``packages_to_install`` (the node builds and reuses its own cached venv, with the engine's index
settings), secrets and config maps as files and empty dirs (carried to the node, private to the
task, never shown in a log), and the folders every task of a run shares, a PVC volume and
kfp's pipeline workspace (refused before anything is recorded unless the home is declared
shared with MILLPOND_SHARED_ROOTS, then mounted as they are on every node).
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import base64
import hashlib
import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from kfp import dsl, kubernetes
from kfp.dsl import Dataset, Input

from millpond.runners.sandbox import sandbox_problem
from tests.datasets.test_s3_root import compile_pipeline, describe, run_json, task
from tests.pipelines.platform_volumes import platform_existing_volume, platform_volumes
from tests.ray.test_ray_pipelines import MILLPOND, _env, millpond
from tests.ray_cluster import RayCluster
from tests.s3_server import S3Server

pytestmark = [
    pytest.mark.s3, pytest.mark.timeout(300),
    pytest.mark.skipif(sandbox_problem() is not None, reason=f"needs bubblewrap: {sandbox_problem()}"),
]

SECRET_VALUE = "hunter2-on-the-node"
LEVEL = "debug-level-7"


# --- a package index of this test's own ----------------------------------------------------
def _wheel(folder: Path, name: str, value: str) -> Path:
    """A pure-Python wheel of module ``name`` (``VALUE = value``), made by hand: no build tool needed."""
    module, dist = name.replace("-", "_"), f"{name.replace('-', '_')}-1.0"
    files = {
        f"{module}.py": f"VALUE = {value!r}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    path = folder / f"{dist}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(text.encode())}")
        archive.writestr(f"{dist}.dist-info/RECORD", "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n")
    return path


def package_index(folder: Path, *names: str) -> str:
    """A PEP 503 index at ``folder`` holding one wheel per name; its file:// URL."""
    links = []
    for name in names:
        project = folder / name
        project.mkdir(parents=True)
        wheel = _wheel(project, name, f"{name} from the test index")
        (project / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>')
        links.append(f'<a href="{name}/">{name}</a>')
    (folder / "index.html").write_text("".join(links))
    return folder.as_uri()


def probe(module: str) -> str:
    import importlib
    import json
    import os

    found = importlib.import_module(module)
    return json.dumps({"value": found.VALUE, "file": found.__file__, "node": os.environ["MILLPOND_RAY_NODE_ID"]})


# --- secrets, config maps, empty dirs ---------------------------------------------------------
@dsl.component(base_image="python:3.11")
def read_private_files() -> str:
    import hashlib
    import os
    import stat

    parts = []
    for folder in ("/mnt/creds", "/etc/settings"):
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            with open(path) as handle:
                parts.append(f"{path}={handle.read()}|{oct(stat.S_IMODE(os.stat(path).st_mode))}")
    parts.append("env=" + os.environ.get("DB_PASSWORD", "<unset>"))
    for folder in ("/scratch", "/shm-scratch"):  # empty at start, writable, the task's own
        parts.append(f"{folder} empty={not os.listdir(folder)}")
        with open(os.path.join(folder, "made-here"), "w") as out:
            out.write("x")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest() + " " + os.environ["MILLPOND_NODE_DIR"]


@dsl.pipeline(name="ray-private-files")
def private_files():
    reader = read_private_files()
    kubernetes.use_secret_as_volume(reader, secret_name="db-creds", mount_path="/mnt/creds")
    kubernetes.use_secret_as_env(reader, secret_name="db-creds", secret_key_to_env={"password": "DB_PASSWORD"})
    kubernetes.use_config_map_as_volume(reader, config_map_name="app-settings", mount_path="/etc/settings")
    kubernetes.empty_dir_mount(reader, volume_name="scratch", mount_path="/scratch")
    kubernetes.empty_dir_mount(reader, volume_name="shm", mount_path="/shm-scratch", medium="Memory")


# --- the run's workspace ----------------------------------------------------------------------
@dsl.component(base_image="python:3.11")
def write_workspace(text: str) -> str:
    import os

    with open("/kfp-workspace/note.txt", "w") as out:
        out.write(text)
    return os.environ["MILLPOND_RAY_NODE_ID"]


@dsl.component(base_image="python:3.11")
def read_workspace() -> str:
    import os

    with open("/kfp-workspace/note.txt") as source:
        return source.read() + " " + os.environ["MILLPOND_RAY_NODE_ID"]


@dsl.pipeline(name="ray-workspace", pipeline_config=dsl.PipelineConfig(workspace=dsl.WorkspaceConfig(size="1Gi")))
def with_workspace(text: str = "left in the workspace"):
    writer = write_workspace(text=text).set_accelerator_type("T4").set_accelerator_limit(1)  # node b
    read_workspace().after(writer).set_memory_limit("4G")  # node c


# --- a file of the engine's machine, imported ----------------------------------------------------
@dsl.component(base_image="python:3.11")
def read_imported(data: Input[Dataset]) -> str:
    with open(data.path) as source:
        return source.read()


@dsl.pipeline(name="ray-local-import")
def local_import():
    read_imported(data=dsl.importer(artifact_uri="/etc/hostname", artifact_class=Dataset).output)


@dsl.pipeline(name="ray-local-import-at-run-time")
def local_import_at_run_time(uri: str):
    read_imported(data=dsl.importer(artifact_uri=uri, artifact_class=Dataset).output)


# --- helpers ----------------------------------------------------------------------------------
def _run(
    pipeline: Any, cluster: RayCluster, server: S3Server, tmp_path: Path, *args: str, **env: str
) -> "subprocess.CompletedProcess[str]":
    """`millpond run --ray` of ``pipeline``, root on S3, with ``args`` and ``env`` added to the usual."""
    root = f"s3://{server.create_bucket()}/runs"
    return subprocess.run(
        [MILLPOND, "run", str(compile_pipeline(pipeline, tmp_path)), "--ray", cluster.address, "--pipeline-root",
         root, "-o", "json", *args],
        env={**_env(tmp_path / "home", server), **env}, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=240,
    )


def _texts(*folders: Path) -> str:
    return "\n".join(
        path.read_bytes().decode("utf-8", errors="replace")
        for folder in folders if folder.exists() for path in folder.rglob("*")
        if path.is_file() and "secrets" not in path.relative_to(folder).parts
    )


# --- tests ------------------------------------------------------------------------------------
NODE_BUILD = """
import sys, threading
from pathlib import Path
from millpond.runners.base import Packages, ProcessSpec
from millpond.runners.ray_venv import put_venv_on_path

base, index, log = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
spec = ProcessSpec(argv=[], env={"PATH": "/usr/bin"}, cwd=base, log_path=log)
put_venv_on_path(Packages(("mp-probe",), ("--index-url", index)), spec, base, threading.Event())
print(spec.env["PATH"].split(":")[0])
"""


def test_two_tasks_building_the_same_venv_on_one_node_at_once_take_turns(tmp_path: Path) -> None:
    """What two Ray workers of one node do for two tasks at once, as two processes; both are held at
    the venv's lock until each has begun, so they truly overlap: one builds, the other reuses."""
    from filelock import FileLock

    from millpond.runners.python_env import Prelude, venv_key

    index = package_index(tmp_path / "index", "mp-probe")
    base = tmp_path / "node"
    (base / "venvs").mkdir(parents=True)
    key = venv_key(Prelude(("mp-probe",), ("--index-url", index), []))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    with FileLock(str(base / "venvs" / key) + ".lock"):
        workers = [
            subprocess.Popen([sys.executable, "-c", NODE_BUILD, str(base), index, str(log)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for log in logs
        ]
        deadline = time.monotonic() + 60
        while not all(log.exists() for log in logs) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # each has looked for a ready venv (none) and is waiting for the lock
    outputs = [worker.communicate(timeout=60) for worker in workers]
    assert all(worker.returncode == 0 for worker in workers), outputs
    bins = {out.strip() for out, _ in outputs}
    assert bins == {str(base / "venvs" / key / "bin")}
    said = sorted(log.read_text().splitlines()[-1].split(" (")[0].split(" in ")[0] for log in logs)
    assert said == [f"[millpond] built the venv {key}", f"[millpond] reusing the venv {key}"], said
    assert "built meanwhile by another task here" in "".join(log.read_text() for log in logs)
    probe_value = subprocess.run(
        [f"{bins.pop()}/python", "-c", "import mp_probe; print(mp_probe.VALUE)"], capture_output=True, text=True
    )
    assert probe_value.stdout.strip() == "mp-probe from the test index", probe_value.stderr


def test_packages_to_install_build_one_venv_on_the_node_with_the_engines_index_settings(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    index = package_index(tmp_path / "index", "mp-probe", "mp-probe-env")
    from_component = dsl.component(
        probe, base_image="python:3.11", packages_to_install=["mp-probe"], pip_index_urls=[index]
    )
    from_environment = dsl.component(probe, base_image="python:3.11", packages_to_install=["mp-probe-env"])

    @dsl.pipeline(name="ray-packages")
    def packages():
        for _ in range(2):  # at once, on node c (the only one with 3 GB free twice): one builds, one waits
            from_component(module="mp_probe").set_memory_limit("3G").set_cpu_limit("0.5")
        # found only through PIP_INDEX_URL, the engine's; on node b (its T4)
        from_environment(module="mp_probe_env").set_accelerator_type("T4").set_accelerator_limit(1)

    # The nodes were started without this variable: only the engine's environment has it.
    proc = _run(packages, ray_cluster, s3_server, tmp_path, PIP_INDEX_URL=index)
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    node_c = ray_cluster.nodes["c"]
    done = [(json.loads(t["outputs"]["Output"]), Path(t["log"]).read_text()) for t in run["tasks"]]
    on_c = [(out, log) for out, log in done if out["value"] == "mp-probe from the test index"]
    assert len(on_c) == 2 and {out["node"] for out, _ in on_c} == {node_c.node_id}, done
    venvs = node_c.node_dir / "venvs"
    assert all(Path(out["file"]).is_relative_to(venvs) for out, _ in on_c), done  # the node's own venv
    assert len({Path(out["file"]).parents[3] for out, _ in on_c}) == 1  # one venv for both (the same key)
    # One task built it; the other waited for that build (the node's lock) and reused it: a cache hit.
    assert sorted("built the venv" in log for _, log in on_c) == [False, True], done
    assert sorted("reusing the venv" in log for _, log in on_c) == [False, True], done
    env_made = [out for out, _ in done if out["value"] == "mp-probe-env from the test index"]
    node_b = ray_cluster.nodes["b"]
    assert len(env_made) == 1 and env_made[0]["node"] == node_b.node_id
    assert Path(env_made[0]["file"]).is_relative_to(node_b.node_dir / "venvs")
    assert not (tmp_path / "home" / "venvs").exists()  # nothing built on the engine's machine

    # A package the index does not have: the attempt fails with the installer's one line, and the
    # node keeps no half-built venv.
    missing = dsl.component(probe, base_image="python:3.11", packages_to_install=["mp-missing"], pip_index_urls=[index])

    @dsl.pipeline(name="ray-missing-package")
    def missing_package():
        missing(module="mp_missing").set_memory_limit("3G")  # node c

    proc = _run(missing_package, ray_cluster, s3_server, tmp_path)
    run = run_json(proc)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    error = run["tasks"][0]["error"]
    assert error.startswith("could not install packages_to_install (mp-missing): ") and "\n" not in error, error
    assert sorted(path.name for path in venvs.iterdir() if path.is_dir()) == [Path(on_c[0][0]["file"]).parents[3].name]


def test_secrets_config_maps_and_empty_dirs_reach_the_task_on_its_node_and_leave_with_it(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    made = millpond(["secret", "create", "db-creds", "--from-literal", f"password={SECRET_VALUE}"], home)
    assert made.returncode == 0, made.stderr
    assert millpond(["configmap", "create", "app-settings", "--from-literal", f"level={LEVEL}"], home).returncode == 0
    # What other tests on the shared cluster left (a task whose Ray worker they killed cannot clean up)
    before = {name: set((n.node_dir / "tasks").iterdir()) if (n.node_dir / "tasks").is_dir() else set()
              for name, n in ray_cluster.nodes.items()}
    proc = _run(private_files, ray_cluster, s3_server, tmp_path)
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    expected = [
        f"/mnt/creds/password={SECRET_VALUE}|0o600", f"/etc/settings/level={LEVEL}|0o644",
        f"env={SECRET_VALUE}", "/scratch empty=True", "/shm-scratch empty=True",
    ]
    digest, node_dir = task(run, "read-private-files")["outputs"]["Output"].split()
    assert digest == hashlib.sha256("\n".join(expected).encode()).hexdigest()
    node = next(n for n in ray_cluster.nodes.values() if str(n.node_dir) == node_dir)
    assert node.name in ("b", "c")
    # Nothing of the task is left on its node (its copy goes just after the result is sent), and the
    # value is in no log, output or record.
    deadline = time.monotonic() + 30
    while not set((node.node_dir / "tasks").iterdir()) <= before[node.name] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set((node.node_dir / "tasks").iterdir()) <= before[node.name]
    assert SECRET_VALUE not in proc.stdout + proc.stderr
    assert SECRET_VALUE not in _texts(home, *(n.node_dir for n in ray_cluster.nodes.values()))


def test_a_pvc_volume_the_run_workspace_and_a_local_import_are_refused_unless_shared_then_shared_by_the_nodes(
    ray_cluster: RayCluster, s3_server: S3Server, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    made_by_task = "exec-read: pvcMount at /from-pvc: the volume that task createpvc (CreatePVC) makes"
    imported = "exec-importer: importer: /etc/hostname is a file of this machine that the Ray nodes do not reach"
    for pipeline, words in (
        (with_workspace, "the pipeline's workspace"), (platform_volumes, made_by_task), (local_import, imported)
    ):
        refused = _run(pipeline, ray_cluster, s3_server, tmp_path)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        line = refused.stderr.strip()
        assert line.startswith("error: ") and "\n" not in line and words in line, line
        assert "MILLPOND_SHARED_ROOTS" in line
    assert json.loads(millpond(["runs", "list", "-o", "json"], home).stdout) == []
    # A file or a volume named only at run time (a pipeline parameter) fails its task with the same reason.
    proc = _run(local_import_at_run_time, ray_cluster, s3_server, tmp_path, "-p", "uri=/etc/hostname")
    run = run_json(proc)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert task(run, "importer")["error"] == (
        f"{imported.removeprefix('exec-importer: ')}: in cluster mode import it from s3:// (where the pipeline root "
        "is) or from a folder declared shared with MILLPOND_SHARED_ROOTS"
    )
    (home / "volumes" / "my-data").mkdir(parents=True)
    proc = _run(platform_existing_volume, ray_cluster, s3_server, tmp_path)
    run = run_json(proc)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert task(run, "read")["error"] == (
        f"pvcMount at /from-pvc: volume 'my-data' is a folder of this machine ({home / 'volumes'}) that the Ray "
        f"nodes do not reach: mount a dataset instead, or declare {home / 'volumes'} shared (the same folder on "
        "every node) with MILLPOND_SHARED_ROOTS"
    )
    # This machine's folders are every node's here: declaring the home shared is true.
    shared = {"MILLPOND_SHARED_ROOTS": str(home)}
    proc = _run(with_workspace, ray_cluster, s3_server, tmp_path, **shared)
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    node_b, node_c = ray_cluster.nodes["b"], ray_cluster.nodes["c"]
    assert task(run, "write-workspace")["outputs"]["Output"] == node_b.node_id
    assert task(run, "read-workspace")["outputs"]["Output"] == f"left in the workspace {node_c.node_id}"
    proc = _run(platform_volumes, ray_cluster, s3_server, tmp_path, **shared)
    run = run_json(proc)
    assert proc.returncode == 0 and run["outputs"]["Output"] == "through a volume|scratch-empty=True", describe(run)
    assert task(run, "deletepvc")["state"] == "SUCCEEDED"

