"""Reading kfp 1.x compiled Argo Workflows (issue 17's foundation): the v1 corpus, packages, refusals.

Every workflow of ``../shared/conformance/kfp-v1`` loads into the typed model, or is refused in
one line when its EXPECTED.tsv row says REFUSED for a reason the workflow itself shows (a
ResourceOp of a Job). ``fail_parameter_value_missing`` is REFUSED only when submitted without its
parameter: it loads, and the model names the parameter missing.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from millpond.errors import UserError
from millpond.pipelines.argo import package, scopes
from millpond.pipelines.argo.model import Workflow
from millpond.pipelines.argo.reader import is_argo_workflow, load_workflow, load_workflow_text

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/kfp-v1")
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared kfp-v1 corpus is not here")

# The REFUSED rows refused when the workflow is read, with a piece of their one error line.
REFUSED_ON_LOAD = {
    "resource_ops.yaml": "a resource template that does 'create' on a batch/v1 Job",
}


def _rows() -> dict[str, list[str]]:
    rows = (CORPUS / "EXPECTED.tsv").read_text().splitlines()
    reader = csv.reader((row for row in rows if row and not row.startswith("#")), delimiter="\t")
    return {row[0]: row for row in reader}


def _expected() -> dict[str, str]:
    return {name: row[1] for name, row in _rows().items()}


def _corpus() -> list[str]:
    return sorted(p.name for p in CORPUS.glob("*.yaml")) if CORPUS.is_dir() else []


def test_every_corpus_file_has_an_expected_row() -> None:
    assert set(_expected()) == set(_corpus())
    assert len(_corpus()) == 44


@pytest.mark.parametrize("name", _corpus())
def test_corpus_workflow_loads_or_is_refused_in_one_line(name: str) -> None:
    path = CORPUS / name
    if name in REFUSED_ON_LOAD:
        assert _expected()[name] == "REFUSED"
        with pytest.raises(UserError) as refused:
            load_workflow(path)
        message = str(refused.value)
        assert "\n" not in message and message.startswith(str(path))
        assert REFUSED_ON_LOAD[name] in message
        return
    workflow = load_workflow(path)
    assert isinstance(workflow, Workflow)
    assert workflow.entrypoint in workflow.templates
    assert workflow.sdk_version == "1.8.22"
    assert is_argo_workflow(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("name", _corpus())
def test_expected_parameters_bind_and_refused_rows_are_refused_before_running(name: str) -> None:
    """EXPECTED.tsv's parameters bind to each workflow; every REFUSED row is refused at load or at binding."""
    row = _rows()[name]
    given = {} if row[2] == "-" else json.loads(row[2])
    try:
        workflow = load_workflow(CORPUS / name)
        scopes.workflow_values(workflow, "run-1", "uid-1", given)
    except UserError as exc:
        assert row[1] == "REFUSED", f"{name}: {exc}"
        assert "\n" not in str(exc)
        return
    assert row[1] != "REFUSED", f"{name} is REFUSED in EXPECTED.tsv but loads and binds"


def test_missing_required_parameter_is_named() -> None:
    workflow = load_workflow(CORPUS / "fail_parameter_value_missing.yaml")
    assert workflow.missing_parameters({}) == ["parameter"]
    assert workflow.missing_parameters({"parameter": "x"}) == []


def test_volume_op_is_a_claim_with_json_path_outputs() -> None:
    workflow = load_workflow(CORPUS / "volumeop_basic.yaml")
    assert workflow.name == "VolumeOp Basic" and workflow.run_name_prefix == "volumeop-basic-"
    create = workflow.template("create-pvc")
    assert create.kind == "resource" and create.resource is not None and create.resource.claim is not None
    assert create.resource.claim.name == "{{workflow.name}}-my-pvc"
    assert create.resource.claim.size == "{{inputs.parameters.size}}"
    assert create.resource.claim.access_modes == ("ReadWriteMany",)
    outputs = {p.name: p.json_path for p in create.outputs.parameters}
    assert outputs == {"create-pvc-manifest": (), "create-pvc-name": ("metadata", "name"),
                       "create-pvc-size": ("status", "capacity", "storage")}
    cop = workflow.template("cop")
    assert cop.volumes[0].kind == "persistentVolumeClaim"
    assert cop.volumes[0].source == "{{inputs.parameters.create-pvc-name}}"
    assert cop.container is not None and cop.container.volume_mounts[0].mount_path == "/mnt"
    root = workflow.template(workflow.entrypoint)
    assert root.task("cop") is not None and root.task("cop").dependencies == ("create-pvc",)  # type: ignore[union-attr]


