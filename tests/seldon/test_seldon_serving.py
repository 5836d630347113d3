"""SeldonDeployments served end to end: real supervisors and model servers, ``millpond server``'s gateway,
real ``kubectl``, and seed 003's query script against a SeldonDeployment ``mnist-classifier``.

Seldon's SKLEARN_SERVER answers ``predict_proba`` by default (``SKLearnServer(method="predict_proba")``), its
``method`` parameter picks ``predict`` or ``decision_function``; the answer is built as Seldon's wrapper builds
it (``names`` ``t:0``… for a 2-D answer and none for a 1-D one, ``ndarray`` for an ``ndarray`` request,
``tensor`` for a ``tensor`` or ``jsonData`` one, ``meta.requestPath`` naming the unit and its image). Traffic is
split between predictors by their percentages; the status is Seldon's (``state: Available``, ``replicas``,
``address.url``); deleting one stops its model processes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest
import yaml

from millpond.errors import UnavailableError
from millpond.serving import endpoints, lifecycle
from millpond.serving.seldon.lifecycle import supervisors, wait_available
from millpond.store.resources import ResourceStore
from tests.conftest import _end_background_processes
from tests.kube_support import Kubectl, kubectl_for
from tests.server_support import Served, call, module_home, serving
from tests.serving_support import train_digits

ROOT = Path(__file__).resolve().parents[2]
SDEP = "seldondeployment.machinelearning.seldon.io"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    for path in module_home(tmp_path_factory, "seldon"):
        yield path
        _end_background_processes(path)


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def kubectl(server: Served, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return kubectl_for(server, tmp_path_factory.mktemp("kubectl"))


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    return train_digits(tmp_path_factory.mktemp("digits"))


def until(what: Any, why: str, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := what()):
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {why}"
        time.sleep(0.1)
    return found


def _sklearn(name: str, model_dir: Path, traffic: int | None = None, method: str | None = None) -> dict[str, Any]:
    graph: dict[str, Any] = {"name": "classifier", "implementation": "SKLEARN_SERVER", "modelUri": f"file://{model_dir}"}
    if method:
        graph["parameters"] = [{"name": "method", "value": method, "type": "STRING"}]
    return {"name": name, "graph": graph, **({"traffic": traffic} if traffic is not None else {})}


def _manifest(name: str, *predictors: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "machinelearning.seldon.io/v1", "kind": "SeldonDeployment",
                           "metadata": {"name": name}, "spec": {"predictors": list(predictors)}})


def test_sklearn_server_answers_probabilities_in_seldons_shapes(kubectl: Kubectl, server: Served,
                                                                 digits: tuple[Path, Any, Any]) -> None:
    """``kubectl apply`` a SKLEARN_SERVER deployment; ``kubectl get sdep`` shows it Available; the gateway's
    ``/api/v1.0`` and ``/api/v0.1`` paths and the deployment's own ``address.url`` answer ``predict_proba``."""
    model_dir, model, rows = digits
    assert kubectl.ok("apply", "-f", "-", stdin=_manifest("iris", _sklearn("default", model_dir))).strip() == \
        f"{SDEP}/iris created"
    url = wait_available(ResourceStore(), "iris", "default", 60)
    shown = kubectl.json("get", "sdep", "iris")
    status = shown["status"]
    assert status["state"] == "Available" and status["replicas"] == 1 and status["address"]["url"] == url
    assert status["deploymentStatus"] == {"iris-default-0-classifier": {"replicas": 1, "availableReplicas": 1}}
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "DeploymentsReady": "True", "Ready": "True", "ServicesReady": "True"}
    table = kubectl.ok("get", "seldondeployments").splitlines()
    assert table[0].split() == ["NAME", "AGE"] and table[1].split()[0] == "iris"

    expected = model.predict_proba(rows[:3]).tolist()
    names = [f"t:{i}" for i in range(10)]
    meta = {"requestPath": {"classifier": "seldonio/sklearnserver:1.17.1"}}
    for path in ("/seldon/default/iris/api/v1.0/predictions", "/seldon/default/iris/api/v0.1/predictions",
                 "/seldon/iris/api/v0.1/predictions"):
        code, answer = call(server.url, "POST", path, body={"data": {"ndarray": rows[:3].tolist()}})
        assert (code, answer) == (200, {"data": {"names": names, "ndarray": expected}, "meta": meta})
    code, answer = call(server.url, "POST", "/seldon/default/iris/api/v1.0/predictions",
                        body={"data": {"tensor": {"shape": [3, 64], "values": rows[:3].ravel().tolist()}},
                              "meta": {"puid": "p-1"}})
    assert code == 200 and answer == {"data": {"names": names, "tensor": {
        "shape": [3, 10], "values": np.asarray(expected).ravel().tolist()}}, "meta": {"puid": "p-1", **meta}}
    code, answer = call(server.url, "POST", "/seldon/default/iris/api/v1.0/predictions",
                        body={"jsonData": rows[:1].tolist()})
    assert code == 200 and answer["data"]["tensor"]["shape"] == [1, 10]
    own = url.removesuffix("/api/v1.0/predictions")
    code, answer = call(own, "POST", "/api/v1.0/predictions", body={"data": {"ndarray": rows[:3].tolist()}})
    assert (code, answer["data"]["ndarray"]) == (200, expected)

    code, refused = call(server.url, "POST", "/seldon/default/iris/api/v1.0/predictions",
                         body={"data": {"ndarray": [[1, 2]]}})
    assert code == 400 and refused["status"]["status"] == "FAILURE" and "expected shape" in refused["status"]["info"]
    code, missing = call(server.url, "POST", "/seldon/default/nobody/api/v1.0/predictions", body={"data": {}})
    assert code == 404 and missing["status"]["reason"] == "MICROSERVICE_BAD_DATA"

    kubectl.ok("delete", "sdep", "iris")
    assert supervisors("iris") == [] and endpoints.read("default", "iris", "SeldonDeployment") is None
    code, _ = call(server.url, "POST", "/seldon/default/iris/api/v1.0/predictions", body={"data": {"ndarray": []}})
    assert code == 404


