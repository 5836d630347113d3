"""The web UI of ``millpond server``, driven in Debian's Chromium (headless, fresh profile) with Playwright.

Open the runs list, see a run, open it, see one DAG node per task turn green, click a task and
read a line of its log. Also the UI's JSON helpers: the graph of a run with a sub-DAG, and logs
read by offset.
"""

# no "from __future__ import annotations": kfp reads the components' annotations as types

import json
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

kfp = pytest.importorskip("kfp")
from kfp import dsl

from tests.server_support import Served, module_home, serving

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "ui-runs.png"


@dsl.component
def greet(name: str) -> str:
    print(f"hello from the ui test, {name}")
    return f"hi {name}"


@dsl.component
def shout(text: str) -> str:
    print(f"shouting {text}")
    return text.upper()


@dsl.pipeline(name="ui-demo")
def ui_demo(name: str = "pond") -> str:
    first = greet(name=name)
    second = greet(name="duck")
    loud = shout(text=first.output).after(second)
    return loud.output


@dsl.pipeline(name="inner")
def inner(text: str) -> str:
    return shout(text=text).output


@dsl.pipeline(name="nested")
def nested(name: str = "n") -> str:
    first = greet(name=name)
    return inner(text=first.output).output


@dsl.pipeline(name="looped")
def looped() -> None:
    with dsl.ParallelFor(["a", "b", "c"]) as item:
        greet(name=item)


PNG_1X1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@dsl.component
def report(metrics: dsl.Output[dsl.Metrics], scores: dsl.Output[dsl.ClassificationMetrics],
           notes: dsl.Output[dsl.Markdown], page: dsl.Output[dsl.HTML], picture: dsl.Output[dsl.Artifact],
           png: str) -> None:
    import base64

    metrics.log_metric("accuracy", 0.92)
    metrics.log_metric("loss", 0.31)
    scores.log_confusion_matrix(["cat", "dog"], [[8, 2], [1, 9]])
    scores.log_roc_curve([0.0, 0.2, 1.0], [0.0, 0.8, 1.0], [1.0, 0.5, 0.0])
    with open(notes.path, "w") as out:
        out.write(
            "# Model report\n\nAccuracy is **92%** <script>window.pwned = 1</script>\n\n- first point\n- second\n"
        )
    with open(page.path, "w") as out:
        out.write("<h1>Hello from html</h1><script>parent.document.title = 'pwned'</script>")
    picture.uri += ".png"
    with open(picture.path, "wb") as out:
        out.write(base64.b64decode(png))


