"""``arena serve custom|kserve|sklearn`` flags → an InferenceService manifest, without processes.

Each serve type and flag lands where Arena's chart puts it (and where millpond's PredictorSpec reads
it: what ``apply -f`` of the same manifest would store); a bad flag is one ``error:`` line naming
it, exit 2, nothing stored; Arena's other serve types are refused naming what millpond serves;
fuzzed flag values either build a manifest that ``apply``'s own checks accept or are a UserError.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from millpond.errors import UserError
from millpond.serving import with_data
from millpond.serving.arena_serve import ServeArgs, inference_service
from millpond.serving.deploy import check
from millpond.serving.spec import GPU, GPU_MEM
from millpond.store.resources import ResourceStore
from tests.conftest import CliResult
from tests.fuzz_support import fuzz_settings


@pytest.fixture
def arena(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run the ``arena`` console script in this process (its own error handling: one ``error:`` line)."""
    from millpond.cli.arena import main

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return invoke


def built(**flags: object) -> tuple[dict, object]:
    body = inference_service(ServeArgs(**flags))  # type: ignore[arg-type]
    return body, check(body, "arena serve").predictor


def test_sklearn_is_kserves_sklearn_predictor_with_the_model_uri() -> None:
    body, predictor = built(type="sklearn", name="digits", storage_uri="/models/digits", replicas=3,
                            cpu="500m", memory="1Gi", model_name="digits", model_version="2", version="v1")
    assert body["spec"]["predictor"] == {
        "minReplicas": 3,
        "sklearn": {"storageUri": "/models/digits",
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                  "limits": {"cpu": "500m", "memory": "1Gi"}}}}
    assert body["metadata"]["labels"] == {"servingType": "sklearn", "servingName": "digits", "servingVersion": "v1",
                                          "modelName": "digits", "modelVersion": "2"}
    assert (predictor.server, predictor.replicas, predictor.storage.local_path) == ("sklearn", 3, "/models/digits")
    assert (predictor.resources.cpu_millis, predictor.resources.memory_bytes) == (500, 2**30)


def test_kserve_model_format_runtime_protocol_and_canary() -> None:
    body, predictor = built(type="kserve", name="iris", model_format="sklearn:1.3", runtime="kserve-sklearnserver",
                            storage_uri="s3://models/iris", protocol_version="v2", runtime_version="1.3.0",
                            min_replicas=2, max_replicas=4, canary_traffic_percent=10, gpus=1, port=8085,
                            scale_target=5, scale_metric="rps", container_concurrency=2, timeout=30)
    spec = body["spec"]["predictor"]
    assert spec["model"]["modelFormat"] == {"name": "sklearn", "version": "1.3"}
    assert (spec["model"]["runtime"], spec["model"]["protocolVersion"], spec["model"]["runtimeVersion"]) == \
        ("kserve-sklearnserver", "v2", "1.3.0")
    assert (spec["minReplicas"], spec["maxReplicas"], spec["canaryTrafficPercent"]) == (2, 4, 10)
    assert (spec["scaleTarget"], spec["scaleMetric"], spec["containerConcurrency"], spec["timeout"]) == \
        (5, "rps", 2, 30)
    assert spec["model"]["resources"]["limits"][GPU] == "1"
    assert (predictor.model_format, predictor.protocol, predictor.runtime, predictor.runtime_named) == \
        ("sklearn", "v2", "kserve-sklearnserver", True)
    assert (predictor.replicas, predictor.max_replicas, predictor.canary_traffic_percent) == (2, 4, 10)
    assert (predictor.resources.gpus, predictor.container.port, predictor.storage.authority) == (1, 8085, "models")