def test_volume_snapshot_op_names_its_source_claim() -> None:
    workflow = load_workflow(CORPUS / "volume_snapshotop_sequential.yaml")
    snap = workflow.template("step1-snap").resource
    assert snap is not None and snap.snapshot is not None
    assert snap.snapshot.source == "{{inputs.parameters.create-volume-name}}"
    assert snap.success_condition == "status.readyToUse == true"


def test_kfp_metadata_caching_and_component_spec() -> None:
    workflow = load_workflow(CORPUS / "recursion.yaml")
    flip = workflow.template("flip-coin")
    assert flip.caching.enabled and flip.caching.max_staleness == "P0D"
    spec = load_workflow(CORPUS / "resource_spec.yaml")
    step = next(t for t in spec.templates.values() if t.container is not None)
    assert step.caching.enabled and step.caching.max_staleness == "P0D"  # kfp 1.x: "caching off" is staleness 0
    document = _hello()
    document["spec"]["templates"][0]["metadata"]["labels"]["pipelines.kubeflow.org/enable_caching"] = "false"
    assert not load_workflow_text(yaml.safe_dump(document), "w.yaml").template("echo-op").caching.enabled
    assert dict(step.container.resources.limits) == {"cpu": "1", "memory": "512Mi"}  # type: ignore[union-attr]
    hello = load_workflow(CORPUS / "hello_world.yaml").template("echo-op")
    assert hello.component_spec is not None and hello.component_spec["name"] == "Echo op"


def test_loops_conditions_exit_handler_sidecar_and_patch() -> None:
    nested = load_workflow(CORPUS / "withitem_nested.yaml")
    loop = nested.template("my-pipeline").task("for-loop-2")
    assert loop is not None and loop.with_items == ({"a": 1, "b": 2}, {"a": 10, "b": 20})
    assert nested.template("for-loop-2").parallelism == 0
    param = load_workflow(CORPUS / "withparam_global.yaml")
    assert any(t.with_param == "{{workflow.parameters.loopidy_doop}}" for t in param.template(param.entrypoint).dag)
    condition = load_workflow(CORPUS / "condition.yaml")
    assert any(task.when for t in condition.templates.values() for task in t.dag)
    exit_handler = load_workflow(CORPUS / "legacy_exit_handler.yaml")
    assert exit_handler.on_exit == "echo"
    sidecar = load_workflow(CORPUS / "sidecar.yaml").template("download").sidecars[0]
    assert sidecar.name == "echo" and sidecar.container.command == ("nginx", "-g", "daemon off;")
    patch = load_workflow(CORPUS / "runtime_resource_request.yaml").template("training-op").pod_spec_patch
    assert patch is not None and patch["containers"][0]["name"] == "main"
    raw = load_workflow(CORPUS / "input_artifact_raw_value.yaml").template("component-with-input-artifact")
    assert raw.inputs.artifacts[0].raw == "Constant artifact value"
    legacy = load_workflow(CORPUS / "legacy_data_passing.yaml")
    assert {a.name for a in legacy.artifacts} == {"anything_param", "something_param", "string_param"}
    volume = load_workflow(CORPUS / "volume.yaml")
    assert any(v.kind == "secret" and v.source == "user-gcp-sa" for t in volume.templates.values() for v in t.volumes)
    env = load_workflow(CORPUS / "add_pod_env.yaml")
    sources = {e.name: (e.source, e.key) for t in env.templates.values() if t.container for e in t.container.env}
    assert sources["KFP_POD_NAME"] == ("fieldRef", "metadata.name")
    assert load_workflow(CORPUS / "pipeline_parallelism_limits.yaml").parallelism == 1


