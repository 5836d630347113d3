"""The lineage pages of the web UI in Debian's Chromium, on a real ``millpond server`` after a real run of a four-step
pipeline (gather → clean → train → score, each handing its artifact to the next) and a second run the cache answers:
the Artifacts list (type, URI, run; filtered by name and type), an artifact's page and its Lineage Explorer (its
producer and its consumer, expanded one step further each way), the Executions list (a cache hit CACHED, linking to
the execution it reused) and an execution's page (inputs and outputs by name). No value prints null or undefined;
metadata that looks like HTML stays text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.lineage.chain import chain
from tests.server_support import Served, module_home, serving
from tests.ui.test_server_ui import UI_WAIT_MS, _browser, chromium_page

kfp = pytest.importorskip("kfp")
STEPS = ("gather", "clean", "train", "score")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    _browser()  # skips before anything runs when Chromium or playwright is missing
    for _ in module_home(tmp_path_factory, "lineage-ui"):
        yield from serving()


@pytest.fixture(scope="module")
def runs(server: Served) -> dict[str, Any]:
    """Two runs of the chain, the second answered by the cache: each run's id and its tasks' ids by name."""
    client = kfp.Client(host=server.url)
    found: dict[str, Any] = {}
    for which in ("first", "second"):
        run = client.create_run_from_pipeline_func(chain, arguments={"rows": 3}, run_name=f"chain {which}",
                                                   experiment_name="lineage-ui")
        done = client.wait_for_run_completion(run.run_id, timeout=180, sleep_duration=0.3)
        assert done.state == "SUCCEEDED", done
        tasks = {t.display_name: t.task_id for t in done.run_details.task_details if t.display_name in STEPS}
        assert sorted(tasks) == sorted(STEPS), tasks
        found[which] = {"run_id": run.run_id, "tasks": tasks}
    return found


def _no_null(page: Any) -> None:
    shown = page.locator("#main").inner_text()
    assert not re.search(r"\b(null|undefined|NaN|\[object Object\])\b", shown), shown


def test_artifacts_list_and_an_artifacts_lineage_explorer(server: Served, runs: dict[str, Any], tmp_path: Path) -> None:
    sync_api = _browser()
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/runs")
        page.click("header nav a[data-nav=artifacts]")
        rows = page.locator("tr.artifact-row")
        sync_api.expect(rows).to_have_count(4, timeout=UI_WAIT_MS)  # raw, cleaned, model, metrics: once, cached or not
        cleaned = page.locator('tr.artifact-row[data-name="cleaned"]')
        sync_api.expect(cleaned.locator(".type")).to_have_text("Dataset")
        assert cleaned.locator(".uri").inner_text().endswith("/cleaned")
        sync_api.expect(cleaned.locator("a.run-link")).to_have_attribute("data-run-id", runs["first"]["run_id"])
        sync_api.expect(cleaned.locator(".producer a")).to_have_text("clean")
        _no_null(page)

        page.select_option("#artifact-type-filter", "Model")  # the type filter
        sync_api.expect(rows).to_have_count(1, timeout=10_000)
        sync_api.expect(page.locator('tr.artifact-row[data-name="model"]')).to_be_visible()
        page.select_option("#artifact-type-filter", "")
        page.fill("#artifact-name-filter", "ean")  # the name filter: "cleaned" only
        sync_api.expect(rows).to_have_count(1, timeout=10_000)
        page.click('tr.artifact-row[data-name="cleaned"] a.artifact-link')

        # the artifact's page: overview, its producer (and the cache hit that reused it) and its users
        sync_api.expect(page.locator("#artifact-title")).to_contain_text("cleaned", timeout=UI_WAIT_MS)
        sync_api.expect(page.locator('#artifact-properties [data-key="Type"]')).to_have_text("Dataset")
        sync_api.expect(page.locator('#artifact-metadata tr[data-key="rows"]')).to_contain_text("3")
        sync_api.expect(page.locator('#artifact-metadata tr[data-key="note"]')).to_contain_text("<img src=x")
        assert page.locator("#main img").count() == 0 and page.evaluate("window.pwned") is None
        producer = page.locator(f'#artifact-producers a[data-execution-id="{runs["first"]["tasks"]["clean"]}"]')
        sync_api.expect(producer).to_have_text("clean")
        _no_null(page)

        page.click("#tab-lineage")  # the Lineage Explorer: inputs | producer | the artifact | consumer | outputs
        explorer = page.locator("#lineage-explorer")
        center = explorer.locator('[data-side="center"] [data-name="cleaned"]')
        sync_api.expect(center).to_be_visible(timeout=UI_WAIT_MS)
        left1, left2 = (explorer.locator(f'.lineage-column[data-side="left"][data-depth="{d}"]') for d in (1, 2))
        right1, right2 = (explorer.locator(f'.lineage-column[data-side="right"][data-depth="{d}"]') for d in (1, 2))
        sync_api.expect(left1.locator('.lineage-node[data-name="clean"]')).to_have_count(2)  # the task, the cache hit
        sync_api.expect(left2.locator('.lineage-node[data-name="raw"]')).to_have_count(1)
        sync_api.expect(right1.locator('.lineage-node[data-name="train"]')).to_have_count(2)
        sync_api.expect(right2.locator('.lineage-node[data-name="model"]')).to_have_count(1)
        assert explorer.locator('.lineage-column[data-depth="3"]').count() == 0

        left2.locator('.lineage-node[data-name="raw"] button.expand').click()  # one step left: who gathered it
        left3 = explorer.locator('.lineage-column[data-side="left"][data-depth="3"]')
        sync_api.expect(left3.locator('.lineage-node[data-name="gather"]')).to_have_count(2, timeout=10_000)
        sync_api.expect(explorer.locator('.lineage-column[data-side="left"][data-depth="4"] .none')).to_be_visible()
        right2.locator('.lineage-node[data-name="model"] .sub').click()  # one step further right: who used the model
        right3 = explorer.locator('.lineage-column[data-side="right"][data-depth="3"]')
        right4 = explorer.locator('.lineage-column[data-side="right"][data-depth="4"]')
        sync_api.expect(right3.locator('.lineage-node[data-name="score"]')).to_have_count(2, timeout=10_000)
        sync_api.expect(right4.locator('.lineage-node[data-name="metrics"]')).to_have_count(1)
        _no_null(page)
        page.screenshot(path=str(tmp_path / "lineage-explorer.png"), full_page=True)

        # the producer's card links to its execution's page
        left1.locator(f'a[data-execution-id="{runs["first"]["tasks"]["clean"]}"]').click()
        sync_api.expect(page.locator("#execution-title")).to_contain_text("clean", timeout=UI_WAIT_MS)

        # the run page's artifact node links to the artifact's page (found by its URI)
        page.goto(f"{server.url}/#/runs/{runs['first']['run_id']}")
        page.locator('#dag g.node[data-path="clean@cleaned"]').click(timeout=UI_WAIT_MS)
        page.locator("#artifact-lineage-links a").click(timeout=UI_WAIT_MS)
        sync_api.expect(page.locator("#artifact-title")).to_contain_text("cleaned", timeout=UI_WAIT_MS)
        assert not errors, errors


def test_executions_list_and_an_executions_page(server: Served, runs: dict[str, Any], tmp_path: Path) -> None:
    sync_api = _browser()
    first, second = runs["first"]["tasks"], runs["second"]["tasks"]
    with chromium_page() as (page, errors):
        page.goto(server.url + "/#/executions")
        page.select_option("#execution-type-filter", "system.ContainerExecution")
        rows = page.locator("tr.execution-row")
        sync_api.expect(rows).to_have_count(8, timeout=UI_WAIT_MS)
        page.screenshot(path=str(tmp_path / "executions.png"), full_page=True)
        for name in STEPS:  # the first run's COMPLETE, the second's CACHED, linking to the execution it reused
            done = page.locator(f'tr.execution-row[data-execution-id="{first[name]}"]')
            sync_api.expect(done.locator(".state")).to_have_attribute("data-state", "COMPLETE")
            sync_api.expect(done.locator("a.run-link")).to_have_attribute("data-run-id", runs["first"]["run_id"])
            reused = page.locator(f'tr.execution-row[data-execution-id="{second[name]}"]')
            sync_api.expect(reused.locator(".state")).to_have_attribute("data-state", "CACHED")
            sync_api.expect(reused.locator("a.cached-from")).to_have_attribute("href", f"#/executions/{first[name]}")
        _no_null(page)

        page.select_option("#execution-state-filter", "CACHED")  # the state filter
        sync_api.expect(rows).to_have_count(4, timeout=10_000)
        page.locator(f'tr.execution-row[data-execution-id="{second["train"]}"] a.cached-from').click()

        # the reused execution's page: its declared and actual inputs and outputs, by name
        sync_api.expect(page.locator("#execution-title")).to_contain_text("train", timeout=UI_WAIT_MS)
        assert page.url.endswith(f"#/executions/{first['train']}")
        sync_api.expect(page.locator('#declared-inputs tr[data-name="cleaned"]')).to_contain_text("system.Dataset")
        sync_api.expect(page.locator('#declared-outputs tr[data-name="model"]')).to_contain_text("system.Model")
        sync_api.expect(page.locator('#execution-inputs tr[data-key="cleaned"]')).to_contain_text("TASK_OUTPUT_INPUT")
        sync_api.expect(page.locator('#execution-outputs tr[data-key="model"]')).to_contain_text("Model")
        page.screenshot(path=str(tmp_path / "execution.png"), full_page=True)
        sync_api.expect(page.locator('#execution-properties [data-key="Run"] a')).to_have_attribute(
            "href", f"#/runs/{runs['first']['run_id']}")
        _no_null(page)
        page.click('#execution-outputs tr[data-key="model"] a.artifact-link')  # on to the model's page
        sync_api.expect(page.locator("#artifact-title")).to_contain_text("model", timeout=UI_WAIT_MS)
        sync_api.expect(page.locator("#artifact-consumers a")).to_have_count(2)  # score, and its cache hit

        page.goto(server.url + f"/#/executions/{second['gather']}")  # parameters: declared with their value
        sync_api.expect(page.locator('#declared-inputs tr[data-name="rows"]')).to_contain_text("3", timeout=UI_WAIT_MS)
        sync_api.expect(page.locator("#execution-cached-from")).to_have_text(first["gather"])
        sync_api.expect(page.locator("#execution-inputs")).to_have_text("none")
        page.goto(server.url + "/#/executions/no-such")
        sync_api.expect(page.locator("#execution-error")).to_contain_text("not found", timeout=UI_WAIT_MS)
        _no_null(page)
        assert not errors, errors