def test_kserve_without_a_format_is_a_custom_container_and_custom_runs_its_command() -> None:
    for serve_type in ("kserve", "custom"):
        body, predictor = built(type=serve_type, name="echo", image="python:3.11",
                                command="python -m server --port 9000", port=9000, env=("MODE=fast", "EMPTY="),
                                gpumemory=2, labels=("team=vision",),
                                annotations=("note=a b: c",), data=("weights:/mnt/models",))
        spec = body["spec"]["predictor"]
        container = spec["containers"][0]
        assert container["name"] == "kserve-container" and container["image"] == "python:3.11"
        # as Arena's chart writes it, run through the launcher that binds the dataset at its path
        assert container["command"] == with_data.command("default", "echo", [("weights", "/mnt/models")],
                                                         ["sh", "-c", "python -m server --port 9000"])
        # Knative's PORT: the containerPort (a command listening on 9000 is found there)
        assert container["env"] == [{"name": "MODE", "value": "fast"}, {"name": "EMPTY", "value": ""},
                                    {"name": "PORT", "value": "9000"}]
        assert container["volumeMounts"] == [{"name": "weights", "mountPath": "/mnt/models"}]
        assert spec["volumes"] == [{"name": "weights", "persistentVolumeClaim": {"claimName": "weights"}}]
        assert body["metadata"]["labels"]["team"] == "vision"
        assert body["metadata"]["annotations"] == {"note": "a b: c"}
        assert predictor.server == "command" and predictor.container.port == 9000
        assert predictor.container.command[-3:] == ("sh", "-c", "python -m server --port 9000")
        assert predictor.resources.shares[0].memory_bytes == 2 * 2**30
        assert dict((e.name, e.value) for e in predictor.container.env) == {"MODE": "fast", "EMPTY": "", "PORT": "9000"}


def test_custom_restful_port_wins_and_bash_is_kept() -> None:
    body, predictor = built(type="custom", name="web", command="serve", port=8500, restful_port=8501, shell="bash")
    assert predictor.container.port == 8501 and predictor.container.command[:2] == ("bash", "-c")


@pytest.mark.parametrize(("serve_type", "uri", "data", "expected"), [
    ("sklearn", "", ("digits-data:/models",), "pvc://digits-data"),  # only --data: the dataset is the model dir
    ("sklearn", "/models/digits/v2", ("digits-data:/models",), "pvc://digits-data/digits/v2"),
    ("kserve", "file:///models/iris", ("iris:/models",), "pvc://iris/iris"),
    ("kserve", "/elsewhere/iris", ("iris:/models",), "/elsewhere/iris"),  # not under the mount: as given
    ("sklearn", "s3://bucket/model", (), "s3://bucket/model"),
])
def test_data_becomes_the_predictors_pvc_storage_uri(serve_type: str, uri: str, data: tuple[str, ...],
                                                     expected: str) -> None:
    flags = {"model_format": "sklearn"} if serve_type == "kserve" else {}
    body, predictor = built(type=serve_type, name="m", storage_uri=uri, data=data, **flags)
    key = "model" if serve_type == "kserve" else "sklearn"
    assert body["spec"]["predictor"][key]["storageUri"] == expected == predictor.storage.uri
    assert "volumes" not in body["spec"]["predictor"]


