"""Runs with an s3:// pipeline root, against a real S3 server (SeaweedFS, see s3_server.py).

Each test compiles a small kfp pipeline to IR YAML and runs it with the ``millpond`` CLI in a
subprocess, with a private MILLPOND_HOME and the server's endpoint and keys in its
environment — as a user would. Components see remote artifacts at /s3/BUCKET/… (kfp's
Artifact.path); millpond stages them and uploads outputs only after a task succeeded.
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kfp import compiler, dsl
from kfp.dsl import Artifact, Dataset, Input, Output

from tests.forked import millpond_process
from tests.s3_server import S3Server  # the s3_server fixture comes from conftest's plugins

pytestmark = pytest.mark.s3

MILLPOND = str(Path(sys.executable).parent / "millpond")
PREFIX = "runs/nightly"


# --- the pipelines -------------------------------------------------------------------------
@dsl.component(base_image="python:3.11")
def produce(text: str, data: Output[Dataset], folder: Output[Artifact]) -> str:
    """One file and one folder artifact; returns where kfp told it to write."""
    import os

    with open(data.path, "w") as out:
        out.write(text)
    os.makedirs(folder.path)
    with open(os.path.join(folder.path, "a.txt"), "w") as out:
        out.write(text.upper())
    os.makedirs(os.path.join(folder.path, "sub"))
    with open(os.path.join(folder.path, "sub", "b.txt"), "w") as out:
        out.write(text[::-1])
    data.metadata["chars"] = len(text)
    return data.path


@dsl.component(base_image="python:3.11")
def consume(data: Input[Dataset], folder: Input[Artifact]) -> str:
    """Echo what the upstream task wrote, file and folder."""
    import os

    with open(data.path) as source:
        text = source.read()
    with open(os.path.join(folder.path, "a.txt")) as source:
        upper = source.read()
    with open(os.path.join(folder.path, "sub", "b.txt")) as source:
        reversed_ = source.read()
    return f"{text}|{upper}|{reversed_}"


@dsl.component(base_image="python:3.11")
def write_then_fail(text: str, data: Output[Dataset]):
    """Writes its whole output artifact, then fails: nothing of it may be published."""
    import os

    with open(data.path, "w") as out:
        out.write(text)
    print(f"wrote {os.path.getsize(data.path)} bytes to {data.path}", flush=True)
    raise SystemExit(3)


@dsl.component(base_image="python:3.11")
def where_am_i(data: Input[Dataset]) -> dict:
    """How the task ran: forked from the warm server or not, and what it sees of the remote mirror."""
    import os

    cmdline = open("/proc/self/cmdline", "rb").read().replace(b"\0", b" ").decode()
    return {
        "forked": "millpond.runners.forkserver" in cmdline,
        "path": data.path,
        "text": open(data.path).read(),
        "tmp_listed": os.path.isdir("/tmp"),
        "root_entries": sorted(os.listdir("/")),
    }


@dsl.pipeline(name="s3-where")
def where(text: str = "hello"):
    made = produce(text=text)
    where_am_i(data=made.outputs["data"])


@dsl.pipeline(name="s3-roundtrip")
def roundtrip(text: str = "hello"):
    made = produce(text=text)
    consume(data=made.outputs["data"], folder=made.outputs["folder"])


@dsl.pipeline(name="s3-partial")
def partial(text: str = "hello"):
    produce(text=text)
    write_then_fail(text=text)


# --- helpers -------------------------------------------------------------------------------
def compile_pipeline(pipeline: Any, folder: Path) -> Path:
    path = folder / f"{pipeline.name}.yaml"
    compiler.Compiler().compile(pipeline, str(path))
    return path


def millpond(args: list[str], home: Path, server: S3Server | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "MILLPOND_"))}
    env["MILLPOND_HOME"] = str(home)
    if server is not None:
        env.update(server.env())
    return millpond_process(args, env)


def run_json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"millpond printed no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def task(run: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [t for t in run["tasks"] if t["name"] == name]
    assert len(matches) == 1, [t["name"] for t in run["tasks"]]
    return matches[0]


def task_log(item: dict[str, Any]) -> str:
    path = item.get("log")
    return Path(path).read_text(errors="replace") if path and Path(path).exists() else "(no log)"


def describe(run: dict[str, Any]) -> str:
    """Every task's state, error and log: what a failed assertion should show."""
    parts = [f"run {run['state']}: {run.get('error')}"]
    for item in run["tasks"]:
        parts.append(f"--- {item['name']} {item['state']} {item.get('error')}\n{task_log(item)}")
    return "\n".join(parts)


