"""kfp 1.x Argo workflows of the kfp-v1 corpus run end to end on the engine, translated to IR (``argo.to_ir``).

Each case is a corpus row run as ``millpond run FILE`` with the row's parameters; its end state
must be the row's (EXPECTED.tsv). Rows that need what the translation still refuses (volumes,
input artifacts, sidecars, resource templates) are checked to be refused in one line.
"""

from __future__ import annotations

import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from millpond.pipelines import conditions
from millpond.pipelines.argo.reader import load_workflow
from millpond.pipelines.argo.to_ir import translate
from millpond.pipelines.resources import task_request, with_inputs

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/kfp-v1")
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the kfp-v1 corpus is not here")


def _expected() -> dict[str, tuple[str, dict[str, str]]]:
    rows = {}
    for line in (CORPUS / "EXPECTED.tsv").read_text().splitlines()[1:]:
        name, state, params, _ = line.split("\t", 3)
        rows[name] = (state, {} if params == "-" else json.loads(params))
    return rows


RUNS = [
    "hello_world.yaml", "condition.yaml", "fail.yaml", "withitem_basic.yaml", "withparam_output_dict.yaml",
    "loop_static.yaml", "imagepullsecrets.yaml",
    "nested_condition.yaml", "pipeline_transformers.yaml", "two_step.yaml", "legacy_data_passing.yaml",
    "input_artifact_raw_value.yaml", "output_a_directory.yaml", "data_passing_in_python_components_files.yaml",
    "add_pod_env.yaml", "volume.yaml", "volumeop_basic.yaml", "volumeop_dag.yaml", "volumeop_sequential.yaml",
    "sidecar.yaml", "sequential.yaml", "reused_component.yaml", "legacy_exit_handler.yaml", "recursion.yaml",
    "loop_over_lightweight_output.yaml", "parallelfor_item_argument_resolving.yaml", "withitem_nested.yaml",
    "volume_snapshotop_sequential.yaml", "resource_spec.yaml", "runtime_resource_request.yaml",
    "parallelfor_pipeline_param_in_items_resolving.yaml", "artifact_passing_using_volume.yaml",
]
# The corpus' host has no gsutil (its README); some hosts do, and there it would fetch from the network.
NO_GSUTIL = {"sequential.yaml", "reused_component.yaml", "legacy_exit_handler.yaml",
             "volume_snapshotop_sequential.yaml"}
# What each step must have printed: values and files really reached it (not only a state).
LOGS = {
    "input_artifact_raw_value.yaml": ["Constant artifact value", "Text from a file with hard-coded artifact value"],
    "legacy_data_passing.yaml": ["consume_anything_as_file: anything_param", "consume_anything_as_file: produce_string",
                                 "consume_anything_as_value: constant"],
    "condition.yaml": ["heads"],
    # withItems' tags rendered before the loop (pipeline parameters and task outputs), never passed as written
    "parallelfor_pipeline_param_in_items_resolving.yaml": ["consume <==\nMy name is Alice", "consume-2 <==\nBob"],
    "legacy_exit_handler.yaml": ["exit!"],  # the exit handler ran after the failure
    "add_pod_env.yaml": ["test-adding-pod-env-"],  # $KFP_POD_NAME from the pod's metadata.name
    "volumeop_sequential.yaml": ["==> volumeop-sequential/step3 <==\n1\n1"],  # written through the claim twice
    # outputs written under subPath mounts with tags, read back through the volume, reached the consumer
    "artifact_passing_using_volume.yaml": ["Input parameter = Data 1\nInput artifact = \nData 2"],
}


@pytest.mark.parametrize("name", RUNS)
def test_corpus_row_reaches_its_expected_state(cli, home: Path, name: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if name in NO_GSUTIL:
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "gsutil").write_text('#!/bin/sh\necho "sh: 1: gsutil: not found" >&2\nexit 127\n')
        (tmp_path / "bin" / "gsutil").chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    state, params = _expected()[name]
    args = [a for key, value in params.items() for a in ("-p", f"{key}={value}")]
    if name == "volume.yaml":  # the corpus' precondition: a secret user-gcp-sa (any content)
        assert cli("secret", "create", "user-gcp-sa", "--from-literal", "user-gcp-sa.json={}").code == 0
    if name == "artifact_passing_using_volume.yaml":  # the corpus' precondition: a PVC data-volume
        (home / "volumes" / "data-volume").mkdir(parents=True)
    result = cli("run", CORPUS / name, *args)
    text = result.out + result.err
    final = [line for line in text.splitlines() if line.startswith("run ") and " (" not in line]
    assert final and final[-1].split()[2].rstrip(":") == state, text
    if name == "condition.yaml":  # forced heads: the branch under `when: heads == heads` ran
        assert "single-condition-pipeline/condition-1: SUCCEEDED" in text, text
    if name == "sidecar.yaml":  # the host has no nginx: the step fails at once, naming the sidecar
        assert "sidecar 'echo': command not found on this machine: 'nginx'" in text, text
    logs = cli("runs", "logs", final[-1].split()[1])
    for tag in ("{{workflow.", "{{tasks.", "{{inputs.", "{{item", "{{pod."):  # every Argo tag was rendered
        assert tag not in logs.out, logs.out
    if name in LOGS:
        for expected in LOGS[name]:
            assert expected in logs.out, logs.out


