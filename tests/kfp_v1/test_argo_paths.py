"""kfp 1.x steps see Argo's fixed paths for real (``argo.paths`` + ``argo.placement``): real runs.

Each step's outputs and inputs are files at the absolute paths kfp 1.x compiled in, placed in
the task's sandbox: a path the step builds at run time works, an output under a volume is read
through it, and no path (``/etc/passwd``, a symlink the step leaves) touches host files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from millpond.errors import TaskFailure, UserError
from millpond.pipelines.argo.paths import ArgoPaths, InputPath, OutputPath, check_path, from_ir
from millpond.pipelines.argo.placement import Placement, PlacementError
from millpond.pipelines.loader import load_ir_text
from millpond.runners.base import Bind
from millpond.runners.sandbox import sandbox_problem
from tests.conftest import spawn_cli
from tests.queues_support import until

SEEDS = Path(__file__).parents[1] / "pipelines" / "kfp_v1"
needs_sandbox = pytest.mark.skipif(sandbox_problem() is not None, reason="no bubblewrap here")

# What a kfp 1.x step leaves: paths it builds at run time, a file_outputs path at the root and one
# over a host file, kfp's UI metadata at the root; the consumer reads the artifact at its input path.
_STEPS = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: paths-, labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}}
spec:
  entrypoint: paths
  templates:
  - name: paths
    dag:
      tasks:
      - {name: produce, template: produce}
      - name: consume
        template: consume
        dependencies: [produce]
        arguments:
          parameters:
          - {name: hostile, value: '{{tasks.produce.outputs.parameters.produce-hostile}}'}
          - {name: built, value: '{{tasks.produce.outputs.parameters.produce-built}}'}
          artifacts:
          - {name: produce-root, from: '{{tasks.produce.outputs.artifacts.produce-root}}'}
  - name: produce
    container:
      image: python:3.7
      command: [python3, -c]
      args:
      - |
        import json, os
        built = os.path.join("/tmp", "outputs", "Built", "data")
        os.makedirs(os.path.dirname(built), exist_ok=True)
        open(built, "w").write("built at run time\\n\\n")
        open("/result.txt", "w").write("at the root")
        open("/etc/passwd", "w").write("not the host's")
        json.dump({"outputs": [{"type": "markdown", "storage": "inline", "source": "# hi"}]},
                  open("/mlpipeline-ui-metadata.json", "w"))
    outputs:
      parameters:
      - name: produce-built
        valueFrom: {path: /tmp/outputs/Built/data}
      - name: produce-hostile
        valueFrom: {path: /etc/passwd}
      - {name: produce-missing, valueFrom: {path: /tmp/outputs/Missing/data, default: fallback}}
      artifacts:
      - {name: produce-root, path: /result.txt}
  - name: consume
    container:
      image: alpine
      command: [sh, -c, 'echo "hostile=$0 built=[$1]"; echo "root=$(cat /tmp/inputs/root/data)"']
      args: ['{{inputs.parameters.hostile}}', '{{inputs.parameters.built}}']
    inputs:
      parameters:
      - {name: hostile}
      - {name: built}
      artifacts:
      - {name: produce-root, path: /tmp/inputs/root/data}
"""


def _run_id(text: str) -> str:
    return re.findall(r"^run (\S+) [A-Z]+", text, re.M)[-1]


def _artifact(text: str, name: str) -> Path:
    return Path(re.search(rf"/{re.escape(name)} \(system\.Artifact\): (\S+)", text).group(1))


@needs_sandbox
def test_run_time_paths_root_files_and_a_host_file_path_work_and_cache(cli, home: Path, tmp_path: Path) -> None:
    passwd = Path("/etc/passwd").read_bytes()
    (tmp_path / "paths.yaml").write_text(_STEPS)
    first = cli("run", tmp_path / "paths.yaml")
    text = first.out + first.err
    assert first.code == 0, text
    logs = cli("runs", "logs", _run_id(text)).out
    # the built path was saved less one newline (Argo's trim); /etc/passwd was the step's own file
    assert "hostile=not the host's built=[built at run time\n]" in logs, logs
    assert "root=at the root" in logs, logs
    assert Path("/etc/passwd").read_bytes() == passwd
    assert '"# hi"' in _artifact(text, "produce.mlpipeline-ui-metadata").read_text()
    assert "consume.mlpipeline-ui-metadata" not in text  # optional: a step that writes none has none
    produced = cli("runs", "get", _run_id(text), "--output", "json").out
    assert '"produce-missing": "fallback"' in produced, produced  # no file: valueFrom's default
    assert not list((home / "staging").iterdir())  # every attempt's staging went with it
    second = cli("run", tmp_path / "paths.yaml")
    assert second.code == 0, second.err
    again = cli("runs", "logs", _run_id(second.out + second.err)).out
    assert again.count("cache hit") == 2, again
    assert _artifact(second.out + second.err, "produce.produce-root").read_text() == "at the root"