# --- tests ---------------------------------------------------------------------------------
def test_artifacts_round_trip_through_s3(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket()
    root = f"s3://{bucket}/{PREFIX}"
    text = "millpond on s3: ünïcode ✓"
    yaml_path = compile_pipeline(roundtrip, tmp_path)

    proc = millpond(["run", str(yaml_path), "-p", f"text={text}", "--pipeline-root", root, "-o", "json"],
                    tmp_path / "home", s3_server)
    run = run_json(proc)
    assert proc.returncode == 0 and run["state"] == "SUCCEEDED", describe(run) + proc.stderr
    stored = millpond(["runs", "get", run["run_id"], "-o", "json"], tmp_path / "home")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout)["pipeline_root"] == root

    producer = task(run, "produce")
    data_uri = producer["outputs"]["data"]
    folder_uri = producer["outputs"]["folder"]
    for uri in (data_uri, folder_uri):
        assert uri.startswith(f"{root}/"), uri
    # The component was handed kfp's local view of the remote URI.
    assert producer["outputs"]["Output"] == "/s3/" + data_uri.removeprefix("s3://")

    fs = s3_server.filesystem()
    data_key = data_uri.removeprefix("s3://")
    folder_key = folder_uri.removeprefix("s3://")
    assert fs.cat_file(data_key).decode() == text
    assert fs.cat_file(f"{folder_key}/a.txt").decode() == text.upper()
    assert fs.cat_file(f"{folder_key}/sub/b.txt").decode() == text[::-1]
    assert sorted(fs.find(folder_key)) == [f"{folder_key}/a.txt", f"{folder_key}/sub/b.txt"]

    # Everything the run wrote is under the root, and only the published outputs.
    written = sorted(fs.find(bucket))
    assert written == sorted([data_key, f"{folder_key}/a.txt", f"{folder_key}/sub/b.txt"]), written

    consumer = task(run, "consume")
    assert consumer["state"] == "SUCCEEDED"
    assert consumer["outputs"]["Output"] == f"{text}|{text.upper()}|{text[::-1]}"


