"""The run page as good as KFP's (issue 34), on a real ``millpond server`` with runs made by ``kfp.Client``:

artifact nodes between producer and consumers in the run's and the version's graphs (KFP v2's
StaticFlow/DynamicFlow), a ``dsl.If`` node showing ``exists == False``, the version's static graph
without a state, the runs list's Metrics column from v2 Metrics artifacts (and its sort), the Compare
page (parameters, metrics, scalar metrics, artifacts by run), no ``null``/``undefined`` text on any page,
and ``/favicon.ico``. The API answers are checked first, then the pages in Debian's Chromium.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl

from millpond.server.ir_graph import condition_text
from millpond.server.security import is_public
from tests.server_support import Served, module_home, serving
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page


@dsl.component
def make_data(rows: int, data: dsl.Output[dsl.Dataset]) -> None:
    with open(data.path, "w") as out:
        out.write("\n".join(str(i) for i in range(rows)))


@dsl.component
def evaluate(data: dsl.Input[dsl.Dataset], score: float, metrics: dsl.Output[dsl.Metrics],
             scores: dsl.Output[dsl.ClassificationMetrics]) -> None:
    with open(data.path) as rows:
        assert rows.read()
    metrics.log_metric("accuracy", score)
    metrics.log_metric("f1", round(score - 0.01, 4))
    scores.log_confusion_matrix(["cat", "dog"], [[8, 2], [1, 9]])


@dsl.component
def note(text: str) -> str:
    print(text)
    return text


@dsl.pipeline(name="run-page")
def run_page(score: float = 0.9, exists: bool = False) -> None:
    made = make_data(rows=5)
    evaluate(data=made.outputs["data"], score=score)
    with dsl.If(exists == False):  # noqa: E712  kfp's condition, as the user writes it
        note(text="fresh")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "run-page"):
        yield from serving()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


@pytest.fixture(scope="module")
def runs(client: Any) -> list[str]:
    """Two finished runs of the pipeline: accuracy 0.8 and 0.95."""
    ids = [client.create_run_from_pipeline_func(run_page, experiment_name="run-page", arguments={"score": score},
                                                run_name=f"run page {score}").run_id for score in (0.8, 0.95)]
    for run_id in ids:
        run = client.wait_for_run_completion(run_id, timeout=120, sleep_duration=0.2)
        assert run.state == "SUCCEEDED", run.error
    return ids


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as response:
            body = response.read()
            kind = response.headers.get("content-type", "")
            return response.status, json.loads(body) if "json" in kind else body
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_condition_text_reads_back_what_the_user_wrote() -> None:
    assert condition_text("inputs.parameter_values['pipelinechannel--exists'] == false") == "exists == False"
    assert condition_text("inputs.parameter_values['pipelinechannel--flip-coin-Output'] == 'heads'") \
        == "flip-coin-Output == 'heads'"
    assert condition_text("int(inputs.parameter_values['pipelinechannel--n']) > 3 && "
                          "inputs.parameter_values['pipelinechannel--ok'] == true") == "int(n) > 3 and ok == True"
    assert condition_text("inputs.parameter_values['pipelinechannel--word'] == 'true || false'") \
        == "word == 'true || false'"  # inside quotes: as written
    assert condition_text("") == ""


def test_run_graph_has_artifact_nodes_and_the_conditions_expression(server: Served, runs: list[str]) -> None:
    status, graph = _get(f"{server.url}/ui-api/runs/{runs[0]}/graph")
    assert status == 200
    nodes = {node["path"]: node for node in graph["nodes"]}
    data = nodes["make-data@data"]
    assert data["kind"] == "artifact" and data["name"] == "data" and data["artifact_type"] == "system.Dataset"
    assert data["deps"] == ["make-data"] and data["parent"] is None and data["state"] == "LIVE"
    [entry] = data["outputs"]["artifacts"]["data"]
    assert entry["uri"] == nodes["make-data"]["outputs"]["artifacts"]["data"][0]["uri"]
    # the consumer hangs from the artifact, not from the producer (kfp lists it in dependentTasks too)
    assert nodes["evaluate"]["deps"] == ["make-data@data"]
    assert {nodes["evaluate@metrics"]["artifact_type"], nodes["evaluate@scores"]["artifact_type"]} == {
        "system.Metrics", "system.ClassificationMetrics"}
    assert nodes["evaluate@metrics"]["deps"] == ["evaluate"]
    [condition] = [n for n in graph["nodes"] if n["kind"] == "dag"]
    assert condition["condition"] == "exists == False" and condition["state"] == "SUCCEEDED"
    [inside] = [n for n in graph["nodes"] if n["parent"] == condition["path"]]
    assert inside["name"] == "note" and inside["state"] == "SUCCEEDED"
    assert not any(n.get("kind") == "artifact" for n in graph["nodes"] if n["parent"] == condition["path"])


def test_version_graph_is_static_with_artifact_nodes(server: Served, client: Any, tmp_path: Any) -> None:
    package = tmp_path / "run_page.yaml"
    kfp.compiler.Compiler().compile(run_page, str(package))
    pipeline = client.upload_pipeline(str(package), pipeline_name="run page static")
    versions = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    status, graph = _get(f"{server.url}/ui-api/pipelines/{pipeline.pipeline_id}/versions/"
                         f"{versions[0].pipeline_version_id}/graph")
    assert status == 200 and graph["static"] is True and graph["source"] == "ir"
    artifacts = {n["path"]: n for n in graph["nodes"] if n["kind"] == "artifact"}
    assert set(artifacts) == {"make-data@data", "evaluate@metrics", "evaluate@scores"}
    assert all(n["state"] is None and "outputs" not in n for n in artifacts.values())  # nothing recorded
    assert next(n for n in graph["nodes"] if n["kind"] == "dag")["condition"] == "exists == False"


def test_run_metrics_include_v2_scalar_metrics(server: Served, runs: list[str]) -> None:
    query = "&".join(f"run_id={run_id}" for run_id in runs)
    status, answer = _get(f"{server.url}/ui-api/run-metrics?{query}")
    assert status == 200
    first = answer["runs"][runs[0]]
    assert [(m["name"], m["number_value"], m["node"], m["artifact"]) for m in first] == [
        ("accuracy", 0.8, "evaluate", "metrics"), ("f1", 0.79, "evaluate", "metrics")]
    assert [m["number_value"] for m in answer["runs"][runs[1]]] == [0.95, 0.94]
    assert _get(f"{server.url}/ui-api/run-metrics?run_id=nope")[0] == 404


def test_favicon_answers_and_is_linked(server: Served) -> None:
    status, icon = _get(f"{server.url}/favicon.ico")
    assert status == 200 and icon[:4] == b"\x00\x00\x01\x00" and b"PNG" in icon[:40]  # an ICO holding a PNG
    with urllib.request.urlopen(f"{server.url}/favicon.ico") as response:
        assert response.headers["content-type"] == "image/x-icon"
    status, page = _get(f"{server.url}/")
    assert status == 200 and b'rel="icon" href="/favicon.ico"' in page
    assert is_public("GET", "/favicon.ico") and not is_public("POST", "/favicon.ico")  # no token needed


NO_NULL = re.compile(r"\b(null|undefined|NaN)\b")


def _no_null_text(page: Any, where: str) -> None:
    text = page.inner_text("#main")
    assert not NO_NULL.search(text), f"{where}: {NO_NULL.search(text)!r} in {text[:2000]!r}"


def test_run_page_version_page_runs_list_and_compare_in_chromium(server: Served, client: Any, runs: list[str],
                                                                 tmp_path: Any) -> None:
    sync_api = _browser()
    expect = sync_api.expect
    package = tmp_path / "run_page.yaml"
    kfp.compiler.Compiler().compile(run_page, str(package))
    pipeline = client.upload_pipeline(str(package), pipeline_name="run page chromium")  # no description
    with chromium_page(height=1100) as (page, errors):
        # the run: artifact pills between tasks, the condition's expression, an artifact's panel
        page.goto(f"{server.url}/#/runs/{runs[0]}")
        data = page.locator('#dag g.node.kind-artifact[data-path="make-data@data"]')
        data.wait_for(timeout=UI_WAIT_MS)
        expect(data).to_have_class(re.compile(r"\blive\b"), timeout=UI_WAIT_MS)
        assert data.get_attribute("data-artifact-type") == "system.Dataset"
        assert page.locator("#dag g.node.kind-artifact").count() == 3
        condition = page.locator("#dag g.node.condition")
        expect(condition.locator("text.sub")).to_contain_text("if exists == False")
        assert condition.get_attribute("data-condition") == "exists == False"
        data.click()
        expect(page.locator("#artifact-type")).to_have_text("system.Dataset")
        expect(page.locator("#artifact-uri")).to_contain_text("data")
        page.locator("#artifact-producer").click()  # back to the task that made it
        expect(page.locator("#task-panel h1")).to_contain_text("make-data")
        page.locator('#dag g.node.kind-artifact[data-path="evaluate@scores"]').click()
        matrix = page.locator('#task-panel .preview[data-artifact="scores"] table.confusion-matrix')
        expect(matrix).to_contain_text("cat")
        condition.click()
        expect(page.locator("#task-condition")).to_have_text("Run when: exists == False")
        _no_null_text(page, "run page")

        # the version's static graph: tasks and artifacts, no state anywhere
        page.goto(f"{server.url}/#/pipelines/{pipeline.pipeline_id}")
        graph = page.locator("#version-graph g.node")
        graph.nth(5).wait_for(timeout=UI_WAIT_MS)
        assert page.locator("#version-graph svg.static").count() == 1
        assert page.locator("#version-graph g.node[data-state]").count() == 0
        assert "pending" not in page.inner_text("#version-graph").lower()
        assert page.locator("#version-graph g.node.kind-artifact").count() == 3
        _no_null_text(page, "pipeline page")

        # the runs list: the Metrics column from the Metrics artifacts, sorted by the leading metric
        page.goto(f"{server.url}/#/runs")
        for run_id, shown in zip(runs, ("accuracy: 0.800 · f1: 0.790", "accuracy: 0.950 · f1: 0.940"), strict=True):
            expect(page.locator(f'tr.run-row[data-run-id="{run_id}"] td.metrics-cell')).to_have_text(
                shown, timeout=UI_WAIT_MS)
        order = ('() => [...document.querySelectorAll("tr.run-row")].map((r) => r.dataset.runId)'
                 f'.filter((id) => {json.dumps(runs)}.includes(id))')
        page.click("#sort-metric")
        expect(page.locator("#sort-metric")).to_have_text("Metrics (accuracy ▼)")
        page.wait_for_function(f"() => ({order})()[0] === {json.dumps(runs[1])}", timeout=10_000)
        page.click("#sort-metric")
        expect(page.locator("#sort-metric")).to_have_text("Metrics (accuracy ▲)")
        page.wait_for_function(f"() => ({order})()[0] === {json.dumps(runs[0])}", timeout=10_000)
        _no_null_text(page, "runs list")
        page.click("#sort-metric")
        expect(page.locator("#sort-metric")).to_have_text("Metrics")

        # compare: parameters (the differing one marked), metrics, scalar metrics, artifacts by run
        for run_id in runs:
            page.locator(f'tr.run-row[data-run-id="{run_id}"] input.compare-box').check()
        page.click("#compare-runs")
        page.wait_for_url("**/#/compare/*", timeout=10_000)
        table = page.locator("#compare-table")
        expect(table.locator('tr.param-row[data-param="score"]')).to_have_class(re.compile(r"\bdiffers\b"),
                                                                                  timeout=10_000)
        assert "differs" not in (table.locator('tr.param-row[data-param="exists"]').get_attribute("class") or "")
        expect(table.locator('tr.metric-row[data-metric="accuracy"]')).to_contain_text("0.800")
        expect(table.locator('tr.metric-row[data-metric="accuracy"]')).to_contain_text("0.950")
        scalars = page.locator("#compare-scalars")
        assert scalars.locator("tr.scalar-row td").all_inner_texts()[:2] == ["0.8", "0.95"]
        expect(scalars.locator('tr.scalar-row[data-metric="f1"]')).to_contain_text("0.94")
        for run_id in runs:
            column = page.locator(f'#compare-artifacts .compare-run[data-run-id="{run_id}"]')
            expect(column.locator('.preview[data-artifact="metrics"] table.metrics')).to_contain_text("accuracy")
            expect(column.locator('.preview[data-artifact="scores"] table.confusion-matrix')).to_contain_text("dog")
        _no_null_text(page, "compare page")
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)

        page.goto(f"{server.url}/#/experiments")
        expect(page.locator("#experiments")).to_contain_text("run-page", timeout=10_000)
        _no_null_text(page, "experiments")
        page.goto(f"{server.url}/#/pipelines")
        expect(page.locator("#pipelines")).to_contain_text("run page chromium", timeout=10_000)
        _no_null_text(page, "pipelines")
        assert not errors, errors


def test_missing_text_helpers_give_empty_strings_in_chromium(server: Served) -> None:
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/nodes")
        page.locator("#nodes").wait_for(timeout=10_000)
        got = page.evaluate("""async () => {
          const f = await import('/ui/lib/format.js');
          return [f.text(null), f.text(undefined), f.text(NaN), f.text(0), f.text("x"),
                  f.valueText(null), f.valueText(undefined), f.valueText(false), f.v1Number({}), f.v1Number(null),
                  f.metricsText([{ name: "a", number_value: null }])];
        }""")
        assert got == ["", "", "", "0", "x", "", "", "false", "", "", "a: "]
        assert not errors, errors