def test_method_parameter_and_traffic_between_predictors(cli, home: Path, server: Served,
                                                         digits: tuple[Path, Any, Any], tmp_path: Path) -> None:
    """An 80/20 A/B: ``predict`` (the class, no names) on one predictor, ``predict_proba`` on the other; the
    gateway's split is exact over 10 requests (smooth weighted round-robin); a changed method is served after
    the predictors restart."""
    model_dir, model, rows = digits
    path = tmp_path / "ab.yaml"
    path.write_text(_manifest("ab", _sklearn("a", model_dir, 80, "predict"), _sklearn("b", model_dir, 20)))
    result = cli("apply", "-f", path)
    assert result.code == 0 and result.out.strip() == f"{SDEP}/ab created", result.err
    wait_available(ResourceStore(), "ab", "default", 60)
    answers = [call(server.url, "POST", "/seldon/default/ab/api/v1.0/predictions",
                    body={"data": {"ndarray": rows[:1].tolist()}})[1] for _ in range(10)]
    kinds = Counter("class" if a["data"]["names"] == [] else "proba" for a in answers)
    assert kinds == {"class": 8, "proba": 2}
    assert next(a for a in answers if a["data"]["names"] == [])["data"]["ndarray"] == model.predict(rows[:1]).tolist()
    shown = json.loads(cli("get", "sdep", "ab", "-o", "json").out)["status"]
    assert shown["replicas"] == 2 and set(shown["deploymentStatus"]) == {"ab-a-0-classifier", "ab-b-0-classifier"}

    # its supervisor killed with -9: never Available without one; millpond server's reconciler starts one again
    [supervisor] = supervisors("ab")
    os.kill(supervisor.pid, signal.SIGKILL)
    until(lambda: endpoints.read("default", "ab", "SeldonDeployment") is None, "the dead supervisor's endpoints")
    shown = json.loads(cli("get", "sdep", "ab", "-o", "json").out)["status"]
    assert shown["state"] == "Failed" and "no live supervisor serves it" in shown["description"]
    assert "address" not in shown
    assert lifecycle.reconcile(ResourceStore()) == ["default/ab"]
    wait_available(ResourceStore(), "ab", "default", 60)
    assert call(server.url, "POST", "/seldon/default/ab/api/v1.0/predictions",
                body={"data": {"ndarray": rows[:1].tolist()}})[0] == 200

    path.write_text(_manifest("ab", _sklearn("a", model_dir, 50, "predict_proba"), _sklearn("b", model_dir, 50)))
    assert cli("apply", "-f", path).out.strip() == f"{SDEP}/ab configured"
    assert cli("apply", "-f", path).out.strip() == f"{SDEP}/ab unchanged"
    wait_available(ResourceStore(), "ab", "default", 60)
    for _ in range(4):
        code, answer = call(server.url, "POST", "/seldon/default/ab/api/v1.0/predictions",
                            body={"data": {"ndarray": rows[:1].tolist()}})
        assert code == 200 and answer["data"]["names"] == [f"t:{i}" for i in range(10)]
    assert cli("delete", "seldondeployment", "ab").code == 0
    assert supervisors("ab") == []


