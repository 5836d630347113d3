"""``millpond server`` driven by the real ``kfp.Client``: experiments, runs, terminate, tokens, bad bodies."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl  # noqa: E402

from tests.server_support import Served, module_home, serving  # noqa: E402


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def nap(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "woke"


@dsl.component
def needs_marker(path: str) -> str:
    import os

    assert os.path.exists(path), f"no marker at {path}"
    return "found"


@dsl.pipeline(name="marker")
def marker(path: str) -> str:
    return needs_marker(path=path).output


@dsl.pipeline(name="adder")
def adder(x: int = 1, y: int = 2) -> int:
    first = add(a=x, b=y)
    return add(a=first.output, b=first.output).output


@dsl.pipeline(name="sleeper")
def sleeper(seconds: float = 60.0) -> str:
    return nap(seconds=seconds).output


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from module_home(tmp_path_factory, "server")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:
    yield from serving()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


def _request(url: str, method: str = "GET", body: Any = None, token: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method, headers=headers)) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_health_and_openapi(client: Any, server: Served) -> None:
    assert client.get_kfp_healthz().multi_user is False
    status, document = _request(f"{server.url}/openapi.json")
    assert status == 200 and "/apis/v2beta1/runs" in document["paths"]


def test_experiments_create_list_get_delete(client: Any) -> None:
    created = client.create_experiment("exp-a", description="first")
    again = client.create_experiment("exp-a")  # kfp.Client finds it by name instead of creating it twice
    assert again.experiment_id == created.experiment_id
    for name in ("exp-b", "exp-c"):
        client.create_experiment(name)
    assert client.get_experiment(experiment_id=created.experiment_id).description == "first"
    first = client.list_experiments(page_size=2, sort_by="display_name")
    names = [e.display_name for e in first.experiments]
    second = client.list_experiments(page_size=2, sort_by="display_name", page_token=first.next_page_token)
    names += [e.display_name for e in second.experiments]
    assert names[:3] == ["exp-a", "exp-b", "exp-c"] and first.total_size >= 3
    client.delete_experiment(created.experiment_id)
    with pytest.raises(ValueError, match="No experiment is found"):
        client.get_experiment(experiment_name="exp-a")


def test_run_from_pipeline_func_to_completion(client: Any) -> None:
    result = client.create_run_from_pipeline_func(adder, experiment_name="api-runs", arguments={"x": 3, "y": 4})
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert run.state == "SUCCEEDED", run.error
    got = client.get_run(result.run_id)
    assert got.runtime_config.parameters == {"x": 3, "y": 4}
    tasks = got.run_details.task_details
    assert {t.state for t in tasks} == {"SUCCEEDED"}
    assert len([t for t in tasks if t.display_name.startswith("add")]) == 2
    experiment = client.get_experiment(experiment_name="api-runs")
    listed = client.list_runs(experiment_id=experiment.experiment_id, sort_by="created_at desc")
    assert [r.run_id for r in listed.runs] == [result.run_id]
    assert result.run_id in [r.run_id for r in client.list_runs(page_size=100).runs]


def test_cli_run_shows_in_the_api(client: Any, home: Path, tmp_path: Path) -> None:
    from kfp import compiler

    from millpond.cli.main import main

    package = tmp_path / "adder.yaml"
    compiler.Compiler().compile(adder, str(package))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(package), "--experiment", "from-cli", "-p", "x=5", "-o", "json"])
    assert exit_info.value.code == 0
    experiment = client.get_experiment(experiment_name="from-cli")
    [run] = client.list_runs(experiment_id=experiment.experiment_id).runs
    assert run.state == "SUCCEEDED" and run.runtime_config.parameters["x"] == 5


def test_terminate_then_delete(client: Any) -> None:
    result = client.create_run_from_pipeline_func(sleeper, experiment_name="long", arguments={"seconds": 120})
    deadline = time.monotonic() + 30
    while client.get_run(result.run_id).state != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    client.terminate_run(result.run_id)
    while (state := client.get_run(result.run_id).state) not in ("CANCELED", "FAILED"):
        assert time.monotonic() < deadline, state
        time.sleep(0.1)
    assert state == "CANCELED"
    client.delete_run(result.run_id)
    with pytest.raises(kfp_server_api_exception()) as missing:
        client.get_run(result.run_id)
    assert missing.value.status == 404


def test_retry_reruns_a_failed_run(client: Any, tmp_path: Path) -> None:
    flag = tmp_path / "marker"
    result = client.create_run_from_pipeline_func(marker, experiment_name="retries", arguments={"path": str(flag)})
    failed = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert failed.state == "FAILED" and "no marker" in (failed.error.message or "") + str(failed.run_details)
    flag.write_text("x")
    client.runs.run_service_retry_run(run_id=result.run_id)  # kfp.Client's generated RunService API
    again = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert again.state == "SUCCEEDED", again.error


def test_unknown_parameter_answers_400(server: Served, tmp_path: Path) -> None:
    import yaml
    from kfp import compiler

    package = tmp_path / "adder.yaml"
    compiler.Compiler().compile(adder, str(package))
    body = {"display_name": "bad", "pipeline_spec": yaml.safe_load(package.read_text()),
            "runtime_config": {"parameters": {"z": 1}}}
    status, answer = _request(f"{server.url}/apis/v2beta1/runs", "POST", body)
    assert status == 400 and "z" in answer["message"]


def kfp_server_api_exception() -> type[Exception]:
    import kfp_server_api

    return kfp_server_api.ApiException  # type: ignore[no-any-return]


def test_bad_requests_answer_400(server: Served, client: Any) -> None:
    status, body = _request(f"{server.url}/apis/v2beta1/experiments", "POST", {"display_name": "x", "colour": "red"})
    assert status == 400 and "colour" in body["message"]
    status, body = _request(
        f"{server.url}/apis/v2beta1/runs", "POST", {"display_name": "r", "pipeline_spec": {"nope": 1}}
    )
    assert status == 400 and body["message"]
    status, body = _request(f"{server.url}/apis/v2beta1/runs?sort_by=colour")
    assert status == 400 and "sort_by" in body["message"]
    status, body = _request(f"{server.url}/apis/v2beta1/runs?filter=" + "%7B%22predicates%22%3A1")
    assert status == 400


def test_framework_errors_answer_in_kfps_shape(server: Served) -> None:
    """A body that is not JSON, an unknown route, a wrong method.

    Each answers in KFP's {error, code, message}, never FastAPI's {detail}.
    """
    request = urllib.request.Request(f"{server.url}/apis/v2beta1/runs", data=b"{not json", method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request)
        pytest.fail("a malformed body was accepted")
    except urllib.error.HTTPError as exc:
        status, body = exc.code, json.loads(exc.read())
    assert status == 400 and body["code"] == 3 and body["message"] and "detail" not in body, body
    status, body = _request(f"{server.url}/apis/v2beta1/no-such-route")
    assert status == 404 and body["code"] == 5 and "detail" not in body, body
    status, body = _request(f"{server.url}/apis/v2beta1/healthz", "DELETE")
    assert status == 405 and body["message"] and "detail" not in body, body


def test_token_is_required_when_set(home: Path) -> None:
    served = Served("s3cret")
    try:
        status, body = _request(f"{served.url}/apis/v2beta1/healthz")
        assert status == 401 and "token" in body["message"]
        assert _request(f"{served.url}/apis/v2beta1/healthz", token="wrong")[0] == 401
        authorized = kfp.Client(host=served.url, existing_token="s3cret")
        assert authorized.get_kfp_healthz().multi_user is False
        assert authorized.list_experiments().total_size is not None
    finally:
        served.stop()


def test_non_loopback_without_token_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from millpond.cli.main import main

    monkeypatch.delenv("MILLPOND_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["server", "--host", "0.0.0.0", "--port", "1"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: refusing to listen on 0.0.0.0 without a token")