@dsl.pipeline(name="ui-report")
def ui_report() -> None:
    report(png=PNG_1X1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    for _ in module_home(tmp_path_factory, "ui"):
        yield from serving()


@pytest.fixture(scope="module")
def client(server: Served) -> Any:
    return kfp.Client(host=server.url)


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as response:
            body = response.read()
            kind = response.headers.get("content-type", "")
            return response.status, json.loads(body) if "json" in kind else body.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_page_and_static_files_are_served(server: Served) -> None:
    status, page = _get(server.url + "/")
    assert status == 200 and "/ui/app.js" in page
    assert _get(server.url + "/ui/app.js")[0] == 200 and _get(server.url + "/ui/app.css")[0] == 200
    assert _get(server.url + "/ui/..%2Fui_routes.py")[0] == 404
    assert _get(server.url + "/ui/nothing.js")[0] == 404
    assert _get(server.url + "/ui-api/runs/nope/graph")[0] == 404
    assert 'type="module"' in page  # app.js imports the modules under lib/ and pages/: served as JavaScript
    for name in ("lib/markdown.js", "pages/runs.js"):
        with urllib.request.urlopen(f"{server.url}/ui/{name}") as response:
            assert response.headers["content-type"].startswith("text/javascript"), name
    for name in ("lib/..%2F..%2Fui_routes.py", "lib/nothing.js", "other/app.js", "lib/.hidden.js", "lib/pages/runs.js"):
        assert _get(f"{server.url}/ui/{name}")[0] == 404, name


def test_graph_of_a_nested_run_and_its_log(server: Served, client: Any) -> None:
    result = client.create_run_from_pipeline_func(nested, experiment_name="ui", arguments={"name": "x"})
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    assert run.state == "SUCCEEDED", run.error
    status, graph = _get(f"{server.url}/ui-api/runs/{result.run_id}/graph")
    assert status == 200 and graph["final"] is True
    nodes = {node["path"]: node for node in graph["nodes"]}
    assert {n["kind"] for n in nodes.values()} >= {"container", "dag"}
    [dag] = [n for n in nodes.values() if n["kind"] == "dag"]
    [child] = [n for n in nodes.values() if n["parent"] == dag["path"]]
    [first] = [n for n in nodes.values() if n["parent"] is None and n["kind"] == "container"]
    assert dag["deps"] == [first["path"]] and dag["state"] == "SUCCEEDED"
    assert child["state"] == "SUCCEEDED" and child["outputs"]["parameters"]["Output"] == "HI X"
    assert first["inputs"]["parameters"] == {"name": "x"} and first["outputs"]["parameters"] == {"Output": "hi x"}
    url = f"{server.url}/ui-api/runs/{result.run_id}/tasks/{first['task_id']}/log"
    status, log = _get(url)
    assert status == 200 and "hello from the ui test, x" in log["text"] and log["done"] is True
    offset = log["text"].index("ui test") + len("ui test")
    status, rest = _get(f"{url}?offset={offset}")  # followed from an offset, as the UI does
    assert status == 200 and rest["text"] == log["text"][offset:] and rest["offset"] == log["offset"]
    assert _get(f"{server.url}/ui-api/runs/{result.run_id}/tasks/nope/log")[0] == 404
    assert _get(f"{url}?offset=-1")[0] == 400


def test_graph_of_a_loop_has_its_iterations(server: Served, client: Any) -> None:
    result = client.create_run_from_pipeline_func(looped, experiment_name="ui")
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    nodes = _get(f"{server.url}/ui-api/runs/{result.run_id}/graph")[1]["nodes"]
    [loop] = [n for n in nodes if n["kind"] == "loop"]
    iterations = [n for n in nodes if n["parent"] == loop["path"]]
    assert [n["kind"] for n in iterations] == ["iteration"] * 3
    inside = [n for n in nodes if n["parent"] in {i["path"] for i in iterations}]
    assert len(inside) == 3 and {n["state"] for n in inside} == {"SUCCEEDED"}


def test_artifact_previews_read_only_the_runs_artifacts(server: Served, client: Any) -> None:
    result = client.create_run_from_pipeline_func(ui_report, experiment_name="ui")
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    [node] = [n for n in _get(f"{server.url}/ui-api/runs/{result.run_id}/graph")[1]["nodes"] if n["path"] == "report"]
    outputs = {name: entries[0] for name, entries in node["outputs"]["artifacts"].items()}
    assert outputs["metrics"]["metadata"] == {"accuracy": 0.92, "loss": 0.31}
    assert outputs["scores"]["metadata"]["confusionMatrix"]["rows"] == [{"row": [8, 2]}, {"row": [1, 9]}]
    base = f"{server.url}/ui-api/runs/{result.run_id}/artifacts?uri="
    with urllib.request.urlopen(base + urllib.parse.quote(outputs["notes"]["uri"])) as response:
        assert response.headers["content-type"].startswith("text/plain")
        assert response.headers["content-security-policy"] == "sandbox"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.read().decode().startswith("# Model report")
    with urllib.request.urlopen(base + urllib.parse.quote(outputs["page"]["uri"])) as response:
        assert response.headers["content-type"].startswith("text/plain")  # never served as HTML
    with urllib.request.urlopen(base + urllib.parse.quote(outputs["picture"]["uri"])) as response:
        assert response.headers["content-type"] == "image/png" and response.read().startswith(b"\x89PNG")
    # only URIs the store recorded for this run: not another file, not a folder, not another run's
    assert _get(base + urllib.parse.quote(str(Path(outputs["notes"]["uri"]).parent)))[0] == 404
    assert _get(base + urllib.parse.quote("/etc/passwd"))[0] == 404
    assert _get(base + urllib.parse.quote(outputs["notes"]["uri"] + "/../page"))[0] == 404
    other = client.create_run_from_pipeline_func(looped, experiment_name="ui")
    notes_uri = urllib.parse.quote(outputs["notes"]["uri"])
    assert _get(f"{server.url}/ui-api/runs/{other.run_id}/artifacts?uri={notes_uri}")[0] == 404
    assert _get(f"{server.url}/ui-api/runs/nope/artifacts?uri=x")[0] == 404
    client.wait_for_run_completion(other.run_id, timeout=60, sleep_duration=0.2)


# The longest a page may take to show what a test waits for: under CI's load (20 on 2 cores) a first render
# has taken more than 15 s. Playwright returns as soon as it is there, so a quiet machine waits no longer.
UI_WAIT_MS = 60_000


def _browser() -> Any:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package (scripts/setup.sh does, as root)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is missing: pip install '.[test]'"
    )
    return sync_api