def test_mlflow_server_serves_an_mlflow_sklearn_model(cli, home: Path, server: Served,
                                                     digits: tuple[Path, Any, Any], tmp_path: Path) -> None:
    """MLFLOW_SERVER on a folder as ``mlflow.sklearn.save_model`` writes it (``MLmodel`` naming ``model.pkl``):
    pyfunc's ``predict``, the classes; a folder of another flavor fails, naming it."""
    import pickle

    _, model, rows = digits
    folder = tmp_path / "mlflow-model"
    folder.mkdir()
    (folder / "model.pkl").write_bytes(pickle.dumps(model))
    (folder / "MLmodel").write_text(yaml.safe_dump({"flavors": {
        "python_function": {"loader_module": "mlflow.sklearn", "model_path": "model.pkl", "python_version": "3.11"},
        "sklearn": {"pickled_model": "model.pkl", "serialization_format": "pickle", "sklearn_version": "1.5.0"}}}))
    (folder / "requirements.txt").write_text("scikit-learn\n")
    path = tmp_path / "wines.yaml"
    graph = {"name": "classifier", "implementation": "MLFLOW_SERVER", "modelUri": str(folder)}
    path.write_text(yaml.safe_dump({"apiVersion": "machinelearning.seldon.io/v1alpha2", "kind": "SeldonDeployment",
                                    "metadata": {"name": "wines"},
                                    "spec": {"predictors": [{"name": "default", "graph": graph}]}}))
    assert cli("apply", "-f", path).code == 0
    wait_available(ResourceStore(), "wines", "default", 60)
    code, answer = call(server.url, "POST", "/seldon/default/wines/api/v1.0/predictions",
                        body={"data": {"ndarray": rows[:4].tolist()}})
    assert code == 200 and answer["data"] == {"names": [], "ndarray": model.predict(rows[:4]).tolist()}
    assert answer["meta"] == {"requestPath": {"classifier": "seldonio/mlflowserver:1.17.1"}}
    assert cli("delete", "sdep", "wines").code == 0

    (folder / "MLmodel").write_text(yaml.safe_dump({"flavors": {"keras": {"keras_version": "2"}}}))
    path.write_text(path.read_text().replace("name: wines", "name: keras"))
    assert cli("apply", "-f", path).code == 0
    with pytest.raises(UnavailableError, match="an MLflow model of flavor.s. keras: millpond serves MLflow's sklearn"):
        wait_available(ResourceStore(), "keras", "default", 30)
    assert cli("delete", "sdep", "keras").code == 0


