"""Arguments that mix values with text: kfp 2's f-strings (``f"{a.output}-x"``) and kfp 1.x arguments mixing
Argo tags with text (``gs://{{inputs.parameters.bucket}}/x``, ``part-{{item.a}}``), filled in by the engine as
the KFP driver fills them (``bindings._format``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from millpond.pipelines.bindings import _format
from millpond.pipelines.launcher import TaskError

_V2 = """
from kfp import dsl


@dsl.component
def echo(msg: str) -> str:
    return msg


@dsl.component
def number() -> int:
    return 7


@dsl.pipeline
def formatted(name: str = "world"):
    a = echo(msg=f"hello {name}")
    n = number()
    echo(msg=f"{a.output} and {n.output} and again {name}")
"""

_V1 = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: mixed-
  labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}
spec:
  entrypoint: mixed
  arguments:
    parameters:
    - {name: bucket, value: my-bucket}
  templates:
  - name: mixed
    inputs:
      parameters:
      - {name: bucket}
    dag:
      tasks:
      - name: make
        template: say
        arguments: {parameters: [{name: text, value: 'made-{{inputs.parameters.bucket}}'}]}
      - name: use
        template: say
        dependencies: [make]
        arguments: {parameters: [{name: text, value: 'gs://{{inputs.parameters.bucket}}/{{tasks.make.outputs.parameters.said}}/{{workflow.name}}'}]}
      - name: each
        template: say
        withItems: [{a: one, b: 1}, {a: two, b: 2}]
        arguments: {parameters: [{name: text, value: 'part-{{item.a}}-{{item.b}}'}]}
  - name: say
    inputs:
      parameters:
      - {name: text}
    outputs:
      parameters:
      - name: said
        valueFrom: {path: /tmp/outputs/said/data}
    container:
      image: alpine
      command: [sh, -c, 'mkdir -p /tmp/outputs/said && echo "said: $0" && printf "%s" "$0" > /tmp/outputs/said/data',
        '{{inputs.parameters.text}}']
"""


def test_kfp2_f_string_arguments_are_filled_in(cli, tmp_path: Path) -> None:
    (tmp_path / "formatted.py").write_text(_V2)
    result = cli("run", tmp_path / "formatted.py", "-p", "name=millpond", "-o", "json")
    run = json.loads(result.out)
    assert run["state"] == "SUCCEEDED", result.err
    said = sorted(t["outputs"]["Output"] for t in run["tasks"] if t["name"].startswith("echo"))
    assert said == ["hello millpond", "hello millpond and 7 and again millpond"], said


def test_kfp1_arguments_mixing_tags_with_text_are_filled_in(cli, tmp_path: Path) -> None:
    (tmp_path / "mixed.yaml").write_text(_V1)
    result = cli("run", tmp_path / "mixed.yaml", "-o", "json")
    run = json.loads(result.out)
    assert run["state"] == "SUCCEEDED", result.err
    said = {t["path"]: t["outputs"].get("said") for t in run["tasks"] if t["name"] in ("make", "use", "each")}
    use = [v for k, v in said.items() if k.endswith("/use")][0]
    assert use.startswith("gs://my-bucket/made-my-bucket/mixed-"), said  # the workflow's name: the run's
    assert sorted(v for k, v in said.items() if "iteration" in k and v) == ["part-one-1", "part-two-2"], said
    logs = cli("runs", "logs", run["run_id"]).out
    assert "{{" not in logs, logs


def test_a_placeholder_naming_no_input_fails_the_task_naming_it() -> None:
    with pytest.raises(TaskError, match="names no input of the task"):
        _format("msg", "{{$.inputs.parameters['pipelinechannel--gone']}}", {"msg": "x"})
    assert _format("msg", "{{$.inputs.parameters[\"n\"]}}/{{$.inputs.parameters['f']}}",
                   {"n": 3, "f": 2.0}) == "3/2"