@contextmanager
def chromium_page(height: int = 900) -> Iterator[tuple[Any, list[str]]]:
    """A page in Debian's headless Chromium with a fresh, empty profile, and the script errors it reports."""
    sync_api = _browser()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": height}).new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            browser.close()


def test_runs_list_and_run_detail_in_chromium(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    result = client.create_run_from_pipeline_func(ui_demo, experiment_name="ui-demo", arguments={"name": "pond"},
                                                   run_name="ui demo run")
    with chromium_page(height=800) as (page, errors):
        page.goto(server.url + "/")
        row = page.locator(f'tr.run-row[data-run-id="{result.run_id}"]')
        row.wait_for(timeout=UI_WAIT_MS)
        assert "ui demo run" in row.inner_text() and "ui-demo" in row.inner_text()
        client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
        page.locator(
            f'tr.run-row[data-run-id="{result.run_id}"] .state[data-state="SUCCEEDED"]'
        ).wait_for(timeout=UI_WAIT_MS)
        page.screenshot(path=str(tmp_path / "runs.png"), full_page=True)

        page.select_option("#state-filter", "FAILED")  # the filter hides it
        page.locator(f'tr.run-row[data-run-id="{result.run_id}"]').wait_for(state="detached", timeout=10_000)
        page.select_option("#state-filter", "SUCCEEDED")
        page.locator(f'tr.run-row[data-run-id="{result.run_id}"]').click(timeout=10_000)

        page.wait_for_url(f"**/#/runs/{result.run_id}")
        nodes = page.locator("#dag g.node")
        page.locator('#dag g.node[data-state="SUCCEEDED"]').nth(2).wait_for(timeout=UI_WAIT_MS)
        assert nodes.count() == 3  # one per task: greet, greet-2, shout
        assert page.locator("#dag path.edge").count() == 2  # greet -> shout, greet-2 -> shout
        names = sorted(nodes.nth(i).get_attribute("data-path") or "" for i in range(3))
        assert names == ["greet", "greet-2", "shout"]
        page.locator('#dag g.node[data-path="greet"]').click()
        log = page.locator("#task-log")
        sync_api.expect(log).to_contain_text("hello from the ui test, pond", timeout=10_000)
        sync_api.expect(page.locator("#task-panel table.inputs")).to_contain_text("pond")
        sync_api.expect(page.locator("#task-panel table.outputs")).to_contain_text("hi pond")
        # where it ran (issue 31): a lightweight component on python:3.11 runs on this machine under auto
        sync_api.expect(page.locator("#task-ran-in")).to_contain_text("this machine, not the image (")
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        if not DOCS_SCREENSHOT.exists():  # the README's picture: delete it to take a new one
            DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
            shutil.copy(tmp_path / "run.png", DOCS_SCREENSHOT)

        page.click("header nav a[data-nav=experiments]")
        sync_api.expect(page.locator("#experiments")).to_contain_text("ui-demo", timeout=10_000)
        assert not errors, errors


@dsl.component
def scale(x: int, factor: float, loud: bool) -> str:
    print(f"scaling {x} by {factor}")
    text = f"{x * factor}"
    return text.upper() if loud else text


@dsl.pipeline(name="ui-upload")
def ui_upload(x: int, factor: float = 2.5, loud: bool = False, label: str = "scaled") -> str:
    return scale(x=x, factor=factor, loud=loud).output


def test_upload_a_pipeline_and_start_a_run_from_its_form(server: Served, client: Any, tmp_path: Path) -> None:
    _browser()  # skips before anything is uploaded when Chromium or playwright is missing
    from kfp import compiler

    package = tmp_path / "ui-upload.yaml"
    compiler.Compiler().compile(ui_upload, str(package))
    client.create_experiment("ui-form")
    with chromium_page(height=900) as (page, errors):
        page.goto(server.url + "/#/pipelines")
        page.set_input_files("#pipeline-file", str(package))
        page.fill("#pipeline-name", "uploaded from the ui")
        page.click("#upload-submit")
        page.wait_for_url("**/#/pipelines/*", timeout=10_000)
        form = page.locator("#run-form")
        form.wait_for(timeout=10_000)
        # the form follows the pipeline's parameters: types and defaults
        assert page.get_attribute("#param-x", "type") == "number" and page.get_attribute("#param-x", "step") == "1"
        assert page.input_value("#param-factor") == "2.5"
        assert page.get_attribute("#param-loud", "type") == "checkbox" and not page.is_checked("#param-loud")
        assert page.input_value("#param-label") == "scaled"
        page.click("#create-run")  # x is required and empty: the browser refuses
        assert "/#/pipelines/" in page.url
        page.fill("#param-x", "4")
        page.check("#param-loud")
        page.fill("#run-name", "run from the form")
        page.select_option("#run-experiment", label="ui-form")
        page.click("#create-run")
        page.wait_for_url("**/#/runs/*", timeout=10_000)
        run_id = page.url.rsplit("/", 1)[1]
        page.locator('#run-header .state[data-state="SUCCEEDED"]').wait_for(timeout=60_000)
        page.locator('#dag g.node[data-path="scale"][data-state="SUCCEEDED"]').wait_for(timeout=10_000)
        assert not errors, errors
    run = client.get_run(run_id)
    assert run.display_name == "run from the form" and run.state == "SUCCEEDED"
    assert run.runtime_config.parameters == {"x": 4, "factor": 2.5, "loud": True, "label": "scaled"}
    assert run.pipeline_version_reference.pipeline_id
    experiment = client.get_experiment(experiment_name="ui-form")
    assert run.experiment_id == experiment.experiment_id
    pipeline = client.get_pipeline(run.pipeline_version_reference.pipeline_id)
    assert pipeline.display_name == "uploaded from the ui"


def test_artifact_previews_in_chromium(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    result = client.create_run_from_pipeline_func(ui_report, experiment_name="ui")
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    with chromium_page(height=1000) as (page, errors):
        page.goto(f"{server.url}/#/runs/{result.run_id}")
        page.locator('#dag g.node[data-path="report"][data-state="SUCCEEDED"]').click(timeout=UI_WAIT_MS)
        expect = sync_api.expect
        metrics = page.locator('.preview[data-artifact="metrics"] table.metrics')
        expect(metrics).to_contain_text("accuracy", timeout=10_000)
        expect(metrics).to_contain_text("0.92")
        expect(metrics).to_contain_text("loss")
        matrix = page.locator('.preview[data-artifact="scores"] table.confusion-matrix')
        expect(matrix).to_contain_text("cat")
        assert matrix.locator("tbody td").all_inner_texts() == ["8", "2", "1", "9"]
        assert page.locator('.preview[data-artifact="scores"] svg.roc polyline').count() == 1
        markdown = page.locator('.preview[data-artifact="notes"] .markdown')
        expect(markdown.locator("h3")).to_have_text("Model report", timeout=10_000)
        expect(markdown.locator("strong")).to_have_text("92%")
        assert markdown.locator("li").all_inner_texts() == ["first point", "second"]
        assert markdown.locator("script").count() == 0 and "<script>" in markdown.inner_text()  # shown as text
        frame = page.locator('.preview[data-artifact="page"] iframe')
        frame.wait_for(timeout=10_000)
        assert frame.get_attribute("sandbox") == ""
        expect(
            page.frame_locator('.preview[data-artifact="page"] iframe').locator("h1")
        ).to_have_text("Hello from html")
        image = page.locator('.preview[data-artifact="picture"] img')
        image.wait_for(timeout=10_000)
        page.wait_for_function(
            "() => document.querySelector('.preview[data-artifact=\"picture\"] img').naturalWidth === 1"
        )
        assert page.evaluate("window.pwned") is None and page.title() == "millpond"  # no script ran
        page.screenshot(path=str(tmp_path / "artifacts.png"), full_page=True)
        assert not errors, errors


def _request(url: str, token: str | None = None, method: str = "GET") -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers, method=method)) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_token_mode_page_asks_for_the_token_once(server: Served, client: Any) -> None:
    result = client.create_run_from_pipeline_func(ui_report, experiment_name="ui-token", run_name="token run")
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    guarded = Served("t0ken")  # the same store, a second server that wants a token
    try:
        url = guarded.url
        assert _request(url + "/") == 200
        assert _request(url + "/ui/app.js") == 200 and _request(url + "/ui/app.css") == 200
        assert _request(url + "/ui/lib/api.js") == 200 and _request(url + "/ui/pages/run-detail.js") == 200
        assert _request(url + "/ui/lib/../../apis/v2beta1/runs") == 401
        for path in ("/apis/v2beta1/runs", "/apis/v2beta1/healthz", f"/ui-api/runs/{result.run_id}/graph",
                     "/openapi.json", "/docs", "/ui/../apis/v2beta1/runs"):
            assert _request(url + path) == 401, path
            assert _request(url + path, token="wrong") == 401, path
        assert _request(url + "/", method="POST") == 401
        assert _request(url + "/apis/v2beta1/runs", token="t0ken") == 200
        assert _request(url + f"/ui-api/runs/{result.run_id}/graph", token="t0ken") == 200

        sync_api = _browser()
        with chromium_page(height=900) as (page, errors):
            page.goto(url + "/")
            page.locator("#token-form").wait_for(timeout=10_000)
            page.fill("#token-input", "wrong")
            page.click("#token-submit")
            sync_api.expect(page.locator("#token-form")).to_contain_text("refused", timeout=10_000)
            page.fill("#token-input", "t0ken")
            page.click("#token-submit")
            row = page.locator(f'tr.run-row[data-run-id="{result.run_id}"]')
            row.wait_for(timeout=UI_WAIT_MS)
            assert "ui-token" in row.inner_text()
            row.click()
            page.locator('#dag g.node[data-path="report"][data-state="SUCCEEDED"]').click(timeout=UI_WAIT_MS)
            metrics = page.locator('.preview[data-artifact="metrics"]')
            sync_api.expect(metrics).to_contain_text("accuracy", timeout=10_000)
            notes = page.locator('.preview[data-artifact="notes"] h3')
            sync_api.expect(notes).to_have_text("Model report", timeout=10_000)
            sync_api.expect(page.locator("#task-log")).to_have_text(re.compile("cache hit|Executor"), timeout=10_000)
            page.click("header nav a[data-nav=pipelines]")  # other pages too, without asking again
            page.locator("#upload-form").wait_for(timeout=10_000)
            page.reload()  # kept for the tab (sessionStorage)
            page.locator("#upload-form").wait_for(timeout=10_000)
            assert page.locator("#token-form").count() == 0
            assert page.evaluate("sessionStorage.getItem('millpond-token')") == "t0ken"
            assert not errors, errors
    finally:
        guarded.stop()