BAD_FLAGS = [
    (["custom", "--name", "x", "--gpus", "-1", "run"], "--gpus -1"),
    (["custom", "--name", "x", "--gpus", "1", "--gpumemory", "2", "run"], "--gpumemory"),
    (["custom", "--name", "x", "--gpucore", "30", "run"], "--gpucore 30"),
    (["custom", "--name", "x", "--cpu", "lots", "run"], "--cpu"),
    (["custom", "--name", "x", "--memory", "1Q", "run"], "--memory"),
    (["custom", "--name", "x", "--replicas", "0", "run"], "scale to zero"),
    (["custom", "--name", "x", "--port", "70000", "run"], "--port 70000"),
    (["custom", "--name", "Bad_Name", "run"], "--name 'Bad_Name'"),
    (["custom", "--name", "9lives", "run"], "--name '9lives'"),
    (["custom", "--name", "x", "-n", "Not Valid", "run"], "--namespace"),
    (["custom", "--name", "x", "--data", "nocolon", "run"], "--data 'nocolon'"),
    (["custom", "--name", "x", "--data", "ds:relative", "run"], "DATASET:/ABSOLUTE/PATH"),
    (["custom", "--name", "x", "--data", "ds:/", "run"], "nothing can be mounted"),
    (["custom", "--name", "x", "--data", "a:/m", "--data", "b:/m", "run"], "mounted twice"),
    (["custom", "--name", "x", "--env", "1A=b", "run"], "--env '1A'"),
    (["custom", "--name", "x", "--env", "novalue", "run"], "KEY=VALUE"),
    (["custom", "--name", "x", "--label", "bad key!=v", "run"], "--label"),
    (["custom", "--name", "x", "--label", "k=bad value", "run"], "--label"),
    (["custom", "--name", "x", "--annotation", "=v", "run"], "--annotation"),
    (["custom", "--name", "x", "--model-version", "a b", "run"], "--model-version"),
    (["custom", "--name", "x"], "give the command"),
    (["custom", "--name", "x", "--command", "a", "b"], "--command or the words"),
    (["custom", "--name", "x", "--shell", "zsh", "run"], "--shell"),
    (["custom", "--name", "x", "--port", "9000", "--replicas", "2", "run"], "listen on $PORT"),
    (["sklearn", "--name", "x"], "--model-uri is required"),
    (["sklearn", "--name", "x", "--model-uri", "/m", "python", "serve.py"], "a command runs in a custom container"),
    (["kserve", "--name", "x", "--model-format", "sklearn", "--storage-uri", "/m", "--command", "run"],
     "a command runs in a custom container"),
    (["sklearn", "--name", "x", "--model-uri", "ftp://host/model"], "unsupported scheme ftp://"),
    (["sklearn", "--name", "x", "--model-uri", "/m/../../etc"], "'..' is not allowed"),
    (["sklearn", "--name", "x", "--model-uri", "/m", "--protocol-version", "v9"], "--protocol-version"),
    (["kserve", "--name", "x", "--model-format", ":1", "--storage-uri", "/m"], "--model-format"),
    (["kserve", "--name", "x", "--model-format", "sklearn:", "--storage-uri", "/m"], "--model-format"),
    (["kserve", "--name", "x", "--model-format", "sklearn", "--storage-uri", "/m", "--min-replicas", "3",
      "--max-replicas", "2"], "cannot be greater"),
    (["kserve", "--name", "x", "--model-format", "sklearn", "--storage-uri", "/m", "--canary-traffic-percent",
      "101"], "between 0 and 100"),
    (["kserve", "--name", "x", "--model-format", "sklearn", "--data", "a:/a", "--data", "b:/b"], "several datasets"),
    (["kserve", "--name", "x", "--model-format", "sklearn", "--storage-uri", "/m", "--min-replicas", "0"],
     "scale to zero"),
    (["kserve", "--name", "x", "--gpus", "abc"], "'abc' is not a valid integer"),
    (["kserve", "--name", "x", "--no-such-flag", "1"], "No such option"),
    (["kserve"], "Missing option '--name'"),
]


@pytest.mark.parametrize(("argv", "says"), BAD_FLAGS, ids=[" ".join(a[:1] + a[3:5]) for a, _ in BAD_FLAGS])
def test_a_bad_flag_is_one_error_line_exit_2_and_nothing_stored(arena, argv: list[str], says: str) -> None:
    result = arena("serve", *argv)
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert ResourceStore().list("InferenceService", None) == []


@pytest.mark.parametrize("serve_type", ["tensorflow", "tf", "triton", "seldon", "kfserving", "distributed"])
def test_arenas_other_serve_types_are_refused_naming_what_millpond_serves(arena, serve_type: str) -> None:
    result = arena("serve", serve_type, "--name", "m", "--model-path", "/m", "--restfulPort", "8501")
    assert result.code == 2
    (line,) = result.err.strip().splitlines()
    assert line.startswith(f"error: arena serve {serve_type}: ") and "custom" in line and "sklearn" in line


def test_a_flag_of_another_type_is_named(arena) -> None:
    result = arena("serve", "custom", "--name", "x", "--storage-uri", "/m", "run")
    assert result.code == 2 and result.err.startswith("error: No such option") and "--storage-uri" in result.err
    with pytest.raises(UserError, match="--model-format: a kserve flag"):
        inference_service(ServeArgs(type="sklearn", name="x", storage_uri="/m", model_format="sklearn"))
    with pytest.raises(UserError, match="--canary-traffic-percent: not a flag of arena serve custom"):
        inference_service(ServeArgs(type="custom", name="x", command="run", canary_traffic_percent=5))


def test_unknown_type_on_list_get_is_refused(arena) -> None:
    result = arena("serve", "list", "-T", "tensorflow")
    assert result.code == 2 and result.err.startswith("error: --type 'tensorflow'")
    result = arena("serve", "get", "nothing-here")
    assert result.code == 2 and "nothing-here" in result.err and len(result.err.strip().splitlines()) == 1


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=24)
_flag_text = st.one_of(_text, st.sampled_from(["", "500m", "1Gi", "/models/m", "s3://b/m", "pvc://d/m", "file:///m",
                                               "sklearn", "sklearn:1", "pytorch", "v1", "v2", "ds:/models",
                                               "KEY=VALUE", "a/b=c", "app.kubernetes.io/name=x", "run it"]))