@pytest.mark.parametrize("suffix", [".tar.gz", ".zip"])
def test_a_compiled_package_runs_like_its_yaml(cli, tmp_path: Path, suffix: str) -> None:
    """dsl-compile's package (pipeline.yaml inside a .tar.gz, or a .zip) runs from the CLI."""
    package = tmp_path / f"hello{suffix}"
    if suffix == ".zip":
        with zipfile.ZipFile(package, "w") as archive:
            archive.write(CORPUS / "hello_world.yaml", "pipeline.yaml")
    else:
        with tarfile.open(package, "w:gz") as archive:
            archive.add(CORPUS / "hello_world.yaml", arcname="pipeline.yaml")
    result = cli("run", package)
    assert result.code == 0 and "my-first-pipeline/echo-op: SUCCEEDED" in result.err, result.out + result.err


def test_a_missing_required_parameter_is_refused_before_running(cli) -> None:
    result = cli("run", CORPUS / "fail_parameter_value_missing.yaml")
    assert result.code == 2
    assert result.err.strip().count("\n") == 0 and "parameter" in result.err


def test_a_sidecar_runs_beside_its_step_and_is_stopped(cli, tmp_path: Path) -> None:
    text = (CORPUS / "sidecar.yaml").read_text()
    text = text.replace("command: [nginx, -g, daemon off;]", "command: [sh, -c, 'echo up > sidecar-up; sleep 600']")
    polling = ("'until wget http://localhost:80 -O /tmp/results.txt; do sleep 5; done\n"
               "          && cat /tmp/results.txt'")
    text = text.replace(polling, "'until [ -f sidecar-up ]; do sleep 0.1; done; cat sidecar-up | tee /tmp/results.txt'")
    assert "sidecar-up; sleep 600" in text and "until [ -f sidecar-up ]" in text
    (tmp_path / "sidecar_ok.yaml").write_text(text)
    result = cli("run", tmp_path / "sidecar_ok.yaml")
    # the run ends (the sidecar's sleep 600 was stopped) and succeeds (the step saw the sidecar's file)
    assert result.code == 0 and "pipeline-with-sidecar/download: SUCCEEDED" in result.err, result.out + result.err


