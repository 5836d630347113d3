"""Pipelines, pipeline versions, runs from a version, and archiving, driven by the real ``kfp.Client``."""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import io
import json
import tarfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import compiler, dsl

from tests.server.test_server_api import home  # noqa: F401  (the fixture that sets MILLPOND_HOME)
from tests.server_support import Served


@dsl.component
def multiply(a: int, b: int) -> int:
    return a * b


@dsl.pipeline(name="multiplier")
def multiplier(x: int = 2, y: int = 3) -> int:
    return multiply(a=x, b=y).output


@dsl.pipeline(name="squarer")
def squarer(x: int = 4) -> int:
    return multiply(a=x, b=x).output


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[Served]:  # noqa: F811
    served = Served()
    yield served
    served.stop()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("packages")
    made = {}
    for name, func in (("multiplier", multiplier), ("squarer", squarer)):
        made[name] = folder / f"{name}.yaml"
        compiler.Compiler().compile(func, str(made[name]))
    return made


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _api_error() -> type[Exception]:
    import kfp_server_api

    return kfp_server_api.ApiException  # type: ignore[no-any-return]


def _request(url: str, method: str = "GET", body: Any = None, data: bytes | None = None,
             content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    if body is not None:
        data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _multipart(url: str, filename: str, content: bytes) -> tuple[int, dict[str, Any]]:
    boundary = uuid.uuid4().hex
    data = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"uploadfile\"; filename=\"{filename}\"\r\n"
            f"Content-Type: application/octet-stream\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
    return _request(url, "POST", data=data, content_type=f"multipart/form-data; boundary={boundary}")


def test_upload_list_get_versions_delete(client: Any, packages: dict[str, Path]) -> None:
    name = _unique("mult")
    pipeline = client.upload_pipeline(str(packages["multiplier"]), pipeline_name=name, description="x times y")
    assert (pipeline.display_name, pipeline.description) == (name, "x times y")
    assert client.get_pipeline_id(name) == pipeline.pipeline_id
    assert client.get_pipeline_id("no-such-pipeline") is None
    got = client.get_pipeline(pipeline.pipeline_id)
    assert got.display_name == name and got.created_at is not None

    version = client.upload_pipeline_version(str(packages["squarer"]), pipeline_version_name="v2",
                                             pipeline_id=pipeline.pipeline_id, description="squares")
    by_name = client.upload_pipeline_version(str(packages["multiplier"]), pipeline_version_name="v3",
                                             pipeline_name=name)
    versions = client.list_pipeline_versions(pipeline.pipeline_id, sort_by="created_at")
    assert [v.display_name for v in versions.pipeline_versions] == [name, "v2", "v3"] and versions.total_size == 3
    first_page = client.list_pipeline_versions(pipeline.pipeline_id, page_size=2, sort_by="display_name desc")
    assert [v.display_name for v in first_page.pipeline_versions] == ["v3", "v2"] and first_page.next_page_token
    fetched = client.get_pipeline_version(pipeline.pipeline_id, version.pipeline_version_id)
    assert fetched.description == "squares" and fetched.pipeline_spec["pipelineInfo"]["name"] == "squarer"

    listed = client.list_pipelines(page_size=100, filter=json.dumps(
        {"predicates": [{"key": "display_name", "operation": "IS_SUBSTRING", "stringValue": name}]}))
    assert [p.pipeline_id for p in listed.pipelines] == [pipeline.pipeline_id]

    with pytest.raises(_api_error()) as duplicate:
        client.upload_pipeline(str(packages["multiplier"]), pipeline_name=name)
    assert duplicate.value.status == 409
    with pytest.raises(_api_error()) as has_versions:
        client.delete_pipeline(pipeline.pipeline_id)  # as Kubeflow: versions first (or cascade=true)
    assert has_versions.value.status == 412
    for v in client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions:
        client.delete_pipeline_version(pipeline.pipeline_id, v.pipeline_version_id)
    with pytest.raises(_api_error()) as gone:
        client.get_pipeline_version(pipeline.pipeline_id, by_name.pipeline_version_id)
    assert gone.value.status == 404
    client.delete_pipeline(pipeline.pipeline_id)
    with pytest.raises(_api_error()) as missing:
        client.get_pipeline(pipeline.pipeline_id)
    assert missing.value.status == 404


def test_run_from_a_pipeline_version(client: Any, packages: dict[str, Path]) -> None:
    name = _unique("runnable")
    pipeline = client.upload_pipeline(str(packages["multiplier"]), pipeline_name=name)
    version = client.upload_pipeline_version(str(packages["squarer"]), pipeline_version_name="square",
                                             pipeline_id=pipeline.pipeline_id)
    experiment = client.create_experiment(_unique("from-versions"))
    run = client.run_pipeline(experiment.experiment_id, "square-5", pipeline_id=pipeline.pipeline_id,
                              version_id=version.pipeline_version_id, params={"x": 5})
    done = client.wait_for_run_completion(run.run_id, timeout=60, sleep_duration=0.2)
    assert done.state == "SUCCEEDED", done.error
    assert done.pipeline_version_reference.pipeline_version_id == version.pipeline_version_id
    assert done.runtime_config.parameters == {"x": 5} and done.experiment_id == experiment.experiment_id
    # the run keeps its copy of the spec: deleting the version does not break it
    client.delete_pipeline_version(pipeline.pipeline_id, version.pipeline_version_id)
    assert client.get_run(run.run_id).pipeline_spec["pipelineInfo"]["name"] == "squarer"


KFP_V1 = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "kfp-v1"
if not KFP_V1.is_dir():
    KFP_V1 = Path("/work/shared/conformance/kfp-v1")


@pytest.mark.skipif(not KFP_V1.is_dir(), reason="the kfp-v1 corpus is not here")
def test_a_kfp_v1_package_uploads_and_runs(client: Any, tmp_path: Path) -> None:
    """dsl-compile's .tar.gz of a kfp 1.x pipeline (an Argo Workflow) is uploaded and run like a v2 one."""
    package = tmp_path / "condition.tar.gz"
    with tarfile.open(package, mode="w:gz") as archive:
        archive.add(KFP_V1 / "condition.yaml", arcname="pipeline.yaml")
    pipeline = client.upload_pipeline(str(package), pipeline_name=_unique("v1-condition"))
    experiment = client.create_experiment(_unique("v1-runs"))
    version = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    run = client.run_pipeline(experiment.experiment_id, "v1-heads", pipeline_id=pipeline.pipeline_id,
                              version_id=version.pipeline_version_id, params={"force_flip_result": "heads"})
    done = client.wait_for_run_completion(run.run_id, timeout=120, sleep_duration=0.2)
    assert done.state == "SUCCEEDED", done.error
    spec = client.get_run(run.run_id).pipeline_spec  # a v1 run: its workflow, as Kubeflow returns it
    assert spec["kind"] == "Workflow" and spec["metadata"]["generateName"].startswith("single-condition-pipeline")


def test_bad_uploads_answer_400(server: Served, client: Any, packages: dict[str, Path]) -> None:
    base = f"{server.url}/apis/v2beta1/pipelines"
    status, body = _multipart(f"{base}/upload?name={_unique('bad')}", "bad.yaml", b"root: [unclosed\n")
    assert status == 400 and "malformed YAML" in body["message"] and "\n" not in body["message"]
    status, body = _multipart(f"{base}/upload?name={_unique('bad')}", "bad.yaml", b"pipelineInfo: {name: x}\n")
    assert status == 400 and body["message"].startswith("invalid pipeline package")
    status, body = _multipart(f"{base}/upload_version?name=v", "p.yaml", packages["multiplier"].read_bytes())
    assert status == 400 and "pipelineid" in body["message"]
    status, body = _multipart(
        f"{base}/upload_version?pipelineid=nope&name=v", "p.yaml", packages["multiplier"].read_bytes()
    )
    assert status == 404
    status, body = _request(f"{base}", "POST", {"display_name": "x", "colour": "red"})
    assert status == 400 and "colour" in body["message"]
    status, body = _request(f"{base}?sort_by=colour")
    assert status == 400 and "sort_by" in body["message"]


def test_json_creates_and_packages(server: Served, client: Any, packages: dict[str, Path]) -> None:
    import yaml

    base = f"{server.url}/apis/v2beta1/pipelines"
    name = _unique("json")
    status, pipeline = _request(base, "POST", {"display_name": name, "description": "made by JSON"})
    assert status == 200 and pipeline["display_name"] == name
    pid = pipeline["pipeline_id"]
    status, from_url = _request(f"{base}/{pid}/versions", "POST", {
        "display_name": "from-url", "package_url": {"pipeline_url": packages["multiplier"].as_uri()}})
    assert status == 200, from_url
    status, inline = _request(f"{base}/{pid}/versions", "POST", {
        "display_name": "inline", "pipeline_spec": yaml.safe_load(packages["squarer"].read_text())})
    assert status == 200, inline
    # a .tar.gz package with the YAML inside, as KFP accepts
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(packages["multiplier"], arcname="pipeline.yaml")
    status, packed = _multipart(f"{base}/upload_version?pipelineid={pid}&name=packed", "p.tar.gz", buffer.getvalue())
    assert status == 200 and packed["display_name"] == "packed"
    assert [v.display_name for v in client.list_pipeline_versions(pid, sort_by="created_at").pipeline_versions] == \
        ["from-url", "inline", "packed"]
    status, answer = _request(f"{base}/names/{name}")
    assert status == 200 and answer["pipeline_id"] == pid
    status, _ = _request(f"{base}/{pid}?cascade=true", "DELETE")
    assert status == 200 and _request(f"{base}/{pid}")[0] == 404


def test_archive_and_unarchive(client: Any, packages: dict[str, Path]) -> None:
    experiment = client.create_experiment(_unique("archive-me"))
    result = client.create_run_from_pipeline_package(str(packages["multiplier"]), arguments={"x": 1},
                                                     experiment_id=experiment.experiment_id)
    client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert client.get_run(result.run_id).storage_state == "AVAILABLE"

    client.archive_run(result.run_id)
    assert client.get_run(result.run_id).storage_state == "ARCHIVED"
    archived = json.dumps({"predicates": [{"key": "storage_state", "operation": "EQUALS", "stringValue": "ARCHIVED"}]})
    assert result.run_id in [r.run_id for r in client.list_runs(page_size=100, filter=archived).runs]
    client.unarchive_run(result.run_id)
    assert client.get_run(result.run_id).storage_state == "AVAILABLE"

    client.archive_experiment(experiment.experiment_id)  # archives its runs too
    assert client.get_experiment(experiment_id=experiment.experiment_id).storage_state == "ARCHIVED"
    assert client.get_run(result.run_id).storage_state == "ARCHIVED"
    listed = client.list_experiments(page_size=100, filter=json.dumps(
        {"predicates": [{"key": "storage_state", "operation": "EQUALS", "stringValue": "ARCHIVED"}]}))
    assert experiment.experiment_id in [e.experiment_id for e in listed.experiments]
    with pytest.raises(_api_error()) as refused:
        client.run_pipeline(experiment.experiment_id, "late", pipeline_package_path=str(packages["multiplier"]))
    assert refused.value.status == 412 and "archived" in str(refused.value.body)
    client.unarchive_experiment(experiment.experiment_id)
    assert client.get_experiment(experiment_id=experiment.experiment_id).storage_state == "AVAILABLE"
    assert client.get_run(result.run_id).storage_state == "ARCHIVED"  # as Kubeflow: runs stay archived
    with pytest.raises(_api_error()) as missing:
        client.archive_run("no-such-run")
    assert missing.value.status == 404


def test_archive_survives_an_engine_update(client: Any, packages: dict[str, Path]) -> None:
    """The engine's stdlib journal writes runs without naming storage_state; the column's default fills it."""
    result = client.create_run_from_pipeline_package(str(packages["squarer"]), arguments={"x": 3},
                                                     experiment_name=_unique("journal"))
    assert client.get_run(result.run_id).storage_state == "AVAILABLE"
    client.archive_run(result.run_id)
    client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert client.get_run(result.run_id).storage_state == "ARCHIVED"


def test_migration_0004_keeps_existing_runs(tmp_path: Path) -> None:
    """A home at revision 0003 with runs in it: upgraded, its runs and experiments are AVAILABLE."""
    import sqlite3

    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from millpond.store.db import HEAD_REVISION, MIGRATIONS_DIR, get_engine

    url = f"sqlite:///{tmp_path / 'old.db'}"
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    engine = create_engine(url)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
        conn.exec_driver_sql(
            "INSERT INTO experiments (id, name, description, created_at) VALUES ('e', 'e', '', '2024-01-01')"
        )
        conn.exec_driver_sql("INSERT INTO runs (id, name, experiment_id, pipeline_name, pipeline_spec, parameters, "
                             "pipeline_root, state, outputs, created_at) VALUES ('r', 'r', 'e', 'p', '{}', '{}', '/x', "
                             "'SUCCEEDED', '{}', '2024-01-01')")
    engine.dispose()
    get_engine(url)
    with sqlite3.connect(tmp_path / "old.db") as db:
        assert db.execute("SELECT storage_state, pipeline_version_id FROM runs").fetchall() == [("AVAILABLE", None)]
        assert db.execute("SELECT storage_state FROM experiments").fetchall() == [("AVAILABLE",)]
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD_REVISION,)]