_ints = st.one_of(st.integers(-3, 4), st.integers(-(2**40), 2**40))


@fuzz_settings(300)
@given(serve_type=st.sampled_from(["custom", "kserve", "sklearn", "tf"]), name=st.one_of(_text, st.just("model-a")),
       namespace=st.one_of(_text, st.just("default")), text=st.lists(_flag_text, min_size=12, max_size=12),
       ints=st.lists(_ints, min_size=8, max_size=8), many=st.lists(_flag_text, max_size=3))
def test_fuzzed_flags_build_what_apply_accepts_or_are_a_user_error(serve_type: str, name: str, namespace: str,
                                                                   text: list[str], ints: list[int],
                                                                   many: list[str]) -> None:
    args = ServeArgs(
        type=serve_type, name=name, namespace=namespace, version=text[0], model_name=text[1], image=text[2],
        command=text[3], cpu=text[4], memory=text[5], model_format=text[6] if serve_type == "kserve" else "",
        storage_uri=text[7] if serve_type != "custom" else "", protocol_version=text[8] if serve_type != "custom"
        else "", runtime=text[9] if serve_type == "kserve" else "", data=tuple(many[:1]), env=tuple(many[1:2]),
        labels=tuple(many[2:]), annotations=(text[10],) if text[10] else (), replicas=ints[0], gpus=ints[1],
        gpumemory=ints[2], port=ints[3], min_replicas=ints[4] if serve_type == "kserve" else -1,
        max_replicas=ints[5] if serve_type == "kserve" else 0,
        canary_traffic_percent=ints[6] if serve_type == "kserve" else -1, timeout=ints[7] if serve_type == "kserve"
        else 0)
    try:
        body = inference_service(args)
    except UserError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    try:
        manifest = check(body, "arena serve")
    except UserError as exc:  # apply's own checks may still refuse (a schema's bound): one line, never a traceback
        assert "\n" not in str(exc)
        return
    assert manifest.name == name and manifest.predictor is not None


def test_examples_of_the_readme_build(tmp_path: Path) -> None:
    """The README's arena serve lines as typed args: each is a manifest apply's checks accept."""
    for args in (ServeArgs(type="sklearn", name="digits", storage_uri=str(tmp_path)),
                 ServeArgs(type="kserve", name="sklearn-iris", model_format="sklearn",
                           storage_uri="gs://kfserving-examples/models/sklearn/1.0/model"),
                 ServeArgs(type="custom", name="echo", port=8080, command="python -m http.server 8080")):
        assert check(inference_service(args), "arena serve").predictor is not None
    assert GPU_MEM  # the share resource the builder writes for --gpumemory


def test_deploy_model_round_trips_through_a_component_file(tmp_path: Path) -> None:
    from kfp import compiler, components

    from millpond.serving.components import deploy_model

    path = tmp_path / "deploy_model.yaml"
    compiler.Compiler().compile(deploy_model, str(path))
    loaded = components.load_component_from_file(str(path))
    inputs = loaded.component_spec.inputs or {}
    assert {"model", "name", "format", "replicas", "namespace", "timeout_s"} == set(inputs)
    assert inputs["model"].type == "system.Model@0.0.1"
    assert set(loaded.component_spec.outputs or {}) == {"Output"}


_flags = st.sampled_from(["--replicas", "--gpus", "--gpumemory", "--cpu", "--memory", "--data", "--env", "--label",
                          "--annotation", "--version", "--model-name", "--model-version", "--image", "--command",
                          "--shell", "--model-format", "--storage-uri", "--model-uri", "--port", "--restful-port",
                          "--protocol-version", "--min-replicas", "--max-replicas", "--canary-traffic-percent",
                          "--runtime", "--selector", "--enable-istio", "-n", "--timeout", "--unknown"])
_values = st.one_of(_flag_text, st.integers(-5, 70000).map(str))


@fuzz_settings(150)
@given(serve_type=st.sampled_from(["custom", "kserve", "sklearn"]),
       pairs=st.lists(st.tuples(_flags, _values), max_size=6), words=st.lists(_flag_text, max_size=2))