def test_a_model_without_predict_proba_fails_in_its_status(cli, home: Path, tmp_path: Path) -> None:
    """A RidgeClassifier has no ``predict_proba``: Seldon's default method cannot load it; the status says
    Failed with the model server's reason, and the InferenceService's ``--method``-less server is untouched."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import RidgeClassifier

    x, y = load_digits(return_X_y=True)
    folder = tmp_path / "ridge"
    folder.mkdir()
    joblib.dump(RidgeClassifier().fit(x[:200], y[:200]), folder / "model.joblib")
    path = tmp_path / "ridge.yaml"
    path.write_text(_manifest("ridge", _sklearn("default", folder)))
    assert cli("apply", "-f", path).code == 0
    with pytest.raises(UnavailableError, match="no predict_proba"):
        wait_available(ResourceStore(), "ridge", "default", 30)
    assert cli("delete", "sdep", "ridge").code == 0


def test_seed_003s_query_against_a_seldon_deployment(server: Served, tmp_path: Path) -> None:
    """examples/seldon_query/seldon_mnist.py applies the SeldonDeployment ``mnist-classifier``; seed 003's query
    script, with only the address changed, gets the ten probabilities, as Seldon answers them."""
    example = ROOT / "examples" / "seldon_query"
    served = subprocess.run([sys.executable, example / "seldon_mnist.py", "--dir", tmp_path / "mnist", "--timeout",
                             "60"], capture_output=True, text=True, timeout=240)
    assert served.returncode == 0, served.stderr
    assert f"{SDEP}/mnist-classifier created" in served.stdout
    queried = subprocess.run([sys.executable, example / "query_endpoint.py", server.url.removeprefix("http://")],
                             capture_output=True, text=True, timeout=60)
    assert queried.returncode == 0, queried.stderr
    status, answer = queried.stdout.strip().splitlines()[-2:]
    body, label = answer.split(" (label ")
    data = json.loads(body)["data"]
    model = joblib.load(tmp_path / "mnist" / "model" / "model.joblib")
    sys.path.insert(0, str(ROOT / "examples" / "fluid_mnist"))
    from make_data import digits_as_mnist

    arrays = digits_as_mnist()
    first = arrays["t10k-images"][:1].reshape(1, 784) / 255.0  # the script's next_batch(1)
    assert status == "200" and data["names"] == [f"t:{i}" for i in range(10)]
    assert data["ndarray"] == model.predict_proba(first).tolist()
    assert abs(sum(data["ndarray"][0]) - 1.0) < 1e-9 and label.rstrip(")") == str(int(arrays["t10k-labels"][0]))
    done = subprocess.run([sys.executable, "-m", "millpond.cli.main", "delete", "sdep", "mnist-classifier"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_bad_deployments_through_the_kubernetes_api_are_a_status_and_nothing_stored(kubectl: Kubectl,
                                                                                     server: Served) -> None:
    """kubectl's apply of traffic that does not sum to 100, and a POST of a graph too deep: a ``Status`` with
    Kubernetes' reason and Seldon's message; nothing stored."""
    refused = kubectl.run("apply", "-f", "-", stdin=_manifest(
        "split", _sklearn("a", Path("/nowhere"), 70), _sklearn("b", Path("/nowhere"), 20)))
    assert refused.returncode == 1 and "Traffic must sum to 100 for multiple predictors" in refused.stderr
    assert "Traceback" not in refused.stderr
    deep: dict[str, Any] = {"name": "u12", "type": "MODEL"}
    for level in range(11, 0, -1):
        deep = {"name": f"u{level}", "type": "TRANSFORMER", "children": [deep]}
    body = yaml.safe_load(_manifest("deep", {"name": "p", "graph": deep, "componentSpecs": [
        {"spec": {"containers": [{"name": f"u{i}", "image": "x/y:1"} for i in range(1, 13)]}}]}))
    code, status = call(server.url, "POST", "/apis/machinelearning.seldon.io/v1/namespaces/default/seldondeployments",
                        body=body)
    assert 400 <= code < 500 and status["kind"] == "Status" and status["status"] == "Failure"
    assert status["reason"] in ("Invalid", "BadRequest") and "more than 11 units deep" in status["message"]
    assert ResourceStore().list("SeldonDeployment", None) == []
    missing = kubectl.run("get", "sdep", "split")
    assert missing.returncode == 1 and 'seldondeployments.machinelearning.seldon.io "split" not found' in missing.stderr


def test_a_seldon_deployment_and_an_inference_service_of_one_name_are_two_objects(
        kubectl: Kubectl, server: Served, home: Path, digits: tuple[Path, Any, Any]) -> None:
    """As on Kubernetes, a SeldonDeployment and an InferenceService may share a name and a namespace: each keeps
    its own model copy, events and processes, and deleting one leaves the other answering."""
    model_dir, model, rows = digits
    isvc = yaml.safe_dump({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                           "metadata": {"name": "twin"},
                           "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                                                            "storageUri": f"file://{model_dir}"}}}})
    kubectl.ok("apply", "-f", "-", stdin=isvc)
    kubectl.ok("apply", "-f", "-", stdin=_manifest("twin", _sklearn("default", model_dir)))
    lifecycle.wait_ready(ResourceStore(), "twin", "default", 60)
    wait_available(ResourceStore(), "twin", "default", 60)
    assert endpoints.folder("default", "twin") != endpoints.folder("default", "twin", "SeldonDeployment")
    assert (home / "serving" / "default" / "twin").is_dir() and (home / "seldon" / "default" / "twin").is_dir()

    kubectl.ok("delete", "sdep", "twin")
    assert supervisors("twin") == []
    code, answer = call(server.url, "POST", "/v1/models/twin:predict", body={"instances": rows[:2].tolist()})
    assert (code, answer) == (200, {"predictions": model.predict(rows[:2]).tolist()})
    assert lifecycle.supervisors("twin"), "the InferenceService's supervisor ended with the SeldonDeployment"
    kubectl.ok("delete", "isvc", "twin")