_FAILING = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {{generateName: symlink-, labels: {{pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}}}}
spec:
  entrypoint: leave
  templates:
  - name: leave
    container:
      image: alpine
      command: [sh, -c, 'mkdir -p /tmp/outputs/Output && ln -s {target} /tmp/outputs/Output/data']
    outputs:
      parameters:
      - name: leave-Output
        valueFrom: {{path: /tmp/outputs/Output/data}}
"""


@needs_sandbox
def test_a_symlink_left_as_an_output_fails_the_step_and_is_never_read(cli, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    (tmp_path / "link.yaml").write_text(_FAILING.format(target=secret))
    result = cli("run", tmp_path / "link.yaml")
    text = result.out + result.err
    assert "leave: FAILED" in text and "not a plain file" in text, text
    assert "SECRET" not in text


def test_a_path_leaving_its_place_is_refused_at_load_in_one_line(cli, tmp_path: Path) -> None:
    for path in ("/tmp/outputs/../../etc/x", "/proc/self/environ", "/", "relative/data"):
        text = _FAILING.format(target="/x").replace("/tmp/outputs/Output/data}", path + "}")
        (tmp_path / "bad.yaml").write_text(text)
        result = cli("run", tmp_path / "bad.yaml")
        assert result.code == 2 and result.err.startswith("error: ") and result.err.count("\n") == 1, result.err


_RETRIED = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: retried-, labels: {pipelines.kubeflow.org/kfp_sdk_version: 1.8.22}}
spec:
  entrypoint: main
  volumes:
  - {name: data, persistentVolumeClaim: {claimName: data-volume}}
  templates:
  - name: main
    dag:
      tasks:
      - {name: flaky, template: flaky}
  - name: flaky
    retryStrategy: {limit: 1}
    container:
      image: alpine
      command:
      - sh
      - -c
      - |
        if [ -s /tmp/outputs/Output/data ]; then echo stale > /tmp/outputs/Output/data; exit 0; fi
        mkdir -p /tmp/outputs/Output
        if [ ! -f /data/tried ]; then touch /data/tried; echo first > /tmp/outputs/Output/data; kill -9 $$; fi
        echo second > /tmp/outputs/Output/data
      volumeMounts:
      - {name: data, mountPath: /data}
    outputs:
      parameters:
      - name: flaky-Output
        valueFrom: {path: /tmp/outputs/Output/data}
"""


@needs_sandbox
def test_a_killed_attempt_leaves_no_staging_and_the_retry_gets_fresh_paths(cli, home: Path, tmp_path: Path) -> None:
    (home / "volumes" / "default" / "data-volume").mkdir(parents=True)
    (tmp_path / "retried.yaml").write_text(_RETRIED)
    result = cli("run", tmp_path / "retried.yaml", "--output", "json")
    assert result.code == 0, result.out + result.err
    assert (home / "volumes" / "default" / "data-volume" / "tried").exists()  # the first attempt ran and was killed
    assert '"second"' in result.out and "stale" not in result.out, result.out
    assert not list((home / "staging").iterdir())


