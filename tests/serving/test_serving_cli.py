"""``arena serve``, ``millpond serve --from-run`` and the ``deploy_model`` pipeline component, end to end.

Real processes: each InferenceService gets its supervisor and a model server (``serving.lifecycle``),
queries go through ``millpond server``'s gateway (``/v1/models/NAME:predict``, Seldon's
``/seldon/NAME/api/v0.1/predictions``) and straight to a replica, and their answers must equal the
model called in this process. ``arena serve list|get|logs|delete`` must show what runs and stop it;
a run's Model artifact is found by task and output name, and anything but a Model is refused in
one line; a pipeline's deploy task outputs the service's URL, keeps a service its own run made, never
touches one a person made, fails on a model that cannot load, and stops waiting on SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pytest

from millpond.errors import ConflictError, TaskFailure, UnavailableError
from millpond.runners.environment import RUN_ID_ENV, TASK_ID_ENV
from millpond.runners.stopping import StopFlag
from millpond.serving import endpoints, lifecycle, objects, pipeline_step
from millpond.serving.deploy import check, ready_url
from millpond.serving.from_run import ARTIFACT_ANNOTATION, RUN_LABEL
from millpond.serving.pipeline_step import DeployInputs, _wait_ready
from millpond.store.resources import ResourceStore
from tests.conftest import CliResult, _end_background_processes
from tests.server_support import Served, module_home, serving
from tests.serving_support import train_digits

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = Path(__file__).parents[1] / "pipelines"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    for path in module_home(tmp_path_factory, "serve-cli"):
        yield path
        _end_background_processes(path)


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    return train_digits(tmp_path_factory.mktemp("digits"))


def _invoke(entry: Callable[[list[str]], None], capsys: pytest.CaptureFixture[str], *args: Any) -> CliResult:
    capsys.readouterr()
    try:
        entry([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return CliResult(code, out, err)


@pytest.fixture
def arena(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from millpond.cli.arena import main

    return lambda *args: _invoke(main, capsys, *args)


@pytest.fixture
def millpond(home: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from millpond.cli.main import main

    return lambda *args: _invoke(main, capsys, *args)


def post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def predictions(base: str, name: str, rows: np.ndarray) -> list[Any]:
    return post(f"{base}/v1/models/{name}:predict", {"instances": rows.tolist()})["predictions"]


def test_arena_serve_sklearn_list_get_query_logs_delete(arena, server: Served, digits: tuple[Path, Any, Any]) -> None:
    model_dir, model, rows = digits
    result = arena("serve", "sklearn", "--name", "digits", "--model-uri", model_dir, "--model-version", "1",
                   "--cpu", "100m")
    assert result.code == 0, result.err
    assert result.out.strip() == "inferenceservice.serving.kserve.io/digits created"
    again = arena("serve", "sklearn", "--name", "digits", "--model-uri", model_dir)
    assert again.code == 2 and again.err.strip().splitlines() == [
        "error: the serving job digits already exists in namespace default: arena serve delete digits -n default first"]

    store = ResourceStore()
    url = ready_url(store, "digits", "default", 60)
    served = endpoints.read("default", "digits")
    assert served is not None and url == f"http://127.0.0.1:{served.port}"  # its own, stable port

    listed = arena("serve", "list").out.splitlines()
    assert listed[0].split() == ["NAME", "TYPE", "VERSION", "DESIRED", "AVAILABLE", "ADDRESS", "PORTS"]
    assert listed[1].split() == ["digits", "Sklearn", "00001", "1", "1", url, f"HTTP:{served.port}"]
    info = json.loads(arena("serve", "get", "digits", "-o", "json").out)
    (instance,) = info["instances"]
    assert (instance["name"], instance["status"], instance["restartCount"]) == \
        ("digits-predictor-00001-replica-0", "Running", 0)
    assert info["address"] == url and info["availableInstances"] == 1
    table = arena("serve", "get", "digits").out
    assert re.search(r"digits-predictor-00001-replica-0\s+Running\s+\S+\s+1/1\s+0\s+localhost", table), table

    expected = model.predict(rows).tolist()
    assert predictions(server.url, "digits", rows) == expected  # the gateway of millpond server
    assert predictions(instance["url"], "digits", rows) == expected  # the replica itself
    seldon = post(f"{server.url}/seldon/digits/api/v0.1/predictions",
                  {"data": {"names": [f"X{i + 1}" for i in range(64)], "ndarray": rows[:3].tolist()}})
    assert seldon["data"]["ndarray"] == expected[:3]

    logs = arena("serve", "logs", "digits")
    assert logs.code == 0 and "millpond-model-server ready name=digits" in logs.out
    last = arena("serve", "logs", "digits", "--tail", "1", "--timestamps").out.splitlines()
    assert len(last) == 1 and re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z ", last[0])
    assert arena("serve", "logs", "digits", "--since", "1h", "-i", "digits-predictor-00001-replica-0").out == logs.out
    wrong = arena("serve", "logs", "digits", "-i", "nope")
    assert wrong.code == 2 and "has no instance nope" in wrong.err

    deleted = arena("serve", "delete", "digits")
    assert deleted.code == 0 and "deleted successfully" in deleted.err
    assert lifecycle.supervisors("digits") == [] and endpoints.read("default", "digits") is None
    with pytest.raises(urllib.error.URLError):
        predictions(instance["url"], "digits", rows)  # its model server is gone with it
    assert arena("serve", "get", "digits").code == 2
    assert arena("serve", "list").out.splitlines()[1:] == []


def test_millpond_serve_from_run_of_the_digits_pipeline(millpond, arena, server: Served) -> None:
    ran = millpond("run", ROOT / "examples" / "digits_pipeline.py", "-p", "n_estimators=5", "-o", "json")
    assert ran.code == 0, ran.err
    run = json.loads(ran.out)
    model_uri = next(t for t in run["tasks"] if t["name"] == "train")["outputs"]["model"]
    store = ResourceStore()

    for artifact, says in (("preprocess.train_data", "is a system.Dataset, not a system.Model"),
                           ("train.weights", "has no output artifact 'weights' (its artifacts: model"),
                           ("fit.model", "has no task 'fit' (its tasks: evaluate, preprocess, train)"),
                           ("model", "must be TASK.OUTPUT")):
        refused = millpond("serve", "--from-run", run["run_id"], "--artifact", artifact)
        assert refused.code == 2 and refused.err.strip().splitlines() == [refused.err.strip()]
        assert says in refused.err, refused.err
    assert millpond("serve", "--from-run", "no-such-run", "--artifact", "train.model").err.startswith(
        "error: no run with id or name 'no-such-run'")
    assert store.list("InferenceService", None) == []  # nothing stored by a refusal

    served = millpond("serve", "--from-run", run["name"], "--artifact", "train.model", "--name", "digits-run",
                      "--wait", "--timeout", "60")
    assert served.code == 0, served.err
    assert served.out.splitlines()[0] == "inferenceservice.serving.kserve.io/digits-run created"
    url = served.out.splitlines()[-1]
    assert url == (lifecycle.observed_status(store.get("InferenceService", "digits-run")) or {})["url"]
    resource = store.get("InferenceService", "digits-run")
    assert resource is not None and resource.manifest["metadata"]["annotations"][ARTIFACT_ANNOTATION] == "train.model"
    assert resource.manifest["spec"]["predictor"]["sklearn"]["storageUri"] == model_uri  # the artifact's URI
    assert resource.manifest["metadata"]["labels"][RUN_LABEL] == run["run_id"]
    # the format came from the artifact's metadata (framework: scikit-learn)

    rows = np.load(next(t for t in run["tasks"] if t["name"] == "preprocess")["outputs"]["test_data"])["x"][:20]
    assert predictions(server.url, "digits-run", rows) == joblib.load(model_uri).predict(rows).tolist()
    again = millpond("serve", "--from-run", run["run_id"], "--artifact", "train.model", "--name", "digits-run")
    assert again.code == 0 and again.out.strip() == "inferenceservice.serving.kserve.io/digits-run unchanged"
    assert arena("serve", "delete", "digits-run").code == 0


def test_deploy_component_in_a_pipeline_outputs_its_url(millpond, server: Served) -> None:
    ran = millpond("run", PIPELINES / "deploy_step.py", "-p", "name=digits-step", "-o", "json")
    assert ran.code == 0, ran.err
    run = json.loads(ran.out)
    assert run["state"] == "SUCCEEDED", run
    store = ResourceStore()
    resource = store.get("InferenceService", "digits-step")
    assert resource is not None and resource.manifest["metadata"]["labels"][RUN_LABEL] == run["run_id"]
    url = run["outputs"]["Output"]
    assert url == lifecycle.observed_status(resource)["url"]
    # the service outlives the run: its supervisor carries nothing the engine's guardian kills by, nor the task's grant
    [supervisor] = lifecycle.supervisors("digits-step")
    environ = Path(f"/proc/{supervisor.pid}/environ").read_bytes().split(b"\0")
    names = {item.split(b"=", 1)[0].decode() for item in environ}
    assert not names & {"MILLPOND_ENGINE_TOKEN", "MILLPOND_LEDGER_GRANT", "MILLPOND_RUN_ID", "MILLPOND_TASK_ID"}
    model = joblib.load(next(t for t in run["tasks"] if t["name"] == "fit")["outputs"]["model"])
    rows = np.arange(64 * 3, dtype=float).reshape(3, 64) % 17
    assert predictions(server.url, "digits-step", rows) == model.predict(rows).tolist()

    # a second run deploying under the same name rolls its own model out into the service
    second = json.loads(millpond("run", PIPELINES / "deploy_step.py", "-p", "name=digits-step", "-p", "rows=300",
                                 "-o", "json").out)
    assert second["state"] == "SUCCEEDED" and second["outputs"]["Output"] == url  # the service's port stays
    resource = store.get("InferenceService", "digits-step")
    assert resource is not None and resource.manifest["metadata"]["labels"][RUN_LABEL] == second["run_id"]
    newer = joblib.load(next(t for t in second["tasks"] if t["name"] == "fit")["outputs"]["model"])
    assert (newer.predict(rows) != model.predict(rows)).any()  # the two models tell their answers apart
    # the step ended once its own model served all the traffic: the new revision, rolled out
    assert predictions(server.url, "digits-step", rows) == newer.predict(rows).tolist()
    lifecycle.stop("digits-step")
    objects.delete(objects.KINDS["InferenceService"], "digits-step", "default", store)


def test_deploy_step_keeps_its_runs_service_refuses_a_persons_and_fails_on_a_broken_model(
        arena, digits: tuple[Path, Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_dir, _, _ = digits
    monkeypatch.setenv(RUN_ID_ENV, "0d9c6e5a-run")
    monkeypatch.setenv(TASK_ID_ENV, "task-1")
    inputs = DeployInputs(model_uri=str(model_dir), name="kept", timeout_s=60)
    url = pipeline_step.run_step(inputs)
    store = ResourceStore()
    uid = store.get("InferenceService", "kept").uid
    assert pipeline_step.run_step(inputs) == url  # a retried task of the same run: the same service, kept
    assert store.get("InferenceService", "kept").uid == uid

    assert arena("serve", "sklearn", "--name", "persons", "--model-uri", model_dir).code == 0
    with pytest.raises(ConflictError, match="persons already exists .* not a pipeline run"):
        pipeline_step.run_step(DeployInputs(model_uri=str(model_dir), name="persons"))

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.joblib").write_text("not a pickle")
    with pytest.raises(TaskFailure, match="broken: ModelLoadFailed: .*model.joblib"):
        pipeline_step.run_step(DeployInputs(model_uri=str(broken), name="broken", timeout_s=60))
    # a later deploy of a model that cannot load into a served service: the task fails, the old model serves on
    with pytest.raises(TaskFailure, match="kept-predictor-00002 cannot serve .*the previous revision keeps serving"):
        pipeline_step.run_step(DeployInputs(model_uri=str(broken), name="kept", timeout_s=60))
    served = endpoints.read("default", "kept")
    assert served is not None and [(r.name, r.percent) for r in served.revisions if r.replicas] == \
        [("kept-predictor-00001", 100)]
    for name in ("kept", "persons", "broken"):
        assert arena("serve", "delete", name).code == 0


def test_a_cancelled_deploy_task_stops_waiting_on_sigterm(home: Path) -> None:
    """A service that never becomes Ready (stored, no supervisor): SIGTERM ends the wait within a poll."""
    from millpond.serving.from_run import ModelArtifact, inference_service

    store = ResourceStore()
    body = inference_service(ModelArtifact("r", "r", "t", "o", "/nowhere/model.joblib", {}), "waiting")
    objects.apply([check(body, "test")], store)
    stop = StopFlag()
    with stop.installed():
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(TaskFailure, match="stopped waiting because its pipeline task got SIGTERM"):
            _wait_ready(store, "waiting", "default", 60.0, stop)
    assert store.get("InferenceService", "waiting") is not None  # the service stays as applied


def test_seed_003s_query_script_with_only_the_address_changed(server: Served, tmp_path: Path) -> None:
    """examples/seldon_query: serve an mnist-classifier with ``arena serve sklearn``, then run seed 003's
    query (``/seldon/mnist-classifier/api/v0.1/predictions`` with ``data.names``/``data.ndarray``) at the server."""
    import subprocess
    import sys

    example = ROOT / "examples" / "seldon_query"
    served = subprocess.run([sys.executable, example / "serve_mnist.py", "--dir", tmp_path / "mnist", "--timeout",
                             "60"], capture_output=True, text=True, timeout=180)
    assert served.returncode == 0, served.stderr
    assert "inferenceservice.serving.kserve.io/mnist-classifier created" in served.stdout
    address = server.url.removeprefix("http://")
    queried = subprocess.run([sys.executable, example / "query_endpoint.py", address], capture_output=True,
                             text=True, timeout=60)
    assert queried.returncode == 0, queried.stderr
    status, answer = queried.stdout.strip().splitlines()[-2:]
    assert status == "200"
    body, label = answer.split(" (label ")
    predicted = json.loads(body)["data"]["ndarray"]
    model = joblib.load(tmp_path / "mnist" / "model.joblib")
    sys.path.insert(0, str(ROOT / "examples" / "fluid_mnist"))
    from make_data import digits_as_mnist

    first = digits_as_mnist()["t10k-images"][:1].reshape(1, 784) / 255.0  # the script's next_batch(1)
    assert predicted == model.predict(first).tolist() and label.rstrip(")") == str(int(digits_as_mnist()[
        "t10k-labels"][0]))
    subprocess.run([sys.executable, "-m", "millpond.cli.arena", "serve", "delete", "mnist-classifier"], check=True,
                   capture_output=True)


def test_custom_command_sees_its_data_at_the_path_given(arena, home: Path) -> None:
    """``--data DATASET:/PATH`` of a custom command: the named volume bound at PATH (bubblewrap); a dataset that
    does not exist is the replica's one ``error:`` line in the status, and the command never starts."""
    volume = home / "volumes" / "weights"
    volume.mkdir(parents=True, exist_ok=True)
    (volume / "hello.txt").write_text("from the dataset\n")
    command = "cd /mnt/models && exec python3 -m http.server $PORT --bind 127.0.0.1"
    assert arena("serve", "custom", "--name", "files", "--data", "weights:/mnt/models", command).code == 0
    store = ResourceStore()
    ready_url(store, "files", "default", 60)
    (instance,) = json.loads(arena("serve", "get", "files", "-o", "json").out)["instances"]
    with urllib.request.urlopen(f"{instance['url']}/hello.txt", timeout=10) as response:
        assert response.read() == b"from the dataset\n"
    assert not Path("/mnt/models/hello.txt").exists()  # bound for the command only, not on the host

    assert arena("serve", "custom", "--name", "nodata", "--data", "missing:/mnt/models", command).code == 0
    with pytest.raises(UnavailableError, match="no Dataset missing in namespace default and no volume"):
        ready_url(store, "nodata", "default", 30)
    for name in ("files", "nodata"):
        assert arena("serve", "delete", name).code == 0


