"""KFP v1 runs in the REST API and the UI's helpers, against a real ``millpond server``.

kfp.Client lists v1 and v2 runs together and gets a v1 run's spec back as its Argo workflow (as
Kubeflow's v2 backend returns a v1 upload); the graph of a v1 run is the workflow's own steps
(loop items expanded, a false condition skipped, the exit handler), each with its record; kfp
1.x's ``mlpipeline-ui-metadata``/``mlpipeline-metrics`` outputs are read, bounded, a ``source``
only from the run's own artifacts; hostile uploads answer 400 in one line.

In Debian's Chromium with Playwright (as tests/test_server_ui.py): upload a compiled kfp 1.x
package through the Pipelines page's form (seed 003's workflow as the ``.tar.gz`` dsl-compile
writes), see the version's graph drawn from the workflow, start a run from the form and watch it
succeed with the workflow's step names; open a node's log and outputs; see kfp 1.x's
visualizations render while the hostile parts stay inert text (no script runs); see a v1 and a v2
run side by side in the runs list with the v1 metrics column, and compared.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import io
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

kfp = pytest.importorskip("kfp")
from kfp import dsl

from millpond.documents import load_yaml_documents
from millpond.errors import UserError
from millpond.pipelines.argo.package import read_package
from millpond.pipelines.argo.reader import read_workflow
from millpond.server.v1_outputs import SourceError, read_metrics, read_visualizations
from millpond.server.v1_ui_routes import _source_reader
from millpond.server.workflow_graph import parsed_workflow, workflow_nodes
from millpond.settings import load_settings
from millpond.store.runs import RunStore
from tests.conftest import MILLPOND_BIN
from tests.server.test_server_pipelines import _multipart, _request
from tests.server_support import Served, module_home, serving
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

V1 = Path(__file__).parents[1] / "pipelines" / "kfp_v1"
EXAMPLES = Path(__file__).parents[2] / "examples" / "kfp_v1"


CALCULATION = EXAMPLES / "seed003_calculation" / "pipeline.yaml"  # the packages examples/kfp_v1 ships
UI_OUTPUTS = V1 / "ui_outputs.yaml"


@dsl.component
def v2_step(word: str) -> str:
    return word.upper()


@dsl.pipeline(name="v2-beside-v1")
def v2_pipeline(word: str = "duck") -> str:
    return v2_step(word=word).output


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "kfpv1ui"):
        yield from serving()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


@pytest.fixture(scope="module")
def ui_run(client: Any) -> Any:
    """The ui_outputs workflow, uploaded and run to its end (report, loop, skipped condition, exit handler)."""
    pipeline = client.upload_pipeline(str(UI_OUTPUTS), pipeline_name=f"ui-outputs-{uuid.uuid4().hex[:6]}")
    version = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    experiment = client.create_experiment(f"v1-ui-{uuid.uuid4().hex[:6]}")
    run = client.run_pipeline(experiment.experiment_id, "ui outputs", pipeline_id=pipeline.pipeline_id,
                              version_id=version.pipeline_version_id)
    done = client.wait_for_run_completion(run.run_id, timeout=90, sleep_duration=0.2)
    assert done.state == "SUCCEEDED", done.error
    return done


def _get(url: str) -> tuple[int, Any]:
    return _request(url)


def test_kfp_client_sees_v1_and_v2_runs_together(server: Served, client: Any, tmp_path: Path) -> None:
    package = tmp_path / "calculation.tar.gz"  # the package dsl-compile writes: pipeline.yaml in a .tar.gz
    with tarfile.open(package, mode="w:gz") as archive:
        archive.add(CALCULATION, arcname="pipeline.yaml")
    pipeline = client.upload_pipeline(str(package), pipeline_name=f"calc-{uuid.uuid4().hex[:6]}")
    version = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    spec = client.get_pipeline_version(pipeline.pipeline_id, version.pipeline_version_id).pipeline_spec
    assert spec["kind"] == "Workflow" and spec["spec"]["entrypoint"] == "calculation-pipeline"  # as uploaded

    experiment = client.create_experiment(f"mixed-{uuid.uuid4().hex[:6]}")
    v1 = client.run_pipeline(experiment.experiment_id, "v1 calc", pipeline_id=pipeline.pipeline_id,
                             version_id=version.pipeline_version_id, params={"a": "1", "b": "7", "c": "17"})
    v2 = client.create_run_from_pipeline_func(v2_pipeline, experiment_name=experiment.display_name,
                                              run_name="v2 beside")
    for run_id in (v1.run_id, v2.run_id):
        done = client.wait_for_run_completion(run_id, timeout=90, sleep_duration=0.2)
        assert done.state == "SUCCEEDED", done.error
    listed = client.list_runs(experiment_id=experiment.experiment_id, page_size=10).runs
    assert sorted(r.display_name for r in listed) == ["v1 calc", "v2 beside"]

    got = client.get_run(v1.run_id)
    assert got.pipeline_spec["kind"] == "Workflow"  # the workflow it ran, not the IR it was translated to
    assert got.runtime_config.parameters == {"a": "1", "b": "7", "c": "17"}
    assert got.pipeline_version_reference.pipeline_version_id == version.pipeline_version_id
    names = {t.display_name: t.state for t in got.run_details.task_details}
    assert names["add-2"] == "SUCCEEDED"
    assert client.get_run(v2.run_id).pipeline_spec["pipelineInfo"]["name"] == "v2-beside-v1"

    status, graph = _get(f"{server.url}/ui-api/runs/{v1.run_id}/graph")
    assert status == 200 and graph["source"] == "workflow"
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert sorted(nodes) == ["add", "add-2", "my-divmod"]  # no entrypoint node, the workflow's names
    assert nodes["add-2"]["deps"] == ["calculation-pipeline/my-divmod"]
    assert nodes["add"]["outputs"]["parameters"]["add-Output"] == "5.0"  # a + 4
    status, log = _get(f"{server.url}/ui-api/runs/{v1.run_id}/tasks/{nodes['add']['task_id']}/log")
    assert status == 200 and log["has_log"]
    status, v2_graph = _get(f"{server.url}/ui-api/runs/{v2.run_id}/graph")
    assert status == 200 and v2_graph["source"] == "ir" and [n["name"] for n in v2_graph["nodes"]] == ["v2-step"]


def test_graph_of_a_v1_run_is_the_workflows_steps(server: Served, client: Any, ui_run: Any) -> None:
    status, graph = _get(f"{server.url}/ui-api/runs/{ui_run.run_id}/graph")
    assert status == 200 and graph["source"] == "workflow" and graph["final"]
    nodes = {n["name"]: n for n in graph["nodes"]}
    assert sorted(nodes) == ["cleanup", "condition-1", "echo(0:alpha)", "echo(1:beta)", "never-run", "report"]
    assert not any(n["path"].split("/")[-1].startswith(("argo-", "for-loop")) for n in graph["nodes"])
    assert all(n["parent"] is None for n in graph["nodes"])  # flat, as v1's runtime graph
    states = {name: n["state"] for name, n in nodes.items()}
    assert states == {"report": "SUCCEEDED", "echo(0:alpha)": "SUCCEEDED", "echo(1:beta)": "SUCCEEDED",
                      "condition-1": "SKIPPED", "never-run": "SKIPPED", "cleanup": "SUCCEEDED"}
    report = nodes["report"]["path"]
    assert nodes["echo(1:beta)"]["deps"] == [report] and nodes["condition-1"]["deps"] == [report]
    assert nodes["never-run"]["deps"] == [nodes["condition-1"]["path"]]
    assert set(nodes["cleanup"]["deps"]) == {nodes["echo(0:alpha)"]["path"], nodes["echo(1:beta)"]["path"],
                                             nodes["never-run"]["path"]}
    status, log = _get(f"{server.url}/ui-api/runs/{ui_run.run_id}/tasks/{nodes['echo(1:beta)']['task_id']}/log")
    assert status == 200 and "word: beta" in log["text"]

    reference = ui_run.pipeline_version_reference
    status, static = _get(f"{server.url}/ui-api/pipelines/{reference.pipeline_id}/versions/"
                          f"{reference.pipeline_version_id}/graph")
    assert status == 200 and static["source"] == "workflow"
    kinds = {n["name"]: (n["kind"], n["state"]) for n in static["nodes"]}
    assert kinds == {"report": ("container", "PENDING"), "echo": ("loop", "PENDING"),
                     "condition-1": ("group", "PENDING"), "never-run": ("container", "PENDING"),
                     "cleanup": ("container", "PENDING")}


def test_v1_outputs_and_metrics_of_a_run(server: Served, client: Any, ui_run: Any) -> None:
    status, graph = _get(f"{server.url}/ui-api/runs/{ui_run.run_id}/graph")
    report = next(n for n in graph["nodes"] if n["name"] == "report")
    assert set(report["outputs"]["artifacts"]) == {"mlpipeline-ui-metadata", "mlpipeline-metrics"}
    status, answer = _get(f"{server.url}/ui-api/runs/{ui_run.run_id}/tasks/{report['task_id']}/v1-outputs")
    assert status == 200
    assert answer["metrics"] == [{"name": "accuracy-score", "number_value": 0.875, "format": "PERCENTAGE"},
                                 {"name": "loss", "number_value": 0.25, "format": "RAW"}]
    shown = answer["visualizations"]
    assert [v["type"] for v in shown] == ["markdown", "table", "confusion_matrix", "roc", "web-app",
                                          "tensorboard", "markdown"]
    assert shown[0]["text"].startswith("# Report") and "<script>" in shown[0]["text"]  # text: the UI never parses it
    assert shown[1]["header"] == ["name", "score"] and shown[1]["rows"][0] == ["alpha", "0.9"]
    assert shown[2]["labels"] == ["cat", "dog"] and shown[2]["matrix"] == [[8, 2], [1, 9]]
    assert shown[3]["points"][1] == {"fpr": 0.1, "tpr": 0.6, "threshold": 0.8}
    assert "not served" in shown[5]["text"]
    assert "not an artifact of this run" in shown[6]["error"] and "text" not in shown[6]

    status, metrics = _get(f"{server.url}/ui-api/run-metrics?run_id={ui_run.run_id}")
    assert status == 200
    assert [(m["name"], m["node"]) for m in metrics["runs"][ui_run.run_id]] == [
        ("accuracy-score", "report"), ("loss", "report")]
    status, body = _get(f"{server.url}/ui-api/run-metrics?run_id=no-such-run")
    assert status == 404 and body["message"]


def test_a_source_is_read_only_from_the_runs_own_artifacts(tmp_path: Path) -> None:
    artifact = tmp_path / "run" / "report" / "out"
    artifact.mkdir(parents=True)
    (artifact / "table.csv").write_text("a,1\n")
    (artifact / "escape").symlink_to("/etc/passwd")
    read = _source_reader({str(artifact), "/", ""})  # a root-like URI never lets everything through
    assert read(str(artifact / "table.csv")) == b"a,1\n"
    for hostile in ("/etc/passwd", "file:///etc/passwd", f"{artifact}/../../../etc/passwd", f"file://{artifact}/x",
                    "http://127.0.0.1:1/x", f"{artifact}/escape", f"{artifact}x/table.csv", "\x00"):
        with pytest.raises(SourceError):
            read(hostile)
    shown = read_visualizations(json.dumps({"outputs": [
        {"type": "table", "format": "csv", "source": "/etc/passwd"},
        {"type": "markdown", "source": f"file://{os.sep}etc{os.sep}passwd"},
        {"type": "table", "format": "csv", "source": str(artifact / "table.csv")},
        {"type": "script", "storage": "inline", "source": "x"},
    ]}).encode(), read)
    assert ["error" in v for v in shown] == [True, True, False, True] and shown[2]["rows"] == [["a", "1"]]


def test_bad_v1_outputs_are_one_line_each() -> None:
    with pytest.raises(UserError, match="not JSON"):
        read_metrics(b"{nope")
    with pytest.raises(UserError, match="'metrics' list"):
        read_metrics(b'{"metrics": 3}')
    metrics = read_metrics(json.dumps({"metrics": [
        {"name": "ok", "numberValue": 1}, {"name": "nan", "numberValue": "NaN"}, {"name": "x" * 100, "numberValue": 1},
        {"name": "flag", "numberValue": True}, "junk", {"name": "pct", "numberValue": 0.5, "format": "ODD"}]}).encode())
    assert [(m.name, m.format) for m in metrics] == [("ok", "RAW"), ("pct", "RAW")]
    many = json.dumps({"outputs": [{"type": "markdown", "storage": "inline", "source": "x"}] * 500}).encode()
    assert len(read_visualizations(many, _no_source)) == 50
    big = json.dumps({"outputs": [{"type": "markdown", "storage": "inline", "source": "x" * (600 * 1024)}]}).encode()
    assert "over" in read_visualizations(big, _no_source)[0]["error"]
    matrix = json.dumps({"outputs": [{"type": "confusion_matrix", "storage": "inline", "labels": ["a"],
                                      "source": "a,b,1e999\n"}]}).encode()
    assert "finite" in read_visualizations(matrix, _no_source)[0]["error"]


def _no_source(source: str) -> bytes:
    raise SourceError(f"{source}: no sources here")


_JSON = st.recursive(st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4),
                     max_leaves=20)
_ENTRY = st.fixed_dictionaries({"type": st.sampled_from(["markdown", "table", "confusion_matrix", "roc", "web-app",
                                                          "tensorboard", "other"]),
                                "storage": st.sampled_from(["inline", "uri"]),
                                "source": st.text(max_size=60) | _JSON},
                               optional={"format": st.sampled_from(["csv", "json"]) | _JSON,
                                         "header": _JSON, "schema": _JSON, "labels": _JSON})


@settings(max_examples=60, deadline=None)
@given(st.lists(_ENTRY | _JSON, max_size=6), _JSON)
def test_fuzzed_ui_metadata_gives_views_or_errors_never_a_crash(entries: list[Any], metrics: Any) -> None:
    try:  # a document the limits refuse (a NUL in a key, say) is one error for the whole file
        views = read_visualizations(json.dumps({"outputs": entries}).encode(), _no_source)
    except UserError as exc:
        assert "\n" not in str(exc)
        views = []
    for view in views:
        assert isinstance(view["type"], str) and ("error" in view or {"text", "rows", "points", "matrix"} & set(view))
    try:
        read_metrics(json.dumps({"metrics": metrics}).encode())
    except UserError as exc:
        assert "\n" not in str(exc)


def test_hostile_uploads_answer_400_in_one_line(server: Served, client: Any) -> None:
    base = f"{server.url}/apis/v2beta1/pipelines/upload"
    before = len(client.list_pipelines(page_size=100).pipelines or [])
    bomb = io.BytesIO()  # 64 MiB of spaces as pipeline.yaml: about 64 KiB zipped
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pipeline.yaml", b" " * (64 * 1024 * 1024))
    climbing = io.BytesIO()
    with tarfile.open(fileobj=climbing, mode="w:gz") as archive:
        archive.add(CALCULATION, arcname="../pipeline.yaml")
    gzip_bomb = io.BytesIO()
    with tarfile.open(fileobj=gzip_bomb, mode="w:gz") as archive:
        info = tarfile.TarInfo("pipeline.yaml")
        info.size = 80 * 1024 * 1024
        archive.addfile(info, io.BytesIO(b"\0" * info.size))
    huge = b"apiVersion: argoproj.io/v1alpha1\nkind: Workflow\n# " + b"x" * (33 * 1024 * 1024)
    cases = {
        "bomb.zip": (bomb.getvalue(), "larger than"),
        "climb.tar.gz": (climbing.getvalue(), "'..'"),
        "bomb.tar.gz": (gzip_bomb.getvalue(), "larger than"),
        "huge.yaml": (huge, "over 32 MiB"),
        "broken.tar.gz": (b"\x1f\x8b" + os.urandom(200), "not a readable"),
        "binary.yaml": (b"\xff\xfe\x00garbage", "not UTF-8"),
    }
    for filename, (content, expected) in cases.items():
        status, body = _multipart(f"{base}?name=hostile-{uuid.uuid4().hex[:6]}", filename, content)
        assert status == 400, (filename, status, body)
        assert expected in body["message"] and "\n" not in body["message"], (filename, body)
    assert len(client.list_pipelines(page_size=100).pipelines or []) == before  # nothing stored



def _post_run(server: Served, spec: dict[str, Any], name: str, parameters: dict[str, str]) -> str:
    status, run = _request(f"{server.url}/apis/v2beta1/runs", "POST", {
        "display_name": name, "pipeline_spec": spec, "runtime_config": {"parameters": parameters}})
    assert status == 200, run
    return str(run["run_id"])


def test_an_inline_v1_run_keeps_its_workflow_and_clones(server: Served, client: Any) -> None:
    """A workflow posted inline (kfp 2's client parses files as IR itself, so REST): kept, drawn, cloned."""
    workflow = yaml.safe_load(CALCULATION.read_text())
    first = _post_run(server, workflow, "inline v1", {"a": "2"})
    assert client.wait_for_run_completion(first, timeout=90, sleep_duration=0.2).state == "SUCCEEDED"
    spec = client.get_run(first).pipeline_spec
    assert spec == workflow  # the document as posted
    # the UI's clone posts the run's pipeline_spec back: the workflow runs again, drawn again
    clone = _post_run(server, spec, "clone of inline v1", {"a": "3"})
    assert client.wait_for_run_completion(clone, timeout=90, sleep_duration=0.2).state == "SUCCEEDED"
    status, graph = _get(f"{server.url}/ui-api/runs/{clone}/graph")
    assert status == 200 and graph["source"] == "workflow"
    assert next(n for n in graph["nodes"] if n["name"] == "add")["outputs"]["parameters"]["add-Output"] == "7.0"


# --- in Chromium ---------------------------------------------------------------------------------

def test_upload_a_v1_package_and_run_it_from_the_ui(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    package = tmp_path / "calculation.tar.gz"  # what dsl-compile writes: pipeline.yaml in a .tar.gz
    with tarfile.open(package, mode="w:gz") as archive:
        archive.add(CALCULATION, arcname="pipeline.yaml")
    with chromium_page(height=1000) as (page, errors):
        page.goto(server.url + "/#/pipelines")
        page.set_input_files("#pipeline-file", str(package))
        page.fill("#pipeline-name", f"calculation {uuid.uuid4().hex[:6]}")
        page.click("#upload-submit")
        page.wait_for_url("**/#/pipelines/*", timeout=10_000)
        graph = page.locator("#version-graph g.node")
        graph.nth(2).wait_for(timeout=10_000)
        assert graph.count() == 3
        assert sorted(graph.nth(i).get_attribute("data-path") or "" for i in range(3)) == [
            "calculation-pipeline/add", "calculation-pipeline/add-2", "calculation-pipeline/my-divmod"]
        sync_api.expect(page.locator("#version-graph-source")).to_contain_text("kfp v1")
        assert page.input_value("#param-b") == "7" and page.input_value("#param-c") == "17"
        page.fill("#param-a", "1")
        page.fill("#run-name", "v1 from the ui")
        page.click("#create-run")
        page.wait_for_url("**/#/runs/*", timeout=10_000)
        run_id = page.url.rsplit("/", 1)[1]
        page.locator('#run-header .state[data-state="SUCCEEDED"]').wait_for(timeout=60_000)
        for name in ("add", "my-divmod", "add-2"):
            page.locator(f'#dag g.node[data-path="calculation-pipeline/{name}"][data-state="SUCCEEDED"]').wait_for(
                timeout=10_000)
        assert page.locator("#dag g.node").count() == 3  # no entrypoint node, no translation's helpers
        sync_api.expect(page.locator("#v1-badge")).to_have_text("kfp v1")
        labels = sorted(page.locator("#dag g.node text:not(.sub)").all_text_contents())
        assert labels == ["add", "add-2", "my-divmod"]
        page.locator('#dag g.node[data-path="calculation-pipeline/add-2"]').click()
        sync_api.expect(page.locator("#task-panel table.outputs")).to_contain_text("add-2-Output")
        sync_api.expect(page.locator("#task-panel table.inputs")).to_contain_text("17")
        assert not errors, errors
    run = client.get_run(run_id)
    assert run.state == "SUCCEEDED" and run.pipeline_spec["kind"] == "Workflow"
    assert run.runtime_config.parameters == {"a": "1", "b": "7", "c": "17"}


def test_v1_graph_outputs_and_runs_list_in_chromium(server: Served, client: Any, ui_run: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    expect = sync_api.expect
    experiment = client.get_experiment(ui_run.experiment_id)
    v1 = ui_run
    v2 = client.create_run_from_pipeline_func(v2_pipeline, experiment_name=experiment.display_name, run_name="v2 word")
    assert client.wait_for_run_completion(v2.run_id, timeout=90, sleep_duration=0.2).state == "SUCCEEDED"
    with chromium_page(height=1400) as (page, errors):
        page.goto(f"{server.url}/#/runs/{v1.run_id}")
        page.locator('#dag g.node[data-state="SUCCEEDED"]').nth(3).wait_for(timeout=UI_WAIT_MS)
        paths = {page.locator("#dag g.node").nth(i).get_attribute("data-path")
                 for i in range(page.locator("#dag g.node").count())}
        assert paths == {"ui-outputs/report", "ui-outputs/echo/iteration-0/echo", "ui-outputs/echo/iteration-1/echo",
                         "ui-outputs/condition-1", "ui-outputs/condition-1/never-run", "exit-cleanup"}
        labels = set(page.locator("#dag g.node text:not(.sub)").all_text_contents())
        assert labels == {"report", "echo(0:alpha)", "echo(1:beta)", "condition-1", "never-run", "cleanup"}
        assert page.get_attribute('#dag g.node[data-path="ui-outputs/condition-1"]', "data-state") == "SKIPPED"

        page.locator('#dag g.node[data-path="ui-outputs/echo/iteration-1/echo"]').click()
        expect(page.locator("#task-log")).to_contain_text("word: beta", timeout=10_000)

        page.locator('#dag g.node[data-path="ui-outputs/report"]').click()
        expect(page.locator("#task-log")).to_contain_text("report written", timeout=10_000)
        box = page.locator("#v1-outputs")
        metrics = box.locator('.v1-output[data-type="metrics"] table.metrics')
        expect(metrics).to_contain_text("accuracy-score", timeout=10_000)
        expect(metrics).to_contain_text("87.500%")
        expect(metrics).to_contain_text("0.250")
        markdown = box.locator('.v1-output[data-type="markdown"] .markdown')
        expect(markdown.locator("h3")).to_have_text("Report")
        expect(markdown.locator("strong")).to_have_text("accuracy")
        assert markdown.locator("script, img").count() == 0 and "<script>" in markdown.inner_text()  # as text
        table = box.locator('.v1-output[data-type="table"] table.v1-table')
        assert table.locator("thead th").all_inner_texts() == ["name", "score"]
        assert table.locator("tbody td").all_inner_texts() == [
            "alpha", "0.9", "<b onmouseover=x>beta</b>", "<script>window.__pwned = 3</script>"]
        assert table.locator("b, script").count() == 0
        matrix = box.locator('.v1-output[data-type="confusion_matrix"] table.confusion-matrix')
        assert matrix.locator("tbody td").all_inner_texts() == ["8", "2", "1", "9"]
        assert box.locator('.v1-output[data-type="roc"] svg.roc polyline').count() == 1
        frame = box.locator('.v1-output[data-type="web-app"] iframe')
        assert frame.get_attribute("sandbox") == ""  # no scripts, no same origin
        expect(page.frame_locator('.v1-output[data-type="web-app"] iframe').locator("h1")).to_have_text("web app")
        expect(box.locator('.v1-output[data-type="tensorboard"]')).to_contain_text("not served")
        expect(box.locator(".v1-error")).to_contain_text("not an artifact of this run")  # source: /etc/passwd
        assert page.evaluate("window.__pwned") is None and page.title() == "millpond"  # no script ran
        page.screenshot(path=str(tmp_path / "v1-run.png"), full_page=True)

        page.goto(f"{server.url}/#/experiments/{experiment.experiment_id}")
        v1_row = page.locator(f'tr.run-row[data-run-id="{v1.run_id}"]')
        v2_row = page.locator(f'tr.run-row[data-run-id="{v2.run_id}"]')
        v1_row.wait_for(timeout=10_000)
        v2_row.wait_for(timeout=10_000)
        expect(v1_row.locator("td.metrics-cell")).to_contain_text("accuracy-score: 87.500%", timeout=10_000)
        assert v2_row.locator("td.metrics-cell").inner_text() == ""
        v1_row.locator("input.compare-box").check()
        v2_row.locator("input.compare-box").check()
        page.click("#compare-runs")
        page.wait_for_url("**/#/compare/*", timeout=10_000)
        compare = page.locator("#compare-table")
        expect(compare).to_contain_text("ui outputs", timeout=10_000)
        expect(compare).to_contain_text("v2 word")
        expect(compare.locator("tr.metric-row").first).to_contain_text("87.500%")
        expect(compare.locator("tr.param-row")).to_contain_text(["threshold", "word"])
        assert not errors, errors


def test_a_cli_run_keeps_its_workflow_on_both_databases(cli: Any, database: str) -> None:
    """``millpond run workflow.yaml`` records the workflow (migration 0011, SQLite and PostgreSQL): the UI draws it."""
    ran = cli("run", CALCULATION, "-p", "a=1", "-o", "json")
    assert ran.code == 0, ran.err
    store = RunStore(load_settings().database_url)
    run = store.get_run(ran.json()["run_id"])
    assert run.workflow == yaml.safe_load(CALCULATION.read_text())
    workflow = parsed_workflow(run.workflow)
    assert workflow is not None
    tasks = {task.path: task for task in store.list_tasks(run.id)}
    nodes = workflow_nodes(workflow, tasks, ended=True)
    assert [(n["name"], n["state"]) for n in nodes] == [("add", "SUCCEEDED"), ("my-divmod", "SUCCEEDED"),
                                                         ("add-2", "SUCCEEDED")]


SEED002 = EXAMPLES / "seed002_fashion_mnist" / "pipeline.tar.gz"
SEED002_STEPS = ["create-pipeline-volume", "git-clone", "preprocessing", "training-and-evaluation"]


def test_seed002s_graph_is_its_workflows_steps() -> None:
    """Seed 002 (VolumeOp, then git-clone, preprocessing, training) drawn from its workflow, before any run."""
    document = load_yaml_documents(read_package(SEED002), str(SEED002))[0]
    nodes = workflow_nodes(read_workflow(document, str(SEED002)), {})
    assert [n["name"] for n in nodes] == SEED002_STEPS
    assert nodes[0]["kind"] == "resource" and nodes[2]["deps"] == [
        "fashion-mnist-training-pipeline/create-pipeline-volume", "fashion-mnist-training-pipeline/git-clone"]


def test_upload_seed002s_package_and_run_it_from_the_ui(server: Served, client: Any, tmp_path: Path) -> None:
    """Seed 002 as its tutorial does it: dsl-compile's pipeline.tar.gz through the Pipelines form,
    then a run from the form (the repository is local, the ssh key a secret). It clones into its
    VolumeOp's volume, trains, and outputs through file_outputs the model path train.py wrote."""
    sync_api = _browser()
    repo = subprocess.run([sys.executable, EXAMPLES / "seed002_fashion_mnist" / "make_repo.py",
                           tmp_path / "kubeflow-mnist.git"], capture_output=True, text=True, check=True).stdout.strip()
    key = tmp_path / "id_rsa"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n")
    made = subprocess.run([MILLPOND_BIN, "secret", "create", "ssh-key-secret", "--from-file", f"id_rsa={key}"],
                          capture_output=True, text=True, env=os.environ)  # the server's home (module_home)
    assert made.returncode == 0, made.stderr
    with chromium_page(height=1000) as (page, errors):
        page.goto(server.url + "/#/pipelines")
        page.set_input_files("#pipeline-file", str(SEED002))
        page.fill("#pipeline-name", f"fashion mnist {uuid.uuid4().hex[:6]}")
        page.click("#upload-submit")
        page.wait_for_function("() => location.hash.startsWith('#/pipelines/') || "
                               "document.querySelector('#upload-message.error')", timeout=10_000)
        refused = page.locator("#upload-message.error")
        assert not refused.count(), refused.inner_text()  # seed 002 loads (its paths are placed: argo.placement)
        graph = page.locator("#version-graph g.node")
        graph.nth(3).wait_for(timeout=10_000)
        assert sorted(graph.locator("text:not(.sub)").all_text_contents()) == SEED002_STEPS
        assert page.input_value("#param-data_dir") == "/workspace"
        page.fill("#param-repo_url", repo)
        page.fill("#param-python", sys.executable)
        page.fill("#run-name", "seed 002 from the ui")
        page.click("#create-run")
        page.wait_for_url("**/#/runs/*", timeout=10_000)
        run_id = page.url.rsplit("/", 1)[1]
        page.locator('#run-header .state[data-state="SUCCEEDED"], #run-header .state[data-state="FAILED"]').wait_for(
            timeout=300_000)
        sync_api.expect(page.locator("#run-header .state")).to_have_attribute("data-state", "SUCCEEDED")
        trained = page.locator('#dag g.node[data-state="SUCCEEDED"]').filter(has_text="training-and-evaluation")
        trained.click()
        output = page.locator("#task-panel table.outputs tr").filter(has_text="training-and-evaluation-output")
        uri = output.locator("td").nth(1).inner_text().strip()
        assert Path(uri).read_text().startswith("/workspace/kubeflow-mnist/"), uri  # the path train.py wrote
        assert not errors, errors
    run = client.get_run(run_id)
    assert run.state == "SUCCEEDED" and run.pipeline_spec["kind"] == "Workflow"
    assert run.runtime_config.parameters["repo_url"] == repo


def test_a_withparam_loops_nodes_are_named_by_the_items_it_ran(cli: Any, home: Path) -> None:
    """withParam over a step's output: ``for-loop-1(0:1)``, as Argo names it."""
    ran = cli("run", V1 / "loop_over_lightweight_output.yaml", "-o", "json")
    assert ran.code == 0, ran.err
    store = RunStore(load_settings().database_url)
    run = store.get_run(ran.json()["run_id"])
    tasks = {task.path: task for task in store.list_tasks(run.id)}
    workflow = parsed_workflow(run.workflow or {})
    assert workflow is not None
    nodes = workflow_nodes(workflow, tasks, ended=True)
    assert [(n["name"], n["state"]) for n in nodes] == [
        ("produce-list", "SUCCEEDED"), ("for-loop-1(0:1)", "SUCCEEDED"), ("consume-data", "SUCCEEDED"),
        ("for-loop-1(1:2)", "SUCCEEDED"), ("consume-data", "SUCCEEDED"), ("for-loop-1(2:3)", "SUCCEEDED"),
        ("consume-data", "SUCCEEDED")]
    assert nodes[2]["deps"] == [nodes[1]["path"]] and nodes[1]["deps"] == [nodes[0]["path"]]


def test_a_workflow_of_thousands_of_tasks_is_drawn_in_order_and_fast() -> None:
    """Tasks written in reverse of their dependencies still come after them; the graph (polled every second
    while a run goes) stays linear: 3000 chained tasks in well under the two seconds a quadratic order took."""
    document = yaml.safe_load(UI_OUTPUTS.read_text())
    tasks = document["spec"]["templates"][0]["dag"]["tasks"]
    tasks += [{"name": f"c{i}", "template": "cleanup", "dependencies": [f"c{i - 1}"] if i else []}
              for i in reversed(range(3000))]
    workflow = read_workflow(document, "big")
    started = time.perf_counter()
    nodes = workflow_nodes(workflow, {})
    took = time.perf_counter() - started
    chain = [n for n in nodes if n["name"][1:].isdigit()]
    assert [n["name"] for n in chain] == [f"c{i}" for i in range(3000)]
    assert chain[1]["deps"] == [chain[0]["path"]] and took < 2.0, took
