"""Compiled IR to mutate, and the two ways a refused pipeline must look: the CLI (exit 2) and the API (400)."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import copy
import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kfp import compiler, dsl

from tests.forked import millpond_process

_WRITE = 'mkdir -p "$(dirname "$1")" && printf "%s" "$0" > "$1"'


@dsl.container_component
def first(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _WRITE], args=[text, out])


@dsl.container_component
def second(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _WRITE], args=[text, out])


@dsl.container_component
def third(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _WRITE], args=[text, out])


@dsl.container_component
def fourth(text: str, out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(image="alpine:3", command=["sh", "-c", _WRITE], args=[text, out])


@dsl.container_component
def write_folder(out: dsl.Output[dsl.Artifact]):
    """Writes a folder artifact: publishing it moves a folder into place (and removes what was there)."""
    return dsl.ContainerSpec(
        image="alpine:3", command=["sh", "-c", 'mkdir -p "$0" && echo hi > "$0/file"'], args=[out.path]
    )


@dsl.pipeline(name="shapes")
def shapes(text: str = "x"):
    """Root: first → second (data), third and fourth independent; a loop whose body is third → fourth (data)."""
    made = first(text=text)
    second(text=made.output)
    third(text=text)
    fourth(text=text)
    with dsl.ParallelFor(["1", "2"]) as item:
        inner = third(text=item)
        fourth(text=inner.output)


@dsl.pipeline(name="writer")
def writer():
    write_folder()


def compiled(pipeline: Any, folder: Path) -> dict[str, Any]:
    """The IR the real kfp compiler writes for ``pipeline``."""
    package = folder / f"{pipeline.name}-compiled.yaml"
    compiler.Compiler().compile(pipeline, str(package))
    return yaml.safe_load(package.read_text())


def write_ir(spec: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def rename_task(spec: dict[str, Any], dag: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``spec`` with task ``old`` of ``dag`` (a part of ``spec``) keyed ``new``; references follow."""
    tasks = dag["dag"]["tasks"]
    tasks[new] = tasks.pop(old)
    text = json.dumps(spec).replace(f'"producerTask": "{old}"', f'"producerTask": {json.dumps(new)}')
    return json.loads(text)


def loop_component(spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ParallelFor body of ``shapes``: a sub-DAG component."""
    return next((name, c) for name, c in spec["components"].items() if name.startswith("comp-for-loop") and "dag" in c)


def millpond(home: Path, *args: Any) -> subprocess.CompletedProcess[str]:
    """``millpond ARGS`` as its own process over ``home`` (forked warm: tests/forked.py)."""
    return millpond_process(list(args), {**os.environ, "MILLPOND_HOME": str(home)})


def assert_refused(home: Path, result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, one ``error:`` line holding every fragment, no traceback, and no run recorded."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    listing = millpond(home, "runs", "list", "-o", "json")
    assert listing.returncode == 0, listing.stderr
    assert json.loads(listing.stdout) == []
    return lines[0]


def post_run(url: str, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST /apis/v2beta1/runs with an inline pipeline_spec, as kfp.Client.create_run_from_pipeline_package does."""
    body = json.dumps({"display_name": "refused", "pipeline_spec": spec}).encode()
    request = urllib.request.Request(
        f"{url}/apis/v2beta1/runs", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def list_runs(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/apis/v2beta1/runs") as response:
        return list(json.loads(response.read()).get("runs") or [])


def clone(spec: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(spec)