def test_update_rolls_a_new_model_out_as_a_canary_then_promotes_it(arena, server: Served,
                                                                    digits: tuple[Path, Any, Any],
                                                                    tmp_path: Path) -> None:
    """``arena serve update sklearn --model-uri NEW --canary-traffic-percent 50``: a second revision gets half
    the requests through the gateway (a model that always answers 7 tells them apart), 100 promotes it and the
    first revision's replica stops."""
    from sklearn.dummy import DummyClassifier

    model_dir, model, rows = digits
    row = next(r for r in rows if model.predict(r[None])[0] != 7)[None]
    sevens = tmp_path / "sevens"
    sevens.mkdir()
    joblib.dump(DummyClassifier(strategy="constant", constant=7).fit(rows[:10], [7] * 10), sevens / "model.joblib")
    assert arena("serve", "sklearn", "--name", "canary", "--model-uri", model_dir).code == 0
    store = ResourceStore()
    ready_url(store, "canary", "default", 60)
    result = arena("serve", "update", "sklearn", "--name", "canary", "--model-uri", sevens,
                   "--canary-traffic-percent", "50")
    assert result.code == 0 and result.out.strip() == "inferenceservice.serving.kserve.io/canary configured"

    def answers() -> list[Any]:
        return [predictions(server.url, "canary", row)[0] for _ in range(20)]

    deadline = time.monotonic() + 60
    while [r["percent"] for r in json.loads(arena("serve", "get", "canary", "-o", "json").out)["revisions"]
           if r["replicas"]] != [50, 50]:
        assert time.monotonic() < deadline, arena("serve", "get", "canary").out
        time.sleep(0.2)
    split = answers()
    assert split.count(7) == 10 and split.count(int(model.predict(row)[0])) == 10  # smooth round-robin: exactly half

    assert arena("serve", "update", "sklearn", "--name", "canary", "--canary-traffic-percent", "100").code == 0
    while [r["name"] for r in json.loads(arena("serve", "get", "canary", "-o", "json").out)["revisions"]] != \
            ["canary-predictor-00002"]:
        assert time.monotonic() < deadline, arena("serve", "get", "canary").out
        time.sleep(0.2)
    assert answers() == [7] * 20
    instances = json.loads(arena("serve", "get", "canary", "-o", "json").out)["instances"]
    assert [(i["name"], i["status"]) for i in instances] == [("canary-predictor-00001-replica-0", "Stopped"),
                                                            ("canary-predictor-00002-replica-0", "Running")]
    bad = arena("serve", "update", "custom", "--name", "canary", "--image", "x")
    assert bad.code == 2 and "arena serve update sklearn or kserve" in bad.err
    assert arena("serve", "delete", "canary").code == 0