def test_fuzzed_command_lines_are_one_error_line_and_store_nothing_new(home: Path, capsys, serve_type: str,
                                                                       pairs: list[tuple[str, str]],
                                                                       words: list[str]) -> None:
    """Every flag combination against a taken name: whatever the builder makes of it ends in one ``error:``
    line and exit 2 (a bad flag, or the name already taken), and the stored object is not touched."""
    from millpond.cli.arena import main
    from millpond.serving import objects

    store = ResourceStore()
    if store.get("InferenceService", "taken") is None:
        objects.apply([check(inference_service(ServeArgs(type="sklearn", name="taken", storage_uri="/m")), "t")],
                      store)
    before = store.get("InferenceService", "taken")
    argv = ["serve", serve_type, "--name", "taken", *[part for pair in pairs for part in pair], "--", *words]
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        main(argv)
    err = capsys.readouterr().err
    assert ended.value.code == 2, (argv, err)
    lines = [line for line in err.splitlines() if not line.startswith("info: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, err)
    assert store.get("InferenceService", "taken") == before and len(store.list("InferenceService", None)) == 1


def test_update_changes_only_the_flags_given() -> None:
    from millpond.serving.arena_update import UpdateArgs, updated

    current = inference_service(ServeArgs(type="sklearn", name="digits", storage_uri="/models/v1", cpu="1",
                                          env=("A=1",), labels=("team=a",), version="v1"))
    body = updated(current, UpdateArgs(type="sklearn", name="digits", storage_uri="/models/v2",
                                       canary_traffic_percent=20, env=("B=2", "A=3"), memory="1Gi", version="v2"))
    spec = body["spec"]["predictor"]
    assert spec["canaryTrafficPercent"] == 20 and spec["sklearn"]["storageUri"] == "/models/v2"
    assert spec["sklearn"]["env"] == [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}]
    assert spec["sklearn"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert body["metadata"]["labels"] == {**current["metadata"]["labels"], "servingVersion": "v2"}
    assert check(body, "update").predictor.canary_traffic_percent == 20
    assert current["spec"]["predictor"]["sklearn"]["storageUri"] == "/models/v1"  # the stored one is not touched
    promoted = updated(body, UpdateArgs(type="sklearn", name="digits", canary_traffic_percent=100, gpus=1))
    assert promoted["spec"]["predictor"]["canaryTrafficPercent"] == 100
    assert promoted["spec"]["predictor"]["sklearn"]["resources"]["limits"][GPU] == "1"
    dropped = updated(promoted, UpdateArgs(type="kserve", name="digits", gpus=0, gpumemory=2))
    assert dropped["spec"]["predictor"]["sklearn"]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi",
                                                                              GPU_MEM: "2"}


def test_update_of_a_custom_command_keeps_its_datasets_and_port_rule() -> None:
    from millpond.serving.arena_update import UpdateArgs, updated

    current = inference_service(ServeArgs(type="custom", name="web", command="serve v1", data=("w:/m",)))
    body = updated(current, UpdateArgs(type="custom", name="web", command="serve v2", port=9000))
    (container,) = body["spec"]["predictor"]["containers"]
    assert container["command"] == with_data.command("default", "web", [("w", "/m")], ["sh", "-c", "serve v2"])
    assert {"name": "PORT", "value": "9000"} in container["env"]
    assert check(body, "update").predictor.container.port == 9000


@pytest.mark.parametrize(("serve_type", "flags", "says"), [
    ("custom", {"image": "x"}, "is a sklearn predictor: arena serve update sklearn or kserve"),
    ("kserve", {"model_format": "pytorch"}, "--model-format: this InferenceService has no model predictor"),
    ("sklearn", {"command": "run"}, "a command runs in a custom container"),
    ("sklearn", {"canary_traffic_percent": 101}, "between 0 and 100"),
    ("sklearn", {"cpu": "many"}, "--cpu"),
    ("sklearn", {"labels": ("bad key!=x",)}, "--label"),
    ("sklearn", {"replicas": 0}, "scale to zero"),
])
def test_a_bad_update_is_one_line(serve_type: str, flags: dict, says: str) -> None:
    from millpond.serving.arena_update import UpdateArgs, updated

    current = inference_service(ServeArgs(type="sklearn", name="digits", storage_uri="/models/v1"))
    with pytest.raises(UserError) as refused:
        updated(current, UpdateArgs(type=serve_type, name="digits", **flags))
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_model_artifacts_format_and_storage_uri(tmp_path: Path) -> None:
    """The format: metadata first, then the file's extension (or the one model file of a folder); the
    storageUri is the artifact's URI as it is (the supervisor's fetch names a bare file for its server)."""
    from millpond.serving.from_run import (
        ARTIFACT_ANNOTATION,
        RUN_LABEL,
        ModelArtifact,
        default_name,
        split_artifact,
    )
    from millpond.serving.from_run import inference_service as from_artifact

    bare = tmp_path / "model"
    bare.write_bytes(b"weights")
    folder = tmp_path / "torch"
    folder.mkdir()
    (folder / "net.pt").write_bytes(b"x")

    def artifact(uri: str, **metadata: object) -> ModelArtifact:
        return ModelArtifact("0123456789ab", "run-1", "train", "model", uri, dict(metadata))

    assert artifact(str(bare), framework="scikit-learn").format == "sklearn"
    assert artifact(str(bare), framework="PyTorch").format == "pytorch"
    assert artifact(str(bare)).format is None
    assert artifact(f"file://{folder}").format == "pytorch"
    assert artifact("s3://bucket/run/train/model.joblib").format == "sklearn"
    with pytest.raises(UserError, match="cannot tell the model's format"):
        from_artifact(artifact(str(bare)), "m")

    body = from_artifact(artifact(str(bare), framework="sklearn"), "digits", replicas=2,
                         annotations={ARTIFACT_ANNOTATION: "train.model"})
    assert body["spec"]["predictor"] == {"sklearn": {"storageUri": str(bare)}, "minReplicas": 2}  # its URI as it is
    assert body["metadata"]["annotations"] == {ARTIFACT_ANNOTATION: "train.model"}
    assert body["metadata"]["labels"] == {RUN_LABEL: "0123456789ab"}
    for uri in (f"file://{folder}", "s3://bucket/run/train/model"):
        assert from_artifact(artifact(uri), "m", fmt="pytorch")["spec"]["predictor"]["pytorch"]["storageUri"] == uri
    assert check(from_artifact(artifact(str(bare), framework="sklearn"), "digits"), "serve").predictor is not None

    assert split_artifact("root.sub.train.model") == ("root.sub.train", "model")
    assert default_name(artifact("/m")) == "train-model"
    assert default_name(ModelArtifact("r", "r", "9 Train_Step", "Model!", "/m", {})) == "model-9-train-step-model"
    for bad in ("model", ".model", "train.", ""):
        with pytest.raises(UserError, match="TASK.OUTPUT"):
            split_artifact(bad)


@pytest.mark.parametrize(("argv", "says"), [
    (["default", "web"], "usage: python -m millpond.serving.with_data"),
    (["default", "web", "d:/m", "--"], "no command after --"),
    (["default", "web", "d:relative", "--", "true"], "'d:relative' must be DATASET:/PATH"),
    (["default", "web", "nothing-here:/m", "--", "true"], "no Dataset nothing-here in namespace default"),
])
def test_the_data_launcher_refuses_in_one_line_before_running_anything(home: Path, capsys, argv: list[str],
                                                                       says: str) -> None:
    assert with_data.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and len(err.strip().splitlines()) == 1


def test_arena_serve_info_counts_the_gpus_asked(home: Path) -> None:
    """``arena serve get``'s requestGPUs/requestGPUMemory (Arena's ServingJobInfo) per replica, read from the
    stored predictor (stored here without a supervisor: nothing runs)."""
    from millpond.serving import objects, serve_views

    store = ResourceStore()
    for name, flags in (("whole", {"gpus": 2}), ("shared", {"gpumemory": 3}), ("none", {})):
        objects.apply([check(inference_service(ServeArgs(type="sklearn", name=name, storage_uri="/m", **flags)),
                             "t")], store)
    infos = {r.name: serve_views.info(r, instances=True) for r in store.list("InferenceService", None)}
    assert {n: (i["requestGPUs"], i["requestGPUMemory"]) for n, i in infos.items()} == \
        {"whole": (2, 0), "shared": (0, 3), "none": (0, 0)}
    assert infos["none"]["ready"] == "Unknown" and infos["none"]["instances"] == []
    assert infos["none"]["type"] == "Sklearn" and infos["none"]["availableInstances"] == 0


@fuzz_settings(60)
@given(run=_text, artifact=st.one_of(_text, st.just("train.model"), _text.map(lambda t: f"{t}.model")))
def test_fuzzed_millpond_serve_arguments_are_one_error_line(home: Path, capsys, run: str, artifact: str) -> None:
    """``millpond serve --from-run RUN --artifact TASK.OUTPUT`` with no such run: one ``error:`` line, exit 2."""
    from millpond.cli.main import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        main(["serve", "--from-run", run, "--artifact", artifact])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert ResourceStore().list("InferenceService", None) == []
