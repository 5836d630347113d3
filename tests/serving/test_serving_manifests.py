"""KServe's serving manifests at ``millpond apply -f`` / ``get`` / ``delete``: an InferenceService becomes a
typed PredictorSpec (format, runtime, storageUri, resources, replicas, canary), KServe's webhook rules
refuse what KServe refuses (one ``error:`` line, exit 2, nothing stored), a predictor millpond cannot
serve here is accepted with Ready False and the reason, the kinds that cannot mean anything here are
refused naming why, and the conformance corpus's KServe rows apply or are refused as EXPECTED.tsv
says. Hostile and mutated documents only ever come out accepted or refused with a UserError."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given

from millpond.datasets.manifests import read_documents
from millpond.datasets.schema_check import check_schema_file
from millpond.errors import UnavailableError, UserError
from millpond.runners.processes import ProcessIdentity
from millpond.serving import endpoints, lifecycle, objects
from millpond.serving.kinds import KINDS, REFUSED
from millpond.serving.manifests import is_serving_document
from millpond.serving.storage_uri import parse_storage_uri
from millpond.store.resources import ResourceStore
from tests.fuzz_support import fuzz_settings, mutated, mutated_text

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "k8s-manifests"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/conformance/k8s-manifests")
SERVING_KINDS = set(KINDS) | set(REFUSED)
API = "serving.kserve.io/v1beta1"


def isvc(name: str = "digits", **predictor: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name},
            "spec": {"predictor": predictor or {"sklearn": {"storageUri": "pvc://digits-data/models/digits"}}}}


def write(tmp_path: Path, *documents: dict[str, Any]) -> Path:
    path = tmp_path / "serving.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def nothing_stored() -> bool:
    store = ResourceStore()
    return all(not store.list(kind, None) for kind in KINDS)


def checked(*documents: dict[str, Any]) -> list[Any]:
    return objects.check([("test.yaml", n, copy.deepcopy(d)) for n, d in enumerate(documents, 1)], check_schema_file)


# --- the typed record -----------------------------------------------------------------------------------------
def test_a_predictor_becomes_a_typed_spec_with_resources_replicas_canary_and_parts() -> None:
    doc = isvc(model={"modelFormat": {"name": "SKLearn", "version": "1"}, "runtime": "kserve-mlserver",
                      "protocolVersion": "v2", "storageUri": "s3://models/digits/",
                      "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                    "limits": {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}}},
               minReplicas=2, maxReplicas=3, canaryTrafficPercent=10)
    doc["spec"]["transformer"] = {"containers": [{"name": "kserve-container", "image": "t:1"}]}
    [manifest] = checked(doc)
    spec = manifest.predictor
    assert (spec.name, spec.namespace, spec.implementation, spec.model_format, spec.format_version) == (
        "digits", "default", "model", "sklearn", "1")
    assert (spec.runtime, spec.runtime_named, spec.protocol) == ("kserve-mlserver", True, "v2")
    assert (spec.storage.scheme, spec.storage.authority, spec.storage.path) == ("s3", "models", "digits")
    assert (spec.resources.cpu_millis, spec.resources.memory_bytes, spec.resources.gpus) == (500, 2**30, 1)
    assert (spec.replicas, spec.max_replicas, spec.canary_traffic_percent) == (2, 3, 10)
    assert spec.transformer and not spec.explainer
    assert spec.unservable is None and spec.server == "sklearn"
    assert manifest.notes == ["recorded, not run or read here: spec.transformer (requests go to the predictor, "
                              "whose model is read from its storageUri)"]


def test_a_custom_container_with_a_command_runs_on_the_host() -> None:
    [manifest] = checked(isvc("echo", containers=[
        {"name": "sidecar", "image": "busybox"},
        {"name": "kserve-container", "image": "ignored:1", "command": ["python", "-m", "model"], "args": ["--x=1"],
         "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
         "ports": [{"containerPort": 9000}]}]))
    spec = manifest.predictor
    assert spec.server == "command" and spec.model_format is None and spec.runtime is None
    assert spec.container.command == ("python", "-m", "model") and spec.container.args == ("--x=1",)
    assert spec.container.port == 9000 and spec.replicas == 1 and spec.max_replicas == 0
    assert [(e.name, e.value, e.value_from) for e in spec.container.env] == [
        ("A", "1", None), ("B", None, {"secretKeyRef": {"name": "s", "key": "k"}})]


@pytest.mark.parametrize(("predictor", "reason", "says"), [
    ({"xgboost": {"storageUri": "gs://b/m"}}, "NoSupportingRuntime", "xgboost models need KServe's kserve-xgbserver"),
    ({"onnx": {"storageUri": "gs://b/m"}}, "NoSupportingRuntime", "onnx models need NVIDIA Triton"),
    ({"containers": [{"name": "c", "image": "kserve/custom-model:latest"}]}, "InvalidPredictorSpec",
     "the container has no command"),
    ({"sklearn": {"storageUri": "oci://registry/model:1"}}, "ModelLoadFailed", "container runtime"),
    ({"sklearn": {"storageUri": "models/iris"}}, "ModelLoadFailed", "relative path"),
    ({"pytorch": {}}, "InvalidPredictorSpec", "no storageUri"),
])
def test_what_cannot_be_served_here_is_accepted_and_its_status_says_why(
        cli, tmp_path: Path, predictor: dict[str, Any], reason: str, says: str, monkeypatch) -> None:
    # the runtime policy host: a custom container without a command then cannot run (in its image it
    # can, decided by its supervisor: tests/containers/test_serving_images.py)
    monkeypatch.setenv("MILLPOND_RUNTIME", "host")
    result = cli("apply", "-f", write(tmp_path, isvc("m", **predictor)))
    assert result.code == 0, result.err
    assert result.out == "inferenceservice.serving.kserve.io/m created\n"
    assert result.err.count("\n") == 1 and "accepted, not served here" in result.err and says in result.err
    shown = cli("get", "isvc", "m", "-o", "json").json()
    ready = {c["type"]: c for c in shown["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", reason) and says in ready["message"]
    assert shown["status"]["modelStatus"]["lastFailureInfo"]["reason"] == reason


def test_names_with_line_breaks_stay_on_one_line_in_the_status_and_the_info_line(cli, tmp_path: Path) -> None:
    result = cli("apply", "-f", write(tmp_path, isvc("m", model={"modelFormat": {"name": "xg\nboost"}},
                                                     minReplicas=0)))
    assert result.code == 0 and result.err.count("\n") == 1 and '"xg\\nboost" models need' in result.err
    [manifest] = checked(isvc("c", containers=[{"name": "c", "image": "evil\nimage"}]))
    assert "\n" not in manifest.predictor.unservable and manifest.predictor.replicas == 1


@pytest.mark.parametrize(("text", "parts"), [
    ("s3://bucket/a/b/", ("s3", "bucket", "a/b")),
    ("gs://kfserving-examples/models/sklearn/1.0/model", ("gs", "kfserving-examples", "models/sklearn/1.0/model")),
    ("https://example.com/m/model.joblib", ("https", "example.com", "m/model.joblib")),
    ("hf://meta-llama/Llama-3", ("hf", "meta-llama", "Llama-3")),
    ("pvc://digits-data/models/v1", ("pvc", "digits-data", "models/v1")),
    ("pvc://model-pv-claim", ("pvc", "model-pv-claim", "")),
    ("file:///srv/models/iris", ("file", "", "srv/models/iris")),
    # a run's Model artifact: PIPELINE_ROOT/PIPELINE/RUN_ID/TASK/OUTPUT under a local or a MinIO root
    ("/home/me/.millpond/pipeline_root/digits/0a1b/train/model", ("file", "", "home/me/.millpond/pipeline_root/"
                                                                   "digits/0a1b/train/model")),
    ("minio://mlpipeline/v2/artifacts/digits/0a1b/train/model", ("minio", "mlpipeline",
                                                                 "v2/artifacts/digits/0a1b/train/model")),
])
def test_storage_uris_parse_into_scheme_authority_and_path(text: str, parts: tuple[str, str, str]) -> None:
    uri = parse_storage_uri(text)
    assert (uri.scheme, uri.authority, uri.path) == parts and uri.unreadable is None
    assert uri.dataset == (parts[1] if parts[0] == "pvc" else None)
    assert uri.local_path == ("/" + parts[2] if parts[0] == "file" else None)


@pytest.mark.parametrize(("text", "says"), [
    ("ftp://host/m", "unsupported scheme ftp://"), ("pvc:///m", "names no dataset"),
    ("pvc://Big_Name/m", "invalid dataset (PVC) name"),
    ("s3://b/../../etc", "'..' is not allowed"), ("file://relative/x", "absolute path"), ("hf://owner", "hf://OWNER"),
    ("https:///nohost", "names no host"), ("s3://b/\x00", "control characters"), ("", "expected a URI"),
])
def test_a_bad_storage_uri_is_one_line(text: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_storage_uri(text)
    assert says in str(caught.value) and "\n" not in str(caught.value)


# --- the commands ---------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("database")  # SQLite, then PostgreSQL
def test_apply_get_delete_an_inference_service_and_a_runtime(cli, tmp_path: Path) -> None:
    runtime = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
               "metadata": {"name": "my-sklearn"}, "spec": {"supportedModelFormats": [{"name": "sklearn"}],
                                                           "containers": [{"name": "kserve-container", "image": "x"}]}}
    path = write(tmp_path, runtime, isvc())
    applied = cli("apply", "-f", path)
    assert applied.code == 0, applied.err
    assert applied.out.splitlines() == ["clusterservingruntime.serving.kserve.io/my-sklearn created",
                                        "inferenceservice.serving.kserve.io/digits created"]
    assert cli("apply", "-f", path).out.splitlines()[-1] == "inferenceservice.serving.kserve.io/digits unchanged"
    # its supervisor started at apply, and finds neither a Dataset digits-data nor a volume of that name
    missing = "ModelLoadFailed: storageUri pvc://digits-data/models/digits: no Dataset digits-data"
    with pytest.raises(UnavailableError, match=missing):
        lifecycle.wait_ready(ResourceStore(), "digits", timeout_s=30)
    for name in ("isvc", "inferenceservices", "inferenceservice.serving.kserve.io"):
        table = cli("get", name)
        assert table.code == 0 and table.out.split()[:7] == ["NAME", "URL", "READY", "PREV", "LATEST", "AGE", "digits"]
        assert table.out.splitlines()[1].split()[1] == "False"
    shown = cli("get", "isvc", "digits", "-o", "yaml")
    value = yaml.safe_load(shown.out)
    ready = {c["type"]: c for c in value["status"]["conditions"]}
    assert ready["Ready"]["status"] == ready["PredictorReady"]["status"] == "False"
    assert ready["Ready"]["reason"] == "ModelLoadFailed"
    assert value["status"]["modelStatus"]["transitionStatus"] == "BlockedByFailedLoad"
    assert value["spec"] == isvc()["spec"]
    runtimes = cli("get", "clusterservingruntimes")
    assert runtimes.out.splitlines()[1].split()[:4] == ["my-sklearn", "false", "sklearn", "kserve-container"]
    assert "namespace" not in cli("get", "clusterservingruntime", "my-sklearn", "-o", "json").json()["metadata"]
    assert objects.predictor_of(ResourceStore(), "digits").storage.dataset == "digits-data"
    assert cli("delete", "isvc", "digits").out == 'inferenceservice.serving.kserve.io "digits" deleted\n'
    gone = cli("delete", "isvc", "digits")
    assert gone.code == 2 and gone.err == 'error: inferenceservices.serving.kserve.io "digits" not found\n'
    assert cli("delete", "clusterservingruntime", "my-sklearn").code == 0 and nothing_stored()


def test_a_changed_spec_gets_a_fresh_status(cli, tmp_path: Path) -> None:
    assert cli("apply", "-f", write(tmp_path, isvc("m", xgboost={"storageUri": "gs://b/m"}))).code == 0
    store = ResourceStore()
    store.set_status("InferenceService", "m", objects.status("True", "", "", url="http://h/v1/models/m",
                                                             active="Loaded", transition="UpToDate", revision="m-1"))
    assert cli("get", "isvc").out.splitlines()[1].split()[:2] == ["m", "False"]  # Ready, but no supervisor serves it
    resource = store.get("InferenceService", "m")
    me = ProcessIdentity.own()  # endpoints written by a live process: as a supervisor would
    answering = (endpoints.Revision("m-1", 100, ("http://127.0.0.1:1",)),)
    endpoints.write(endpoints.Endpoints("m", "default", resource.uid, "m", "v1", 1, answering, me.pid, me.start, "now"))
    table = cli("get", "isvc").out.splitlines()[1].split()
    assert table[:4] == ["m", "http://h/v1/models/m", "True", "100"]  # URL READY LATEST: no previous revision
    store.set_status("InferenceService", "m", objects.status("True", "", "", url="http://h/v1/models/m",
                                                             revision="m-2", previous="m-1", canary_percent=10))
    assert cli("get", "isvc").out.splitlines()[1].split()[:5] == ["m", "http://h/v1/models/m", "True", "90", "10"]
    assert cli("apply", "-f", write(tmp_path, isvc("m", sklearn={"storageUri": "gs://b/m"}))).code == 0
    assert cli("get", "isvc", "m", "-o", "json").json()["status"]["conditions"][1]["reason"] == "NotStarted"


def test_a_pvc_naming_no_dataset_or_volume_yet_is_accepted_and_said_in_one_line(cli, home: Path,
                                                                                tmp_path: Path) -> None:
    result = cli("apply", "-f", write(tmp_path, isvc()))
    assert result.code == 0 and result.err.strip().splitlines() == [
        f"info: pvc://digits-data: no Dataset digits-data in namespace default and no volume "
        f"{home / 'volumes' / 'default' / 'digits-data'}: InferenceService digits cannot load its model "
        "until one exists"]
    (home / "volumes" / "digits-data").mkdir(parents=True)  # a named local volume: what a PVC is here
    assert cli("apply", "-f", write(tmp_path, isvc("other"))).err == ""
    dataset = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "Dataset", "metadata": {"name": "mnist"},
               "spec": {"mounts": [{"mountPoint": f"local://{tmp_path}", "name": "mnist"}]}}
    both = cli("apply", "-f", write(tmp_path, dataset, isvc("third", sklearn={"storageUri": "pvc://mnist/m"})))
    assert both.code == 0 and "info: pvc://" not in both.err, both.err


BAD = [
    (isvc(sklearn={"storageUri": "gs://b/m"}, xgboost={"storageUri": "gs://b/m"}), "exactly one of"),
    ({**isvc(), "spec": {"predictor": {"minReplicas": 1}}}, "exactly one of"),
    (isvc(sklearn={"storageUri": "gs://b/m"}, minReplicas=3, maxReplicas=2), "cannot be greater than maxReplicas"),
    (isvc(sklearn={"storageUri": "gs://b/m"}, minReplicas=-1), "cannot be less than 0"),
    (isvc(sklearn={"storageUri": "gs://b/m"}, canaryTrafficPercent=101), "canaryTrafficPercent"),
    (isvc(sklearn={"storageUri": "ftp://b/m"}), "spec.predictor.sklearn.storageUri: unsupported scheme ftp://"),
    (isvc(sklearn={"storageUri": "s3://b/../x"}), "'..' is not allowed"),
    (isvc(sklearn={"storageUri": "gs://b/m", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}),
     "not a whole number of GPUs"),
    (isvc(sklearn={"storageUri": "gs://b/m", "resources": {"limits": {"example.com/fpga": "1"}}}),
     "example.com/fpga cannot exist on this machine"),
    (isvc(sklearn={"storageUri": "gs://b/m", "resources": {"requests": {"memory": "lots"}}}), "memory"),
    (isvc(model={"modelFormat": {"name": ""}, "storageUri": "gs://b/m"}), "modelFormat.name"),
    (isvc(sklearn={"storageUri": "gs://b/m", "colour": "blue"}), 'unknown field "spec.predictor.sklearn.colour"'),
    ({**isvc(), "apiVersion": "serving.kubeflow.org/v1alpha2"}, "millpond reads serving.kserve.io/v1beta1"),
    ({**isvc(), "metadata": {"name": "1digits"}}, "start with a letter"),
    ({**isvc(), "metadata": {"name": "Digits"}}, "metadata.name"),
    ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "InferenceGraph", "metadata": {"name": "g"},
      "spec": {"nodes": {}}}, "InferenceGraph: routing between InferenceServices"),
    ({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "TrainedModel", "metadata": {"name": "t"}},
     "TrainedModel: multi-model serving"),
]


@pytest.mark.parametrize(("document", "says"), BAD, ids=[says[:40] for _, says in BAD])
def test_a_bad_serving_manifest_is_one_error_line_exit_2_and_nothing_stored(
        cli, tmp_path: Path, document: dict[str, Any], says: str) -> None:
    result = cli("apply", "-f", write(tmp_path, isvc("good"), document))  # after a good one: all or nothing
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.err
    assert "Traceback" not in result.err and result.out == ""
    assert nothing_stored()


def test_refused_kinds_name_why_at_get_too(cli) -> None:
    for name in ("inferencegraphs", "ig", "trainedmodel", "llminferenceservices", "localmodelcache"):
        result = cli("get", name)
        assert result.code == 2 and len(result.err.strip().splitlines()) == 1 and "millpond" in result.err


def _corpus_rows() -> list[tuple[str, str, str]]:
    if not (CORPUS / "EXPECTED.tsv").is_file():
        return []
    rows = []
    for line in (CORPUS / "EXPECTED.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        file, expected, kinds = line.split("\t")[:3]
        if set(kinds.split(",")) <= SERVING_KINDS:
            rows.append((file, expected, kinds))
    return rows


@pytest.mark.skipif(not _corpus_rows(), reason="the shared conformance corpus is not beside this checkout")
@pytest.mark.parametrize(("file", "expected", "kinds"), _corpus_rows(), ids=[row[0][:60] for row in _corpus_rows()])
def test_corpus_serving_rows_apply_or_are_refused_as_expected(cli, file: str, expected: str, kinds: str) -> None:
    result = cli("apply", "-f", CORPUS / file)
    assert "Traceback" not in result.err and len(result.err.strip().splitlines()) <= 4, result.err
    if expected == "apply":
        assert result.code == 0, result.err
    elif expected == "refuse":
        assert result.code == 2 and result.err.startswith("error: "), result.err
    else:
        assert result.code in (0, 2), result.err
    if result.code == 2:
        assert len(result.err.strip().splitlines()) == 1 and nothing_stored()
        return
    documents = [doc for doc in yaml.safe_load_all((CORPUS / file).read_text()) if doc]
    assert len(result.out.splitlines()) == len(documents)
    stored = ResourceStore().list("InferenceService", None)
    assert len(stored) == sum(doc["kind"] == "InferenceService" for doc in documents)
    for resource in stored:  # Ready is never claimed before a model server answers
        ready = {c["type"]: c for c in resource.status["conditions"]}["Ready"]
        assert ready["status"] in ("Unknown", "False") and ready["message"]
        predictor = objects.predictor_of(ResourceStore(), resource.name, resource.namespace)
        assert (ready["status"] == "False") == (predictor.unservable is not None)


# --- fuzzing: seeds are our own documents and the corpus's KServe documents, mutated ---------------------------
def _seeds() -> list[dict[str, Any]]:
    seeds: list[dict[str, Any]] = [isvc(), *(document for document, _ in BAD)]
    for file, _, _ in _corpus_rows():
        seeds += [doc for doc in yaml.safe_load_all((CORPUS / file).read_text()) if isinstance(doc, dict)]
    return seeds


SEEDS = _seeds()


@fuzz_settings(examples=400)
@given(doc=mutated(SEEDS))
def test_mutated_serving_manifest_is_accepted_or_refused(doc: Any) -> None:
    """Whatever the document, the checks either accept it (with its PredictorSpec) or raise one UserError line."""
    if not is_serving_document(doc):  # apply sends it to Fluid's checks
        return
    try:
        [manifest] = objects.check([("fuzz.yaml", 1, copy.deepcopy(doc))], check_schema_file)
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("fuzz.yaml: document 1: ")
        return
    assert manifest.info.kind == doc["kind"]
    if manifest.info.kind == "InferenceService":
        assert manifest.predictor is not None and manifest.predictor.replicas >= 1
        assert objects.initial_status(manifest.predictor)["conditions"][1]["status"] in ("Unknown", "False")


TEXTS = [yaml.safe_dump_all([doc]) for doc in SEEDS[:3]] + [(CORPUS / file).read_text() for file, _, _ in
                                                            _corpus_rows()[:6]]


@fuzz_settings(examples=200)
@given(text=mutated_text(TEXTS))
def test_mutated_serving_manifest_text_is_accepted_or_refused(text: str, tmp_path_factory: pytest.TempPathFactory
                                                              ) -> None:
    path = Path(tmp_path_factory.getbasetemp()) / "fuzz-serving.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        documents = [d for d in read_documents([str(path)]) if is_serving_document(d[2])]
        objects.check(documents, check_schema_file)
    except UserError as exc:
        assert "\n" not in str(exc)


def _stored() -> list[tuple[str, str, str, Any]]:
    store = ResourceStore()
    return [(r.kind, r.namespace, r.name, r.manifest) for kind in KINDS for r in store.list(kind, None)]


@fuzz_settings(examples=40)
@given(doc=mutated(SEEDS))
def test_a_mutated_manifest_at_millpond_apply_is_applied_or_one_error_line_with_nothing_stored(
        cli, tmp_path_factory: pytest.TempPathFactory, doc: Any) -> None:
    """The whole command, as a user runs it: exit 0, or exit 2 with one ``error:`` line and the store untouched."""
    before = _stored()
    path = Path(tmp_path_factory.getbasetemp()) / "fuzz-apply.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = cli("apply", "-f", path)
    assert "Traceback" not in result.err
    if result.code == 2:
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and result.out == "", result.err
        assert _stored() == before
    else:
        assert result.code == 0, result.err