# ---- packages -------------------------------------------------------------------------------------


def _tar(members: dict[str, bytes], kinds: dict[str, bytes] | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kinds and name in kinds:
                info.type = kinds[name]
                info.linkname = "/etc/passwd"
                info.size = 0
                archive.addfile(info)
            else:
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("suffix", [".tar.gz", ".tgz", ".zip"])
def test_archives_load_the_same_workflow(tmp_path: Path, suffix: str) -> None:
    source = CORPUS / "volumeop_dag.yaml"
    data = source.read_bytes()
    packed = _zip({"pipeline.yaml": data}) if suffix == ".zip" else _tar({"pipeline.yaml": data})
    path = tmp_path / f"pipeline{suffix}"
    path.write_bytes(packed)
    from_archive = load_workflow(path)
    direct = load_workflow(source)
    assert from_archive.templates == direct.templates and from_archive.parameters == direct.parameters


@pytest.mark.parametrize(("members", "problem"), [
    ({"../pipeline.yaml": b"x"}, "reaches outside the archive"),
    ({"/pipeline.yaml": b"x"}, "absolute path"),
    ({"a/../../pipeline.yaml": b"x"}, "reaches outside the archive"),
    ({"README": b"x"}, "no pipeline.yaml"),
    ({"pipeline.yaml": b"\xff\xfe"}, "not UTF-8"),
    ({"pipeline.yaml": b"a: 1", "x/pipeline.yaml": b"a: 1"}, "more than one pipeline.yaml"),
    ({f"f{i}": b"" for i in range(package.MAX_MEMBERS + 1)}, "more than 64 members"),
])
@pytest.mark.parametrize("kind", ["tar", "zip"])
def test_hostile_archives_are_refused_in_one_line(tmp_path: Path, members: dict[str, bytes], problem: str,
                                                  kind: str) -> None:
    path = tmp_path / ("p.tar.gz" if kind == "tar" else "p.zip")
    path.write_bytes(_tar(members) if kind == "tar" else _zip(members))
    with pytest.raises(package.PackageError) as refused:
        load_workflow(path)
    assert problem in str(refused.value) and "\n" not in str(refused.value)


def test_links_and_bombs_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    link = tmp_path / "link.tar.gz"
    link.write_bytes(_tar({"pipeline.yaml": b""}, kinds={"pipeline.yaml": tarfile.SYMTYPE}))
    with pytest.raises(package.PackageError, match="link or device"):
        load_workflow(link)
    monkeypatch.setattr(package, "MAX_UNPACKED_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(_tar({"big": b"\0" * (4 * 1024 * 1024), "pipeline.yaml": b"a: 1"}))
    with pytest.raises(package.PackageError, match="decompresses to more than"):
        load_workflow(bomb)
    for name, data in (("corrupt.tar.gz", b"\x1f\x8b" + b"garbage" * 10), ("corrupt.zip", b"PK\x03\x04garbage"),
                       ("plain.zip", b"not an archive")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(package.PackageError, match="not a readable|not a .tar.gz or .zip"):
            load_workflow(tmp_path / name)


# ---- recognition and refusals ---------------------------------------------------------------------


def _hello() -> dict:
    return yaml.safe_load((CORPUS / "hello_world.yaml").read_text())


def _refusal(document: object) -> str:
    with pytest.raises(UserError) as refused:
        load_workflow_text(yaml.safe_dump(document), "w.yaml")
    message = str(refused.value)
    assert "\n" not in message and message.startswith("w.yaml")
    return message


def test_v2_ir_and_hand_written_argo_are_not_v1_pipelines() -> None:
    assert not is_argo_workflow({"pipelineInfo": {"name": "x"}, "root": {}})
    assert "not a compiled KFP v1 pipeline" in _refusal({"pipelineInfo": {"name": "x"}, "root": {}})
    plain = _hello()
    plain["metadata"] = {"generateName": "x-"}
    assert "without kfp's pipelines.kubeflow.org/" in _refusal(plain)
    template = {**_hello(), "kind": "WorkflowTemplate"}
    assert "an Argo WorkflowTemplate is not a compiled KFP v1 pipeline" in _refusal(template)
    assert "empty file" in str(pytest.raises(UserError, load_workflow_text, "", "w.yaml").value)


@pytest.mark.parametrize(("edit", "problem"), [
    (lambda w: w["spec"].update(entrypoint="nope"), "spec.entrypoint: no template named 'nope'"),
    (lambda w: w["spec"]["templates"][1]["dag"]["tasks"][0].update(template="gone"), "no template named 'gone'"),
    (lambda w: w["spec"]["templates"][0].update(initContainers=[{}]), "initContainers: init containers are not run"),
    (lambda w: w["spec"]["templates"][0].update(volumes=[{"name": "h", "hostPath": {"path": "/"}}]),
     "a hostPath volume cannot be provided"),
    (lambda w: w["spec"]["templates"][0]["container"].update(args=["{{inputs.parameters.x}}"]),
     "names no input parameter of the template"),
    (lambda w: w["spec"]["templates"][0]["container"].update(args=["{{workflow.labels.x}}"]), "unsupported Argo tag"),
    (lambda w: w["spec"]["templates"][0]["container"].update(args=["{{=sprig.trim('x')}}"]),
     "Argo expression tag"),
    (lambda w: w["spec"]["templates"][1]["dag"]["tasks"][0].update(when="heads =="), "invalid when expression"),
    (lambda w: w["spec"]["templates"][1]["dag"]["tasks"][0].update(dependencies=["ghost"]), "depends on 'ghost'"),
    (lambda w: w["spec"]["templates"][1]["dag"]["tasks"].append({"name": "b", "template": "echo-op",
                                                                 "dependencies": ["b"]}), "dependency cycle"),
    (lambda w: w["spec"].update(synchronization={}), "Argo field 'synchronization' is not supported"),
    (lambda w: w["spec"]["templates"][0]["container"].update(env=[{"name": "E", "valueFrom": {"x": {}}}]),
     "environment from 'x' is not supported"),
    (lambda w: w["spec"]["templates"][0].update(retryStrategy={"limit": "3", "retryPolicy": "Sometimes"}),
     "'Sometimes' is not one of"),
    (lambda w: w["spec"]["templates"][0]["container"].update(image=["x"]), "container.image: expected a string"),
])
def test_what_cannot_be_honoured_is_refused_naming_it(edit, problem: str) -> None:  # noqa: ANN001
    document = _hello()
    edit(document)
    assert problem in _refusal(document)


def test_a_required_input_without_argument_is_refused() -> None:
    document = yaml.safe_load((CORPUS / "volumeop_basic.yaml").read_text())
    root = next(t for t in document["spec"]["templates"] if t["name"] == "volumeop-basic")
    next(t for t in root["dag"]["tasks"] if t["name"] == "cop")["arguments"] = {}
    assert "input parameter 'create-pvc-name' of template 'cop' gets no argument" in _refusal(document)


def test_retry_and_deadline_are_read() -> None:
    document = _hello()
    document["spec"]["templates"][0].update(retryStrategy={"limit": "3", "retryPolicy": "Always",
                                                           "backoff": {"duration": "1s", "factor": 2}},
                                            activeDeadlineSeconds=60)
    template = load_workflow_text(yaml.safe_dump(document), "w.yaml").template("echo-op")
    assert template.retry is not None and template.retry.limit == 3 and template.retry.policy == "Always"
    assert template.retry.backoff_factor == 2.0 and template.active_deadline_seconds == 60


def test_depends_and_integers_are_checked() -> None:
    document = _hello()
    tasks = document["spec"]["templates"][1]["dag"]["tasks"]
    tasks.append({"name": "b", "template": "echo-op", "depends": "echo-op.Succeeded || !echo-op.Failed"})
    workflow = load_workflow_text(yaml.safe_dump(document), "w.yaml")
    assert workflow.template(workflow.entrypoint).task("b").depends  # type: ignore[union-attr]
    tasks[-1]["depends"] = "echo-op.Succeeded ||"
    assert "invalid when expression" in _refusal(document)
    tasks[-1]["depends"] = "echo-op.Finished"
    assert "'echo-op.Finished' is not a task result" in _refusal(document)
    document = _hello()
    document["spec"]["parallelism"] = "9" * 5000
    assert "spec.parallelism: expected an integer" in _refusal(document)


def test_an_archive_is_known_by_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"  # a .tar.gz someone named .yaml
    path.write_bytes(_tar({"pipeline.yaml": (CORPUS / "hello_world.yaml").read_bytes()}))
    assert load_workflow(path).name == "my-first-pipeline"


def test_a_template_timeout_is_refused() -> None:
    document = _hello()
    document["spec"]["templates"][0]["timeout"] = "10s"
    assert "timeout: a template timeout is not honoured" in _refusal(document)


def test_an_image_from_a_parameter_is_checked_like_any_tag() -> None:
    document = _hello()
    document["spec"]["templates"][0]["container"]["image"] = "{{inputs.parameters.image}}"
    assert "names no input parameter of the template" in _refusal(document)
    document["spec"]["templates"][0]["inputs"] = {"parameters": [{"name": "image"}]}
    document["spec"]["templates"][1]["dag"]["tasks"][0]["arguments"] = {
        "parameters": [{"name": "image", "value": "{{inputs.parameters.image}}"}]}
    document["spec"]["templates"][1]["inputs"] = {"parameters": [{"name": "image"}]}
    document["spec"]["arguments"]["parameters"] = [{"name": "image", "value": "python:3.11"}]
    workflow = load_workflow_text(yaml.safe_dump(document), "w.yaml")
    assert workflow.template("echo-op").container.image == "{{inputs.parameters.image}}"  # type: ignore[union-attr]


SEEDS = Path(__file__).parents[1] / "pipelines" / "kfp_v1"
CALCULATION = Path(__file__).parents[2] / "examples" / "kfp_v1" / "seed003_calculation" / "pipeline.yaml"  # as written


def test_seed_002_compiled_tar_gz_loads_with_its_volume_op_and_secret() -> None:
    workflow = load_workflow(SEEDS / "seed002_fashion_mnist.tar.gz")
    assert workflow.name == "Fashion MNIST Training Pipeline"
    assert [p.name for p in workflow.parameters] == ["image", "repo_url", "data_dir"]
    volume_op = workflow.template("create-pipeline-volume").resource
    assert volume_op is not None and volume_op.claim is not None
    assert volume_op.claim.size == "3Gi" and volume_op.claim.access_modes == ("ReadWriteOnce",)
    clone = workflow.template("git-clone")
    assert {(v.kind, v.source) for v in clone.volumes} == {
        ("persistentVolumeClaim", "{{inputs.parameters.create-pipeline-volume-name}}"), ("secret", "ssh-key-secret")}
    mounts = {m.mount_path: m.read_only for m in clone.container.volume_mounts}  # type: ignore[union-attr]
    assert mounts == {"/workspace": False, "/etc/ssh-key": True}
    train = workflow.template("training-and-evaluation")
    assert train.container is not None and train.container.image == "{{inputs.parameters.image}}"
    # file_outputs not consumed downstream: kfp 1.x writes only the artifact, on the claim's mount
    assert [(a.name, a.path) for a in train.outputs.artifacts] == [
        ("training-and-evaluation-output", "/workspace/kubeflow-mnist/output.txt")]


def test_seed_003_compiled_calculation_loads() -> None:
    workflow = load_workflow(CALCULATION)
    assert workflow.name == "Calculation pipeline"
    divmod_outputs = {p.name: p.path for p in workflow.template("my-divmod").outputs.parameters}
    assert divmod_outputs["my-divmod-quotient"] == "/tmp/outputs/quotient/data"
    root = workflow.template(workflow.entrypoint)
    add_2 = root.task("add-2")
    assert add_2 is not None and add_2.dependencies == ("my-divmod",)
    assert any("{{tasks.my-divmod.outputs.parameters.my-divmod-quotient}}" == p.value
               for p in add_2.arguments.parameters)