@pytest.mark.parametrize("fork_server", ["1", "0"])
def test_remote_artifacts_through_the_fork_server_or_a_plain_process(
    fork_server: str, s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task with an S3 root forks from the warm server (a private root carries /s3, made for it
    alone) and sees exactly what a plain sandboxed process sees; the host gains no /s3."""
    bucket = s3_server.create_bucket()
    root = f"s3://{bucket}/{PREFIX}"
    yaml_path = compile_pipeline(where, tmp_path)
    host_root = sorted(os.listdir("/"))
    env_home = tmp_path / "home"
    monkeypatch.setenv("MILLPOND_FORK_SERVER", fork_server)
    proc = subprocess.run(
        [MILLPOND, "run", str(yaml_path), "-p", "text=seen", "--pipeline-root", root, "-o", "json"],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, "MILLPOND_HOME": str(env_home),
             **s3_server.env()},
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
    )
    run = run_json(proc)
    assert proc.returncode == 0, describe(run) + proc.stderr
    seen = task(run, "where-am-i")["outputs"]["Output"]
    data_uri = task(run, "produce")["outputs"]["data"]
    assert seen["forked"] is (fork_server == "1")
    assert seen["path"] == "/s3/" + data_uri.removeprefix("s3://")
    assert seen["text"] == "seen"
    assert seen["tmp_listed"] is True
    assert seen["root_entries"] == sorted({*host_root, "s3"})  # the host's / as it is, plus the mirror
    assert sorted(os.listdir("/")) == host_root  # no /s3 (or anything else) appeared on the host


def test_failed_task_publishes_nothing(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket()
    root = f"s3://{bucket}/{PREFIX}"
    yaml_path = compile_pipeline(partial, tmp_path)

    proc = millpond(["run", str(yaml_path), "-p", "text=half-written", "--pipeline-root", root, "-o", "json"],
                    tmp_path / "home", s3_server)
    run = run_json(proc)
    assert proc.returncode == 1 and run["state"] == "FAILED", describe(run) + proc.stderr

    failed = task(run, "write-then-fail")
    assert failed["state"] == "FAILED", describe(run)
    assert failed["exit_code"] == 3, describe(run)
    # The task did write its output before failing (so "nothing published" means something).
    assert "wrote 12 bytes to /s3/" in task_log(failed), task_log(failed)

    producer = task(run, "produce")
    assert producer["state"] == "SUCCEEDED", describe(run)
    data_uri = producer["outputs"]["data"]
    assert data_uri.startswith(f"{root}/")
    fs = s3_server.filesystem()
    assert fs.cat_file(data_uri.removeprefix("s3://")) == b"half-written"

    # The failing task's output URI: a sibling of the producer's, under its own task path.
    run_prefix = data_uri.removeprefix("s3://").split(f"/{producer['path']}/")[0]
    failed_prefix = f"{run_prefix}/{failed['path']}"
    assert not fs.exists(f"{failed_prefix}/data")
    assert fs.find(failed_prefix) == []
    leftovers = [key for key in fs.find(bucket) if not key.startswith(data_uri.removeprefix("s3://").rsplit("/", 1)[0])]
    assert leftovers == [], leftovers


@pytest.mark.parametrize("problem", ["wrong secret key", "no such bucket"])
def test_unwritable_s3_root_fails_the_task(problem: str, s3_server: S3Server, tmp_path: Path) -> None:
    """The upload fails: the task fails with a one-line reason, the run ends, nothing lands."""
    bucket = s3_server.create_bucket()
    server = s3_server
    root = f"s3://{bucket}/{PREFIX}"
    if problem == "wrong secret key":
        server = S3Server(s3_server.endpoint_url, s3_server.access_key, "not-the-secret")
    else:
        root = f"s3://{bucket}-missing/{PREFIX}"
    yaml_path = compile_pipeline(roundtrip, tmp_path)

    proc = millpond(["run", str(yaml_path), "--pipeline-root", root, "-o", "json"], tmp_path / "home", server)
    run = run_json(proc)
    assert proc.returncode == 1 and run["state"] == "FAILED", describe(run) + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    producer = task(run, "produce")
    assert producer["state"] == "FAILED", describe(run)
    assert producer["error"].startswith(f"could not upload output artifact {root}/"), producer["error"]
    assert "\n" not in producer["error"]
    assert [t["name"] for t in run["tasks"] if t["state"] == "SUCCEEDED"] == []
    assert s3_server.filesystem().find(bucket) == []


@pytest.mark.parametrize("root", ["ftp://x", "s3://", "https://example.com/artifacts"])
def test_unsupported_pipeline_root_is_a_user_error(root: str, tmp_path: Path) -> None:
    yaml_path = compile_pipeline(roundtrip, tmp_path)
    proc = millpond(["run", str(yaml_path), "--pipeline-root", root, "-o", "json"], tmp_path / "home")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert root in lines[0]
    assert proc.stdout == ""


def test_cache_hits_reuse_s3_artifacts_while_they_exist(s3_server: S3Server, tmp_path: Path) -> None:
    """A second run reuses the first run's s3 outputs; once they are deleted, the task runs again."""
    bucket = s3_server.create_bucket()
    root = f"s3://{bucket}/{PREFIX}"
    yaml_path = compile_pipeline(roundtrip, tmp_path)
    home = tmp_path / "home"
    args = ["run", str(yaml_path), "-p", "text=cached", "--pipeline-root", root, "-o", "json"]

    first = run_json(millpond(args, home, s3_server))
    assert first["state"] == "SUCCEEDED", describe(first)
    data_uri = task(first, "produce")["outputs"]["data"]

    second = run_json(millpond(args, home, s3_server))
    assert second["state"] == "SUCCEEDED", describe(second)
    assert task(second, "produce")["cached"] is True, describe(second)
    assert task(second, "produce")["outputs"]["data"] == data_uri
    assert task(second, "consume")["outputs"]["Output"] == "cached|CACHED|dehcac"

    fs = s3_server.filesystem()
    fs.rm(data_uri.removeprefix("s3://"))
    third = run_json(millpond(args, home, s3_server))
    assert third["state"] == "SUCCEEDED", describe(third)
    producer = task(third, "produce")
    assert producer["cached"] is False, describe(third)
    assert producer["outputs"]["data"] != data_uri
    assert fs.cat_file(producer["outputs"]["data"].removeprefix("s3://")) == b"cached"
    assert task(third, "consume")["outputs"]["Output"] == "cached|CACHED|dehcac"