@needs_sandbox
def test_a_cancelled_step_leaves_no_staging_on_the_host(home: Path, tmp_path: Path) -> None:
    (home / "volumes" / "default" / "data-volume").mkdir(parents=True)
    waiting = _RETRIED.replace("retryStrategy: {limit: 1}", "retryStrategy: {limit: 0}").replace(
        "if [ ! -f /data/tried ]", "echo partial > /tmp/outputs/Output/data; touch /data/started; sleep 600\n"
        "        if [ ! -f /data/tried ]")
    (tmp_path / "waiting.yaml").write_text(waiting)
    host_outputs = os.path.lexists("/tmp/outputs")
    engine = spawn_cli(home, "run", tmp_path / "waiting.yaml")
    try:
        started = home / "volumes" / "default" / "data-volume" / "started"
        until(lambda: started.exists() or engine.poll() is not None, 60, "the step to start")
        assert engine.poll() is None, engine.communicate()
        os.kill(engine.pid, signal.SIGINT)
        assert engine.wait(120) == 130
    finally:
        if engine.poll() is None:
            engine.kill()
    assert not list((home / "staging").iterdir())
    assert os.path.lexists("/tmp/outputs") == host_outputs  # the step's /tmp was its own


def _seed_002(tmp_path: Path, repo: Path) -> Path:
    """Seed 002's compiled workflow, with only what this host lacks changed: its python, ssh-keyscan, ~."""
    with tarfile.open(SEEDS / "seed002_fashion_mnist.tar.gz") as archive:
        workflow = yaml.safe_load(archive.extractfile("pipeline.yaml").read())  # type: ignore[union-attr]
    for template in workflow["spec"]["templates"]:
        container = template.get("container")
        if not container:
            continue
        if container["command"] == ["sh"]:
            script = container["args"][1]
            assert "ssh-keyscan bitbucket.org >> ~/.ssh/known_hosts && " in script
            container["args"][1] = script.replace("ssh-keyscan bitbucket.org >> ~/.ssh/known_hosts && ", "").replace(
                "~/.ssh", "$TMPDIR/.ssh")  # no network here; the host's ~ is not the pod's
        else:
            assert container["command"][0] == "/opt/conda/envs/kubeflow-mnist/bin/python"
            container["command"][0] = "python3"
    path = tmp_path / "seed002.yaml"
    path.write_text(yaml.safe_dump(workflow))
    return path


_PREPROCESSING = """import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument('--data_dir')
data_dir = parser.parse_args().data_dir
os.makedirs(data_dir, exist_ok=True)
json.dump({'train': [1, 2, 3], 'test': [4, 5]}, open(os.path.join(data_dir, 'data.json'), 'w'))
"""
_TRAIN = """import argparse, json, os
PROJECT_ROOT = '/workspace/kubeflow-mnist'
parser = argparse.ArgumentParser()
parser.add_argument('--data_dir')
data = json.load(open(os.path.join(parser.parse_args().data_dir, 'data.json')))
with open(os.path.join(PROJECT_ROOT, 'output.txt'), 'w') as f:
    f.write('test accuracy: %d/%d\\n' % (sum(data['test']), sum(data['train'])))
"""


@needs_sandbox
def test_seed_002_runs_and_its_output_is_the_file_train_py_wrote(cli, home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "kubeflow-mnist"
    repo.mkdir()
    (repo / "preprocessing.py").write_text(_PREPROCESSING)
    (repo / "train.py").write_text(_TRAIN)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "seed 002"]):
        subprocess.run([*git, *command], check=True)
    key = cli("secret", "create", "ssh-key-secret", "--from-literal", "id_rsa=not-a-real-key")
    assert key.code == 0, key.err
    result = cli("run", _seed_002(tmp_path, repo), "-p", f"repo_url={repo}", "-p", "image=local/kubeflow-mnist")
    text = result.out + result.err
    assert result.code == 0 and "training-and-evaluation: SUCCEEDED" in text, text
    output = _artifact(text, "training-and-evaluation.training-and-evaluation-output")
    assert output.read_text() == "test accuracy: 9/6\n"
    volume = next(p for p in (home / "volumes" / "default").iterdir() if p.is_dir())  # the VolumeOp's PVC
    assert (volume / "kubeflow-mnist" / "output.txt").read_text() == "test accuracy: 9/6\n"


# --- the path rules, fuzzed ---------------------------------------------------------------------

_SEGMENT = st.sampled_from(["..", ".", "", "proc", "etc", "passwd", "link", "dir", "data", "x y", "é"])