def test_recurring_runs_and_datasets_pages(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    from kfp import compiler

    package = tmp_path / "ui-upload.yaml"
    compiler.Compiler().compile(ui_upload, str(package))
    experiment = client.create_experiment("ui-recurring")
    recurring = client.create_recurring_run(experiment_id=experiment.experiment_id, job_name="hourly from the ui test",
                                            interval_second=3600, max_concurrency=2, pipeline_package_path=str(package),
                                            params={"x": 1})
    try:
        with chromium_page(height=900) as (page, errors):
            page.goto(server.url + "/#/recurring")
            row = page.locator(f'tr[data-recurring-id="{recurring.recurring_run_id}"]')
            sync_api.expect(row).to_contain_text("hourly from the ui test", timeout=10_000)
            sync_api.expect(row).to_contain_text("every 3600s")
            sync_api.expect(row).to_contain_text("ui-recurring")
            sync_api.expect(row.locator(".state")).to_have_text("ENABLED")
            row.locator("button.toggle").click()
            sync_api.expect(row.locator(".state")).to_have_text("DISABLED", timeout=10_000)
            assert client.get_recurring_run(recurring.recurring_run_id).status == "DISABLED"
            _apply_dataset_and_load(server, tmp_path)
            page.click("header nav a[data-nav=datasets]")
            dataset = page.locator('tr[data-dataset="ui-ds"]')
            sync_api.expect(dataset.locator(".cached-percentage")).to_have_text("100.0%", timeout=30_000)
            operation = page.locator('tr[data-operation="ui-load"]')
            sync_api.expect(operation).to_contain_text("DataLoad", timeout=10_000)
            sync_api.expect(operation).to_contain_text("ui-ds")
            sync_api.expect(operation.locator(".state")).to_have_text("Complete", timeout=30_000)
            assert not errors, errors
    finally:
        client.delete_recurring_run(recurring.recurring_run_id)


def _apply_dataset_and_load(server: Served, tmp_path: Path) -> None:
    """A local:// dataset and a DataLoad of it, applied through millpond's own routes."""
    import json
    import urllib.request

    from tests.datasets_support import manifest

    source = tmp_path / "ui-source"
    source.mkdir()
    (source / "a.bin").write_bytes(b"a" * 4096)
    levels = [{"mediumtype": "MEM", "path": str(tmp_path / "ui-shm"), "quota": "16Mi"}]
    load = {"apiVersion": "data.fluid.io/v1alpha1", "kind": "DataLoad", "metadata": {"name": "ui-load"},
            "spec": {"dataset": {"name": "ui-ds", "namespace": "default"}}}
    for body, kind in ((manifest("ui-ds", f"local://{source}", secret=False, levels=levels), "application/yaml"),
                       (json.dumps([load]), "application/json")):
        request = urllib.request.Request(
            server.url + "/apis/millpond/v1/fluid/apply", data=body.encode(), method="POST",
            headers={"Content-Type": kind},
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200


@dsl.component
def nap(marker: str, seconds: int) -> str:
    import os
    import time

    with open(marker, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(seconds)
    return "woke"


@dsl.pipeline(name="ui-napping")
def ui_napping(marker: str, seconds: int = 120) -> str:
    return nap(marker=marker, seconds=seconds).output


@dsl.component
def needs_flag(flag: str) -> str:
    import os

    if not os.path.exists(flag):
        raise RuntimeError(f"no flag at {flag}")
    return "flagged"


@dsl.pipeline(name="ui-flaky")
def ui_flaky(flag: str) -> str:
    return needs_flag(flag=flag).output


def _wait_for_file(path: Path, limit_s: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _header_state(page: Any, state: str) -> None:
    page.locator(f'#run-header .state[data-state="{state}"]').wait_for(timeout=60_000)


def test_links_that_kfp_client_prints_open_their_pages(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    from kfp import compiler

    result = client.create_run_from_pipeline_func(ui_demo, experiment_name="ui-links", run_name="linked run")
    client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2)
    experiment = client.get_experiment(experiment_name="ui-links")
    package = tmp_path / "ui-upload.yaml"
    compiler.Compiler().compile(ui_upload, str(package))
    pipeline = client.upload_pipeline(str(package), pipeline_name="linked pipeline")
    first = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    second = client.upload_pipeline_version(str(package), pipeline_version_name="second version",
                                            pipeline_id=pipeline.pipeline_id)
    expect = sync_api.expect
    with chromium_page() as (page, errors):
        page.goto(f"{server.url}/#/runs/details/{result.run_id}")  # opened by its URL: no list loaded before
        header = page.locator("#run-header")
        expect(header).to_contain_text("linked run", timeout=UI_WAIT_MS)
        expect(header).to_contain_text("ui-links", timeout=10_000)  # the experiment's name, not its id
        assert experiment.experiment_id not in header.inner_text()
        page.locator('#dag g.node[data-path="shout"]').wait_for(timeout=10_000)

        page.goto(f"{server.url}/#/experiments/details/{experiment.experiment_id}")
        expect(page.locator("h1")).to_have_text("Runs of experiment ui-links", timeout=10_000)
        page.locator(f'tr.run-row[data-run-id="{result.run_id}"]').wait_for(timeout=10_000)

        page.goto(f"{server.url}/#/pipelines/details/{pipeline.pipeline_id}")
        expect(page.locator("h1").first).to_contain_text("linked pipeline", timeout=10_000)
        page.locator("#run-form").wait_for(timeout=10_000)
        expect(page.locator("tr.chosen")).to_have_attribute("data-version-id", second.pipeline_version_id)  # the newest

        page.goto(f"{server.url}/#/pipelines/details/{pipeline.pipeline_id}/version/{first.pipeline_version_id}")
        expect(page.locator("tr.chosen")).to_have_attribute(
            "data-version-id", first.pipeline_version_id, timeout=10_000
        )
        page.locator("#run-form").wait_for(timeout=10_000)
        assert "no run with id" not in page.inner_text("body") and not errors, errors


@dsl.pipeline(name="ui-levels")
def ui_levels() -> None:
    with dsl.ParallelFor(["a", "b"]) as item:
        inner(text=item)


def test_breadcrumbs_name_each_level_of_sub_dags_and_go_up(server: Served, client: Any) -> None:
    _browser()
    result = client.create_run_from_pipeline_func(ui_levels, experiment_name="ui")
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    nodes = _get(f"{server.url}/ui-api/runs/{result.run_id}/graph")[1]["nodes"]
    [loop] = [n for n in nodes if n["kind"] == "loop"]
    iteration = next(n for n in nodes if n["parent"] == loop["path"])
    [dag] = [n for n in nodes if n["parent"] == iteration["path"]]
    assert dag["kind"] == "dag"
    with chromium_page() as (page, errors):
        page.goto(f"{server.url}/#/runs/{result.run_id}")
        crumbs = page.locator("#breadcrumbs a.crumb")
        for level in (loop, iteration, dag):  # down three levels: loop, one iteration, the sub-pipeline in it
            page.locator(f'#dag g.node[data-path="{level["path"]}"]').dblclick(timeout=UI_WAIT_MS)
        page.locator('#dag g.node[data-state="SUCCEEDED"]').first.wait_for(timeout=10_000)
        assert crumbs.all_inner_texts() == ["ui-levels", loop["name"], iteration["name"], dag["name"]]
        assert "," not in page.inner_text("#breadcrumbs")
        assert page.locator("#dag g.node").count() == 1  # shout, the sub-pipeline's one task

        page.click("#scope-up")  # one level up: the iteration, holding the sub-pipeline
        assert crumbs.all_inner_texts() == ["ui-levels", loop["name"], iteration["name"]]
        assert page.locator(f'#dag g.node[data-path="{dag["path"]}"]').count() == 1
        page.click("#scope-up")  # the loop's iterations
        assert crumbs.all_inner_texts() == ["ui-levels", loop["name"]]
        assert page.locator("#dag g.node").count() == 2
        page.locator('#breadcrumbs a.crumb[data-scope=""]').click()  # a crumb goes straight to its level
        assert crumbs.all_inner_texts() == ["ui-levels"] and page.locator("#scope-up").count() == 0
        page.locator(f'#dag g.node[data-path="{loop["path"]}"]').wait_for()
        assert not errors, errors


def test_terminate_archive_restore_and_delete_a_run_in_chromium(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    marker = tmp_path / "napping"
    result = client.create_run_from_pipeline_func(ui_napping, experiment_name="ui-actions", run_name="napping run",
                                                   arguments={"marker": str(marker)})
    _wait_for_file(marker)
    expect = sync_api.expect
    with chromium_page() as (page, errors):
        page.goto(f"{server.url}/#/runs/{result.run_id}")
        _header_state(page, "RUNNING")
        assert page.locator("#action-retry").count() == 0
        page.click("#action-terminate")
        _header_state(page, "CANCELED")
        assert client.get_run(result.run_id).state == "CANCELED"
        page.locator("#action-retry").wait_for(timeout=10_000)
        assert page.locator("#action-terminate").count() == 0

        page.click("#action-archive")
        page.locator("#archived-badge").wait_for(timeout=10_000)
        assert client.get_run(result.run_id).storage_state == "ARCHIVED"
        page.goto(f"{server.url}/#/runs")
        page.locator("#runs tbody tr").first.wait_for(timeout=10_000)
        assert page.locator(f'tr.run-row[data-run-id="{result.run_id}"]').count() == 0  # not among the active runs
        page.click("#tab-archived")
        page.wait_for_url("**/#/archive/runs")
        page.locator(f'tr.run-row[data-run-id="{result.run_id}"]').click(timeout=10_000)
        page.click("#action-restore")
        expect(page.locator("#action-archive")).to_be_visible(timeout=10_000)
        assert client.get_run(result.run_id).storage_state == "AVAILABLE"

        dialogs: list[str] = []
        page.once("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.click("#action-delete")  # dismissed: nothing deleted
        expect(page.locator("#action-delete")).to_be_enabled(timeout=10_000)
        assert dialogs and "napping run" in dialogs[0]
        assert client.get_run(result.run_id).state == "CANCELED"
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#action-delete")
        page.wait_for_url("**/#/runs", timeout=10_000)
        status, _body = _get(f"{server.url}/apis/v2beta1/runs/{result.run_id}")
        assert status == 404
        assert not errors, errors


def test_retry_and_clone_a_run_in_chromium(server: Served, client: Any, tmp_path: Path) -> None:
    sync_api = _browser()
    flag = tmp_path / "flag"
    result = client.create_run_from_pipeline_func(ui_flaky, experiment_name="ui-actions", arguments={"flag": str(flag)})
    assert client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.2).state == "FAILED"
    greeted = client.create_run_from_pipeline_func(ui_demo, experiment_name="ui-actions", run_name="to clone",
                                                    arguments={"name": "original"})
    assert client.wait_for_run_completion(greeted.run_id, timeout=60, sleep_duration=0.2).state == "SUCCEEDED"
    with chromium_page() as (page, errors):
        page.goto(f"{server.url}/#/runs/{result.run_id}")
        _header_state(page, "FAILED")
        flag.write_text("now")
        page.click("#action-retry")
        _header_state(page, "SUCCEEDED")
        assert client.get_run(result.run_id).state == "SUCCEEDED"

        page.goto(f"{server.url}/#/runs/{greeted.run_id}")
        _header_state(page, "SUCCEEDED")
        page.click("#action-clone")
        page.wait_for_url(f"**/#/runs/{greeted.run_id}/clone")
        page.locator("#run-form").wait_for(timeout=10_000)
        assert page.input_value("#param-name") == "original"  # the run's parameters, editable
        assert page.input_value("#run-name") == "Clone of to clone"
        assert page.locator("#run-experiment option:checked").inner_text() == "ui-actions"
        page.fill("#param-name", "cloned")
        page.click("#create-run")
        page.wait_for_url(re.compile(r".*#/runs/[0-9a-f-]+$"), timeout=10_000)
        clone_id = page.url.rsplit("/", 1)[1]
        assert clone_id != greeted.run_id
        _header_state(page, "SUCCEEDED")
        sync_api.expect(page.locator("#run-header")).to_contain_text("ui-actions")
        assert not errors, errors
    clone = client.get_run(clone_id)
    original = client.get_run(greeted.run_id)
    assert clone.display_name == "Clone of to clone" and clone.runtime_config.parameters == {"name": "cloned"}
    assert clone.experiment_id == original.experiment_id and clone.pipeline_spec == original.pipeline_spec


HOSTILE_LINE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def test_jobs_page_lists_a_job_and_follows_its_log_in_chromium(server: Served, tmp_path: Path) -> None:
    """A job submitted with TrainingClient: in the Jobs list, then its page with instances, events and a log
    that grows while it runs; a log line (and a job name in the URL) that look like HTML stay text."""
    sync_api = _browser()
    from millpond.training import PytorchJobBuilder, TrainingClient

    gate = tmp_path / "go-on"
    command = (f"echo 'first line from the job'; echo '{HOSTILE_LINE}'; "
               f"while [ ! -e {gate} ]; do sleep 0.2; done; echo 'second line, after the gate'")
    client = TrainingClient()
    client.submit(PytorchJobBuilder().with_name("ui-job").with_workers(2).with_command(command).build())
    try:
        with chromium_page(height=900) as (page, errors):
            page.goto(server.url + "/#/runs")
            page.click("header nav a[data-nav=jobs]")
            row = page.locator('tr.job-row[data-job="default/ui-job"]')
            sync_api.expect(row).to_contain_text("PYTORCHJOB", timeout=UI_WAIT_MS)
            sync_api.expect(row.locator(".state")).to_have_text("RUNNING", timeout=30_000)
            row.click()
            page.wait_for_url("**/#/jobs/default/ui-job")
            sync_api.expect(page.locator("#job-header .state")).to_have_text("RUNNING", timeout=UI_WAIT_MS)
            sync_api.expect(page.locator('#job-instances tr[data-instance="ui-job-worker-0"]')).to_be_visible()
            sync_api.expect(page.locator("#job-events")).to_contain_text("Submitted")
            log = page.locator("#job-log")
            sync_api.expect(log).to_contain_text("first line from the job", timeout=UI_WAIT_MS)
            sync_api.expect(log).to_contain_text(HOSTILE_LINE)  # shown as text, not made into elements
            assert page.locator("#job-log img, #job-log script").count() == 0
            gate.touch()  # the job goes on: the page shows the line it prints next, and the end
            sync_api.expect(log).to_contain_text("second line, after the gate", timeout=30_000)
            sync_api.expect(page.locator("#job-header .state")).to_have_text("SUCCEEDED", timeout=30_000)
            page.screenshot(path=str(tmp_path / "job.png"), full_page=True)

            hostile = urllib.parse.quote('<img src=x onerror="window.pwned=3">', safe="")
            page.goto(f"{server.url}/#/jobs/default/{hostile}")
            sync_api.expect(page.locator("#job-error")).to_contain_text("no training job <img", timeout=UI_WAIT_MS)
            assert page.evaluate("window.pwned") is None
            assert not errors, errors
    finally:
        gate.touch()
        client.delete("ui-job")