def test_a_volume_snapshot_is_a_copy_of_the_volume_at_that_point(cli, home: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gsutil").write_text('#!/bin/sh\nexit 127\n')
    (tmp_path / "gsutil").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    result = cli("run", CORPUS / "volume_snapshotop_sequential.yaml", "-p", "url=gs://ml-pipeline/shakespeare1.txt")
    assert result.code == 0, result.out + result.err
    volumes = {p.name.rsplit("-", 2)[-2] + "-" + p.name.rsplit("-", 1)[-1]: p
               for p in (home / "volumes" / "default").iterdir() if p.is_dir()}
    assert sorted(p.name for p in volumes["step1-snap"].iterdir()) == ["step1"]
    assert sorted(p.name for p in volumes["step2-snap"].iterdir()) == ["step1", "step2"]
    assert (volumes["step3-snap"] / "step3" / "file3").is_file()


@pytest.mark.parametrize("name", ["resource_ops.yaml"])
def test_what_is_not_translated_yet_is_refused_in_one_line(cli, name: str) -> None:
    result = cli("run", CORPUS / name)
    assert result.code == 2, result.out
    assert result.err.startswith("error: ") and result.err.strip().count("\n") == 0, result.err


def test_a_when_becomes_a_trigger_over_hidden_inputs() -> None:
    spec, _ = translate(load_workflow(CORPUS / "condition.yaml"))
    task = spec["components"]["comp-single-condition-pipeline"]["dag"]["tasks"]["condition-1"]
    condition = task["triggerPolicy"]["condition"]
    assert condition.startswith("argoWhen(") and "argo-when-1" in condition
    binding = task["inputs"]["parameters"]["argo-when-1"]
    assert binding["taskOutputParameter"]["producerTask"] == "flip-coin"
    assert "parameterExpressionSelector" not in binding  # the launcher saved it trimmed, as Argo does
    assert task["dependentTasks"] == ["flip-coin"]


def test_requests_and_limits_reach_the_executor() -> None:
    spec, _ = translate(load_workflow(CORPUS / "resource_spec.yaml"))
    resources = spec["deploymentSpec"]["executors"]["exec-training-op"]["container"]["resources"]
    assert resources == {"resourceCpuRequest": "1", "resourceCpuLimit": "1",
                         "resourceMemoryRequest": "512Mi", "resourceMemoryLimit": "512Mi"}


def test_a_pod_spec_patch_sets_quantities_the_engine_fills_at_run_time() -> None:
    spec, _ = translate(load_workflow(CORPUS / "runtime_resource_request.yaml"))
    container = spec["deploymentSpec"]["executors"]["exec-training-op"]["container"]
    assert container["resources"] == {
        "resourceCpuRequest": "200m",  # the step's own request; its limits come from the patch
        "resourceMemoryLimit": "{{$.inputs.parameters['generate-resource-request-memory']}}",
        "resourceCpuLimit": "{{$.inputs.parameters['generate-resource-request-cpu']}}"}
    filled = with_inputs(container, {"generate-resource-request-memory": "500Mi",
                                     "generate-resource-request-cpu": "300m"})
    request = task_request(filled)
    assert (request.cpu, request.memory) == (0.2, 500 * 1024 * 1024)
    with pytest.raises(ValueError, match="names no input"):
        with_inputs(container, {})


def test_argo_functions_follow_argo() -> None:
    heads = json.dumps('"{{inputs.parameters.w}}" == "heads"')
    assert conditions.condition_holds(f"argoWhen({heads}, inputs.parameter_values)", {"w": "heads"})
    assert not conditions.condition_holds(f"argoWhen({heads}, inputs.parameter_values)", {"w": "tails"})
    assert not conditions.condition_holds(
        'argoWhen("{{inputs.parameters.w}} > 5", inputs.parameter_values)', {"w": "3"})
    assert conditions.select("argoTrim(string_value)", "heads\n") == "heads"
    assert conditions.select("argoTrim(string_value)", "a\n\n") == "a\n"
    assert conditions.select('argoItem(string_value, "a")', {"a": 1, "b": "x"}) == "1"
    assert conditions.select('argoItem(string_value, "")', {"a": 1}) == '{"a":1}'
    assert conditions.select('argoItem(string_value, "")', "plain") == "plain"
    assert conditions.select('argoItem(string_value, "")', 3.0) == "3"
    with pytest.raises(conditions.ConditionError, match="no field 'z'"):
        conditions.select('argoItem(string_value, "z")', {"a": 1})
    with pytest.raises(conditions.ConditionError, match="no parameter 'heads' found"):
        conditions.condition_holds(f"argoWhen({json.dumps('{{inputs.parameters.w}}')}, inputs.parameter_values)",
                                   {"w": "heads"})


def test_argo_calls_skip_celpy_but_agree_with_it() -> None:
    """to_ir's exact calls are evaluated in Python (shallow, for recursive graphs); other spellings still by CEL."""
    heads = json.dumps('"{{inputs.parameters.w}}" == "heads"')
    for values in ({"w": "heads"}, {"w": "tails"}):
        direct = conditions.condition_holds(f"argoWhen({heads}, inputs.parameter_values)", values)
        through_cel = conditions.condition_holds(f"argoWhen({heads}, inputs.parameter_values) == true", values)
        assert direct == through_cel == (values["w"] == "heads")
    assert conditions.select("argoTrim(string_value) + ''", "x\n") == conditions.select("argoTrim(string_value)", "x\n")


def test_a_cached_rerun_of_a_recursion_replays_its_levels_and_ends(cli, tmp_path: Path) -> None:
    """recursive_while loops while a cached coin says heads. Each level of the recursion is its
    own execution (keyed by its depth): the first run flips at every level, a re-run takes every
    level from the cache and stops where the first stopped, instead of repeating level 1 for ever."""
    flips = tmp_path / "flips"
    script = tmp_path / "flip.sh"  # heads for the first four flips (flip and flip-2 race for two of them)
    # flip and flip-2 run at once: the count is read and rewritten under a lock, or both could
    # read the same n and the recursion would get one level more.
    script.write_text(f'exec 9>{flips}.lock; flock 9\n'
                      f'n=$(($(cat {flips} 2>/dev/null || echo 0) + 1)); echo $n > {flips}\n'
                      'if [ $n -le 4 ]; then echo heads; else echo tails; fi\n')
    coin = ("python -c \"import random; result = ''heads'' if random.randint(0,1)\n"
            "          == 0 else ''tails''; print(result)\"")
    text = (CORPUS / "recursive_while.yaml").read_text()
    assert text.count(coin) == 3
    (tmp_path / "while.yaml").write_text(text.replace(coin, f"sh {script}"))

    runs = []
    for _ in range(2):
        result = cli("run", tmp_path / "while.yaml", "-o", "json")
        assert result.code == 0, result.err[-3000:]
        runs.append(result.json())
    first, second = runs
    assert first["state"] == second["state"] == "SUCCEEDED"
    assert flips.read_text().strip() == "5"  # 2 at the root + 3 levels (heads, heads, tails); none in the re-run
    levels = [t for t in first["tasks"] if t["name"] == "flip-3"]
    assert len(levels) == 3 and not any(t["cached"] for t in levels)
    replayed = [t for t in second["tasks"] if t["name"] == "flip-3"]
    assert sorted(t["path"] for t in replayed) == sorted(t["path"] for t in levels)
    assert all(t["cached"] for t in replayed)