@given(st.lists(_SEGMENT, min_size=0, max_size=6), st.booleans())
def test_check_path_accepts_only_normal_absolute_paths_outside_the_kernel(segments: list[str], rooted: bool) -> None:
    path = ("/" if rooted else "") + "/".join(segments)
    try:
        checked = check_path(path, "fuzz")
    except UserError as exc:
        assert str(exc).startswith("fuzz: ")
        return
    assert checked == os.path.normpath(checked) and checked.startswith("/") and checked != "/"
    assert ".." not in checked.split("/") and not checked.startswith(("/proc/", "/sys/", "/dev/"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_SEGMENT, min_size=1, max_size=5), st.sampled_from(["parameter", "artifact"]), st.booleans())
def test_hostile_paths_under_a_volume_never_read_or_write_outside_it(tmp_path: Path, segments: list[str],
                                                                     kind: str, as_input: bool) -> None:
    """A volume a step left with links out (``link -> outside``, ``passwd -> outside/passwd``): whatever path
    the step names under it, placing inputs there and reading outputs back stays inside the task's folders."""
    case = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    volume, outside, attempt = case / "volume", case / "outside", case / "attempt"
    for folder in (volume / "dir", outside):
        folder.mkdir(parents=True)
    (outside / "passwd").write_text("SECRET")
    (volume / "link").symlink_to(outside)
    (volume / "passwd").symlink_to(outside / "passwd")
    (volume / "dir" / "data").write_text("fine")
    path = "/vol/" + "/".join(segments)
    try:
        check_path(path, "fuzz")
    except UserError:
        return
    paths = ArgoPaths(inputs=(InputPath(path=path, raw="placed"),)) if as_input else ArgoPaths(
        outputs=(OutputPath(name="out", kind=kind, path=path),))
    before = sorted((p, p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    try:
        placement = Placement(paths, attempt, [Bind(volume, "/vol")], None)
        placement.prepare({}, lambda text: text)
        if as_input:
            return
        values = placement.parameters(lambda text: text)
        placement.artifacts(lambda name: case / "published" / name)
    except (TaskFailure, OSError):
        pass  # refused in a line (a link, a folder, no file): what matters is what was read and written
    else:
        assert "SECRET" not in "".join(values.values())
        published = case / "published" / "out"
        assert not published.is_file() or published.read_text() != "SECRET"
    finally:
        after = sorted((p, p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
        assert after == before


def test_without_a_sandbox_a_declared_path_fails_saying_so_and_the_ui_outputs_are_skipped(tmp_path: Path) -> None:
    ui = OutputPath(name="mlpipeline-ui-metadata", kind="artifact", path="/mlpipeline-ui-metadata.json",
                    optional=True, implicit=True)
    placement = Placement(ArgoPaths(outputs=(ui,)), tmp_path / "a", [], "bubblewrap (bwrap) is not installed")
    assert placement.binds == [] and placement.outputs == []
    declared = OutputPath(name="out", kind="parameter", path="/tmp/outputs/Output/data")
    with pytest.raises(PlacementError, match="/tmp/outputs/Output/data needs a private mount namespace: bubblewrap"):
        Placement(ArgoPaths(outputs=(ui, declared)), tmp_path / "b", [], "bubblewrap (bwrap) is not installed")


def test_the_record_round_trips_and_a_hand_written_one_is_checked() -> None:
    paths = ArgoPaths(outputs=(OutputPath(name="p", kind="parameter", value="{{$.pipeline_task_uuid}}"),
                               OutputPath(name="a", kind="artifact", path="/a.txt", optional=True)),
                      inputs=(InputPath(path="/tmp/inputs/x/data", name="x"),))
    assert from_ir(paths.to_ir(), "ir") == paths
    for bad in ({"outputs": [{"name": "a", "kind": "artifact"}]}, {"inputs": [{"path": "/proc/1/mem", "name": "x"}]},
                {"outputs": "no"}, {"other": []}, {"outputs": 3}, {"inputs": True}):
        with pytest.raises(UserError):
            from_ir(bad, "ir")


def test_the_loader_keeps_a_good_record_and_refuses_a_hostile_one() -> None:
    corpus = Path("/work/shared/conformance/kfp-v1")
    if not (corpus / "two_step.yaml").exists():
        pytest.skip("the kfp-v1 corpus is not here")
    loaded = load_ir_text((corpus / "two_step.yaml").read_text(), "two_step.yaml")
    containers = [e["container"] for e in loaded.spec["deploymentSpec"]["executors"].values() if "container" in e]
    records = [from_ir(c["argoPaths"], "ir") for c in containers if "argoPaths" in c]
    assert records and all(r.outputs for r in records)  # each step's paths survive protobuf's check
    spec = json.loads(json.dumps(loaded.spec))
    container = next(c for c in spec["deploymentSpec"]["executors"].values() if "argoPaths" in c.get("container", {}))
    container["container"]["argoPaths"]["outputs"][0]["path"] = "/proc/self/environ"
    with pytest.raises(UserError, match=r"argoPaths.outputs\[0\].*where no step file may be"):
        load_ir_text(yaml.safe_dump(spec), "hand-written.yaml")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["/a", "/proc/x", "x", "parameter", "artifact", "n"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["outputs", "inputs", "name", "kind", "path", "value", "raw", "optional", "default"]),
        children, max_size=4),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_any_hand_written_record_is_read_or_refused_in_one_line(value: object) -> None:
    try:
        paths = from_ir(value, "ir")
    except UserError as exc:
        assert str(exc).startswith("ir") and "\n" not in str(exc)
        return
    assert from_ir(paths.to_ir(), "ir") == paths
    for path in paths.paths:
        assert check_path(path, "again") == path


def test_a_sub_path_is_rendered_as_the_task_starts_and_may_not_leave_its_volume(tmp_path: Path) -> None:
    from millpond.pipelines.placeholders import PlaceholderContext
    from millpond.pipelines.platform import PlatformError, PodInfo, prepare_platform
    from millpond.store.secrets import ConfigStore

    (tmp_path / "volumes" / "default" / "data").mkdir(parents=True)
    entry = {"constant": "data", "mountPath": "/in",
             "subPath": "artifact_data/{{$.pipeline_job_uuid}}_{{$.pipeline_task_uuid}}/{{$.inputs.parameters['x']}}"}

    def prepare(x: str) -> Any:
        context = PlaceholderContext({"inputs": {"parameterValues": {"x": x}}},
                                     job={"pipeline_job_uuid": "run", "pipeline_task_uuid": "task"})
        return prepare_platform({"pvcMount": [entry]}, resolve=lambda binding: None, configs=ConfigStore(tmp_path),
                                volumes_dir=tmp_path / "volumes", scratch_dir=tmp_path / "scratch",
                                pod=PodInfo(name="p"), render=context.substitute)

    bind = prepare("Output").binds[0]
    assert bind.source == tmp_path / "volumes" / "default" / "data" / "artifact_data" / "run_task" / "Output"
    assert bind.source.is_dir() and bind.target == "/in"
    with pytest.raises(PlatformError, match="without '..'"):
        prepare("../../../../etc")


def test_a_path_in_a_host_folder_the_step_shares_is_refused(tmp_path: Path) -> None:
    """Under millpond's own folder in /tmp (kept visible in the step's private /tmp), a mount point would be
    made on the host: such a path fails the step instead."""
    if not tmp_path.is_relative_to("/tmp"):
        pytest.skip("the test folder is not under /tmp")
    paths = ArgoPaths(outputs=(OutputPath(name="out", kind="parameter", path=f"{tmp_path}/new/data"),))
    with pytest.raises(PlacementError, match="a folder of this machine the step sees as it is"):
        Placement(paths, tmp_path / "attempt", [], None, keep=[tmp_path / "attempt"])
    assert not (tmp_path / "new").exists()


@needs_sandbox
def test_a_private_tmp_shows_only_the_host_entries_holding_the_tasks_own_folders(tmp_path: Path) -> None:
    from millpond.runners.sandbox import wrap

    if not tmp_path.is_relative_to("/tmp"):
        pytest.skip("the test folder is not under /tmp")
    own = "/tmp/" + tmp_path.relative_to("/tmp").parts[0]
    (tmp_path / "private").mkdir()
    (tmp_path / "work").mkdir()
    words = wrap(["true"], [Bind(tmp_path / "private", "/tmp")], tmp_path / "work", "/usr/bin:/bin")
    shown = [words[i + 1] for i, word in enumerate(words) if word in ("--bind", "--dev-bind", "--ro-bind", "--symlink")
             and words[i + 2].startswith("/tmp/")]
    assert shown == [own]  # its working folder's entry, and no other of the host's /tmp
    assert len(words) < 1000
    run = subprocess.run(words, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
